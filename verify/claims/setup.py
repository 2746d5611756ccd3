"""Claims about the problem set-up (Section 2): the qSTR data model, Assumptions 1-3, Lemma 12,
the RS-Hadamard codes and the experiments' encoding (derivations: docs/derivations/codebooks.md,
docs/derivations/theorem4.md sections 0 and 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Callable, Dict, Tuple

import numpy as np
import torch
from hypothesis import HealthCheck, Verbosity, given, seed, settings

from qstr.bounds.attention import lemma12_radius
from qstr.constructions.codes import (
    MAX_M,
    Codebook,
    CoherenceReport,
    build_codebook,
    coherence,
    coherence_report,
    experimental_codebook,
    gf_mul_table,
    rademacher_codebook,
    rademacher_dim,
    rademacher_pair_tail,
    rs_hadamard_codebook,
    rs_hadamard_coherence,
)
from qstr.constructions.links import CallableLink, TwoLayerNet, he2, make_link
from qstr.bounds.recurrent import token_radius
from qstr.constructions.task import QSTR, Prompts, gather_tokens, moment_check
from qstr.verify.claim import (
    Check,
    Claim,
    Context,
    Fault,
    Ref,
    Verdict,
    at_least,
    at_most,
    close,
    exact,
)
from qstr.verify.registry import register
from qstr.verify.properties import assert_index_structure
from qstr.verify.rounding import Rounding
from qstr.verify.strategies import prompts

CODEBOOKS = "docs/derivations/codebooks.md"
SETTING = "docs/derivations/theorem4.md"


def _coherence_rounding(book: Codebook) -> Rounding:
    """Inner products of unit codes: d_e-term sums whose magnitudes add up to at most 1."""
    return Rounding(n=book.d_e, scale=1.0, dtype=book.omega.dtype, what="d_e eps")


def _gram_mu(omega: torch.Tensor) -> float:
    """max_{i != j} |<omega_i, omega_j>| from the full float64 Gram matrix (brute force)."""
    G = omega.to(torch.float64) @ omega.to(torch.float64).T
    return float((G - torch.diag(torch.diagonal(G))).abs().max())


def _tail_by_counting(d_e: int, mu: float) -> Fraction:
    """P(|<w, w'>| > mu) for independent Rademacher words, by counting sign patterns:
    <w, w'> = (2b - d_e)/d_e with b ~ Binomial(d_e, 1/2) (codebooks.md (a))."""
    cut, count, term = Fraction(mu) * d_e, 0, 1  # term = C(d_e, b), b = 0, 1, ...
    for b in range(d_e + 1):
        if d_e - 2 * b <= cut:  # the lower tail 2b - d_e < -mu d_e ends; the upper one mirrors it
            break
        count, term = count + term, term * (d_e - b) // (b + 1)
    return Fraction(2 * count, 2**d_e)


# ---------------------------------------------------------------- assumption-3

A3_DELTA = 1e-3
A3_SMALL_N = (2, 3, 8)  # few pairs: C(N, 2) differs most from N^2 / 2
A3_TAIL_DIMS = (100, 200, 256, 4099)  # the exact rational branch, and scipy's beyond d_e = 4096
A3_GRAM_ROWS = 1024  # the brute-force Gram runs on each codebook's first rows


@dataclass(frozen=True)
class Assumption3Inputs:
    """The toolkit's codebooks as users build them, and the rules and tails they are built by."""

    books: Tuple[Tuple[str, Codebook], ...]
    n_rademacher: int  # N of the Rademacher codebook, whose d_e follows the exact rule
    mu_max: float  # Assumption 3's 1/2
    measure: Callable[[torch.Tensor], float]  # the exact coherence users get (codes.coherence)
    mus: Tuple[float, ...]  # measure(omega) of each codebook, measured once
    locate: Callable[[torch.Tensor], CoherenceReport]  # coherence_report: mu and its pair
    dim_rule: Callable[[int, float, float], int]  # rademacher_dim, the exact rule
    pair_tail: Callable[[int, float], float]  # rademacher_pair_tail
    hoeffding: Callable[[int, float, float], int]  # rademacher_dim(..., rule="hoeffding")


def _rotated(base: Codebook, ctx: Context) -> Codebook:
    """User codes through Codebook.from_tensor: RS-Hadamard words under a random rotation."""
    g = ctx.generator("assumption-3/rotation")
    Q, _ = torch.linalg.qr(torch.randn(base.d_e, base.d_e, generator=g, dtype=torch.float64))
    return Codebook.from_tensor(base.omega.to(torch.float64) @ Q.to(base.omega.device))


def _hoeffding_rule(N: int, delta: float, mu: float) -> int:
    return rademacher_dim(N, delta, mu, rule="hoeffding")


def assumption3_inputs(ctx: Context) -> Assumption3Inputs:
    """Codebooks through build_codebook (the dispatch `qstr codebook` uses), a zero-padded one and
    a custom one (Assumption 3; docs/derivations/codebooks.md (a), (c))."""
    device = ctx.device
    n_det = ctx.pick(quick=8192, full=32768, gpu=131072)
    n_rad = ctx.pick(quick=2048, full=8192, gpu=65536)
    small = rs_hadamard_codebook(64, dtype=torch.float64, device=device)
    rad = ctx.generator("assumption-3/rademacher", device=device)
    books = (
        ("rs-hadamard", build_codebook(n_det, kind="rs-hadamard", mu_max=0.5, device=device)),
        (
            "rademacher",
            build_codebook(
                n_rad, kind="rademacher", mu_max=0.5, delta=A3_DELTA, generator=rad, device=device
            ),
        ),
        (
            "rs-hadamard zero-padded to d_e = 300",
            build_codebook(64, kind="rs-hadamard", d_e=300, dtype=torch.float64, device=device),
        ),
        ("custom (rotated rs-hadamard)", _rotated(small, ctx)),
    )
    return Assumption3Inputs(
        books,
        n_rad,
        0.5,
        coherence,
        _measured(books, coherence),
        coherence_report,
        rademacher_dim,
        rademacher_pair_tail,
        _hoeffding_rule,
    )


def _measured(books, measure) -> Tuple[float, ...]:
    return tuple(measure(b.omega) for _, b in books)


def _with_books(inp: Assumption3Inputs, books) -> Assumption3Inputs:
    return replace(inp, books=books, mus=_measured(books, inp.measure))


def _worst(values, key=lambda v: v[0]):
    return max(values, key=key)


def a3_coherence(inp: Assumption3Inputs, ctx: Context) -> Verdict:
    """Assumption 3: max_{i != j} |<omega_i, omega_j>| <= 1/2, the worst codebook (exact mu)."""
    mu, name, book = _worst([(mu, name, b) for mu, (name, b) in zip(inp.mus, inp.books)])
    return at_most(
        mu, inp.mu_max, _coherence_rounding(book), detail=f"worst: {name} N={book.N} d_e={book.d_e}"
    )


def a3_unit_rows(inp: Assumption3Inputs, ctx: Context) -> Verdict:
    """Assumption 3's unit codes: max_i | ||omega_i||^2 - 1 | over every codebook."""

    def off(b):
        return float((b.omega.to(torch.float64).pow(2).sum(dim=1) - 1).abs().max())

    dev, name, book = _worst([(off(b), name, b) for name, b in inp.books])
    return at_most(
        dev,
        0.0,
        _coherence_rounding(book),
        detail=f"max | ||omega_i||^2 - 1 |, worst: {name} N={book.N} d_e={book.d_e}",
    )


def a3_stored_mu(inp: Assumption3Inputs, ctx: Context) -> Verdict:
    """The mu a codebook carries into the bounds is its exact coherence (codebooks.md)."""
    gaps = [(abs(b.mu - mu), name, b) for mu, (name, b) in zip(inp.mus, inp.books)]
    gap, name, book = _worst(gaps)
    return close(
        gap,
        0.0,
        0.0,
        _coherence_rounding(book),
        detail=f"|stored mu - measured mu|, worst: {name} (stored {book.mu:.6g})",
    )


def a3_gram(inp: Assumption3Inputs, ctx: Context) -> Verdict:
    """The exact coherence equals the brute-force float64 Gram maximum, on each codebook's first
    A3_GRAM_ROWS rows."""

    def gap(b):
        rows = b.omega[:A3_GRAM_ROWS]
        return abs(inp.measure(rows) - _gram_mu(rows))

    g, name, book = _worst([(gap(b), name, b) for name, b in inp.books])
    return close(
        g,
        0.0,
        0.0,
        _coherence_rounding(book),
        detail=f"|coherence - Gram max| on <= {A3_GRAM_ROWS} rows, worst: {name}",
    )


def _witness_gap(report: CoherenceReport, book: Codebook) -> float:
    """| |<omega_i, omega_j>| - mu | at the pair (i, j) the report says attains mu (float64)."""
    i, j = report.pair
    rows = book.omega[[i, j]].to(torch.float64)
    return abs(abs(float(rows[0] @ rows[1])) - report.mu)


def a3_witness(inp: Assumption3Inputs, ctx: Context) -> Verdict:
    """Assumption 3's coherence is attained: the pair coherence_report names has
    |<omega_i, omega_j>| = mu, on every row of each codebook (docs/derivations/codebooks.md); the
    largest gap."""
    g, name, book = _worst(
        [(_witness_gap(inp.locate(b.omega), b), name, b) for name, b in inp.books]
    )
    return close(
        g,
        0.0,
        0.0,
        _coherence_rounding(book),
        detail=f"| |<omega_i, omega_j>| - mu | at the reported pair, worst: {name}",
    )


def _union_bounds(inp: Assumption3Inputs, shift: int):
    """C(N, 2) P(|<w_i, w_j>| > 1/2) / delta at d_e + shift, d_e from the exact rule, per N."""
    out = []
    for N in (inp.n_rademacher,) + A3_SMALL_N:
        d_e = inp.dim_rule(N, A3_DELTA, inp.mu_max) + shift
        tail = inp.pair_tail(d_e, inp.mu_max) if d_e >= 1 else math.inf
        ratio = N * (N - 1) // 2 * tail / A3_DELTA
        out.append((ratio, N, d_e))
    return out


def a3_union_bound(inp: Assumption3Inputs, ctx: Context) -> Verdict:
    """The exact rule's d_e passes the union bound C(N, 2) P(|<w_i, w_j>| > 1/2) <= delta
    (codebooks.md (a)); the largest ratio to delta over N."""
    ratio, N, d_e = max(_union_bounds(inp, 0))
    return at_most(ratio, 1.0, detail=f"union bound / delta at N={N}, d_e={d_e}")


def a3_union_bound_least(inp: Assumption3Inputs, ctx: Context) -> Verdict:
    """The exact rule's d_e is the least from which it passes: at d_e - 1 the union bound exceeds
    delta (codebooks.md (a)); the smallest ratio over N."""
    ratio, N, d_e = min(_union_bounds(inp, -1))
    return at_least(ratio, 1.0, detail=f"union bound / delta at N={N}, d_e - 1 = {d_e}")


def _tail_errors(inp: Assumption3Inputs, dims):
    """(relative error of the pair tail against the sign-pattern count, d_e) per d_e in dims."""
    out = []
    for d_e in dims:
        count = _tail_by_counting(d_e, inp.mu_max)
        out.append((abs(Fraction(inp.pair_tail(d_e, inp.mu_max)) - count) / count, d_e))
    return out


def a3_tail_exact(inp: Assumption3Inputs, ctx: Context) -> Verdict:
    """In its exact range (d_e <= 4096) the pair tail is the sign-pattern count rounded once."""
    err, d_e = max(_tail_errors(inp, [d for d in A3_TAIL_DIMS if d <= 4096]))
    return at_most(
        float(err),
        2.0**-53,
        detail=f"relative error, worst at d_e = {d_e}; bound: one rounding to float64",
    )


def a3_tail_scipy(inp: Assumption3Inputs, ctx: Context) -> Verdict:
    """Beyond d_e = 4096 (scipy's binomial cdf) the pair tail is the count to relative 1e-12."""
    err, d_e = max(_tail_errors(inp, [d for d in A3_TAIL_DIMS if d > 4096]))
    return at_most(float(err), 1e-12, detail=f"relative error at d_e = {d_e}")


def a3_hoeffding(inp: Assumption3Inputs, ctx: Context) -> Verdict:
    """The Hoeffding rule d_e = ceil(2 ln(N (N - 1) / delta) / mu^2) (codebooks.md (a)), N = 100."""
    N, mu = 100, inp.mu_max
    want = math.ceil(2 * math.log(N * (N - 1) / A3_DELTA) / mu**2)
    return exact(inp.hoeffding(N, A3_DELTA, mu), want, detail=f"N = {N}, delta = {A3_DELTA:g}")


def _experimental_books(inp: Assumption3Inputs, ctx: Context) -> Assumption3Inputs:
    """Codes at the experiments' d_e = floor(5 ln N), N = 100: coherence above 1/2."""
    g = ctx.generator("assumption-3/experimental", device=ctx.device)
    return _with_books(
        inp, (("experimental", experimental_codebook(100, generator=g, device=ctx.device)),)
    )


def _short_rows(inp: Assumption3Inputs, ctx: Context) -> Assumption3Inputs:
    """Rademacher codes normalised by sqrt(d_e + 1) instead of sqrt(d_e): rows of norm < 1."""
    book = dict(inp.books)["rademacher"]
    short = book.omega * math.sqrt(book.d_e / (book.d_e + 1))
    return _with_books(inp, (("rows / sqrt(d_e + 1)", Codebook(short, book.mu, "custom")),))


def _stale_mu(inp: Assumption3Inputs, ctx: Context) -> Assumption3Inputs:
    """The first 64 words of the RS-Hadamard code keeping the whole code's mu (1/2, not 1/8)."""
    book = dict(inp.books)["rs-hadamard"]
    prefix = Codebook(book.omega[:64], book.mu, "rs-hadamard")
    return _with_books(inp, (("rs-hadamard prefix, stale mu", prefix),))


def _diagonal_counted(inp: Assumption3Inputs, ctx: Context) -> Assumption3Inputs:
    """A coherence whose mask lets the diagonal <omega_i, omega_i> = 1 in (row blocks of the
    Gram, as codes.coherence reads it: the whole Gram at N = 131,072 would take 128 GiB)."""

    def measure(omega):
        w = omega.to(torch.float64)
        return max(float((w[i : i + 1024] @ w.T).abs().max()) for i in range(0, w.shape[0], 1024))

    return replace(inp, measure=measure, mus=_measured(inp.books, measure))


def _rule_of(rule: Callable[[int, float, float], int]):
    return lambda inp, ctx: replace(inp, dim_rule=rule)


def _float32_report(inp: Assumption3Inputs, ctx: Context) -> Assumption3Inputs:
    """The coherence and its pair measured on the codes rounded to float32."""
    return replace(inp, locate=lambda omega: coherence_report(omega.to(torch.float32)))


def _one_sided_tail(inp: Assumption3Inputs, ctx: Context) -> Assumption3Inputs:
    """The pair tail with |.| forgotten: P(<w_i, w_j> > mu), half the two-sided tail."""
    return replace(inp, pair_tail=lambda d_e, mu: rademacher_pair_tail(d_e, mu) / 2)


def _hoeffding_mu(inp: Assumption3Inputs, ctx: Context) -> Assumption3Inputs:
    """The Hoeffding rule with mu in place of mu^2."""

    def rule(N, delta, mu):
        return math.ceil(2 * math.log(N * (N - 1) / delta) / mu)

    return replace(inp, hoeffding=rule)


WITNESS = "coherence attained at its pair"
register(
    Claim(
        id="assumption-3",
        ref=Ref("Assumption 3", "Assumption 3"),
        statement="toolkit codebooks: unit rows, exact coherence max|<w_i,w_j>| <= 1/2",
        inputs=assumption3_inputs,
        checks=[
            Check("coherence <= 1/2", a3_coherence),
            Check("unit rows", a3_unit_rows),
            Check("stored mu = measured", a3_stored_mu),
            Check("coherence = brute-force Gram", a3_gram),
            Check(WITNESS, a3_witness),
            Check("union bound <= delta at d_e", a3_union_bound),
            Check("union bound > delta at d_e - 1", a3_union_bound_least),
            Check("pair tail = count (exact range)", a3_tail_exact),
            Check("pair tail = count (scipy range)", a3_tail_scipy),
            Check("Hoeffding rule as derived", a3_hoeffding),
        ],
        faults=[
            Fault(
                "d_e = floor(5 ln N) at N = 100 (the experiments)",
                _experimental_books,
                breaks=("coherence <= 1/2",),
            ),
            Fault("rows normalised by sqrt(d_e + 1)", _short_rows, breaks=("unit rows",)),
            Fault(
                "a prefix keeping the whole code's mu", _stale_mu, breaks=("stored mu = measured",)
            ),
            Fault(
                "the diagonal counted in the coherence",
                _diagonal_counted,
                breaks=("coherence = brute-force Gram", "stored mu = measured"),
            ),
            Fault("coherence measured in float32", _float32_report, breaks=(WITNESS,)),
            Fault(
                "the exact rule one short",
                _rule_of(lambda N, delta, mu: rademacher_dim(N, delta, mu) - 1),
                breaks=("union bound <= delta at d_e",),
            ),
            Fault(
                "the Hoeffding dimension for the exact rule",
                _rule_of(_hoeffding_rule),
                breaks=("union bound > delta at d_e - 1",),
            ),
            Fault(
                "a one-sided pair tail",
                _one_sided_tail,
                breaks=("pair tail = count (exact range)", "pair tail = count (scipy range)"),
            ),
            Fault(
                "mu for mu^2 in the Hoeffding rule",
                _hoeffding_mu,
                breaks=("Hoeffding rule as derived",),
            ),
        ],
        builds=(build_codebook, rademacher_codebook, rs_hadamard_codebook, Codebook.from_tensor),
        bounds=(rademacher_dim, rademacher_pair_tail, coherence, coherence_report),
        derivation=CODEBOOKS,
    )
)


# ---------------------------------------------------------------- data-model


@dataclass(frozen=True)
class DataModelInputs:
    """Sampled batches (task, prompts) of hypothesis-drawn qSTR tasks (Definition 2)."""

    cases: Tuple[Tuple[QSTR, Prompts], ...]


def data_model_inputs(ctx: Context) -> DataModelInputs:
    """Tasks drawn by ``qstr.verify.strategies.prompts`` (N <= 10, d <= 3, q <= 3, B <= 3), each
    sampled as users sample it; the draws are seeded by name."""
    cases = []

    @settings(
        max_examples=ctx.pick(quick=60, full=400),
        database=None,
        deadline=None,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
    )
    @given(prompts(max_N=10, max_d=3, max_q=3, max_B=3, device=ctx.device))
    def draw(case):
        cases.append(case)

    seed(ctx.seed_of("data-model/tasks"))(draw)()
    return DataModelInputs(tuple(cases))


def _label_error(task: QSTR, p: Prompts):
    """(max |y - g(x_t)|, its rounding) with x_t read by direct indexing x[b, t[b, i, k]]."""
    direct = p.x[torch.arange(p.B, device=p.x.device)[:, None, None], p.t]
    want = task.link(direct)
    err = float((p.y - want).abs().max())
    scale = max(1.0, float(want.abs().max()))
    return err, Rounding(
        n=task.q * task.d + 16, scale=scale, dtype=p.x.dtype, what="(q d + 16) eps max(1, |y|max)"
    )


def dm_labels(inp: DataModelInputs, ctx: Context) -> Verdict:
    """Definition 2: y_i = g(x_{t_i}) at every position of every sampled prompt (worst case)."""
    (err, rnd), (task, p) = max(
        ((_label_error(*c), c) for c in inp.cases), key=lambda v: v[0][0] - v[0][1].term
    )
    return at_most(
        err,
        0.0,
        rnd,
        detail=f"max |y - g(x_t)| over {len(inp.cases)} batches, worst: "
        f"N={task.N} d={task.d} q={task.q} {task.variant}/{task.indices} {p.x.dtype}",
    )


def _structure_fault(task: QSTR, p: Prompts) -> str:
    """'' or what breaks Definition 2's index structure (properties.assert_index_structure)."""
    try:
        assert_index_structure(task, p)
    except AssertionError as exc:
        return str(exc)
    return ""


def dm_structure(inp: DataModelInputs, ctx: Context) -> Verdict:
    """Simple prompts share one t; distinct, few-heads and half-zero variants as defined."""
    bad = [(task, why) for task, p in inp.cases for why in [_structure_fault(task, p)] if why]
    first = f"; first: N={bad[0][0].N} {bad[0][0].variant}: {bad[0][1]}" if bad else ""
    return exact(
        len(bad), 0, detail=f"batches breaking the index structure of {len(inp.cases)}{first}"
    )


def dm_index_range(inp: DataModelInputs, ctx: Context) -> Verdict:
    """Every index t_{i,k} lies in [0, N): the largest distance outside it over the batches."""
    out = max(max(0, -int(p.t.min()), int(p.t.max()) - (task.N - 1)) for task, p in inp.cases)
    return exact(out, 0, detail="max distance of an index outside [0, N)")


def _shape_fault(task: QSTR, p: Prompts) -> str:
    B, N, d, q = p.x.shape[0], task.N, task.d, task.q
    y_shape = (B, N) if task.link.out_dim is None else (B, N, task.link.out_dim)
    if (tuple(p.x.shape), tuple(p.t.shape), tuple(p.y.shape)) != ((B, N, d), (B, N, q), y_shape):
        return f"shapes x {tuple(p.x.shape)}, t {tuple(p.t.shape)}, y {tuple(p.y.shape)}"
    if p.y.dtype != p.x.dtype or p.t.dtype != torch.long:
        return f"dtypes x {p.x.dtype}, y {p.y.dtype}, t {p.t.dtype}"
    return ""


def dm_shapes(inp: DataModelInputs, ctx: Context) -> Verdict:
    """x is (B, N, d), t is (B, N, q) of longs, y is (B, N) (or (B, N, out)) of x's dtype."""
    bad = [why for task, p in inp.cases for why in [_shape_fault(task, p)] if why]
    first = f": {bad[0]}" if bad else ""
    return exact(len(bad), 0, detail=f"batches with a wrong shape or dtype{first}")


def _each_case(edit):
    def apply(inp, ctx):
        return replace(inp, cases=tuple((task, edit(task, p)) for task, p in inp.cases))

    return apply


def _off_by_one(task: QSTR, p: Prompts) -> Prompts:
    """A broken sampler: labels read the token after the indexed one."""
    return Prompts(x=p.x, t=p.t, y=task.link(gather_tokens(p.x, (p.t + 1) % task.N)))


def _per_position_t(task: QSTR, p: Prompts) -> Prompts:
    """A sampler that draws t per position for simple prompts (labels kept consistent)."""
    t = (p.t + torch.arange(task.N, device=p.t.device)[None, :, None]) % task.N
    return Prompts(x=p.x, t=t, y=task.link(gather_tokens(p.x, t)))


def _one_based(task: QSTR, p: Prompts) -> Prompts:
    """Indices counted from 1: t in [1, N]."""
    return Prompts(x=p.x, t=p.t + 1, y=p.y)


def _wide_labels(task: QSTR, p: Prompts) -> Prompts:
    """Labels returned in the other float dtype than the tokens."""
    other = torch.float32 if p.y.dtype == torch.float64 else torch.float64
    return Prompts(x=p.x, t=p.t, y=p.y.to(other))


register(
    Claim(
        id="data-model",
        ref=Ref("Definition 2", "Definition 1"),
        statement="sampled qSTR batches: y_i = g(x_{t_i}) everywhere, simple prompts share t, "
        "shapes/dtypes",
        inputs=data_model_inputs,
        checks=[
            Check("labels y_i = g(x_t_i)", dm_labels),
            Check("index structure as defined", dm_structure),
            Check("indices in [0, N)", dm_index_range),
            Check("shapes and dtypes", dm_shapes),
        ],
        faults=[
            Fault(
                "labels read x_{t_i + 1} (off-by-one sampler)",
                _each_case(_off_by_one),
                breaks=("labels y_i = g(x_t_i)",),
            ),
            Fault(
                "simple prompts with t drawn per position",
                _each_case(_per_position_t),
                breaks=("index structure as defined",),
            ),
            Fault("indices counted from 1", _each_case(_one_based), breaks=("indices in [0, N)",)),
            Fault(
                "labels in the other dtype", _each_case(_wide_labels), breaks=("shapes and dtypes",)
            ),
        ],
        builds=(QSTR.sample,),
        derivation=SETTING,
    )
)

# ---------------------------------------------------------------- assumption-1

A1_ORDERS = (1.0, 2.0, 3.0, 4.0)
A1_DIMS = (1, 4, 16)
A1_TOL = 0.05  # Monte Carlo: the r = 4 ratio's standard error over B N = 25,600 draws: ~1 %


def chi_moment_ratio(d: int, r: float) -> float:
    """E[||x||^r]^(2/r) / (d r) for x ~ N(0, I_d):
    E||x||^r = 2^(r/2) Gamma((d + r)/2) / Gamma(d/2)."""
    log_m = (r / 2) * math.log(2) + math.lgamma((d + r) / 2) - math.lgamma(d / 2)
    return math.exp(2 * log_m / r) / (d * r)


def normal_moment_ratio(r: float, s: float = 1.0) -> float:
    """E[|y|^r]^(2/r) / r^(2s) for y ~ N(0, 1): E|y|^r = 2^(r/2) Gamma((r + 1)/2) / sqrt(pi)."""
    log_m = (r / 2) * math.log(2) + math.lgamma((r + 1) / 2) - 0.5 * math.log(math.pi)
    return math.exp(2 * log_m / r) / r ** (2 * s)


@dataclass(frozen=True)
class Assumption1Inputs:
    """moment_check reports of the qSTR sampler (linear link: y ~ N(0, 1)) per d, and the closed
    forms they are compared with."""

    reports: Tuple[Tuple[int, object], ...]  # (d, MomentReport)
    chi_ratio: Callable[[int, float], float]
    normal_ratio: Callable[[float], float]


def _a1_tasks(ctx: Context) -> Tuple[Tuple[int, QSTR], ...]:
    return tuple(
        (
            d,
            QSTR(
                N=64,
                d=d,
                link=make_link("linear", 1, d, generator=ctx.generator("assumption-1/link", d)),
            ),
        )
        for d in A1_DIMS
    )


def _a1_reports(tasks, ctx: Context):
    B = ctx.pick(quick=400, full=4000)

    def report(d, task):
        g = ctx.generator("assumption-1/tokens", d, device=ctx.device)
        return moment_check(task, B=B, orders=A1_ORDERS, device=ctx.device, generator=g)

    return tuple((d, report(d, task)) for d, task in tasks)


def assumption1_inputs(ctx: Context) -> Assumption1Inputs:
    """Monte Carlo token and label moments at r = 1..4, d = 1, 4, 16 (Assumption 1)."""
    reports = _a1_reports(_a1_tasks(ctx), ctx)
    return Assumption1Inputs(reports, chi_moment_ratio, normal_moment_ratio)


def a1_c_x(inp: Assumption1Inputs, ctx: Context) -> Verdict:
    """Assumption 1 with C_x = 1: E[||x||^r]^(1/r) <= sqrt(d r), the largest measured ratio."""
    C_x, d, rep = max((rep.C_x, d, rep) for d, rep in inp.reports)
    rnd = Rounding(n=rep.samples, scale=C_x, what="(B N) eps C_x")
    return at_most(
        C_x,
        1.0,
        rnd,
        detail=f"C_x = max_r E||x||^r^(2/r) / (d r), worst d = {d}, {rep.samples} tokens",
    )


def _worst_ratio(inp: Assumption1Inputs, column: int, closed):
    """max |MC / closed - 1| over d and r: (deviation, ratio, d, r)."""
    rows = [
        (abs(row[column] / closed(d, row[0]) - 1), row[column] / closed(d, row[0]), d, row[0])
        for d, rep in inp.reports
        for row in rep.per_order
    ]
    return max(rows)


def a1_tokens(inp: Assumption1Inputs, ctx: Context) -> Verdict:
    """Token moments E[||x||^r]^(2/r) / (d r): Monte Carlo = the chi closed form, within 5%."""
    _, ratio, d, r = _worst_ratio(inp, 1, inp.chi_ratio)
    return close(ratio, 1.0, A1_TOL, detail=f"MC / closed form, worst at d = {d}, r = {r:g}")


def a1_labels(inp: Assumption1Inputs, ctx: Context) -> Verdict:
    """Label moments E[|y|^r]^(2/r) / r^2 (y ~ N(0, 1)): Monte Carlo = the normal closed form."""
    _, ratio, d, r = _worst_ratio(inp, 2, lambda d, r: inp.normal_ratio(r))
    return close(ratio, 1.0, A1_TOL, detail=f"MC / closed form, worst at d = {d}, r = {r:g}")


class _Scaled(QSTR):
    """A sampler drawing x ~ N(0, scale^2 I) by mistake."""

    scale = 1.5

    def sample_tokens(self, B, *, generator, device, dtype):
        x = super().sample_tokens(B, generator=generator, device=device, dtype=dtype)
        return self.scale * x


def _wide_tokens(inp: Assumption1Inputs, ctx: Context) -> Assumption1Inputs:
    """Tokens drawn with standard deviation 1.5 instead of 1."""
    tasks = tuple((d, _Scaled(N=t.N, d=t.d, link=t.link)) for d, t in _a1_tasks(ctx))
    return replace(inp, reports=_a1_reports(tasks, ctx))


def _wide_labels(inp: Assumption1Inputs, ctx: Context) -> Assumption1Inputs:
    """A linear link whose direction has norm 1.5: labels ~ N(0, 2.25)."""

    def wide(d, t):
        return QSTR(N=t.N, d=d, link=CallableLink(q=1, d=d, fn=lambda xt: 1.5 * t.link(xt)))

    tasks = tuple((d, wide(d, t)) for d, t in _a1_tasks(ctx))
    return replace(inp, reports=_a1_reports(tasks, ctx))


def _chi_of_d_plus_one(inp: Assumption1Inputs, ctx: Context) -> Assumption1Inputs:
    """The chi closed form with d + 1 degrees of freedom."""
    return replace(inp, chi_ratio=lambda d, r: chi_moment_ratio(d + 1, r))


register(
    Claim(
        id="assumption-1",
        ref=Ref("Assumption 1", "Assumption 1"),
        statement="sampled tokens: E[||x||^r]^(1/r) <= sqrt(C_x d r) with C_x <= 1, Monte Carlo = "
        "chi closed form",
        inputs=assumption1_inputs,
        checks=[
            Check("C_x <= 1", a1_c_x),
            Check("token moments = chi closed form", a1_tokens),
            Check("label moments = normal closed form", a1_labels),
        ],
        faults=[
            Fault(
                "tokens with standard deviation 1.5",
                _wide_tokens,
                breaks=("C_x <= 1", "token moments = chi closed form"),
            ),
            Fault(
                "labels with standard deviation 1.5",
                _wide_labels,
                breaks=("label moments = normal closed form",),
            ),
            Fault(
                "the chi closed form at d + 1",
                _chi_of_d_plus_one,
                breaks=("token moments = chi closed form",),
            ),
        ],
        builds=(QSTR.sample, moment_check),
        bounds=(chi_moment_ratio, normal_moment_ratio),
        derivation=SETTING,
    )
)

# ---------------------------------------------------------------- assumption-2 (links)

A2_Q, A2_D = 3, 4
A2_TEACHERS = 400  # random teachers averaged over (quick and full)
A2_Z = 6.0  # standard errors allowed between a Monte Carlo mean and its stated value
# E g^2 for q distinct N(0, I_d) tokens, as the links are stated (constructions/links.py)
A2_SECOND_MOMENT = {
    "linear": lambda q, d: 1.0,
    "hermite": lambda q, d: 1.0,
    "sqnorm": lambda q, d: 2.0,
    "mean": lambda q, d: d / q,
    "mean-projected": lambda q, d: 1.0 / q,
}


def teacher_second_moment_closed(q: int, d: int) -> float:
    """The random teacher's E g^2 = m E a_j^2 E relu(w.x + b)^2 = (1 + 1/(q d)) / 2 (a ~ N(0, 1/m),
    W, b ~ N(0, 1/(q d)); cross terms vanish, E relu(z)^2 = E z^2 / 2 for symmetric z)."""
    return (1 + 1 / (q * d)) / 2


@dataclass(frozen=True)
class Assumption2Inputs:
    """The links users get from make_link, Gaussian tokens (and some of norm 10), the teacher's
    draw, and the stated second moments."""

    links: Tuple[Tuple[str, object], ...]
    xt: torch.Tensor  # (n, q, d) N(0, I) tokens
    big: torch.Tensor  # tokens of norm 10, for the exact nets
    teacher: Callable[[torch.Generator], object]  # a generator -> a random teacher link
    stated: Dict[str, Callable[[int, int], float]]
    teacher_closed: Callable[[int, int], float]


def _draw_teacher(g: torch.Generator):
    return make_link("teacher", A2_Q, A2_D, generator=g)


def assumption2_inputs(ctx: Context) -> Assumption2Inputs:
    """Each link of constructions/links.py at q = 3, d = 4, and n Gaussian token triples."""
    n = ctx.pick(quick=100_000, full=1_000_000)
    names = ("linear", "hermite", "sqnorm", "mean", "mean-projected", "teacher")
    links = tuple(
        (name, make_link(name, A2_Q, A2_D, generator=ctx.generator("assumption-2/link", i)))
        for i, name in enumerate(names)
    )
    g = ctx.generator("assumption-2/tokens")
    xt = torch.randn(n, A2_Q, A2_D, generator=g, dtype=torch.float64)
    big = xt[:2000] * (10.0 / xt[:2000].norm(dim=-1, keepdim=True))
    return Assumption2Inputs(
        links, xt, big, _draw_teacher, dict(A2_SECOND_MOMENT), teacher_second_moment_closed
    )


def _second_moment(link, xt: torch.Tensor):
    """(E g^2 estimate, its standard error) over the rows of xt."""
    y = link(xt)
    sq = (y * y).sum(-1) if y.dim() == xt.dim() - 1 else y * y
    return float(sq.mean()), float(sq.std() / math.sqrt(sq.numel()))


def a2_second_moments(inp: Assumption2Inputs, ctx: Context) -> Verdict:
    """Each link's E g^2 (Monte Carlo) = its stated value: the largest |mean - stated| / se."""
    rows = []
    for name, link in inp.links:
        if name in inp.stated:
            m, se = _second_moment(link, inp.xt)
            want = inp.stated[name](A2_Q, A2_D)
            rows.append((abs(m - want) / se, name, m, se, want))
    z, name, m, se, want = max(rows)
    return at_most(
        z,
        A2_Z,
        detail=f"standard errors, worst: {name}: E g^2 = {m:.4f} +- {se:.1g} "
        f"vs stated {want:.4g} ({len(inp.xt)} draws)",
    )


def _teacher_moment(inp: Assumption2Inputs, ctx: Context):
    """E g^2 averaged over A2_TEACHERS teachers, each on its own 32 Gaussian inputs: (mean, se)."""
    g = ctx.generator("assumption-2/teachers")
    means = []
    for _ in range(A2_TEACHERS):
        link = inp.teacher(g)
        xt = torch.randn(32, A2_Q, A2_D, generator=g, dtype=torch.float64)
        means.append(float(link(xt).pow(2).mean()))
    m = torch.tensor(means, dtype=torch.float64)
    return float(m.mean()), float(m.std() / math.sqrt(len(means)))


def a2_teacher(inp: Assumption2Inputs, ctx: Context) -> Verdict:
    """The random teacher's E g^2 over its draws = (1 + 1/(q d)) / 2, within 6 standard errors."""
    m, se = _teacher_moment(inp, ctx)
    want = inp.teacher_closed(A2_Q, A2_D)
    return close(m, want, A2_Z * se, detail=f"{A2_TEACHERS} teachers: se {se:.2g}, tolerance 6 se")


def a2_exact_nets(inp: Assumption2Inputs, ctx: Context) -> Verdict:
    """Every exact Assumption 2 net equals g, on Gaussian tokens and tokens of norm 10."""
    rows = []
    for name, link in inp.links:
        net = link.two_layer_net()
        if net is not None:
            err = max(float((net(x) - link(x)).abs().max()) for x in (inp.xt[:2000], inp.big))
            rnd = Rounding(
                n=A2_Q * A2_D + net.m + 2,
                scale=10.0 * A2_Q * max(1.0, net.lipschitz),
                what="(qd + m + 2) eps 10 q Lip",
            )
            rows.append((err - rnd.term, err, rnd, name))
    _, err, rnd, name = max(rows, key=lambda r: r[0])
    return at_most(err, 0.0, rnd, detail=f"max |net - g|, worst: {name}")


def _only(name: str, link):
    return lambda inp, ctx: replace(inp, links=((name, link(ctx)),))


def _hermite_u(ctx: Context):
    return make_link("hermite", A2_Q, A2_D, generator=ctx.generator("assumption-2/link", 1)).u


def _no_sqrt2(ctx: Context):
    """He2 without its 1/sqrt(2)."""
    u = _hermite_u(ctx)

    def g(xt):
        return (((xt * u.to(xt)).sum(-1)) ** 2 - 1).sum(-1) / math.sqrt(A2_Q)

    return CallableLink(q=A2_Q, d=A2_D, fn=g)


def _times_sqrt_q(ctx: Context):
    """The Hermite sum times sqrt(q) instead of over it."""
    u = _hermite_u(ctx)

    def g(xt):
        return he2((xt * u.to(xt)).sum(-1)).sum(-1) * math.sqrt(A2_Q)

    return CallableLink(q=A2_Q, d=A2_D, fn=g)


def _sign_slip(ctx: Context):
    """A linear link whose exact net lost the sign of its second unit."""
    lin = make_link("linear", A2_Q, A2_D, generator=ctx.generator("assumption-2/link", 0))
    good = lin.two_layer_net()
    bad = TwoLayerNet(a=torch.tensor([1.0, 1.0], dtype=torch.float64), W=good.W, b=good.b)

    class SignSlip(type(lin)):
        def two_layer_net(self):
            return bad

    return SignSlip(q=A2_Q, d=A2_D, u=lin.u)


def _unscaled_teacher(inp: Assumption2Inputs, ctx: Context) -> Assumption2Inputs:
    """Teachers drawn with a ~ N(0, 1) (the 1/sqrt(m) of the output weights forgotten)."""

    def draw(g):
        t = _draw_teacher(g)
        m = t.net.a.shape[0]
        net = TwoLayerNet(a=t.net.a * math.sqrt(m), W=t.net.W, b=t.net.b)
        return type(t)(q=A2_Q, d=A2_D, net=net)

    return replace(inp, teacher=draw)


register(
    Claim(
        id="assumption-2",
        ref=Ref("Assumption 2", "Assumption 2"),
        statement="links as stated: E g^2 (Monte Carlo; the random teacher averaged over its draws) "
        "= its stated value; the exact two-layer nets equal g",
        inputs=assumption2_inputs,
        checks=[
            Check("E g^2 = stated", a2_second_moments),
            Check("teacher E g^2 = (1 + 1/(qd)) / 2", a2_teacher),
            Check("exact nets = g", a2_exact_nets),
        ],
        faults=[
            Fault("He2 without 1/sqrt 2", _only("hermite", _no_sqrt2), breaks=("E g^2 = stated",)),
            Fault(
                "the Hermite sum times sqrt q",
                _only("hermite", _times_sqrt_q),
                breaks=("E g^2 = stated",),
            ),
            Fault(
                "a linear net with a sign lost",
                _only("linear", _sign_slip),
                breaks=("exact nets = g",),
            ),
            Fault(
                "a teacher without the 1/sqrt(m) of its output weights",
                _unscaled_teacher,
                breaks=("teacher E g^2 = (1 + 1/(qd)) / 2",),
            ),
        ],
        builds=(make_link,),
        bounds=(teacher_second_moment_closed,),
        derivation=SETTING,
    )
)

# ---------------------------------------------------------------- lemma-12

L12_DELTA = 1e-3  # token_radius's default failure probability


@dataclass(frozen=True)
class Lemma12Inputs:
    """n prompts of N Gaussian tokens in R^d (C_x = 1), and the two radii they are held to."""

    x: torch.Tensor  # (n, N, d)
    radius: Callable[[int, int, int], float]  # Lemma 12's r_x(d, n, N)
    token_radius: Callable[[int, int], float]  # the RNN's radius(d, n N) (bounds.recurrent)


def lemma12_inputs(ctx: Context) -> Lemma12Inputs:
    """n = 64 (quick) or 512 prompts of N = 2048 tokens, d = 2 (theorem4.md, section 1a)."""
    n, N, d = ctx.pick(quick=64, full=512), 2048, 2
    x = torch.randn(
        n,
        N,
        d,
        generator=ctx.generator("lemma-12/tokens", device=ctx.device),
        dtype=torch.float64,
        device=ctx.device,
    )
    return Lemma12Inputs(x, lemma12_radius, token_radius)


def _max_norm(inp: Lemma12Inputs):
    n, N, d = inp.x.shape
    worst = float(inp.x.norm(dim=-1).max())
    return worst, n, N, d, Rounding(n=d + 1, scale=worst, what="(d + 1) eps max||x||")


def l12_radius(inp: Lemma12Inputs, ctx: Context) -> Verdict:
    """Lemma 12: every token lies in the ball of radius r_x = sqrt(3 C_x e d log(n N))."""
    worst, n, N, d, rnd = _max_norm(inp)
    r_x = inp.radius(d, n, N)
    return at_most(
        worst,
        r_x,
        rnd,
        detail=f"max ||x_j|| over n={n} prompts x N={N} tokens, d={d}, "
        f"C_x = 1; slack r_x / max = {r_x / worst:.2f}",
    )


def l12_token_radius(inp: Lemma12Inputs, ctx: Context) -> Verdict:
    """The constructions' radius sqrt(d) + sqrt(2 ln(n N / delta)) holds for the same tokens."""
    worst, n, N, d, rnd = _max_norm(inp)
    return at_most(
        worst,
        inp.token_radius(d, n * N),
        rnd,
        detail=f"token_radius(d, n N) at delta = {L12_DELTA:g}",
    )


def l12_radius_formula(inp: Lemma12Inputs, ctx: Context) -> Verdict:
    """r_x = sqrt(3 C_x e d ln(n N)) at C_x = 1 (theorem4.md, 1a)."""
    _, n, N, d, _ = _max_norm(inp)
    want = math.sqrt(3 * math.e * d * math.log(n * N))
    return close(inp.radius(d, n, N), want, 1e-12 * want, detail="relative tolerance 1e-12")


def l12_token_radius_formula(inp: Lemma12Inputs, ctx: Context) -> Verdict:
    """token_radius = sqrt(d) + sqrt(2 ln(n N / delta)) (Gaussian concentration, union bound)."""
    _, n, N, d, _ = _max_norm(inp)
    want = math.sqrt(d) + math.sqrt(2 * math.log(n * N / L12_DELTA))
    return close(inp.token_radius(d, n * N), want, 1e-12 * want, detail="relative tolerance 1e-12")


def _no_union_bound(inp: Lemma12Inputs, ctx: Context) -> Lemma12Inputs:
    """r_x without the union bound over the n N tokens (log(n N) -> 1, one token)."""
    return replace(inp, radius=lambda d, n, N: math.sqrt(3 * math.e * d))


def _no_concentration(inp: Lemma12Inputs, ctx: Context) -> Lemma12Inputs:
    """token_radius without its concentration term: the mean norm sqrt(d) alone."""
    return replace(inp, token_radius=lambda d, n_tokens: math.sqrt(d))


register(
    Claim(
        id="lemma-12",
        ref=Ref("Lemma 12", "Lemma 12"),
        statement="every token of n prompts lies in the ball of radius sqrt(3 C_x e d log(n N)) "
        "(w.h.p.), and within the RNN's token_radius",
        inputs=lemma12_inputs,
        checks=[
            Check("max ||x_j|| <= r_x", l12_radius),
            Check("max ||x_j|| <= token_radius", l12_token_radius),
            Check("r_x as derived", l12_radius_formula),
            Check("token_radius as derived", l12_token_radius_formula),
        ],
        faults=[
            Fault(
                "r_x without the union bound over n N tokens",
                _no_union_bound,
                breaks=("max ||x_j|| <= r_x", "r_x as derived"),
            ),
            Fault(
                "token_radius without its concentration term",
                _no_concentration,
                breaks=("max ||x_j|| <= token_radius", "token_radius as derived"),
            ),
        ],
        bounds=(lemma12_radius, token_radius),
        derivation=SETTING,
    )
)

# ---------------------------------------------------------------- rs-hadamard-codes

# x^4 + x^2 + 1 = (x^2 + x + 1)^2 and x^8 + 1 = (x + 1)^8
RS_REDUCIBLE = {4: 0b10101, 8: 0b100000001}


@dataclass(frozen=True)
class RSInputs:
    """GF(2^m) multiplication tables for every m the code uses, RS-Hadamard codebooks with
    N = n^2 words at mu = 1/n, the root-count coherence and the guarantee (codebooks.md (c))."""

    tables: Dict[int, np.ndarray]  # m -> (2^m, 2^m) table
    books: Tuple[Tuple[int, Codebook], ...]  # (m, codebook)
    grams: Tuple[float, ...]  # each code's brute-force Gram coherence, computed once
    root_count: Callable[[int, int, int], float]  # rs_hadamard_coherence(N, m, k)
    guarantee: Callable[[int, int], float]  # (k, n) -> (k - 1) / n


def rs_guarantee(k: int, n: int) -> float:
    """<omega_i, omega_j> = #roots(p_i - p_j) / n <= (k - 1) / n (codebooks.md (c))."""
    return (k - 1) / n


def rs_inputs(ctx: Context) -> RSInputs:
    """Tables for m = 1..MAX_M; codes for m = 1..5 (6 on the GPU profile)."""
    tables = {m: gf_mul_table(m) for m in range(1, MAX_M + 1)}
    books = tuple(
        (m, rs_hadamard_codebook(4**m, mu=1.0 / 2**m, device=ctx.device))
        for m in range(1, ctx.pick(quick=5, full=5, gpu=6) + 1)
    )
    grams = tuple(_gram_mu(b.omega) for _, b in books)
    return RSInputs(tables, books, grams, rs_hadamard_coherence, rs_guarantee)


def _zero_divisors(table: np.ndarray) -> int:
    """Nonzero rows of the table that do not permute the nonzero elements (0 for a field)."""
    n = table.shape[0]
    rows = np.sort(table[1:, 1:], axis=1)
    return int((rows != np.arange(1, n)[None, :]).any(axis=1).sum())


def rs_fields(inp: RSInputs, ctx: Context) -> Verdict:
    """GF(2)[x]/(f_m) is a field for every m: each nonzero row permutes the nonzero elements."""
    bad = sorted(m for m, t in inp.tables.items() if _zero_divisors(t))
    return exact(
        len(bad),
        0,
        detail=f"tables with zero divisors among m = 1..{max(inp.tables)}"
        + (f": m = {bad}" if bad else ""),
    )


def _rounding(book: Codebook) -> Rounding:
    return Rounding(n=book.d_e, scale=1.0, dtype=torch.float64, what="d_e eps")


def rs_root_count(inp: RSInputs, ctx: Context) -> Verdict:
    """The code's mu (O(N n) root count) = the brute-force float64 Gram coherence (worst m)."""
    gap, m, book = max(
        ((abs(b.mu - g), m, b) for g, (m, b) in zip(inp.grams, inp.books)), key=lambda r: r[0]
    )
    return close(
        gap,
        0.0,
        0.0,
        _rounding(book),
        detail=f"|stored mu - Gram mu|, worst m = {m} (N = {book.N}, stored {book.mu:.4g})",
    )


def rs_guarantee_holds(inp: RSInputs, ctx: Context) -> Verdict:
    """Gram coherence <= (k - 1)/n for every code: the largest excess over the guarantee."""
    excess = [
        (g - inp.guarantee(b.params["k"], 2**m), m, b) for g, (m, b) in zip(inp.grams, inp.books)
    ]
    e, m, book = max(excess, key=lambda r: r[0])
    return at_most(e, 0.0, _rounding(book), detail=f"Gram mu - (k - 1)/n, worst m = {m}")


def rs_prefixes(inp: RSInputs, ctx: Context) -> Verdict:
    """rs_hadamard_coherence(N', m, k) = the Gram coherence of the first N' words, N' = 2, n + 1
    (the XOR identity of codebooks.md (c))."""
    rows = []
    for m, b in inp.books:
        k = b.params["k"]
        for Np in (2, 2**m + 1):
            rows.append((abs(inp.root_count(Np, m, k) - _gram_mu(b.omega[:Np])), m, Np, b))
    gap, m, Np, book = max(rows, key=lambda r: r[0])
    return close(gap, 0.0, 0.0, _rounding(book), detail=f"worst m = {m}, N' = {Np}")


def _reducible(inp: RSInputs, ctx: Context) -> RSInputs:
    """Reducible moduli x^4 + x^2 + 1 and x^8 + 1: zero divisors."""
    reducible = {m: gf_mul_table(m, p) for m, p in RS_REDUCIBLE.items()}
    return replace(inp, tables={**inp.tables, **reducible})


def _one_root_fewer(inp: RSInputs, ctx: Context) -> RSInputs:
    """Codes storing (k - 2)/n: a polynomial of degree < k counted with k - 2 roots at most."""
    books = tuple(
        (m, Codebook(b.omega, max(0.0, (b.params["k"] - 2) / 2**m), b.kind, b.params))
        for m, b in inp.books
    )
    return replace(inp, books=books)


def _guarantee_one_short(inp: RSInputs, ctx: Context) -> RSInputs:
    """The guarantee (k - 2)/n."""
    return replace(inp, guarantee=lambda k, n: (k - 2) / n)


def _root_count_plus_one(inp: RSInputs, ctx: Context) -> RSInputs:
    """The root count over N' + 1 words (an off-by-one in the XOR range)."""
    return replace(inp, root_count=lambda N, m, k: rs_hadamard_coherence(min(N + 1, 4**m), m, k))


register(
    Claim(
        id="rs-hadamard-codes",
        ref=Ref("Assumption 3", "Assumption 3"),
        statement="the RS-Hadamard codes: GF(2^m) tables are fields for every m used; exact "
        "coherence two ways",
        inputs=rs_inputs,
        checks=[
            Check("root-count mu = Gram mu", rs_root_count),
            Check("Gram mu <= (k - 1)/n", rs_guarantee_holds),
            Check("prefix root count = Gram", rs_prefixes),
            Check("GF(2^m) tables are fields", rs_fields),
        ],
        faults=[
            Fault(
                "reducible moduli x^4 + x^2 + 1 and x^8 + 1",
                _reducible,
                breaks=("GF(2^m) tables are fields",),
            ),
            Fault("codes storing (k - 2)/n", _one_root_fewer, breaks=("root-count mu = Gram mu",)),
            Fault(
                "the guarantee (k - 2)/n", _guarantee_one_short, breaks=("Gram mu <= (k - 1)/n",)
            ),
            Fault(
                "the root count over N' + 1 words",
                _root_count_plus_one,
                breaks=("prefix root count = Gram",),
            ),
        ],
        builds=(rs_hadamard_codebook, gf_mul_table),
        bounds=(rs_hadamard_coherence, rs_guarantee),
        derivation=CODEBOOKS,
    )
)

# ---------------------------------------------------------------- experimental-encoding

EXP_N = 100


@dataclass(frozen=True)
class ExperimentalInputs:
    """Violating pairs of independent draws of the experiments' codebook (N = 100, d_e = 23), and
    the pair tail that predicts them (codebooks.md (b))."""

    counts: Tuple[int, ...]  # pairs with |<w_i, w_j>| > 1/2, per draw
    d_e: int
    pair_tail: Callable[[int, float], float]  # rademacher_pair_tail


def experimental_inputs(ctx: Context) -> ExperimentalInputs:
    """R = 300 (quick) or 3000 draws of experimental_codebook(100), each its own generator."""

    def draw(r):
        g = ctx.generator("experimental-encoding/draw", r, device=ctx.device)
        return experimental_codebook(EXP_N, device=ctx.device, generator=g)

    books = [draw(r) for r in range(ctx.pick(quick=300, full=3000))]
    return ExperimentalInputs(
        tuple(b.params["n_violations"] for b in books), books[0].d_e, rademacher_pair_tail
    )


def exp_mean(inp: ExperimentalInputs, ctx: Context) -> Verdict:
    """The mean number of pairs above 1/2 per draw = C(N, 2) P(|<w_i, w_j>| > 1/2) (about 52.58),
    within 6 standard errors."""
    R, pairs = len(inp.counts), EXP_N * (EXP_N - 1) // 2
    mean = sum(inp.counts) / R
    se = math.sqrt(sum((c - mean) ** 2 for c in inp.counts) / (R - 1) / R)
    return close(
        mean,
        pairs * inp.pair_tail(inp.d_e, 0.5),
        6 * se,
        detail=f"N = {EXP_N}, d_e = {inp.d_e}, {R} draws, se {se:.2g}, tolerance 6 se",
    )


def exp_tail(inp: ExperimentalInputs, ctx: Context) -> Verdict:
    """The pair tail at d_e = 23 = the sign-pattern count 89104 / 2^23 (codebooks.md (b))."""
    count = _tail_by_counting(inp.d_e, 0.5)
    return exact(inp.pair_tail(inp.d_e, 0.5), float(count), detail=f"count {count}")


def exp_every_draw(inp: ExperimentalInputs, ctx: Context) -> Verdict:
    """Every draw violates Assumption 3: the fewest pairs above 1/2 in a draw is at least 1."""
    return at_least(
        min(inp.counts), 1, detail=f"fewest violating pairs over {len(inp.counts)} draws"
    )


def _one_sided(inp: ExperimentalInputs, ctx: Context) -> ExperimentalInputs:
    """The one-sided tail (|.| forgotten): half the pairs."""
    return replace(inp, pair_tail=lambda d_e, mu: rademacher_pair_tail(d_e, mu) / 2)


def _exact_rule_draws(inp: ExperimentalInputs, ctx: Context) -> ExperimentalInputs:
    """Ten draws at the exact rule's d_e (rademacher_codebook, N = 100): no pair above 1/2."""

    def draw(r):
        g = ctx.generator("experimental-encoding/rule", r, device=ctx.device)
        return rademacher_codebook(EXP_N, device=ctx.device, generator=g)

    books = [draw(r) for r in range(10)]
    return replace(inp, counts=tuple(coherence_report(b.omega, 0.5).n_violations for b in books))


register(
    Claim(
        id="experimental-encoding",
        ref=Ref("Appendix E", "Appendix E"),
        statement="the experiments' d_e = floor(5 ln N) at N = 100: about 52.6 of 4950 code pairs "
        "exceed 1/2 (exact tail = sign-pattern count = Monte Carlo)",
        inputs=experimental_inputs,
        checks=[
            Check("mean violations = C(N, 2) tail", exp_mean),
            Check("pair tail = sign-pattern count", exp_tail),
            Check("every draw violates Assumption 3", exp_every_draw),
        ],
        faults=[
            Fault(
                "the one-sided tail",
                _one_sided,
                breaks=("mean violations = C(N, 2) tail", "pair tail = sign-pattern count"),
            ),
            Fault(
                "draws at the exact rule's d_e",
                _exact_rule_draws,
                breaks=("every draw violates Assumption 3",),
            ),
        ],
        builds=(experimental_codebook,),
        bounds=(rademacher_pair_tail,),
        derivation=CODEBOOKS,
    )
)
