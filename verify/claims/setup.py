"""Claims about the problem set-up (Section 2): the qSTR data model and Assumption 3."""
from __future__ import annotations

from hypothesis import HealthCheck, Verbosity, given, settings

from qstr.constructions.codes import coherence_report, experimental_codebook, rademacher_codebook, rs_hadamard_codebook
from qstr.constructions.task import Prompts, gather_tokens
from qstr.verify.properties import assert_valid_prompts
from qstr.verify.registry import Claim, Context, Outcome, register
from qstr.verify.rounding import Rounding
from qstr.verify.strategies import prompts


def _coherence_rounding(book) -> Rounding:
    """Inner products of unit codes: d_e-term sums of terms at most 1 in absolute value in sum."""
    return Rounding(n=book.d_e, scale=1.0, dtype=book.omega.dtype, what="d_e eps")

# ---------------------------------------------------------------- assumption-3


def _assumption3(ctx: Context) -> Outcome:
    """Build the toolkit's codebooks and measure their exact coherence against 1/2."""
    device = ctx.device
    n_det = ctx.pick(quick=8192, full=32768, gpu=131072)
    n_rad = ctx.pick(quick=2048, full=8192, gpu=65536)
    books = [
        rs_hadamard_codebook(n_det, mu=0.5, device=device),
        rademacher_codebook(n_rad, mu_max=0.5, delta=1e-3, generator=ctx.generator(3, device), device=device),
    ]
    rows = [(b.kind, b.N, b.d_e, coherence_report(b.omega, 0.5), _coherence_rounding(b)) for b in books]
    worst = max(r.mu for *_, r, _ in rows)
    detail = "; ".join(f"{k} N={n} d_e={de}: mu={r.mu:.4f}, {r.n_violations} pairs > 1/2, {rnd}"
                       for k, n, de, r, rnd in rows)
    return Outcome(measured=round(worst, 6), bound="<= 0.5", holds=all(rnd.within(r.mu, 0.5) for *_, r, rnd in rows),
                   detail=detail, dtype=str(books[0].omega.dtype).replace("torch.", ""))


def _assumption3_falsifier(ctx: Context) -> Outcome:
    """The paper's experimental encoding d_e = floor(5 ln N) at N = 100 must violate it."""
    book = experimental_codebook(100, generator=ctx.generator(4, ctx.device), device=ctx.device)
    r = coherence_report(book.omega, 0.5)
    rnd = _coherence_rounding(book)
    detail = f"experimental N=100 d_e={book.d_e}: mu={r.mu:.4f}, {r.n_violations}/{r.n_pairs} pairs > 1/2; {rnd}"
    return Outcome(measured=round(r.mu, 6), bound="<= 0.5", holds=rnd.within(r.mu, 0.5), detail=detail)


register(Claim(
    id="assumption-3", ref_seed="Assumption 3", ref_conference="Assumption 3",
    statement="toolkit codebooks: unit rows, exact coherence max|<w_i,w_j>| <= 1/2",
    check=_assumption3, falsifier=_assumption3_falsifier,
    falsifier_statement="d_e = floor(5 ln N) at N = 100 (paper's experiments) violates it",
))

# ---------------------------------------------------------------- data-model


def _run_property(ctx: Context, corrupt: bool) -> Outcome:
    """Run the Definition 2 property over hypothesis-drawn tasks; count counterexamples."""
    n = ctx.pick(quick=60, full=400)
    failures = []

    @settings(max_examples=n, database=None, deadline=None, derandomize=True, verbosity=Verbosity.quiet,
              suppress_health_check=list(HealthCheck))
    @given(prompts(max_N=10, max_d=3, max_q=3, max_B=3, device=ctx.device))
    def prop(case):
        task, p = case
        if corrupt:
            p = _off_by_one(task, p)
        assert_valid_prompts(task, p, p.x.dtype)

    try:
        prop()
    except AssertionError as exc:
        failures.append(str(exc).splitlines()[0])
    measured = f"{len(failures)} counterexample(s) / {n} examples"
    tol = "labels compared to g(x_t) within the rounding tolerance 1e-5 (float32) / 1e-12 (float64), rtol and atol"
    return Outcome(measured=measured, bound="0 counterexamples", holds=not failures,
                   detail="; ".join(failures + [tol]), dtype="float32+float64")


def _off_by_one(task, p: Prompts) -> Prompts:
    """A broken sampler: labels read the token after the indexed one."""
    shifted = (p.t + 1) % task.N
    return Prompts(x=p.x, t=p.t, y=task.link(gather_tokens(p.x, shifted)))


register(Claim(
    id="data-model", ref_seed="Definition 2", ref_conference="Definition 1",
    statement="sampled qSTR batches: y_i = g(x_{t_i}) everywhere, simple prompts share t, shapes/dtypes",
    check=lambda ctx: _run_property(ctx, corrupt=False),
    falsifier=lambda ctx: _run_property(ctx, corrupt=True),
    falsifier_statement="labels read x_{t_i + 1} (off-by-one sampler) must be caught",
))
