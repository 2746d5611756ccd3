"""Claims about the auxiliary lemmas (Section 6 / Appendix D): Lemmas 39, 40, 41 and 42."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Callable, Tuple

from scipy import stats

from qstr.bounds.gaussian import (VarianceEstimate, conditional_sqnorm_variance, mc_conditional_sqnorm_variance,
                                  random_orthonormal_rows)
from qstr.verify.claim import Check, Claim, Fault, Ref, Verdict, at_least, at_most, close, exact
from qstr.verify.legacy import Claim as Legacy, Context, Outcome, register
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
    """One estimate per case from ``mc_conditional_sqnorm_variance`` (docs/derivations/few-heads.md, section 1)."""
    n_outer, n_inner = ctx.pick(quick=(400, 200), full=(2000, 500), gpu=(4000, 200))
    per_case = 1 - (1 - FAMILY_CONFIDENCE) / len(LEMMA40_CASES)
    estimates = []
    for k, r in LEMMA40_CASES:
        V = random_orthonormal_rows(r, k, generator=ctx.generator("lemma-40/V", k, r, device=ctx.device))
        estimates.append(mc_conditional_sqnorm_variance(
            V, n_outer=n_outer, n_inner=n_inner, confidence=per_case,
            generator=ctx.generator("lemma-40/samples", k, r, device=ctx.device)))
    return Lemma40Inputs(LEMMA40_CASES, tuple(estimates), conditional_sqnorm_variance,
                         float(stats.norm.ppf(0.5 + per_case / 2)), n_outer + n_inner)


def _lemma40_rounding(inp: Lemma40Inputs, est: VarianceEstimate, k: int, claimed: float) -> Rounding:
    return Rounding(n=inp.n_terms + k, scale=max(est.estimate, claimed),
                    what="(n_outer + n_inner + k) eps max(est, 2(k-r))")


def lemma40_zscores(inp: Lemma40Inputs, ctx: Context) -> Verdict:
    """The largest |estimate - 2(k - r)| / stderr over the cases is within the family's critical value."""
    worst, parts, terms = 0.0, [], []
    for (k, r), est in zip(inp.cases, inp.estimates):
        claimed = inp.variance(k, r)
        rnd = _lemma40_rounding(inp, est, k, claimed)
        terms.append(rnd.times(1 / max(est.stderr, 1e-300), "1/stderr"))
        worst = max(worst, abs(est.estimate - claimed) / max(est.stderr, 1e-300))
        parts.append(f"k={k} r={r}: {est.estimate:.3f} +- {est.halfwidth:.3f} vs {claimed:g}")
    return at_most(worst, inp.zcrit, largest(terms), detail="; ".join(parts))


def lemma40_intervals(inp: Lemma40Inputs, ctx: Context) -> Verdict:
    """Every case's own confidence interval (the estimator's record) contains 2(k - r): the largest
    distance to the closed form in half-widths is at most 1."""
    worst, terms = 0.0, []
    for (k, r), est in zip(inp.cases, inp.estimates):
        claimed = inp.variance(k, r)
        terms.append(_lemma40_rounding(inp, est, k, claimed).times(1 / est.halfwidth, "1/halfwidth"))
        worst = max(worst, abs(est.estimate - claimed) / est.halfwidth)
    return at_most(worst, 1.0, largest(terms), detail="|estimate - 2(k - r)| / half-width, largest case")


def _rank_plus_one(inp: Lemma40Inputs, ctx: Context) -> Lemma40Inputs:
    """The closed form at rank r + 1: an off-by-one in the conditioning's degrees of freedom."""
    return replace(inp, variance=lambda k, r: conditional_sqnorm_variance(k, min(r + 1, k)))


register(Claim(
    id="lemma-40", ref=Ref("Lemma 40"),
    statement="Var(||x||^2 | Vx) = 2(k - r) for x ~ N(0, I_k), V with r orthonormal rows (MC, 99.9% family CI)",
    inputs=lemma40_inputs,
    checks=[Check("family z-scores", lemma40_zscores), Check("each interval contains", lemma40_intervals)],
    faults=[Fault("rank r + 1", _rank_plus_one, breaks=("family z-scores", "each interval contains"))],
    builds=(mc_conditional_sqnorm_variance,), bounds=(conditional_sqnorm_variance,),
    derivation="docs/derivations/few-heads.md",
))

# ---------------------------------------------------------------- lemma-39, lemma-41, lemma-42
# (bounds/packing.py, constructions/lipschitz.py; derivations in docs/derivations/lemmas-39-41-42.md)

import torch  # noqa: E402

from qstr.constructions.links import TwoLayerNet  # noqa: E402
from qstr.constructions.lipschitz import (ball_grid, certify_sup_error, fk_coefficients, fk_moments,  # noqa: E402
                                          lipschitz_net, net_lipschitz_bound)
from qstr.constructions.lipschitz import smoothing_error_bound  # noqa: E402
from qstr.bounds.packing import (  # noqa: E402
    conjugate,
    crossover_dimension,
    greedy_packing,
    lemma39,
    lemma39_equality_case,
    lemma39_swapped_rhs,
    maurey_log_packing_bound,
    maurey_simple_bound,
    maurey_violation_dimension,
    euclidean_packing_log_lower,
    min_pairwise_distance,
    mixed_norm,
    packing_log_bound,
    sample_ball,
    smaller_bound,
    volume_log_packing_bound,
)
from qstr.bounds.recurrent import euclidean_packing_counterexample  # noqa: E402
from qstr.verify.adversarial import worst_case_tokens  # noqa: E402

INF = math.inf


# (p, q, r): ||AB||_{p,q} <= ||A||_{r,q} ||B||_{p,s}, s = r/(r-1)
LEMMA39_CASES = ((2, 2, 2), (1, INF, INF), (INF, 1, 1), (3, 1.5, 4 / 3), (1, 2, 3), (INF, INF, 1.5))
LEMMA39_SHAPES = ((1, 5, 1), (3, 4, 5), (6, 2, 3))  # (m, n, k) of the random pairs
LEMMA39_ROUNDING = Rounding(n=128, scale=1.0, what="128 eps x ratio (3 mixed norms of <= 6 x 5 "
                            "matrices: sums, powers, roots)")
Pair = Tuple[torch.Tensor, torch.Tensor]


def holder_rhs(A: torch.Tensor, B: torch.Tensor, p: float, q: float, r: float) -> torch.Tensor:
    """Lemma 39's right-hand side ||A||_{r,q} ||B||_{p,s}, batched and differentiable."""
    return mixed_norm(A, r, q) * mixed_norm(B, p, conjugate(r))


def _swapped_rhs(A: torch.Tensor, B: torch.Tensor, p: float, q: float, r: float) -> torch.Tensor:
    """The false form ||A||_{q,r} ||B||_{s,p} (inner and outer exponents exchanged)."""
    return mixed_norm(A, q, r) * mixed_norm(B, conjugate(r), p)


@dataclass(frozen=True)
class Lemma39Inputs:
    """Per (p, q, r): random pairs, the equality case and Adam's starting pairs; the right-hand side."""

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
    return Lemma39Inputs(LEMMA39_CASES, tuple(random), tuple(equality), tuple(starts), steps,
                         holder_rhs)


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


def _case(p, q, r) -> str:
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
            worst, where = top, f"{_case(p, q, r)} ({how})"
    return at_most(worst, 1.0, LEMMA39_ROUNDING, detail=f"largest lhs/rhs at {where}")


def lemma39_tight(inp: Lemma39Inputs, ctx: Context) -> Verdict:
    """Lemma 39 is tight: lemma39_equality_case attains lhs / rhs = 1 for every (p, q, r); the
    ratio farthest from 1."""
    ratios = [(float(_ratio(inp, A, B, p, q, r)), _case(p, q, r))
              for (p, q, r), (A, B) in zip(inp.cases, inp.equality)]
    ratio, where = max(ratios, key=lambda t: abs(t[0] - 1.0))
    return close(ratio, 1.0, 0.0, LEMMA39_ROUNDING, detail=f"farthest from 1 at {where}")


def _swapped(inp: Lemma39Inputs, ctx: Context) -> Lemma39Inputs:
    """The right-hand side with inner and outer exponents exchanged, ||A||_{q,r} ||B||_{s,p}."""
    return replace(inp, rhs=_swapped_rhs)


def _doubled(inp: Lemma39Inputs, ctx: Context) -> Lemma39Inputs:
    """A right-hand side loose by a factor 2 (still true, no longer tight)."""
    return replace(inp, rhs=lambda A, B, p, q, r: 2 * holder_rhs(A, B, p, q, r))


register(Claim(
    id="lemma-39", ref=Ref("Lemma 39", "Lemma 39"),
    statement=("||AB||_{p,q} <= ||A||_{r,q} ||B||_{p,s} (row p-norms then q-norm; 1/r + 1/s = 1), "
               "tight"),
    inputs=lemma39_inputs,
    checks=[Check("lhs <= rhs", lemma39_holds), Check("equality case attained", lemma39_tight)],
    faults=[Fault("inner and outer exponents swapped, ||A||_{q,r} ||B||_{s,p}", _swapped,
                  breaks=("lhs <= rhs", "equality case attained")),
            Fault("right-hand side doubled", _doubled, breaks=("equality case attained",))],
    builds=(lemma39_equality_case,), bounds=(mixed_norm, conjugate),
    derivation="docs/derivations/lemmas-39-41-42.md",
))

LEMMA41_DIMS = (1, 2, 3)
LEMMA41_EPS = (0.3, 0.6, 1.0, 1.5)
SPHERE_D, SPHERE_M, SPHERE_SEP = 128, 2000, 1.2  # Lemma 41's contrast on the Euclidean sphere


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
        i, j = torch.meshgrid(torch.arange(-M - 1, M + 2), torch.arange(-2 * M - 2, 2 * M + 3),
                              indexing="ij")
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

    def __str__(self) -> str:
        return f"{self.ball} d={self.d} eps={self.eps:g}: M={self.points.shape[0]}"


@dataclass(frozen=True)
class Lemma41Inputs:
    """Greedy packings of the l1 and l2 balls and of the sphere of R^128; the bounds they meet."""

    packings: Tuple[Packing, ...]  # the sphere's packing last (inside the l2 ball)
    bound: Callable[[int, float, str], float]  # Lemma 41: packing_log_bound(d, eps, ball)
    maurey_form: Callable[[int, float], float]  # ln(2D + 1) / eps^2, the form without its constant

    @property
    def sphere(self) -> Packing:
        return self.packings[-1]


def _sphere_packing(ctx: Context) -> Packing:
    """Greedy SPHERE_SEP-packing of SPHERE_M random unit vectors of R^SPHERE_D (the candidates of
    bounds.recurrent.euclidean_packing_counterexample)."""
    g = ctx.generator("lemma-41/sphere", device=ctx.device)
    X = torch.randn(SPHERE_M, SPHERE_D, generator=g, dtype=torch.float64, device=ctx.device)
    return Packing("l2", SPHERE_D, SPHERE_SEP, greedy_packing(X / X.norm(dim=1, keepdim=True),
                                                              SPHERE_SEP))


def lemma41_inputs(ctx: Context) -> Lemma41Inputs:
    """Greedy packings (structured candidates, then uniform ones from ``sample_ball``) of the l1
    and l2 balls, d = 1, 2, 3, and of the sphere of R^128 (docs/derivations/lemmas-39-41-42.md)."""
    n_cand = ctx.pick(quick=3000, full=30000)
    packings = []
    for ball, d, (e, eps) in itertools.product(("l2", "l1"), LEMMA41_DIMS,
                                               enumerate(LEMMA41_EPS)):
        g = ctx.generator("lemma-41/candidates", d, e, device=ctx.device)
        cand = torch.cat([_structured(d, eps, ball, ctx.device),
                          sample_ball(n_cand, d, ball, generator=g)])
        packings.append(Packing(ball, d, eps, greedy_packing(cand, eps)))
    packings.append(_sphere_packing(ctx))
    return Lemma41Inputs(tuple(packings), packing_log_bound, _maurey_form)


def _maurey_form(D: int, eps: float) -> float:
    """ln(2D + 1) / eps^2: maurey_simple_bound without its constant 8."""
    return maurey_simple_bound(D, eps) / 8


def lemma41_holds(inp: Lemma41Inputs, ctx: Context) -> Verdict:
    """Lemma 41: log M <= d log(1 + 2/eps) (l2) and <= min(that, log C(2d + k, k)) (l1), for every
    packing; the largest log M - bound (docs/derivations/lemmas-39-41-42.md)."""
    gaps = [(math.log(P.points.shape[0]) - inp.bound(P.d, P.eps, P.ball), P) for P in inp.packings]
    gap, P = max(gaps, key=lambda t: t[0])
    return at_most(gap, 0.0, detail=f"largest at {P}, log M = {math.log(P.points.shape[0]):.3f} "
                   f"vs {inp.bound(P.d, P.eps, P.ball):.3f}; no rounding term: M is a count and "
                   "both bounds are closed forms")


def lemma41_separated(inp: Lemma41Inputs, ctx: Context) -> Verdict:
    """Every packing is an eps-packing: the smallest pairwise distance over eps, over packings
    (> 1 by the greedy rule; equality would already be a defect)."""
    ratio, P = min(((min_pairwise_distance(P.points) / P.eps, P) for P in inp.packings),
                   key=lambda t: t[0])
    return at_least(ratio, 1.0, detail=f"smallest distance / eps at {P}")


def lemma41_sphere(inp: Lemma41Inputs, ctx: Context) -> Verdict:
    """The Maurey form fails for the Euclidean sphere: a greedy 1.2-packing of random unit vectors
    of R^128 has log M above ln(2D + 1) / eps^2 (docs/derivations/lemmas-39-41-42.md)."""
    S = inp.sphere
    log_m = math.log(S.points.shape[0])
    return at_least(log_m, inp.maurey_form(S.d, S.eps),
                    detail=f"{S} of {SPHERE_M} random unit vectors: log M = {log_m:.2f}; "
                    f"volume bound {volume_log_packing_bound(S.d, S.eps):.1f}")


def _quartered(d: int, eps: float, ball: str) -> float:
    """Lemma 41's bound with both constants divided by 4: (d / 4) log(1 + 2/eps) and
    k = ceil(1 / eps^2)."""
    vol = volume_log_packing_bound(d, eps) / 4
    if ball == "l2":
        return vol
    k = math.ceil(1 / eps ** 2)
    mau = 0.0 if eps >= 2 else math.lgamma(2 * d + k + 1) - math.lgamma(k + 1) - math.lgamma(2 * d + 1)
    return min(vol, mau)


def _constants_quartered(inp: Lemma41Inputs, ctx: Context) -> Lemma41Inputs:
    return replace(inp, bound=_quartered)


def _point_twice(inp: Lemma41Inputs, ctx: Context) -> Lemma41Inputs:
    """Every packing with its first point kept twice."""
    twice = tuple(replace(P, points=torch.cat([P.points, P.points[:1]])) for P in inp.packings)
    return replace(inp, packings=twice)


def _maurey_constant(inp: Lemma41Inputs, ctx: Context) -> Lemma41Inputs:
    """The Maurey form with its constant 8 (maurey_simple_bound), which R^128 cannot beat."""
    return replace(inp, maurey_form=maurey_simple_bound)


register(Claim(
    id="lemma-41", ref=Ref("Lemma 41", "Lemma 41"),
    statement=("eps-packings: log M <= d log(1 + 2/eps) (l2 ball), and <= log C(2d+k, k), "
               "k = ceil(4/eps^2) (Maurey, l1 ball); greedy packings in d = 1, 2, 3 never exceed "
               "them, and one of random unit vectors in D = 128 breaks the Maurey form for the "
               "Euclidean sphere"),
    inputs=lemma41_inputs,
    checks=[Check("log M <= bound", lemma41_holds),
            Check("packings eps-separated", lemma41_separated),
            Check("D = 128 sphere beats the Maurey form", lemma41_sphere)],
    faults=[Fault("both constants divided by 4", _constants_quartered, breaks=("log M <= bound",)),
            Fault("a point kept twice", _point_twice, breaks=("packings eps-separated",)),
            Fault("the Maurey form with its constant 8", _maurey_constant,
                  breaks=("D = 128 sphere beats the Maurey form",))],
    builds=(greedy_packing, sample_ball),
    bounds=(packing_log_bound, volume_log_packing_bound, maurey_log_packing_bound,
            maurey_simple_bound),
    derivation="docs/derivations/lemmas-39-41-42.md",
))


def _lemma42_cases(ctx: Context):
    """(name, f, L, R, k, build kwargs): 1-D and 2-D Lipschitz functions, the Lemma 22 product map included."""
    n2 = ctx.pick(quick=8, full=16)
    return [
        ("sin(3x)", lambda x: torch.sin(3 * x[..., 0]), 3.0, 1.0, 1, dict(eps=0.05)),
        ("|x - 1/3| - 1/2", lambda x: (x[..., 0] - 1 / 3).abs() - 0.5, 1.0, 2.0, 1, dict(eps=0.01)),
        ("xy on the sqrt2-ball (Lemma 22)", lambda x: x[..., 0] * x[..., 1], math.sqrt(2), math.sqrt(2), 2, dict(degree=n2)),
        ("||x||", lambda x: x.norm(dim=-1), 1.0, 1.0, 2, dict(degree=n2)),
        ("||x|| to eps 0.6", lambda x: x.norm(dim=-1), 1.0, 1.0, 2, dict(eps=0.6)),
        ("sin x1 + cos 2x2", lambda x: torch.sin(x[..., 0]) + torch.cos(2 * x[..., 1]), math.sqrt(5), 1.0, 2,
         dict(degree=n2)),
    ]


def _lemma42_measure(f, built, L, R, k, ctx: Context, salt: int):
    """Certified upper bound (grid + Lipschitz slack), the largest error seen (grid, random,
    adversarial) and the net's rounding term on the ball (its corners bound |x|), on ctx.device."""
    spacing = ctx.pick(quick=2e-4 if k == 1 else 2.5e-2, full=2e-5 if k == 1 else 8e-3)
    net = built.net.to(device=ctx.device)
    cert = certify_sup_error(f, net, L=L, R=R, k=k, spacing=spacing)
    g = ctx.generator(salt, ctx.device)
    x0 = torch.randn(64, 1, k, generator=g, dtype=torch.float64, device=ctx.device)
    x0 = x0 / x0.norm(dim=-1, keepdim=True) * R * torch.rand(64, 1, 1, generator=g, dtype=torch.float64, device=ctx.device)

    def err(x):
        return (f(x[:, 0]) - net(x)).abs()

    x = worst_case_tokens(err, x0, R, steps=ctx.pick(quick=15, full=60), lr=0.05)
    seen = max(cert.lower, float(err(x).max()))
    corners = R * torch.ones(1, k, dtype=torch.float64, device=ctx.device)
    rnd = two_layer(net.W, net.b, net.a[None, :], corners, what="(k + width + 2) eps max|a|(|W| R + |b|)")
    return cert, seen, rnd


FK_CASES = ((1, 1), (3, 3), (8, 2), (16, 2))  # (degree n, coordinates k)


def _fk_moments_two_ways() -> float:
    """Largest relative gap between fk_moments / smoothing_error_bound and the same quantities summed over the tensor
    grid of the discrete FK weights w_j = (1 + 2 sum_l c_l cos(l theta_j)) / G, G = n + 3 (lemmas-39-41-42.md)."""
    gap = 0.0
    for n, k in FK_CASES:
        G, c = n + 3, fk_coefficients(n)
        th = 2 * math.pi * torch.arange(G, dtype=torch.float64) / G
        w1 = (1 + 2 * sum(float(c[m]) * torch.cos(m * th) for m in range(1, n + 1))) / G
        s1 = torch.sin(th / 2) ** 2
        w, s = w1, s1
        for _ in range(k - 1):  # sigma^2 = sum_i sin^2(theta_i / 2) over independent coordinates
            w, s = (w[:, None] * w1).flatten(), (s[:, None] + s1).flatten()
        m2, m4 = float((w * s).sum()), float((w * s * s).sum())
        e = (2 / math.pi) * (2 * math.sqrt(m2) + (math.pi - 2) * math.sqrt(m2 * m4))  # L = R = 1
        for mine, theirs in zip((m2, m4, e), (*fk_moments(n, k), smoothing_error_bound(n, k, 1.0, 1.0))):
            gap = max(gap, abs(mine - theirs) / theirs)
    return gap


def lipschitz_by_secants(net) -> float:
    """Lemma 42's nets in 1-D (k = 1): the exact Lipschitz constant, found without the unit structure that
    ``net_lipschitz_bound`` uses: the net is linear between consecutive breakpoints -b_i / w_i, so its largest |slope|
    is the largest secant over them and over the two outer rays (a unit step beyond the ends)."""
    live = net.W[:, 0] != 0
    bp = torch.unique(-(net.b[live] / net.W[live, 0]))
    s = torch.cat([bp[:1] - 1, bp, bp[-1:] + 1]).to(torch.float64)
    s = s[torch.cat([torch.ones(1, dtype=torch.bool, device=s.device), torch.diff(s) > 1e-9])]  # closer than 1e-9: merged
    y = net(s[:, None, None]).reshape(-1)
    return float((torch.diff(y) / torch.diff(s)).abs().max())


def ridges_as_derived(built) -> bool:
    """Lemma 42, k >= 2 (docs/derivations/lemmas-39-41-42.md, steps 6-7): each ridge's interval count is
    K_v = ceil(2R / h_v), h_v = sqrt(8 eps_ridge S_v^(-2/3) / sum_u S_u^(1/3)) (K_v = 1 where S_v = 0), the ridge
    error is sum_v S_v (2R / K_v)^2 / 8 and the width sum_v (K_v + 1) + 1 (relative 1e-12); one ridge per primitive
    direction of the frequency cube [-n, n]^k (step 5)."""
    total = sum(S ** (1 / 3) for S, _ in built.ridges if S > 0)
    want = [max(1, math.ceil(2 * built.R / math.sqrt(8 * built.ridge_budget * S ** (-2 / 3) / total))) if S > 0 else 1
            for S, _ in built.ridges]
    err = sum(S * (2 * built.R / K) ** 2 / 8 for S, K in built.ridges)
    # step 5: one ridge per primitive direction v of the frequency cube [-n, n]^k, v and -v counted once
    cube = itertools.product(range(-built.degree, built.degree + 1), repeat=built.k)
    primitive = sum(1 for ell in cube if any(ell) and math.gcd(*map(abs, ell)) == 1) // 2
    return (want == [K for _, K in built.ridges] and len(built.ridges) == built.directions == primitive
            and abs(built.ridge_error - err) <= 1e-12 * err and built.width == sum(K + 1 for _, K in built.ridges) + 1)


def interpolation_as_derived(built) -> bool:
    """Lemma 42, k = 1 (docs/derivations/lemmas-39-41-42.md): K intervals of h = 2R / K, error bound L h / 2, all of it
    interpolation (no smoothing), one direction, width m of the net."""
    bound = built.L * (2 * built.R / built.degree) / 2
    return (abs(built.error_bound - bound) <= 1e-12 * bound and built.smooth_error == 0.0 and built.ridges == ()
            and built.ridge_error == built.ridge_budget == built.error_bound and built.directions == 1
            and built.width == built.net.m and built.method == "interpolation")


def norms_as_derived(built) -> bool:
    """Lemma 42's weight record (docs/derivations/lemmas-39-41-42.md): ||a||, ||W||_F, ||b||, r_a = ||a|| sqrt(m),
    r_w = ||(W, b)||_F / sqrt(m) and the path norm sum_i |a_i| ||(w_i, b_i)|| of the built net (relative 1e-12)."""
    net, got = built.net, built.weight_norms
    Wb = torch.cat([net.W, net.b[:, None]], dim=1)
    a, m = net.a, net.a.numel()
    want = {"a": float(a.norm()), "W": float(net.W.norm()), "b": float(net.b.norm()), "r_a": float(a.norm()) * m ** 0.5,
            "r_w": float(Wb.norm()) / m ** 0.5, "path": sum(abs(float(a[i])) * float(Wb[i].norm()) for i in range(m))}
    return set(got) == set(want) and all(abs(got[k] - want[k]) <= 1e-12 * max(want[k], 1e-300) for k in want)


def certificate_as_derived(f, built, L: float, spacing: float, ctx: Context) -> bool:
    """``certify_sup_error``'s slack is (L + Lip(net)) rho with the covering radius rho = spacing sqrt(k) / 2, and the
    projected grid covers the ball within rho: 4096 random points of the ball and of its sphere, each within rho of a
    grid point."""
    k, R = built.k, built.R
    cert = certify_sup_error(f, built.net, L=L, R=R, k=k, spacing=spacing)
    rho = spacing * math.sqrt(k) / 2
    pts, grid_rho = ball_grid(R, k, spacing)
    g = ctx.generator(4270 + k)
    x = torch.randn(4096, k, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True) * R
    x[: 2048] *= torch.rand(2048, 1, generator=g, dtype=torch.float64) ** (1 / k)
    reach = float(torch.cdist(x, pts).min(dim=1).values.max())
    return (abs(cert.slack - (L + net_lipschitz_bound(built.net)) * rho) <= 1e-12 * cert.slack and grid_rho == rho
            and reach <= rho and cert.points == pts.shape[0] and cert.upper == cert.grid_max + cert.slack)


def fk_as_derived() -> bool:
    """The Fejer-Korovkin coefficients (docs/derivations/lemmas-39-41-42.md): c_0 = 1, c_1 = cos(pi / (n + 2)), c_2 the
    lag-2 autocorrelation of a_j = sin((j + 1) pi / (n + 2)) over sum_j a_j^2 = (n + 2) / 2; n = 0 gives c = (1)."""
    ok = fk_coefficients(0).tolist() == [1.0]
    for n in (1, 4, 8, 16):
        c = fk_coefficients(n)
        a = [math.sin((j + 1) * math.pi / (n + 2)) for j in range(n + 1)]
        c2 = sum(a[j] * a[j + 2] for j in range(n - 1)) / ((n + 2) / 2) if n >= 2 else 0.0
        ok &= (abs(float(c[0]) - 1) <= 1e-14 and abs(float(c[1]) - math.cos(math.pi / (n + 2))) <= 1e-14
               and (n < 2 or abs(float(c[2]) - c2) <= 1e-14) and c.numel() == n + 1)
    return ok


def _lemma42(ctx: Context) -> Outcome:
    fk_gap = _fk_moments_two_ways()
    worst, parts, ok, terms, lip_gap, spent = 0.0, [], fk_gap <= 1e-10 and fk_as_derived(), [], 0.0, []
    records = True
    for i, (name, f, L, R, k, kw) in enumerate(_lemma42_cases(ctx)):
        built = lipschitz_net(f, L=L, R=R, k=k, **kw)
        if k == 1:  # one line of weights: the recorded net_lipschitz_bound is exact there
            exact = lipschitz_by_secants(built.net)
            lip_gap = max(lip_gap, abs(built.lipschitz_bound - exact) / exact)
        records &= (norms_as_derived(built) and (ridges_as_derived(built) if k >= 2 else interpolation_as_derived(built))
                    and certificate_as_derived(f, built, L, 2e-3 if k == 1 else 2.5e-2, ctx))
        cert, seen, rnd = _lemma42_measure(f, built, L, R, k, ctx, 4200 + i)
        upper = cert.upper + rnd.term  # the grid maximum was computed: rounding enters the certificate
        asked = kw.get("eps", math.inf)  # a net built for an eps must be certified within it
        ok &= upper <= built.error_bound <= asked and rnd.within(seen, upper)
        if k >= 2:  # the ridge budget as derived (step 6): 0.1 / 0.9 of the smoothing error for a degree, else the rest
            budget = 0.1 / 0.9 * built.smooth_error if "degree" in kw else asked - built.smooth_error
            ok &= (abs(built.ridge_budget - budget) <= 1e-12 * budget and built.ridge_error <= built.ridge_budget
                   and abs(built.error_bound - built.smooth_error - built.ridge_error) <= 1e-12 * built.error_bound)
            spent.append(built.ridge_error / built.ridge_budget)
        terms.append(rnd)
        worst = max(worst, upper / built.error_bound)
        parts.append(f"{name} (k={k}, L={L:.3g}, R={R:.3g}): seen {seen:.4f} <= certified {cert.upper:.4f} <= bound "
                     f"{built.error_bound:.4f}" + (f" <= eps {asked:g} asked" if "eps" in kw else "") + f"; width {built.width}, r_a {built.weight_norms['r_a']:.3g}, "
                     f"r_w {built.weight_norms['r_w']:.3g}, {built.method} n={built.degree}")
    parts.append(f"k >= 2: ridge budget = (0.1 / 0.9) x smoothing error (built for a degree, the default split) or "
                 f"eps - smoothing error (built for eps), ridge error <= budget (spent "
                 f"{', '.join(f'{x:.2f}' for x in spent)}), bound = their sum")
    ok &= records
    parts.append(f"records as derived: every net's weight norms (||a||, ||W||, ||b||, r_a, r_w, path), the k = 1 nets' error "
                 f"L h / 2 (all interpolation), the k = 2 ridges' "
                 f"interval counts K_v, ridge error and width, the certificate's slack (L + Lip) spacing sqrt(k) / 2 and "
                 f"its grid covering 4096 ball and sphere points within rho; FK c_0 = 1, c_1 = cos(pi / (n + 2)), c_2: "
                 f"{records}")
    parts.append(f"FK moments and smoothing error (n, k) in {list(FK_CASES)} against the sum over the weight grid: "
                 f"largest relative gap {fk_gap:.1e} (<= 1e-10)")
    g = ctx.generator(4280)  # and 1-D nets whose breakpoints (unlike the built nets' knots) are not symmetric: a
    # random one, and a tent relu(s - 1) - 2 relu(s - 2) + relu(s - 3) (slope 1 inside, flat outside)
    W, b, a = (torch.randn(*shape, generator=g, dtype=torch.float64) for shape in ((16, 1), (16,), (16,)))
    tent = TwoLayerNet(a=torch.tensor([1.0, -2.0, 1.0], dtype=torch.float64),
                       W=torch.ones(3, 1, dtype=torch.float64), b=torch.tensor([-1.0, -2.0, -3.0], dtype=torch.float64))
    for net in (TwoLayerNet(a=a, W=W, b=b), tent):
        lip_gap = max(lip_gap, abs(net_lipschitz_bound(net) - lipschitz_by_secants(net)) / lipschitz_by_secants(net))
    # k = 2: four lines of weights (two of them 16 degrees apart, one met with both signs); the bound is the sum of
    # the lines' largest slopes, 1 + 1 + 1 + 2 (relu(s) - 2 relu(s - 1/2) on e1; relu(2 s + 0.1) + relu(-s) on e2)
    lines = TwoLayerNet(a=torch.tensor([1.0, -1.0, 1.0, -2.0, 1.0, 1.0], dtype=torch.float64),
                        W=torch.tensor([[0.6, 0.8], [0.8, 0.6], [1, 0], [1, 0], [0, 2], [0, -1]], dtype=torch.float64),
                        b=torch.tensor([0.0, 0.0, 0.0, -0.5, 0.1, 0.0], dtype=torch.float64))
    lip_gap = max(lip_gap, abs(net_lipschitz_bound(lines) - 5.0) / 5.0)
    parts.append(f"the 1-D nets' recorded Lipschitz bound (net_lipschitz_bound, exact for one line of weights), a "
                 f"random 16-unit net's and a tent's on [1, 3] vs the largest secant between breakpoints, and a k = 2 net on four "
                 f"lines (two 16 degrees apart) vs 1 + 1 + 1 + 2: relative gap "
                 f"{lip_gap:.1e} (<= 1e-9)")
    ok &= lip_gap <= 1e-9
    parts.append(f"largest {largest(terms)} (and to the certificate)")
    parts.append("value = the largest (certified sup-error + rounding) / error bound over the functions, limit 1 "
                 "(holds also needs every error seen <= its certificate)")
    return Outcome(measured=f"max certified/bound = {worst:.3f}", bound="<= 1", holds=ok, detail="; ".join(parts),
                   value=float(worst), limit=1.0)


def _lemma42_falsifier(ctx: Context) -> Outcome:
    """Nets built for L, applied to 2L-Lipschitz functions (tent between the knots; cone at 0)."""
    parts, beaten, worst = [], False, 0.0
    L, R = 1.0, 1.0
    built1 = lipschitz_net(lambda x: x[..., 0], L=L, R=R, k=1, eps=0.05)  # knots of the L-construction
    knots = torch.linspace(-R, R, built1.degree + 1, dtype=torch.float64)
    tent = lambda x: 2 * L * (x[..., 0, None] - knots.to(x.device)).abs().min(dim=-1).values  # noqa: E731
    n2 = ctx.pick(quick=8, full=16)
    cone = lambda x: 2 * L * x.norm(dim=-1)  # noqa: E731
    for name, f, k, kw in (("tent 2L", tent, 1, dict(eps=0.05)), ("cone 2L", cone, 2, dict(degree=n2))):
        built = lipschitz_net(f, L=L, R=R, k=k, **kw)
        cert, seen, rnd = _lemma42_measure(f, built, 2 * L, R, k, ctx, 4290 + k)
        beaten |= not rnd.within(seen, built.error_bound)
        worst = max(worst, seen / built.error_bound)
        parts.append(f"{name} (built for L={L}): error seen {seen:.4f} vs bound {built.error_bound:.4f}; {rnd}")
    detail = "; ".join(parts) + "; value = the largest error seen / error bound, limit 1 (plus the rounding term)"
    return Outcome(measured="; ".join(parts), bound="seen <= bound", holds=not beaten, detail=detail,
                   value=float(worst), limit=1.0)


register(Legacy(
    id="lemma-42", ref_seed="Lemma 42", ref_conference="Lemma 42",
    statement=("explicit two-layer ReLU net for an L-Lipschitz f on the R-ball of R^k (k=1 interpolation, "
               "k=2 Fourier-ridge): sup-error, certified on the ball by grid + Lipschitz slack, within its bound"),
    check=_lemma42, falsifier=_lemma42_falsifier,
    falsifier_statement="a function with twice the Lipschitz constant the net was built for must exceed the bound",
))
