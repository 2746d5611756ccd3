"""Assumption 3: the toolkit's codebooks have unit rows and exact coherence <= 1/2, and the rules
that size them are as derived (docs/derivations/codebooks.md (a), (c))."""

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import partial
from typing import Callable, Tuple

import torch

from qstr.bounds.codebooks import build_codebook, experimental_codebook, rademacher_codebook
from qstr.bounds.codebooks import rademacher_dim, rademacher_pair_tail
from qstr.constructions.codes import Codebook, CoherenceReport, coherence, coherence_report
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_least, at_most, close, exact
from qstr.verify.claim import replaced, worst
from qstr.verify.claims._codebooks import CODEBOOKS, coherence_rounding, gram_mu, largest
from qstr.verify.claims._codebooks import one_sided_pair_tail, tail_by_counting
from qstr.verify.registry import register

DELTA = 1e-3
SMALL_N = (2, 3, 8)  # few pairs: C(N, 2) differs most from N^2 / 2
TAIL_DIMS = (100, 200, 256, 4099)  # the exact rational branch, and scipy's beyond d_e = 4096
GRAM_ROWS = 1024  # the brute-force Gram runs on each codebook's first rows
_hoeffding_rule = partial(rademacher_dim, rule="hoeffding")  # (N, delta, mu) -> d_e

claim = register(
    Claim(
        "assumption-3",
        Ref("Assumption 3"),
        marks=("slow",),  # over 3 s in quick on 2 cores (docs/claims.md, "Markers")
        statement="toolkit codebooks: unit rows, exact coherence max|<w_i,w_j>| <= 1/2",
        builds=(build_codebook, rademacher_codebook, rs_hadamard_codebook, Codebook.from_tensor),
        bounds=(rademacher_dim, rademacher_pair_tail, coherence, coherence_report),
        derivation=CODEBOOKS,
    )
)


@dataclass(frozen=True)
class Assumption3Inputs:
    """The toolkit's codebooks as users build them, and the rules and tails they are built by."""

    books: Tuple[Tuple[str, Codebook], ...] = ()  # (name, codebook); "rademacher": the exact rule
    mu_max: float = 0.5  # Assumption 3's 1/2
    measure: Callable[[torch.Tensor], float] = coherence  # the exact coherence users get
    locate: Callable[[torch.Tensor], CoherenceReport] = coherence_report  # mu, its pair
    dim_rule: Callable[[int, float, float], int] = rademacher_dim  # the exact rule
    pair_tail: Callable[[int, float], float] = rademacher_pair_tail
    hoeffding: Callable[[int, float, float], int] = _hoeffding_rule
    mus: Tuple[float, ...] = ()  # measure(omega) of each codebook, measured once (with_books)

    def with_books(self, books, measure=None) -> "Assumption3Inputs":
        """These inputs on other codebooks (or another coherence measure), measured once."""
        measure = measure or self.measure
        mus = tuple(measure(b.omega) for _, b in books)
        return replace(self, books=books, measure=measure, mus=mus)


@claim.inputs
def assumption3_inputs(ctx: Context) -> Assumption3Inputs:
    """Codebooks through build_codebook (the dispatch `qstr codebook` uses), a zero-padded one and
    a custom one (Assumption 3; docs/derivations/codebooks.md (a), (c))."""
    n_det, n_rad = ctx.pick(quick=(8192, 2048), full=(32768, 8192), gpu=(131072, 65536))
    build, dev = build_codebook, dict(device=ctx.device)
    rad = ctx.generator("assumption-3/rademacher", device=ctx.device)
    small = rs_hadamard_codebook(64, dtype=torch.float64, **dev)  # rotated: codes users bring
    g = ctx.generator("assumption-3/rotation")
    Q, _ = torch.linalg.qr(torch.randn(small.d_e, small.d_e, generator=g, dtype=torch.float64))
    books = {
        "rs-hadamard": build(n_det, kind="rs-hadamard", mu_max=0.5, **dev),
        "rademacher": build(
            n_rad, kind="rademacher", mu_max=0.5, delta=DELTA, generator=rad, **dev
        ),
        "rs-hadamard zero-padded to d_e = 300": build(
            64, kind="rs-hadamard", d_e=300, dtype=torch.float64, **dev
        ),
        "custom (rotated rs-hadamard)": Codebook.from_tensor(small.omega @ Q.to(ctx.device)),
    }
    return Assumption3Inputs().with_books(tuple(books.items()))


def _worst_book(inp: Assumption3Inputs, values, verdict=close, bound=0.0, detail="") -> Verdict:
    """verdict(value, bound) per codebook, with the codes' rounding term: the one measuring most."""
    cases = (
        (
            f"{name} N={b.N} d_e={b.d_e}",
            verdict(value, bound, rounding=coherence_rounding(b), detail=detail),
        )
        for value, (name, b) in zip(values, inp.books, strict=True)
    )
    return worst(cases, key=largest)


@claim.check("coherence <= 1/2", evidence="built")
def coherence_at_most_half(inp: Assumption3Inputs) -> Verdict:
    """Assumption 3: max_{i != j} |<omega_i, omega_j>| <= 1/2, the worst codebook (exact mu)."""
    return _worst_book(inp, inp.mus, at_most, inp.mu_max)


@claim.check("unit rows", evidence="built", agreement=True)
def unit_rows(inp: Assumption3Inputs) -> Verdict:
    """Assumption 3's unit codes: max_i | ||omega_i||^2 - 1 | over every codebook."""
    off = [float((b.omega.double().pow(2).sum(dim=1) - 1).abs().max()) for _, b in inp.books]
    return _worst_book(inp, off, at_most, detail="max | ||omega_i||^2 - 1 |")


@claim.check("stored mu = measured", evidence="built", agreement=True)
def stored_mu(inp: Assumption3Inputs) -> Verdict:
    """The mu a codebook carries into the bounds is its exact coherence (codebooks.md)."""
    gaps = [abs(b.mu - mu) for mu, (_, b) in zip(inp.mus, inp.books, strict=True)]
    return _worst_book(inp, gaps, detail="|stored mu - measured mu|")


@claim.check("coherence = brute-force Gram", evidence="built", agreement=True)
def gram(inp: Assumption3Inputs) -> Verdict:
    """The exact coherence equals the brute-force float64 Gram maximum, on each codebook's first
    GRAM_ROWS rows."""
    rows = [b.omega[:GRAM_ROWS] for _, b in inp.books]
    gaps = [abs(inp.measure(w) - gram_mu(w)) for w in rows]
    return _worst_book(inp, gaps, detail=f"|coherence - Gram max| on <= {GRAM_ROWS} rows")


@claim.check("coherence attained at its pair", evidence="built", agreement=True)
def witness(inp: Assumption3Inputs) -> Verdict:
    """Assumption 3's coherence is attained: the pair coherence_report names has
    |<omega_i, omega_j>| = mu, on every row of each codebook (docs/derivations/codebooks.md); the
    largest gap | |<omega_i, omega_j>| - mu | (float64)."""
    reports = [inp.locate(b.omega) for _, b in inp.books]
    rows = [b.omega[list(r.pair)].double() for r, (_, b) in zip(reports, inp.books, strict=True)]
    gaps = [abs(abs(float(w[0] @ w[1])) - r.mu) for w, r in zip(rows, reports, strict=True)]
    return _worst_book(inp, gaps, detail="| |<omega_i, omega_j>| - mu | at the reported pair")


def _union_bounds(inp: Assumption3Inputs, shift: int, verdict) -> Verdict:
    """C(N, 2) P(|<w_i, w_j>| > 1/2) / delta against 1 at the rule's d_e + shift: the worst N."""
    cases = []
    for N in (dict(inp.books)["rademacher"].N,) + SMALL_N:
        d_e = inp.dim_rule(N, DELTA, inp.mu_max) + shift
        tail = inp.pair_tail(d_e, inp.mu_max) if d_e >= 1 else math.inf
        ratio = N * (N - 1) // 2 * tail / DELTA
        cases.append((f"N={N}, d_e = {d_e}", verdict(ratio, 1.0, detail="union bound / delta")))
    return worst(cases)


@claim.check("union bound <= delta at d_e", evidence="exact")
def union_bound(inp: Assumption3Inputs) -> Verdict:
    """The exact rule's d_e passes the union bound C(N, 2) P(|<w_i, w_j>| > 1/2) <= delta
    (codebooks.md (a)); the largest ratio to delta over N."""
    return _union_bounds(inp, 0, at_most)


@claim.check("union bound > delta at d_e - 1", evidence="exact")
def union_bound_least(inp: Assumption3Inputs) -> Verdict:
    """The exact rule's d_e is the least from which it passes: at d_e - 1 the union bound exceeds
    delta (codebooks.md (a)); the smallest ratio over N."""
    return _union_bounds(inp, -1, at_least)


def _tail_errors(inp: Assumption3Inputs, dims, bound: float) -> Verdict:
    """The relative error of the pair tail against the sign-pattern count, the worst d_e."""
    cases = []
    for d_e in dims:
        count = tail_by_counting(d_e, inp.mu_max)
        err = abs(Fraction(inp.pair_tail(d_e, inp.mu_max)) - count) / count
        cases.append((f"d_e = {d_e}", at_most(float(err), bound, detail="relative error")))
    return worst(cases)


@claim.check("pair tail = count (exact range)", evidence="exact")
def tail_exact(inp: Assumption3Inputs) -> Verdict:
    """In its exact range (d_e <= 4096) the pair tail is the sign-pattern count rounded once."""
    return _tail_errors(inp, [d for d in TAIL_DIMS if d <= 4096], 2.0**-53)


@claim.check("pair tail = count (scipy range)", evidence="formula", agreement=True)
def tail_scipy(inp: Assumption3Inputs) -> Verdict:
    """Beyond d_e = 4096 (scipy's binomial cdf) the pair tail is the count to relative 1e-12."""
    return _tail_errors(inp, [d for d in TAIL_DIMS if d > 4096], 1e-12)


@claim.check("Hoeffding rule as derived", evidence="formula")
def hoeffding(inp: Assumption3Inputs) -> Verdict:
    """The Hoeffding rule d_e = ceil(2 ln(N (N - 1) / delta) / mu^2) (codebooks.md (a)), N = 100."""
    N, mu = 100, inp.mu_max
    want = math.ceil(2 * math.log(N * (N - 1) / DELTA) / mu**2)
    return exact(inp.hoeffding(N, DELTA, mu), want, detail=f"N = {N}, delta = {DELTA:g}")


@claim.fault("d_e = floor(5 ln N) at N = 100 (the experiments)", breaks=coherence_at_most_half)
def _experimental_books(inp: Assumption3Inputs, ctx: Context) -> Assumption3Inputs:
    """Codes at the experiments' d_e = floor(5 ln N), N = 100: coherence above 1/2."""
    g = ctx.generator("assumption-3/experimental", device=ctx.device)
    book = experimental_codebook(100, generator=g, device=ctx.device)
    return inp.with_books((("experimental", book),))


@claim.fault("rows normalised by sqrt(d_e + 1)", breaks=unit_rows)
def _rows_over_sqrt_d_e_plus_1(inp: Assumption3Inputs) -> Assumption3Inputs:
    """Rademacher codes normalised by sqrt(d_e + 1) instead of sqrt(d_e): rows of norm < 1."""
    book = dict(inp.books)["rademacher"]
    short = book.omega * math.sqrt(book.d_e / (book.d_e + 1))
    return inp.with_books((("rows / sqrt(d_e + 1)", Codebook(short, book.mu, "custom")),))


@claim.fault("a prefix keeping the whole code's mu", breaks=stored_mu)
def _stale_mu(inp: Assumption3Inputs) -> Assumption3Inputs:
    """The first 64 words of the RS-Hadamard code keeping the whole code's mu (1/2, not 1/8)."""
    book = dict(inp.books)["rs-hadamard"]
    prefix = Codebook(book.omega[:64], book.mu, "rs-hadamard")
    return inp.with_books((("rs-hadamard prefix, stale mu", prefix),))


@claim.fault("the diagonal counted in the coherence", breaks=(gram, stored_mu))
def _diagonal_counted(inp: Assumption3Inputs) -> Assumption3Inputs:
    """A coherence whose mask lets the diagonal <omega_i, omega_i> = 1 in (row blocks of the
    Gram, as codes.coherence reads it: the whole Gram at N = 131,072 would take 128 GiB)."""

    def measure(omega):
        w = omega.to(torch.float64)
        return max(float((w[i : i + 1024] @ w.T).abs().max()) for i in range(0, w.shape[0], 1024))

    return inp.with_books(inp.books, measure)


claim.fault(
    "coherence measured in float32",
    breaks=witness,
    apply=replaced(locate=lambda omega: coherence_report(omega.to(torch.float32))),
)
claim.fault(
    "the exact rule one short",
    breaks=union_bound,
    apply=replaced(dim_rule=lambda N, delta, mu: rademacher_dim(N, delta, mu) - 1),
)
claim.fault(
    "the Hoeffding dimension for the exact rule",
    breaks=union_bound_least,
    apply=replaced(dim_rule=_hoeffding_rule),
)
claim.fault(
    "a one-sided pair tail",
    breaks=(tail_exact, tail_scipy),
    apply=replaced(pair_tail=one_sided_pair_tail),
)
claim.fault(
    "mu for mu^2 in the Hoeffding rule",
    breaks=hoeffding,
    apply=replaced(
        hoeffding=lambda N, delta, mu: math.ceil(2 * math.log(N * (N - 1) / delta) / mu)
    ),
)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: "codebooks " + ", ".join(f"{name} N={b.N} d_e={b.d_e}" for name, b in inp.books)
)
