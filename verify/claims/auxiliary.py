"""Claims about the auxiliary lemmas (Section 6 / Appendix D): Lemmas 39, 40, 41 and 42."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Callable, Optional, Tuple

import torch
from scipy import stats

from qstr.bounds.gaussian import (
    VarianceEstimate,
    conditional_sqnorm_variance,
    mc_conditional_sqnorm_variance,
    random_orthonormal_rows,
)
from qstr.bounds.packing import (
    conjugate,
    greedy_packing,
    lemma39_equality_case,
    maurey_log_packing_bound,
    maurey_simple_bound,
    maurey_violation_dimension,
    min_pairwise_distance,
    mixed_norm,
    packing_log_bound,
    sample_ball,
    volume_log_packing_bound,
)
from qstr.bounds.lipschitz import (
    LipschitzNet,
    SupCertificate,
    ball_grid,
    certify_sup_error,
    fk_moments,
    lemma42_net,
    ridge_curvatures,
    ridge_interval_counts,
    smoothing_error_bound,
)
from qstr.bounds.recurrent import euclidean_packing_counterexample
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.lipschitz import (
    fk_coefficients,
    fourier_ridges,
    interpolation_net,
    net_lipschitz_bound,
    ridge_net,
)
from qstr.verify.adversarial import worst_case_tokens
from qstr.verify.claim import Check, Claim, Context, Fault, Ref, Verdict, at_least, at_most, close
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding, largest, two_layer

# (k, r) pairs: r = 0 (no conditioning), small and large r
LEMMA40_CASES = ((1, 0), (6, 2), (20, 7), (40, 39))
FAMILY_CONFIDENCE = 0.999  # Bonferroni over the cases


@dataclass(frozen=True)
class Lemma40Inputs:
    """Monte Carlo estimates of Var(||x||^2 | Vx), one per (k, r), and the closed form they test."""

    cases: Tuple[Tuple[int, int], ...]
    estimates: Tuple[VarianceEstimate, ...]
    variance: Callable[[int, int], float]  # Lemma 40's closed form 2 (k - r)
    zcrit: float  # the per-case critical value of the family's confidence (Bonferroni)
    n_terms: int  # summands behind each estimate, for the rounding term


def lemma40_inputs(ctx: Context) -> Lemma40Inputs:
    """One estimate per case from ``mc_conditional_sqnorm_variance``
    (docs/derivations/few-heads.md, section 1)."""
    n_outer, n_inner = ctx.pick(quick=(400, 200), full=(2000, 500), gpu=(4000, 200))
    per_case = 1 - (1 - FAMILY_CONFIDENCE) / len(LEMMA40_CASES)
    estimates = []
    for k, r in LEMMA40_CASES:
        g = ctx.generator("lemma-40/V", k, r, device=ctx.device)
        V = random_orthonormal_rows(r, k, generator=g)
        estimates.append(
            mc_conditional_sqnorm_variance(
                V,
                n_outer=n_outer,
                n_inner=n_inner,
                confidence=per_case,
                generator=ctx.generator("lemma-40/samples", k, r, device=ctx.device),
            )
        )
    return Lemma40Inputs(
        LEMMA40_CASES,
        tuple(estimates),
        conditional_sqnorm_variance,
        float(stats.norm.ppf(0.5 + per_case / 2)),
        n_outer + n_inner,
    )


def _lemma40_rounding(
    inp: Lemma40Inputs, est: VarianceEstimate, k: int, claimed: float
) -> Rounding:
    return Rounding(
        n=inp.n_terms + k,
        scale=max(est.estimate, claimed),
        what="(n_outer + n_inner + k) eps max(est, 2(k-r))",
    )


def lemma40_zscores(inp: Lemma40Inputs, ctx: Context) -> Verdict:
    """The largest |estimate - 2(k - r)| / stderr over the cases is within the family's critical
    value."""
    worst, parts, terms = 0.0, [], []
    for (k, r), est in zip(inp.cases, inp.estimates):
        claimed = inp.variance(k, r)
        rnd = _lemma40_rounding(inp, est, k, claimed)
        terms.append(rnd.times(1 / max(est.stderr, 1e-300), "1/stderr"))
        worst = max(worst, est.zscore(claimed))  # the estimate's own |estimate - value| / stderr
        parts.append(f"k={k} r={r}: {est.estimate:.3f} +- {est.halfwidth:.3f} vs {claimed:g}")
    return at_most(worst, inp.zcrit, largest(terms), detail="; ".join(parts))


def lemma40_intervals(inp: Lemma40Inputs, ctx: Context) -> Verdict:
    """Every case's own confidence interval (the estimator's record) contains 2(k - r): the largest
    distance to the closed form in half-widths is at most 1."""
    worst, terms = 0.0, []
    for (k, r), est in zip(inp.cases, inp.estimates):
        claimed = inp.variance(k, r)
        rnd = _lemma40_rounding(inp, est, k, claimed)
        terms.append(rnd.times(1 / est.halfwidth, "1/halfwidth"))
        worst = max(worst, abs(est.estimate - claimed) / est.halfwidth)
    return at_most(
        worst, 1.0, largest(terms), detail="|estimate - 2(k - r)| / half-width, largest case"
    )


def _rank_plus_one(inp: Lemma40Inputs, ctx: Context) -> Lemma40Inputs:
    """The closed form at rank r + 1: an off-by-one in the conditioning's degrees of freedom."""
    return replace(inp, variance=lambda k, r: conditional_sqnorm_variance(k, min(r + 1, k)))


register(
    Claim(
        id="lemma-40",
        ref=Ref("Lemma 40"),
        statement=(
            "Var(||x||^2 | Vx) = 2(k - r) for x ~ N(0, I_k), V with r orthonormal rows (MC, "
            "99.9% family CI)"
        ),
        inputs=lemma40_inputs,
        checks=[
            Check("family z-scores", lemma40_zscores),
            Check("each interval contains", lemma40_intervals),
        ],
        faults=[
            Fault(
                "rank r + 1", _rank_plus_one, breaks=("family z-scores", "each interval contains")
            )
        ],
        builds=(mc_conditional_sqnorm_variance,),
        bounds=(conditional_sqnorm_variance,),
        derivation="docs/derivations/few-heads.md",
    )
)

# ---------------------------------------------------------------- lemma-39, lemma-41, lemma-42
# (bounds/packing.py, bounds/lipschitz.py, constructions/lipschitz.py;
# docs/derivations/lemmas-39-41-42.md)

INF = math.inf


# (p, q, r): ||AB||_{p,q} <= ||A||_{r,q} ||B||_{p,s}, s = r/(r-1)
LEMMA39_CASES = ((2, 2, 2), (1, INF, INF), (INF, 1, 1), (3, 1.5, 4 / 3), (1, 2, 3), (INF, INF, 1.5))
LEMMA39_SHAPES = ((1, 5, 1), (3, 4, 5), (6, 2, 3))  # (m, n, k) of the random pairs
LEMMA39_ROUNDING = Rounding(
    n=128,
    scale=1.0,
    what="128 eps x ratio (3 mixed norms of <= 6 x 5 matrices: sums, powers, roots)",
)
Pair = Tuple[torch.Tensor, torch.Tensor]


def holder_rhs(A: torch.Tensor, B: torch.Tensor, p: float, q: float, r: float) -> torch.Tensor:
    """Lemma 39's right-hand side ||A||_{r,q} ||B||_{p,s}, batched and differentiable."""
    return mixed_norm(A, r, q) * mixed_norm(B, p, conjugate(r))


def _swapped_rhs(A: torch.Tensor, B: torch.Tensor, p: float, q: float, r: float) -> torch.Tensor:
    """The false form ||A||_{q,r} ||B||_{s,p} (inner and outer exponents exchanged)."""
    return mixed_norm(A, q, r) * mixed_norm(B, conjugate(r), p)


@dataclass(frozen=True)
class Lemma39Inputs:
    """Per (p, q, r): random pairs, the equality case and Adam's starting pairs; the right-hand
    side."""

    cases: Tuple[Tuple[float, float, float], ...]
    random: Tuple[Tuple[Pair, ...], ...]  # per case, one batch of pairs per shape
    equality: Tuple[Pair, ...]  # lemma39_equality_case, per case
    starts: Tuple[Pair, ...]  # batched starting pairs of the ascent, per case
    steps: int  # Adam steps of the ascent
    rhs: Callable[..., torch.Tensor]  # ||A||_{r,q} ||B||_{p,s}


def _random_pairs(ctx: Context, i: int, n_random: int) -> Tuple[Pair, ...]:
    """Gaussian A with half its entries zeroed, heavy-tailed B = g / U, of every shape."""
    pairs = []
    for j, (m, n, k) in enumerate(LEMMA39_SHAPES):
        g = ctx.generator("lemma-39/random", i, j, device=ctx.device)
        kw = dict(generator=g, dtype=torch.float64, device=ctx.device)
        A = torch.randn(n_random, m, n, **kw) * (torch.rand(n_random, m, n, **kw) < 0.5)
        B = torch.randn(n_random, n, k, **kw) / torch.rand(n_random, n, k, **kw).clamp_min(1e-3)
        keep = (mixed_norm(A, 2, 2) > 0) & (mixed_norm(B, 2, 2) > 0)
        pairs.append((A[keep], B[keep]))
    return tuple(pairs)


def lemma39_inputs(ctx: Context) -> Lemma39Inputs:
    """Random, structured (equality case) and ascent starting pairs for every (p, q, r)
    (docs/derivations/lemmas-39-41-42.md, Lemma 39)."""
    restarts, steps = ctx.pick(quick=(2, 30), full=(6, 300))
    n_random = ctx.pick(quick=200, full=2000)
    random, equality, starts = [], [], []
    for i, (p, q, r) in enumerate(LEMMA39_CASES):
        random.append(_random_pairs(ctx, i, n_random))
        g = ctx.generator("lemma-39/equality", i, device=ctx.device)
        equality.append(lemma39_equality_case(5, 3, p, q, r, generator=g, m=2))
        g = ctx.generator("lemma-39/ascent", i, device=ctx.device)
        kw = dict(generator=g, dtype=torch.float64, device=ctx.device)
        starts.append((torch.randn(restarts, 3, 4, **kw), torch.randn(restarts, 4, 3, **kw)))
    return Lemma39Inputs(
        LEMMA39_CASES, tuple(random), tuple(equality), tuple(starts), steps, holder_rhs
    )


def _ratio(inp: Lemma39Inputs, A: torch.Tensor, B: torch.Tensor, p, q, r) -> torch.Tensor:
    return mixed_norm(A @ B, p, q) / inp.rhs(A, B, p, q, r)


def _ascent(inp: Lemma39Inputs, i: int) -> float:
    """Adam ascent on log(lhs / rhs) from the case's starting pairs (one batch, no host sync per
    step); the largest ratio seen."""
    p, q, r = inp.cases[i]
    A, B = (t.clone().requires_grad_(True) for t in inp.starts[i])
    opt = torch.optim.Adam([A, B], lr=0.05)
    seen = []
    for _ in range(inp.steps):
        ratio = _ratio(inp, A, B, p, q, r)
        seen.append(ratio.detach().max())
        opt.zero_grad()
        (-torch.log(ratio)).sum().backward()
        opt.step()
    return float(torch.stack(seen).max())


def _exponents(p, q, r) -> str:
    return f"(p,q,r,s)=({p:g},{q:g},{r:.3g},{conjugate(r):.3g})"


def lemma39_holds(inp: Lemma39Inputs, ctx: Context) -> Verdict:
    """Lemma 39: the largest lhs / rhs over random pairs, the equality case and the ascent, over
    every (p, q, r), is at most 1 (docs/derivations/lemmas-39-41-42.md)."""
    worst, where = 0.0, ""
    for i, (p, q, r) in enumerate(inp.cases):
        found = [(float(_ratio(inp, A, B, p, q, r).max()), "random") for A, B in inp.random[i]]
        found.append((float(_ratio(inp, *inp.equality[i], p, q, r)), "equality case"))
        found.append((_ascent(inp, i), "ascent"))
        top, how = max(found)
        if top > worst:
            worst, where = top, f"{_exponents(p, q, r)} ({how})"
    return at_most(worst, 1.0, LEMMA39_ROUNDING, detail=f"largest lhs/rhs at {where}")


def lemma39_tight(inp: Lemma39Inputs, ctx: Context) -> Verdict:
    """Lemma 39 is tight: lemma39_equality_case attains lhs / rhs = 1 for every (p, q, r); the
    ratio farthest from 1."""
    ratios = [
        (float(_ratio(inp, A, B, p, q, r)), _exponents(p, q, r))
        for (p, q, r), (A, B) in zip(inp.cases, inp.equality)
    ]
    ratio, where = max(ratios, key=lambda t: abs(t[0] - 1.0))
    return close(ratio, 1.0, 0.0, LEMMA39_ROUNDING, detail=f"farthest from 1 at {where}")


def _swapped(inp: Lemma39Inputs, ctx: Context) -> Lemma39Inputs:
    """The right-hand side with inner and outer exponents exchanged, ||A||_{q,r} ||B||_{s,p}."""
    return replace(inp, rhs=_swapped_rhs)


def _doubled(inp: Lemma39Inputs, ctx: Context) -> Lemma39Inputs:
    """A right-hand side loose by a factor 2 (still true, no longer tight)."""
    return replace(inp, rhs=lambda A, B, p, q, r: 2 * holder_rhs(A, B, p, q, r))


register(
    Claim(
        id="lemma-39",
        ref=Ref("Lemma 39", "Lemma 39"),
        statement=(
            "||AB||_{p,q} <= ||A||_{r,q} ||B||_{p,s} (row p-norms then q-norm; 1/r + 1/s = 1), "
            "tight"
        ),
        inputs=lemma39_inputs,
        checks=[Check("lhs <= rhs", lemma39_holds), Check("equality case attained", lemma39_tight)],
        faults=[
            Fault(
                "inner and outer exponents swapped, ||A||_{q,r} ||B||_{s,p}",
                _swapped,
                breaks=("lhs <= rhs", "equality case attained"),
            ),
            Fault("right-hand side doubled", _doubled, breaks=("equality case attained",)),
        ],
        builds=(lemma39_equality_case,),
        bounds=(mixed_norm, conjugate),
        derivation="docs/derivations/lemmas-39-41-42.md",
    )
)

LEMMA41_DIMS = (1, 2, 3)
LEMMA41_EPS = (0.3, 0.6, 1.0, 1.5)
SPHERE_D, SPHERE_M, SPHERE_SEP = 128, 2000, 1.2  # Lemma 41's contrast on the Euclidean sphere
VIOLATION_EPS = (0.5, 0.8)  # where the first dimension refuting Maurey for B_2^d is sought
SIMPLE_DIMS = (1, 10, 1000, 10**6)  # where the simplified Maurey form is held to the exact one


def _structured(d: int, eps: float, ball: str, device) -> torch.Tensor:
    """Good candidates first: the vertices +-e_i (l1), then a lattice of spacing just above eps
    (hexagonal in d = 2, the densest packing of the plane; square otherwise)."""
    pts = []
    if ball == "l1":
        eye = torch.eye(d, dtype=torch.float64)
        pts.append(torch.cat([eye, -eye]))
    h = eps * (1 + 1e-6)
    M = int(1 / h) + 1
    axis = h * torch.arange(-M, M + 1, dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(*([axis] * d), indexing="ij"), dim=-1).reshape(-1, d)
    if d == 2:
        i, j = torch.meshgrid(
            torch.arange(-M - 1, M + 2), torch.arange(-2 * M - 2, 2 * M + 3), indexing="ij"
        )
        grid = torch.stack([h * (i + 0.5 * (j % 2)), h * math.sqrt(3) / 2 * j], dim=-1)
        grid = grid.reshape(-1, 2).double()
    norm = grid.abs().sum(1) if ball == "l1" else grid.norm(dim=1)
    pts.append(grid[norm <= 1])
    return torch.cat(pts).to(device)


@dataclass(frozen=True)
class Packing:
    """A greedy eps-packing ``points`` of the unit ``ball`` ("l1", "l2") of R^d."""

    ball: str
    d: int
    eps: float
    points: torch.Tensor
    candidates: torch.Tensor  # what the greedy scan read, in order

    def __str__(self) -> str:
        return f"{self.ball} d={self.d} eps={self.eps:g}: M={self.points.shape[0]}"


@dataclass(frozen=True)
class Lemma41Inputs:
    """Greedy packings of the l1 and l2 balls and of the sphere of R^128; the bounds they meet."""

    packings: Tuple[Packing, ...]  # the sphere's packing last (inside the l2 ball)
    bound: Callable[[int, float, str], float]  # Lemma 41: packing_log_bound(d, eps, ball)
    maurey_form: Callable[[int, float], float]  # ln(2D + 1) / eps^2, the form without its constant
    sphere_kept: int  # euclidean_packing_counterexample's count on the sphere's candidates
    violation: Callable[[float], Optional[int]]  # maurey_violation_dimension
    simplified: Callable[[int, float], float]  # maurey_simple_bound: (8 / eps^2) log(2d + 1)

    @property
    def sphere(self) -> Packing:
        return self.packings[-1]


def _sphere_packing(ctx: Context) -> Tuple[Packing, int]:
    """Greedy SPHERE_SEP-packing of SPHERE_M random unit vectors of R^SPHERE_D, and the count
    bounds.recurrent.euclidean_packing_counterexample keeps from the same vectors (its draw)."""

    def gen():
        return ctx.generator("lemma-41/sphere", device=ctx.device)

    X = torch.randn(SPHERE_M, SPHERE_D, generator=gen(), dtype=torch.float64, device=ctx.device)
    X = X / X.norm(dim=1, keepdim=True)
    kept = euclidean_packing_counterexample(SPHERE_D, SPHERE_M, generator=gen(), sep=SPHERE_SEP)[0]
    return Packing("l2", SPHERE_D, SPHERE_SEP, greedy_packing(X, SPHERE_SEP), X), kept


def lemma41_inputs(ctx: Context) -> Lemma41Inputs:
    """Greedy packings (structured candidates, then uniform ones from ``sample_ball``) of the l1
    and l2 balls, d = 1, 2, 3, and of the sphere of R^128 (docs/derivations/lemmas-39-41-42.md)."""
    n_cand = ctx.pick(quick=3000, full=30000)
    packings = []
    for ball, d, (e, eps) in itertools.product(("l2", "l1"), LEMMA41_DIMS, enumerate(LEMMA41_EPS)):
        g = ctx.generator("lemma-41/candidates", d, e, device=ctx.device)
        cand = torch.cat(
            [_structured(d, eps, ball, ctx.device), sample_ball(n_cand, d, ball, generator=g)]
        )
        packings.append(Packing(ball, d, eps, greedy_packing(cand, eps), cand))
    sphere, kept = _sphere_packing(ctx)
    packings.append(sphere)
    return Lemma41Inputs(
        tuple(packings),
        packing_log_bound,
        _maurey_form,
        kept,
        maurey_violation_dimension,
        maurey_simple_bound,
    )


def _maurey_form(D: int, eps: float) -> float:
    """ln(2D + 1) / eps^2: maurey_simple_bound without its constant 8."""
    return maurey_simple_bound(D, eps) / 8


def lemma41_holds(inp: Lemma41Inputs, ctx: Context) -> Verdict:
    """Lemma 41: log M <= d log(1 + 2/eps) (l2) and <= min(that, log C(2d + k, k)) (l1), for every
    packing; the largest log M - bound (docs/derivations/lemmas-39-41-42.md)."""
    gaps = [(math.log(P.points.shape[0]) - inp.bound(P.d, P.eps, P.ball), P) for P in inp.packings]
    gap, P = max(gaps, key=lambda t: t[0])
    return at_most(
        gap,
        0.0,
        detail=f"largest at {P}, log M = {math.log(P.points.shape[0]):.3f} "
        f"vs {inp.bound(P.d, P.eps, P.ball):.3f}; no rounding term: M is a count and "
        "both bounds are closed forms",
    )


def lemma41_separated(inp: Lemma41Inputs, ctx: Context) -> Verdict:
    """Every packing is an eps-packing: the smallest pairwise distance over eps, over packings
    (> 1 by the greedy rule; equality would already be a defect)."""
    ratio, P = min(
        ((min_pairwise_distance(P.points) / P.eps, P) for P in inp.packings), key=lambda t: t[0]
    )
    return at_least(ratio, 1.0, detail=f"smallest distance / eps at {P}")


def lemma41_maximal(inp: Lemma41Inputs, ctx: Context) -> Verdict:
    """Every greedy packing is maximal among its candidates: each candidate lies within eps of a
    kept point (so the kept points also cover them, the step behind M >= covering numbers);
    the largest distance to the nearest kept point over eps."""

    def reach(P: Packing) -> float:
        return float(torch.cdist(P.candidates, P.points).min(dim=1).values.max()) / P.eps

    ratio, P = max(((reach(P), P) for P in inp.packings), key=lambda t: t[0])
    rnd = Rounding(n=P.d + 2, scale=4.0 / P.eps, what="(d + 2) eps (|x| + |y|)^2 / eps")
    return at_most(ratio, 1.0, rnd, detail=f"largest at {P} ({P.candidates.shape[0]} candidates)")


def lemma41_sphere(inp: Lemma41Inputs, ctx: Context) -> Verdict:
    """The Maurey form fails for the Euclidean sphere: a greedy 1.2-packing of random unit vectors
    of R^128 has log M above ln(2D + 1) / eps^2 (docs/derivations/lemmas-39-41-42.md)."""
    S = inp.sphere
    log_m = math.log(S.points.shape[0])
    return at_least(
        log_m,
        inp.maurey_form(S.d, S.eps),
        detail=f"{S} of {SPHERE_M} random unit vectors: log M = {log_m:.2f}; "
        f"volume bound {volume_log_packing_bound(S.d, S.eps):.1f}",
    )


def lemma41_counterexample(inp: Lemma41Inputs, ctx: Context) -> Verdict:
    """euclidean_packing_counterexample (the Gram-matrix test <x, y> <= 1 - sep^2 / 2) keeps as
    many of the sphere's vectors as the greedy packing by distances: the count users cite."""
    S = inp.sphere
    return close(
        inp.sphere_kept,
        S.points.shape[0],
        0.0,
        detail=f"{S}: counterexample {inp.sphere_kept}, greedy packing "
        f"{S.points.shape[0]}; counts, no rounding term",
    )


def lemma41_simplified(inp: Lemma41Inputs, ctx: Context) -> Verdict:
    """The simplified Maurey bound dominates the exact one: (8 / eps^2) log(2d + 1) >=
    log C(2d + k, k), k = ceil(4 / eps^2) (ceil(a) <= 2a for a >= 1, and C(2d + k, k) <=
    (2d + 1)^k), for d up to 10^6 and every eps < 2 of the claim and 0.1 (the binomial exact,
    its log at 40 digits). Measured: the smallest margin."""
    import mpmath

    gaps = []
    for d, eps in itertools.product(SIMPLE_DIMS, LEMMA41_EPS + (0.1,)):
        k = math.ceil(4 / eps**2)
        with mpmath.workdps(40):
            exact = float(mpmath.log(math.comb(2 * d + k, k)))
        gaps.append((inp.simplified(d, eps) - exact, d, eps, exact))
    gap, d, eps, exact = min(gaps)
    rnd = Rounding(n=4, scale=exact, what="4 eps |log C|")
    return at_least(
        gap,
        0.0,
        rnd,
        detail=f"smallest margin at d = {d}, eps = {eps} (log C(2d + k, k) = {exact:.4g})",
    )


def _maurey_margin(d: int, eps: float) -> float:
    """d log(1/eps) - log C(2d + k, k), k = ceil(4/eps^2), at 40 digits (the binomial exact)."""
    import mpmath

    k = math.ceil(4 / eps**2)
    with mpmath.workdps(40):
        return float(d * mpmath.log(1 / mpmath.mpf(eps)) - mpmath.log(math.comb(2 * d + k, k)))


def lemma41_violation(inp: Lemma41Inputs, ctx: Context) -> Verdict:
    """The Maurey bound is false for B_2^d from d* = maurey_violation_dimension(eps) on: at d*
    the covering lower bound d log(1/eps) exceeds log C(2d + k, k), at d* - 1 it does not (both
    at 40 digits; docs/derivations/lemmas-39-41-42.md). Measured: the smaller of the two margins."""
    parts = []
    for eps in VIOLATION_EPS:
        d = inp.violation(eps)
        if d is None or d < 2:
            return at_least(-math.inf, 0.0, detail=f"eps = {eps}: no first dimension ({d})")
        parts.append((min(_maurey_margin(d, eps), -_maurey_margin(d - 1, eps)), eps, d))
    m, eps, d = min(parts)
    return at_least(
        m,
        0.0,
        detail="; ".join(f"eps = {e}: d* = {k}" for _, e, k in parts)
        + f"; smallest margin at eps = {eps}; both sides at 40 digits, no rounding",
    )


def _quartered(d: int, eps: float, ball: str) -> float:
    """Lemma 41's bound with both constants divided by 4: (d / 4) log(1 + 2/eps) and
    k = ceil(1 / eps^2)."""
    vol = volume_log_packing_bound(d, eps) / 4
    if ball == "l2":
        return vol
    k = math.ceil(1 / eps**2)
    if eps >= 2:
        return min(vol, 0.0)
    mau = math.lgamma(2 * d + k + 1) - math.lgamma(k + 1) - math.lgamma(2 * d + 1)
    return min(vol, mau)


def _constants_quartered(inp: Lemma41Inputs, ctx: Context) -> Lemma41Inputs:
    return replace(inp, bound=_quartered)


def _point_twice(inp: Lemma41Inputs, ctx: Context) -> Lemma41Inputs:
    """Every packing with its first point kept twice."""
    twice = tuple(replace(P, points=torch.cat([P.points, P.points[:1]])) for P in inp.packings)
    return replace(inp, packings=twice)


def _scan_stopped_halfway(inp: Lemma41Inputs, ctx: Context) -> Lemma41Inputs:
    """Packings whose greedy scan stopped after half of its candidates (a loop bound slip)."""

    def half(P: Packing) -> Packing:
        return replace(P, points=greedy_packing(P.candidates[: P.candidates.shape[0] // 2], P.eps))

    return replace(inp, packings=tuple(half(P) for P in inp.packings))


def _atoms_as_d(inp: Lemma41Inputs, ctx: Context) -> Lemma41Inputs:
    """The simplified form counting d atoms, not the 2d + 1 of conv{+-e_i, 0}:
    (8 / eps^2) log d."""
    return replace(inp, simplified=lambda d, eps: 8.0 / eps**2 * math.log(d))


def _violation_one_late(inp: Lemma41Inputs, ctx: Context) -> Lemma41Inputs:
    """The first violating dimension reported one too high (a search that stops one late)."""
    return replace(inp, violation=lambda eps: maurey_violation_dimension(eps) + 1)


def _counterexample_half(inp: Lemma41Inputs, ctx: Context) -> Lemma41Inputs:
    """The counterexample's count from the first half of its vectors (a loop bound slip)."""
    S = inp.sphere
    return replace(inp, sphere_kept=greedy_packing(S.candidates[: SPHERE_M // 2], S.eps).shape[0])


def _maurey_constant(inp: Lemma41Inputs, ctx: Context) -> Lemma41Inputs:
    """The Maurey form with its constant 8 (maurey_simple_bound), which R^128 cannot beat."""
    return replace(inp, maurey_form=maurey_simple_bound)


register(
    Claim(
        id="lemma-41",
        ref=Ref("Lemma 41", "Lemma 41"),
        statement=(
            "eps-packings: log M <= d log(1 + 2/eps) (l2 ball), and <= log C(2d+k, k), "
            "k = ceil(4/eps^2) (Maurey, l1 ball); greedy packings in d = 1, 2, 3 never exceed "
            "them, and one of random unit vectors in D = 128 breaks the Maurey form for the "
            "Euclidean sphere"
        ),
        inputs=lemma41_inputs,
        checks=[
            Check("log M <= bound", lemma41_holds),
            Check("packings eps-separated", lemma41_separated),
            Check("greedy packings maximal", lemma41_maximal),
            Check("D = 128 sphere beats the Maurey form", lemma41_sphere),
            Check("counterexample = greedy packing", lemma41_counterexample),
            Check("Maurey false for B_2^d from d* on", lemma41_violation),
            Check("simplified Maurey form dominates", lemma41_simplified),
        ],
        faults=[
            Fault("both constants divided by 4", _constants_quartered, breaks=("log M <= bound",)),
            Fault("a point kept twice", _point_twice, breaks=("packings eps-separated",)),
            Fault(
                "greedy scan stopped halfway",
                _scan_stopped_halfway,
                breaks=("greedy packings maximal",),
            ),
            Fault(
                "the Maurey form with its constant 8",
                _maurey_constant,
                breaks=("D = 128 sphere beats the Maurey form",),
            ),
            Fault(
                "counterexample from half its vectors",
                _counterexample_half,
                breaks=("counterexample = greedy packing",),
            ),
            Fault(
                "first violating dimension one late",
                _violation_one_late,
                breaks=("Maurey false for B_2^d from d* on",),
            ),
            Fault(
                "atoms counted as d, not 2d + 1",
                _atoms_as_d,
                breaks=("simplified Maurey form dominates",),
            ),
        ],
        builds=(greedy_packing, sample_ball, euclidean_packing_counterexample),
        bounds=(
            packing_log_bound,
            volume_log_packing_bound,
            maurey_log_packing_bound,
            maurey_simple_bound,
            maurey_violation_dimension,
        ),
        derivation="docs/derivations/lemmas-39-41-42.md",
    )
)


@dataclass(frozen=True)
class LipschitzCase:
    """An L-Lipschitz ``f`` on the R-ball of R^k, the net built for it, and how it is probed."""

    name: str
    f: Callable[[torch.Tensor], torch.Tensor]
    L: float  # f's Lipschitz constant: the certificate's slack uses it
    built: LipschitzNet
    eps: Optional[float]  # the sup-error asked for (None: built for a degree)
    starts: torch.Tensor  # (64, 1, k) starting points of the adversarial search
    cert: SupCertificate  # certify_sup_error of f and the net on ctx.device
    rounding: Rounding  # the net's rounding term on the ball

    def __str__(self) -> str:
        b = self.built
        return f"{self.name} (k={b.k}, L={self.L:.3g}, R={b.R:.3g}, {b.method} n={b.degree})"


@dataclass(frozen=True)
class Lemma42Inputs:
    """Lemma 42's nets with their functions; the kernel moments, smoothing bound and grid that its
    certificate rests on (docs/derivations/lemmas-39-41-42.md)."""

    cases: Tuple[LipschitzCase, ...]
    moments: Callable[[int, int], Tuple[float, float]]  # fk_moments(n, k) = (m2, m4)
    smoothing: Callable[[int, int, float, float], float]  # smoothing_error_bound(n, k, L, R)
    grid: Callable[[float, int, float], Tuple[torch.Tensor, float]]  # ball_grid(R, k, spacing)
    probes: Tuple[torch.Tensor, ...]  # per k = 1, 2: 4096 points of the unit ball and sphere
    steps: int  # projected-Adam steps of the adversarial search
    lipschitz: Callable[[TwoLayerNet], float] = net_lipschitz_bound  # the certificate's Lip(net)


FK_CASES = ((1, 1), (3, 3), (8, 2), (16, 2))  # (degree n, coordinates k)
COVER_SPACING = {1: 2e-3, 2: 2.5e-2}  # grid spacing of the covering check, per k


def _starts(ctx: Context, i: int, k: int, R: float) -> torch.Tensor:
    g = ctx.generator("lemma-42/starts", i, device=ctx.device)
    kw = dict(generator=g, dtype=torch.float64, device=ctx.device)
    x0 = torch.randn(64, 1, k, **kw)
    return x0 / x0.norm(dim=-1, keepdim=True) * R * torch.rand(64, 1, 1, **kw)


def _probes(ctx: Context, k: int) -> torch.Tensor:
    """2048 points uniform in the unit ball of R^k, then 2048 on its sphere."""
    g = ctx.generator("lemma-42/probes", k)
    x = torch.randn(4096, k, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True)
    x[:2048] *= torch.rand(2048, 1, generator=g, dtype=torch.float64) ** (1 / k)
    return x


def _functions(ctx: Context):
    """(name, f, L, R, k, build arguments): 1-D and 2-D Lipschitz functions, Lemma 22's product."""
    n2 = ctx.pick(quick=8, full=16)
    return [
        ("sin(3x)", lambda x: torch.sin(3 * x[..., 0]), 3.0, 1.0, 1, dict(eps=0.05)),
        ("|x - 1/3| - 1/2", lambda x: (x[..., 0] - 1 / 3).abs() - 0.5, 1.0, 2.0, 1, dict(eps=0.01)),
        (
            "xy on the sqrt2-ball (Lemma 22)",
            lambda x: x[..., 0] * x[..., 1],
            math.sqrt(2),
            math.sqrt(2),
            2,
            dict(degree=n2),
        ),
        ("||x||", lambda x: x.norm(dim=-1), 1.0, 1.0, 2, dict(degree=n2)),
        ("||x|| to eps 0.6", lambda x: x.norm(dim=-1), 1.0, 1.0, 2, dict(eps=0.6)),
        (
            "sin x1 + cos 2x2",
            lambda x: torch.sin(x[..., 0]) + torch.cos(2 * x[..., 1]),
            math.sqrt(5),
            1.0,
            2,
            dict(degree=n2),
        ),
    ]


def lemma42_inputs(ctx: Context) -> Lemma42Inputs:
    """The nets lemma42_net builds for six functions (k = 1: interpolation; k = 2:
    Fourier-ridge)."""
    cases = tuple(
        _case(
            name,
            f,
            L,
            lemma42_net(f, L=L, R=R, k=k, **kw),
            kw.get("eps"),
            _starts(ctx, i, k, R),
            ctx,
        )
        for i, (name, f, L, R, k, kw) in enumerate(_functions(ctx))
    )
    return Lemma42Inputs(
        cases,
        fk_moments,
        smoothing_error_bound,
        ball_grid,
        (_probes(ctx, 1), _probes(ctx, 2)),
        ctx.pick(quick=15, full=60),
    )


def _case(
    name: str,
    f,
    L: float,
    b: LipschitzNet,
    eps: Optional[float],
    starts: torch.Tensor,
    ctx: Context,
) -> LipschitzCase:
    """The case with its certificate, certify_sup_error on ctx.device (grid + (L + Lip(net)) rho),
    and the net's rounding term on the ball (its corners bound |x|)."""
    net = b.net.to(device=ctx.device)
    cert = _certificate(f, b, L, b.R, ctx)
    corners = b.R * torch.ones(1, b.k, dtype=torch.float64, device=ctx.device)
    rnd = two_layer(
        net.W, net.b, net.a[None, :], corners, what="(k + width + 2) eps max|a|(|W| R + |b|)"
    )
    return LipschitzCase(name, f, L, b, eps, starts, cert, rnd)


def _certificate(f, b: LipschitzNet, L: float, R: float, ctx: Context) -> SupCertificate:
    """certify_sup_error of f and b's net on the R-ball, on ctx.device, at the profile's spacing."""
    spacing = ctx.pick(quick=2e-4 if b.k == 1 else 2.5e-2, full=2e-5 if b.k == 1 else 8e-3)
    net = b.net.to(device=ctx.device)
    return certify_sup_error(f, net, L=L, R=R, k=b.k, spacing=spacing)


def _seen(case: LipschitzCase, ctx: Context, steps: int) -> float:
    """The largest |f - net| found by projected Adam from the case's starting points."""
    net = case.built.net.to(device=ctx.device)

    def err(x):
        return (case.f(x[:, 0]) - net(x)).abs()

    x = worst_case_tokens(err, case.starts.to(ctx.device), case.built.R, steps=steps, lr=0.05)
    return float(err(x).max())


def lemma42_certified(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """Lemma 42: the certified sup_ball |f - net| is within the net's error bound; the largest
    certified / bound over the functions (docs/derivations/lemmas-39-41-42.md, step 7)."""
    ratio, case = max(
        ((c.cert.upper / c.built.error_bound, c) for c in inp.cases), key=lambda t: t[0]
    )
    bound = case.built.error_bound
    return at_most(
        ratio,
        1.0,
        case.rounding.times(1 / bound, "1/bound"),
        detail=f"largest at {case}: certified {case.cert.upper:.4f} vs bound {bound:.4f}",
    )


def lemma42_eps(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """A net built for a sup-error eps has an error bound within eps; the largest bound / eps."""
    ratio, case = max(
        ((c.built.error_bound / c.eps, c) for c in inp.cases if c.eps is not None),
        key=lambda t: t[0],
    )
    rnd = Rounding(n=4, scale=1.0, what="4 eps (L h / 2 / eps, sums of two terms), relative")
    return at_most(
        ratio,
        1.0,
        rnd,
        detail=f"largest at {case}: bound {case.built.error_bound:.4f} vs eps {case.eps:g}",
    )


def lemma42_seen(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """No error found (grid maximum, projected Adam) exceeds the certificate; the largest seen /
    certified."""
    seen = [(max(c.cert.lower, _seen(c, ctx, inp.steps)), c) for c in inp.cases]
    found, case = max(seen, key=lambda t: t[0] / t[1].cert.upper)
    upper = case.cert.upper
    return at_most(
        found / upper,
        1.0,
        case.rounding.times(1 / upper, "1/certified"),
        detail=f"largest at {case}: seen {found:.4f} vs certified {upper:.4f}",
    )


def _steepest_slope(case: LipschitzCase, probes: torch.Tensor, ctx: Context) -> float:
    """The largest ||grad net(x)|| over the probes scaled to the case's R-ball."""
    net = case.built.net.to(device=ctx.device)
    x = (probes.to(ctx.device) * case.built.R).unsqueeze(-2).requires_grad_(True)
    with torch.enable_grad():
        (g,) = torch.autograd.grad(net(x).sum(), x)
    return float(g.norm(dim=-1).max())


def lemma42_net_lipschitz(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """Lemma 42, step 7 of docs/derivations/lemmas-39-41-42.md: the slack (L + Lip(net)) rho needs
    Lip(net) at least every slope of the net on the ball; the largest gradient norm at the probes
    over the bound (for k = 1 the bound is exact and the probes meet every piece: ratio 1)."""

    def ratio_of(c: LipschitzCase) -> float:
        slope, lip = _steepest_slope(c, inp.probes[c.built.k - 1], ctx), inp.lipschitz(c.built.net)
        return slope / lip if lip > 0 else (math.inf if slope > 0 else 0.0)

    ratio, case = max(((ratio_of(c), c) for c in inp.cases), key=lambda t: t[0])
    width = case.built.net.W.shape[0]
    rnd = Rounding(
        n=2 * (width + case.built.k),
        scale=1.0,
        what="2 (width + k) eps, relative (sums over the units)",
    )
    return at_most(ratio, 1.0, rnd, detail=f"largest at {case}: steepest slope / Lip(net) bound")


def _ridge_error(built: LipschitzNet) -> float:
    """Step 6: sum_v S_v (2R / K_v)^2 / 8 over the ridges (S_v, K_v)."""
    return sum(S * (2 * built.R / K) ** 2 / 8 for S, K in built.ridges)


def lemma42_ridges(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """Step 6 (k >= 2): the ridges' interpolation error sum_v S_v (2R / K_v)^2 / 8 is within the
    ridge budget eps_ridge; the largest error / budget."""
    ratio, case = max(
        ((_ridge_error(c.built) / c.built.ridge_budget, c) for c in inp.cases if c.built.k >= 2),
        key=lambda t: t[0],
    )
    rnd = Rounding(n=4 * len(case.built.ridges), scale=1.0, what="4 (ridges) eps, relative")
    return at_most(ratio, 1.0, rnd, detail=f"largest at {case}, {len(case.built.ridges)} ridges")


# step 6: the ridges' share f of the error when a degree is given, restated from the derivation
# (independent of qstr.bounds.lipschitz.RIDGE_FRACTION, which the check holds to it)
RIDGE_FRACTION = 0.1


def _split_gap(c: LipschitzCase, smoothing) -> float:
    """Relative gap of c's eps_smooth and eps_ridge to steps 4 and 6: eps_smooth(n, k, L, R), and
    eps_ridge = f / (1 - f) eps_smooth (a degree given) or eps - eps_smooth (a target eps)."""
    b = c.built
    smooth = smoothing(b.degree, b.k, b.L, b.R)
    ridge = RIDGE_FRACTION / (1 - RIDGE_FRACTION) * smooth if c.eps is None else c.eps - smooth
    return max(abs(b.smooth_error - smooth) / smooth, abs(b.ridge_budget - ridge) / ridge)


def lemma42_split(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """Steps 4 and 6 (k >= 2): the error splits into eps_smooth, the kernel's bound, and the ridge
    budget eps_ridge as derived; the largest relative gap over the nets."""
    gap, case = max(
        ((_split_gap(c, inp.smoothing), c) for c in inp.cases if c.built.k >= 2), key=lambda t: t[0]
    )
    rnd = Rounding(n=8, scale=1.0, what="8 eps (a ratio, a difference), relative")
    return at_most(gap, 0.0, rnd, detail=f"largest at {case}")


def lemma42_moments(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """Steps 3-4: the kernel moments m2, m4 and the smoothing error equal the same quantities
    summed over the tensor grid of the discrete FK weights, G = n + 3; the largest relative gap."""
    worst = None
    for n, k in FK_CASES:
        m2, m4 = _grid_moments(n, k)
        e = (2 / math.pi) * (2 * math.sqrt(m2) + (math.pi - 2) * math.sqrt(m2 * m4))  # L = R = 1
        theirs = (*inp.moments(n, k), inp.smoothing(n, k, 1.0, 1.0))
        gap = max(abs(a - b) / abs(b) for a, b in zip((m2, m4, e), theirs))
        if worst is None or gap > worst[0]:
            worst = (gap, n, k)
    gap, n, k = worst
    rnd = Rounding(
        n=(n + 2) * (n + 3) ** k,
        scale=1.0,
        what="(n + 2) G^k eps (n cosines per weight, G^k terms), relative",
    )
    return at_most(gap, 0.0, rnd, detail=f"largest at n={n}, k={k}")


def _grid_moments(n: int, k: int) -> Tuple[float, float]:
    """E_w sigma^2 and E_w sigma^4 under w_j = (1 + 2 sum_l c_l cos(l theta_j)) / G per coordinate,
    sigma^2 = sum_i sin^2(theta_i / 2), summed over the G^k grid (G = n + 3)."""
    G, c = n + 3, fk_coefficients(n)
    th = 2 * math.pi * torch.arange(G, dtype=torch.float64) / G
    w1 = (1 + 2 * sum(float(c[m]) * torch.cos(m * th) for m in range(1, n + 1))) / G
    s1 = torch.sin(th / 2) ** 2
    w, s = w1, s1
    for _ in range(k - 1):
        w, s = (w[:, None] * w1).flatten(), (s[:, None] + s1).flatten()
    return float((w * s).sum()), float((w * s * s).sum())


def fk_smoothing(f, n: int, k: int, R: float, x: torch.Tensor) -> torch.Tensor:
    """Lemma 42, steps 1-2: T(x) = G^-k sum_j F(y_j) K(x - y_j) on the default grid
    G = 2(n + 2), F = f of the folded (period 4R), ball-projected grid points, K the tensorised
    Fejer-Korovkin kernel."""
    G, P = 2 * (n + 2), 4 * R
    y = -2 * R + P * torch.arange(G, dtype=torch.float64, device=x.device) / G
    folded = R - ((y + R).remainder(P) - 2 * R).abs()
    mesh = torch.stack(torch.meshgrid(*([folded] * k), indexing="ij"), dim=-1)
    norm = mesh.norm(dim=-1, keepdim=True)
    F = f(mesh * torch.clamp(R / norm.clamp_min(1e-300), max=1.0))  # (G,)*k
    c = fk_coefficients(n).to(x.device)
    ls = torch.arange(1, n + 1, dtype=torch.float64, device=x.device)
    theta = 2 * math.pi * (x[:, :, None] - y) / P  # (M, k, G)
    kappa = 1 + 2 * (c[1:] * torch.cos(ls * theta[..., None])).sum(-1)
    out = torch.einsum("j...,mj->m...", F, kappa[:, 0])  # one grid coordinate at a time
    for i in range(1, k):
        out = torch.einsum("mj...,mj->m...", out, kappa[:, i])
    return out / G**k


def lemma42_ridges_of_t(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """Steps 5-6 (k >= 2): the net is the smoothing T, a sum of ridges, up to the ridges'
    interpolation error: max |net - T| over the probes of the R-ball (T by the discrete
    convolution of step 2, not by the FFT the builder uses) is within sum_v S_v h_v^2 / 8."""
    worst = None
    for c in (c for c in inp.cases if c.built.k >= 2 and c.built.method == "fourier-ridge"):
        b = c.built
        x = b.R * inp.probes[b.k - 1].to(ctx.device)
        T = fk_smoothing(c.f, b.degree, b.k, b.R, x)
        gap = float((b.net.to(device=ctx.device)(x[:, None, :]).reshape(-1) - T).abs().max())
        ratio = gap / _ridge_error(b)
        if worst is None or ratio > worst[0]:
            worst = (ratio, c, gap)
    ratio, case, gap = worst
    return at_most(
        ratio,
        1.0,
        case.rounding.times(1 / _ridge_error(case.built), "1/ridge error"),
        detail=f"largest at {case}: |net - T| {gap:.3g} against the ridges' "
        f"{_ridge_error(case.built):.3g}",
    )


def _constant_unit_dropped(inp: Lemma42Inputs, ctx: Context) -> Lemma42Inputs:
    """The k >= 2 nets without their merged constant unit (its output weight zeroed)."""

    def drop(c: LipschitzCase) -> LipschitzCase:
        if c.built.k == 1:
            return c
        a = c.built.net.a.clone()
        a[-1] = 0.0
        net = TwoLayerNet(a=a, W=c.built.net.W.clone(), b=c.built.net.b.clone())
        return replace(c, built=replace(c.built, net=net))

    return replace(inp, cases=tuple(drop(c) for c in inp.cases))


def lemma42_covering(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """The certificate's grid: every point of the R-ball (4096 probes, half on the sphere) lies
    within rho = spacing sqrt(k) / 2 of a grid point; the largest distance / rho."""
    worst = None
    for R, k in sorted({(c.built.R, c.built.k) for c in inp.cases}):
        pts, _ = inp.grid(R, k, COVER_SPACING[k])
        rho = COVER_SPACING[k] * math.sqrt(k) / 2
        dist = torch.cdist(R * inp.probes[k - 1], pts, compute_mode="donot_use_mm_for_euclid_dist")
        reach = float(dist.min(dim=1).values.max())
        if worst is None or reach / rho > worst[0]:
            worst = (reach / rho, f"R={R:.3g}, k={k}, spacing {COVER_SPACING[k]:g}")
    ratio, where = worst
    rnd = Rounding(n=8, scale=1.0, what="8 eps (differences, squares, a root), relative")
    return at_most(ratio, 1.0, rnd, detail=f"largest at {where}")


def _steeper(inp: Lemma42Inputs, ctx: Context) -> Lemma42Inputs:
    """Nets built for L = 1 applied to 2-Lipschitz functions: a tent 2 dist(x, knots) between the
    knots of the k = 1 construction, and the cone 2 ||x|| (k = 2)."""
    line = lemma42_net(lambda x: x[..., 0], L=1.0, R=1.0, k=1, eps=0.05)
    knots = torch.linspace(-1.0, 1.0, line.degree + 1, dtype=torch.float64)

    def tent(x):
        return 2 * (x[..., 0, None] - knots.to(x.device)).abs().min(dim=-1).values

    def cone(x):
        return 2 * x.norm(dim=-1)

    cases = tuple(
        _case(
            name,
            f,
            2.0,
            lemma42_net(f, L=1.0, R=1.0, k=k, **kw),
            None,
            _starts(ctx, 100 + k, k, 1.0),
            ctx,
        )
        for name, f, k, kw in (
            ("tent 2L", tent, 1, dict(eps=0.05)),
            ("cone 2L", cone, 2, dict(degree=ctx.pick(quick=8, full=16))),
        )
    )
    return replace(inp, cases=cases)


def _scaled(inp: Lemma42Inputs, ctx: Context) -> Lemma42Inputs:
    """Every net's output weights a scaled by 1.1 (a copy of the net)."""

    def scale(c: LipschitzCase) -> LipschitzCase:
        net = TwoLayerNet(a=1.1 * c.built.net.a, W=c.built.net.W.clone(), b=c.built.net.b.clone())
        return _case(c.name, c.f, c.L, replace(c.built, net=net), c.eps, c.starts, ctx)

    return replace(inp, cases=tuple(scale(c) for c in inp.cases))


def _degree_lower(inp: Lemma42Inputs, ctx: Context) -> Lemma42Inputs:
    """The nets built for an eps rebuilt at one degree (k = 1: one interval) less than eps needs."""

    def lower(c: LipschitzCase) -> LipschitzCase:
        if c.eps is None:
            return c
        b = c.built
        lower = lemma42_net(c.f, L=b.L, R=b.R, k=b.k, degree=b.degree - 1)
        return _case(c.name, c.f, c.L, lower, c.eps, c.starts, ctx)

    return replace(inp, cases=tuple(lower(c) for c in inp.cases))


def _interval_less(inp: Lemma42Inputs, ctx: Context) -> Lemma42Inputs:
    """One interval less per ridge: K_v - 1 (at least 1) in every k >= 2 net's ridge record."""

    def fewer(c: LipschitzCase) -> LipschitzCase:
        ridges = tuple((S, max(1, K - 1)) for S, K in c.built.ridges)
        return replace(c, built=replace(c.built, ridges=ridges))

    return replace(inp, cases=tuple(fewer(c) for c in inp.cases))


def _half_to_ridges(inp: Lemma42Inputs, ctx: Context) -> Lemma42Inputs:
    """The k >= 2 nets built for a degree rebuilt with half the error given to the ridges."""

    def half(c: LipschitzCase) -> LipschitzCase:
        b = c.built
        if b.k == 1 or c.eps is not None:
            return c
        return replace(
            c, built=lemma42_net(c.f, L=b.L, R=b.R, k=b.k, degree=b.degree, ridge_fraction=0.5)
        )

    return replace(inp, cases=tuple(half(c) for c in inp.cases))


def _unit_ball(inp: Lemma42Inputs, ctx: Context) -> Lemma42Inputs:
    """Certificates of the unit ball whatever R (the radius left at its default 1)."""

    def unit(c: LipschitzCase) -> LipschitzCase:
        if c.built.R == 1.0:  # the same certificate
            return c
        return replace(c, cert=_certificate(c.f, c.built, c.L, 1.0, ctx))

    return replace(inp, cases=tuple(unit(c) for c in inp.cases))


def _moments_off_by_one(inp: Lemma42Inputs, ctx: Context) -> Lemma42Inputs:
    """The kernel moments of degree n + 1 in place of n."""
    return replace(inp, moments=lambda n, k: fk_moments(n + 1, k))


def _lipschitz_halved(inp: Lemma42Inputs, ctx: Context) -> Lemma42Inputs:
    """The net's Lipschitz bound halved (a difference quotient over 2h read as one over h)."""
    return replace(inp, lipschitz=lambda net: 0.5 * net_lipschitz_bound(net))


def _grid_short(inp: Lemma42Inputs, ctx: Context) -> Lemma42Inputs:
    """A grid of the ball of radius R - rho (a slip in the filter of ball_grid)."""

    def short(R, k, spacing):
        pts, rho = ball_grid(R, k, spacing)
        return pts[pts.norm(dim=1) <= R - rho], rho

    return replace(inp, grid=short)


CERTIFIED, SEEN = "certified sup-error <= error bound", "error seen <= certified"
NET_LIP = "Lip(net) bound >= the net's slopes"
SPLIT = "error split as derived (eps_smooth, eps_ridge)"
RIDGES_OF_T = "net = FK smoothing T within the ridge error"
register(
    Claim(
        id="lemma-42",
        ref=Ref("Lemma 42", "Lemma 42"),
        statement=(
            "explicit two-layer ReLU net for an L-Lipschitz f on the R-ball of R^k (k=1 "
            "interpolation, k=2 Fourier-ridge): sup-error, certified on the ball by grid + "
            "Lipschitz slack, within its bound"
        ),
        inputs=lemma42_inputs,
        checks=[
            Check(CERTIFIED, lemma42_certified),
            Check("error bound <= eps asked", lemma42_eps),
            Check(SEEN, lemma42_seen),
            Check("ridge error <= ridge budget", lemma42_ridges),
            Check(SPLIT, lemma42_split),
            Check(RIDGES_OF_T, lemma42_ridges_of_t),
            Check("FK moments as summed over the grid", lemma42_moments),
            Check("grid covers the ball within rho", lemma42_covering),
            Check(NET_LIP, lemma42_net_lipschitz),
        ],
        faults=[
            Fault(
                "functions twice as steep as the nets were built for", _steeper, breaks=(CERTIFIED,)
            ),
            Fault("output weights scaled by 1.1", _scaled, breaks=(CERTIFIED,)),
            Fault("certificates of the unit ball whatever R", _unit_ball, breaks=(SEEN,)),
            Fault(
                "one degree less than eps needs",
                _degree_lower,
                breaks=("error bound <= eps asked",),
            ),
            Fault(
                "one interval less per ridge",
                _interval_less,
                breaks=("ridge error <= ridge budget",),
            ),
            Fault("half the error given to the ridges", _half_to_ridges, breaks=(SPLIT,)),
            Fault(
                "the merged constant unit dropped", _constant_unit_dropped, breaks=(RIDGES_OF_T,)
            ),
            Fault(
                "kernel moments of degree n + 1",
                _moments_off_by_one,
                breaks=("FK moments as summed over the grid",),
            ),
            Fault(
                "grid of the ball of radius R - rho",
                _grid_short,
                breaks=("grid covers the ball within rho",),
            ),
            Fault("the net's Lipschitz bound halved", _lipschitz_halved, breaks=(NET_LIP,)),
        ],
        builds=(interpolation_net, fourier_ridges, ridge_net),
        bounds=(
            lemma42_net,
            smoothing_error_bound,
            fk_moments,
            ridge_curvatures,
            ridge_interval_counts,
            certify_sup_error,
            ball_grid,
            net_lipschitz_bound,
        ),
        derivation="docs/derivations/lemmas-39-41-42.md",
    )
)
