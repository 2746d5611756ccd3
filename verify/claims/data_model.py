"""Definition 2 (the qSTR data model): sampled batches carry y_i = g(x_{t_i}) with the stated
index structure, shapes and dtypes, and t drawn uniformly (docs/derivations/theorem4.md, section
0)."""

import itertools
from dataclasses import dataclass, replace
from typing import Tuple

import numpy as np
import torch
from hypothesis import HealthCheck, Verbosity, given, seed, settings
from scipy.special import chdtrc, chdtri, chndtr

from qstr.constructions.links import make_link
from qstr.constructions.task import QSTR, Prompts, gather_tokens
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, by_ratio, exact, mapped, worst
from qstr.verify.properties import assert_index_structure
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding
from qstr.verify.strategies import prompts

ALPHA = 1e-6  # each chi-square test's level: 8 tests, a false alarm with probability <= 8e-6
# (task, prompts sampled) for the uniformity tests: enough draws for >= 75 expected per cell
UNIFORM = (  # (N, q, variant, indices, B quick)
    (7, 2, "general", "uniform", 700),
    (6, 3, "general", "distinct", 1500),
    (7, 2, "simple", "uniform", 4000),
    (8, 2, "general", "few-heads", 1200),
)

claim = register(
    Claim(
        "data-model",
        Ref("Definition 2", "Definition 1"),
        statement="sampled qSTR batches: y_i = g(x_{t_i}) everywhere, simple prompts share t, "
        "shapes/dtypes; t uniform over [N] and over its tuples (chi-square, level 1e-6)",
        builds=(QSTR.sample,),
        derivation="docs/derivations/theorem4.md",
    )
)


@dataclass(frozen=True)
class DataModelInputs:
    """Sampled batches (task, prompts) of hypothesis-drawn qSTR tasks (Definition 2)."""

    cases: tuple[tuple[QSTR, Prompts], ...]
    uniform: Tuple[Tuple[QSTR, int], ...] = ()  # (task, B): sampled inside the uniformity checks


@claim.inputs
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
    uniform = tuple(
        (QSTR(N, 1, make_link("linear", q, 1, generator=ctx.generator("data-model/u", N)), v, r), B)
        for N, q, v, r, B in UNIFORM
    )
    return DataModelInputs(tuple(cases), tuple((t, ctx.pick(B, 10 * B)) for t, B in uniform))


@claim.check("labels y_i = g(x_t_i)", evidence="built")
def labels(inp: DataModelInputs) -> Verdict:
    """Definition 2: y_i = g(x_{t_i}) at every position of every sampled prompt (worst case),
    x_t read by direct indexing x[b, t[b, i, k]]."""
    cases = []
    for task, p in inp.cases:
        want = task.link(p.x[torch.arange(p.B, device=p.x.device)[:, None, None], p.t])
        scale, what = max(1.0, float(want.abs().max())), "(q d + 16) eps max(1, |y|max)"
        rnd = Rounding(n=task.q * task.d + 16, scale=scale, dtype=p.x.dtype, what=what)
        label = f"N={task.N} d={task.d} q={task.q} {task.variant}/{task.indices} {p.x.dtype}"
        err = float((p.y - want).abs().max())
        cases.append((label, at_most(err, 0.0, rnd, detail="max |y - g(x_t)|")))
    return worst(cases, key=lambda v: v.measured - v.rounding)


def _bad_batches(inp: DataModelInputs, fault_of, what: str) -> Verdict:
    """How many batches ``fault_of(task, prompts)`` finds at fault (none), and the first fault."""
    bad = [why for task, p in inp.cases if (why := fault_of(task, p))]
    first = f"; first: {bad[0]}" if bad else ""
    return exact(len(bad), 0, detail=f"batches {what} of {len(inp.cases)}{first}")


def _structure_fault(task: QSTR, p: Prompts) -> str:
    """'' or what breaks Definition 2's index structure (properties.assert_index_structure)."""
    try:
        assert_index_structure(task, p)
    except AssertionError as exc:
        return f"N={task.N} {task.variant}: {exc}"
    return ""


@claim.check("index structure as defined", evidence="built")
def structure(inp: DataModelInputs) -> Verdict:
    """Simple prompts share one t; distinct, few-heads and half-zero variants as defined."""
    return _bad_batches(inp, _structure_fault, "breaking the index structure")


@claim.check("indices in [0, N)", evidence="built")
def index_range(inp: DataModelInputs) -> Verdict:
    """Every index t_{i,k} lies in [0, N): the largest distance outside it over the batches."""
    out = max(max(0, -int(p.t.min()), int(p.t.max()) - (task.N - 1)) for task, p in inp.cases)
    return exact(out, 0, detail="max distance of an index outside [0, N)")


def _shape_fault(task: QSTR, p: Prompts) -> str:
    """'' or the shapes or dtypes of a batch that are not as defined."""
    B, N, d, q = p.x.shape[0], task.N, task.d, task.q
    y_shape = (B, N) if task.link.out_dim is None else (B, N, task.link.out_dim)
    if (tuple(p.x.shape), tuple(p.t.shape), tuple(p.y.shape)) != ((B, N, d), (B, N, q), y_shape):
        return f"shapes x {tuple(p.x.shape)}, t {tuple(p.t.shape)}, y {tuple(p.y.shape)}"
    if p.y.dtype != p.x.dtype or p.t.dtype != torch.long:
        return f"dtypes x {p.x.dtype}, y {p.y.dtype}, t {p.t.dtype}"
    return ""


@claim.check("shapes and dtypes", evidence="built")
def shapes(inp: DataModelInputs) -> Verdict:
    """x is (B, N, d), t is (B, N, q) of longs, y is (B, N) (or (B, N, out)) of x's dtype."""
    return _bad_batches(inp, _shape_fault, "with a wrong shape or dtype")


def _drawn_tuples(task: QSTR, B: int, ctx: Context) -> torch.Tensor:
    """(n, q) index tuples as Definition 2 draws them: every position of every prompt (simple
    prompts: one per prompt; few-heads: the positions i < N/2, where t_i is uniform)."""
    g = ctx.generator("data-model/uniformity", task.N, task.q)
    t = task.sample(B, generator=g, dtype=torch.float64).t
    t = t[:, :1] if task.variant == "simple" else t
    return (t[:, : task.N // 2] if task.indices == "few-heads" else t).reshape(-1, task.q)


def _cells(task: QSTR, off_by_one: bool = False) -> np.ndarray:
    """The law of an index tuple over the N^q cells (cell sum_k t_k N^k): uniform over [N]^q, or
    over the tuples of q distinct entries; ``off_by_one``: the same over [N - 1] (never the last
    token), the realistic slip the tests are sized against."""
    N, q, top = task.N, task.q, task.N - int(off_by_one)
    p = np.zeros(N**q)
    for tup in itertools.product(range(top), repeat=q):
        if task.indices != "distinct" or len(set(tup)) == q:
            p[sum(v * N**k for k, v in enumerate(tup))] = 1.0
    return p / p.sum()


def _chi_square(observed: np.ndarray, p0: np.ndarray, p1: np.ndarray, what: str) -> Verdict:
    """Pearson's chi-square of the counts against p0 (cells p0 = 0 must stay empty), at most its
    1 - ALPHA quantile; the detail gives the p-value and the power against p1 (noncentral)."""
    n, live = observed.sum(), p0 > 0
    df = int(live.sum()) - 1
    crit = float(chdtri(df, ALPHA))  # the chi-square's 1 - ALPHA quantile
    if observed[~live].any():
        return at_most(np.inf, crit, detail=f"{what}: {int(observed[~live].sum())} impossible")
    e = n * p0[live]
    stat = float(((observed[live] - e) ** 2 / e).sum())
    lam = float(n * ((p1[live] - p0[live]) ** 2 / p0[live]).sum())  # noncentrality under p1
    detail = (
        f"{what}: {int(n)} draws, {df + 1} cells, p = {chdtrc(df, stat):.3g}, level {ALPHA:g}; "
        f"power {1 - chndtr(crit, df, lam):.4f} against the off-by-one sampler; under uniformity "
        f"the statistic is about df = {df} +- {np.sqrt(2 * df):.0f}, the bound its 1 - {ALPHA:g} "
        f"quantile (theorem4.md, 'How t is drawn')"
    )
    return at_most(stat, crit, detail=detail)


def _uniformity(inp: DataModelInputs, ctx: Context, marginal: bool) -> Verdict:
    """Each uniformity task's chi-square, of the entries t_k over [N] (``marginal``) or of the
    tuples over their cells: the worst task (largest statistic / quantile)."""
    cases = []
    for task, B in inp.uniform:
        t, N, q = _drawn_tuples(task, B, ctx).numpy(), task.N, task.q
        p0, p1 = _cells(task), _cells(task, off_by_one=True)
        if marginal:
            observed = np.bincount(t.ravel(), minlength=N)
            p0, p1 = np.full(N, 1.0 / N), np.append(np.full(N - 1, 1.0 / (N - 1)), 0.0)
        else:
            observed = np.bincount((t * N ** np.arange(q)).sum(1), minlength=N**q)
        label = f"N={N} q={q} {task.variant}/{task.indices}"
        cases.append((label, _chi_square(observed, p0, p1, "entries" if marginal else "tuples")))
    return worst(cases, key=by_ratio)


@claim.check("t uniform over [N] (chi-square)", evidence="monte-carlo")
def entries_uniform(inp: DataModelInputs, ctx: Context) -> Verdict:
    """Every entry t_{i,k} is uniform over [N] (the uniform, distinct, simple and few-heads
    rules): Pearson's chi-square over the N positions at most its 1 - 1e-6 quantile."""
    return _uniformity(inp, ctx, marginal=True)


@claim.check("t_i uniform over its tuples (chi-square)", evidence="monte-carlo")
def tuples_uniform(inp: DataModelInputs, ctx: Context) -> Verdict:
    """Every tuple t_i is uniform over [N]^q (over the tuples of distinct entries for the
    distinct rule): Pearson's chi-square over the cells at most its 1 - 1e-6 quantile."""
    return _uniformity(inp, ctx, marginal=False)


class _OffByOne(QSTR):
    """A sampler that never draws the last token: each rule's tuples over [N - 1] (the honest
    draws, a tuple holding N - 1 redrawn until none does)."""

    def sample_indices(self, B, *, generator, device):
        t = super().sample_indices(B, generator=generator, device=device).clone()
        while (bad := (t == self.N - 1).any(-1)).any():
            t[bad] = super().sample_indices(B, generator=generator, device=device)[bad]
        return t


class _Broadcast(QSTR):
    """A sampler that draws one index per position and broadcasts it to the q slots."""

    def sample_indices(self, B, *, generator, device):
        t = super().sample_indices(B, generator=generator, device=device)
        return t[..., :1].expand(t.shape).contiguous()


def _resampled_by(kind):
    """A fault's edit: the uniformity tasks sampled by ``kind`` (a QSTR subclass)."""

    def edit(inp: DataModelInputs) -> DataModelInputs:
        moved = tuple(
            (kind(t.N, t.d, t.link, t.variant, t.indices, t.tokens), B) for t, B in inp.uniform
        )
        return replace(inp, uniform=moved)

    return edit


claim.fault(
    "an off-by-one sampler (t never the last token)",
    breaks=(entries_uniform, tuples_uniform),
    apply=_resampled_by(_OffByOne),
)
claim.fault(
    "one index broadcast to the q slots", breaks=tuples_uniform, apply=_resampled_by(_Broadcast)
)


def _each_batch(edit):
    """A fault's edit of every batch: (task, prompts) -> (task, edit(task, prompts))."""
    return mapped("cases", lambda case: (case[0], edit(*case)))


@claim.fault("labels read x_{t_i + 1} (off-by-one sampler)", breaks=labels)
@_each_batch
def _labels_off_by_one(task: QSTR, p: Prompts) -> Prompts:
    """A broken sampler: labels read the token after the indexed one."""
    return Prompts(x=p.x, t=p.t, y=task.link(gather_tokens(p.x, (p.t + 1) % task.N)))


@claim.fault("simple prompts with t drawn per position", breaks=structure)
@_each_batch
def _t_per_position(task: QSTR, p: Prompts) -> Prompts:
    """A sampler that draws t per position for simple prompts (labels kept consistent)."""
    t = (p.t + torch.arange(task.N, device=p.t.device)[None, :, None]) % task.N
    return Prompts(x=p.x, t=t, y=task.link(gather_tokens(p.x, t)))


@claim.fault("indices counted from 1", breaks=index_range)
@_each_batch
def _one_based(task: QSTR, p: Prompts) -> Prompts:
    """Indices counted from 1: t in [1, N]."""
    return Prompts(x=p.x, t=p.t + 1, y=p.y)


@claim.fault("labels in the other dtype", breaks=shapes)
@_each_batch
def _labels_in_the_other_dtype(task: QSTR, p: Prompts) -> Prompts:
    """Labels returned in the other float dtype than the tokens."""
    other = torch.float32 if p.y.dtype == torch.float64 else torch.float64
    return Prompts(x=p.x, t=p.t, y=p.y.to(other))


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        f"{len(inp.cases)} tasks drawn (N <= "
        + str(max(t.N for t, _ in inp.cases))
        + ", every variant, index structure and token law)"
    )
)
