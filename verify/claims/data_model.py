"""Definition 2 (the qSTR data model): sampled batches carry y_i = g(x_{t_i}) with the stated
index structure, shapes and dtypes (docs/derivations/theorem4.md, section 0)."""

from dataclasses import dataclass
import torch
from hypothesis import HealthCheck, Verbosity, given, seed, settings

from qstr.constructions.task import QSTR, Prompts, gather_tokens
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, exact, mapped, worst
from qstr.verify.properties import assert_index_structure
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding
from qstr.verify.strategies import prompts

claim = register(
    Claim(
        "data-model",
        Ref("Definition 2", "Definition 1"),
        statement="sampled qSTR batches: y_i = g(x_{t_i}) everywhere, simple prompts share t, "
        "shapes/dtypes",
        builds=(QSTR.sample,),
        derivation="docs/derivations/theorem4.md",
    )
)


@dataclass(frozen=True)
class DataModelInputs:
    """Sampled batches (task, prompts) of hypothesis-drawn qSTR tasks (Definition 2)."""

    cases: tuple[tuple[QSTR, Prompts], ...]


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
    return DataModelInputs(tuple(cases))


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
