"""Lemma 41 (Appendix D): eps-packing numbers of the l2 and l1 balls (volume and Maurey bounds),
and the Maurey form failing for the Euclidean sphere (docs/derivations/lemmas-39-41-42.md)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Callable, Optional, Tuple

import mpmath
import torch

from qstr.bounds.packing import (
    greedy_packing,
    maurey_log_packing_bound,
    maurey_simple_bound,
    maurey_violation_dimension,
    min_pairwise_distance,
    packing_log_bound,
    sample_ball,
    volume_log_packing_bound,
)
from qstr.bounds.prop8 import euclidean_packing_counterexample
from qstr.verify.claim import (
    Claim,
    Context,
    Ref,
    Verdict,
    at_least,
    at_most,
    by_measured,
    close,
    mapped,
    replaced,
    worst,
)
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

LEMMA41_DIMS = (1, 2, 3)
LEMMA41_EPS = (0.3, 0.6, 1.0, 1.5)
SPHERE_D, SPHERE_M, SPHERE_SEP = 128, 2000, 1.2  # Lemma 41's contrast on the Euclidean sphere
VIOLATION_EPS = (0.5, 0.8)  # where the first dimension refuting Maurey for B_2^d is sought
SIMPLE_DIMS = (1, 10, 1000, 10**6)  # where the simplified Maurey form is held to the exact one
MAUREY_ACTIVE = ((5, 1.5), (8, 1.0))  # l1 packings where Maurey's branch is the smaller one
# the pin's points: the claim's dimensions and eps, Maurey's active ones, the sphere's D = 128,
# 10^6 (the simplified form's largest d), eps = 0.1 and the edges eps = 1.99, 2 (Maurey's 0), 3
PIN_DIMS = (*LEMMA41_DIMS, 5, 8, SPHERE_D, 10**6)
PIN_EPS = (0.1, *LEMMA41_EPS, 1.99, 2.0, 3.0)
PIN_DPS = 40
# float64 closed forms against 40 digits: log1p, lgamma and a log agree to ~1e-16 relative; the
# lgamma difference loses more, and is given its own rounding term (4 eps lgamma(2d + k + 1))
PIN_RTOL = 1e-12

claim = register(
    Claim(
        "lemma-41",
        Ref("Lemma 41"),
        statement=(
            "eps-packings: log M <= d log(1 + 2/eps) (l2 ball), and <= log C(2d+k, k), "
            "k = ceil(4/eps^2) (Maurey, l1 ball); greedy packings in d = 1, 2, 3 (and where "
            "Maurey's branch is the smaller, d = 5 and 8) never exceed "
            "them, and one of random unit vectors in D = 128 breaks the Maurey form for the "
            "Euclidean sphere"
        ),
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


def _maurey_form(D: int, eps: float) -> float:
    """ln(2D + 1) / eps^2: maurey_simple_bound without its constant 8."""
    return maurey_simple_bound(D, eps) / 8


@dataclass(frozen=True)
class Lemma41Inputs:
    """Greedy packings of the l1 and l2 balls and of the sphere of R^128; the bounds they meet."""

    packings: Tuple[Packing, ...]  # the sphere's packing last (inside the l2 ball)
    sphere_kept: int  # euclidean_packing_counterexample's count on the sphere's candidates
    bound: Callable[[int, float, str], float] = packing_log_bound  # Lemma 41 (d, eps, ball)
    maurey_form: Callable[[int, float], float] = _maurey_form  # ln(2D + 1) / eps^2
    violation: Callable[[float], Optional[int]] = maurey_violation_dimension
    simplified: Callable[[int, float], float] = maurey_simple_bound  # (8 / eps^2) log(2d + 1)
    volume: Callable[[int, float], float] = volume_log_packing_bound  # d log(1 + 2/eps)
    maurey: Callable[[int, float], float] = maurey_log_packing_bound  # log C(2d + k, k)

    @property
    def sphere(self) -> Packing:
        return self.packings[-1]


def _sphere_packing(ctx: Context) -> Tuple[Packing, int]:
    """Greedy SPHERE_SEP-packing of SPHERE_M random unit vectors of R^SPHERE_D, and the count
    bounds.prop8.euclidean_packing_counterexample keeps from the same vectors (its draw)."""

    def gen():
        return ctx.generator("lemma-41/sphere", device=ctx.device)

    X = torch.randn(SPHERE_M, SPHERE_D, generator=gen(), dtype=torch.float64, device=ctx.device)
    X = X / X.norm(dim=1, keepdim=True)
    kept = euclidean_packing_counterexample(SPHERE_D, SPHERE_M, generator=gen(), sep=SPHERE_SEP)[0]
    return Packing("l2", SPHERE_D, SPHERE_SEP, greedy_packing(X, SPHERE_SEP), X), kept


@claim.inputs
def lemma41_inputs(ctx: Context) -> Lemma41Inputs:
    """Greedy packings (structured candidates, then uniform ones from ``sample_ball``) of the l1
    and l2 balls, d = 1, 2, 3, and of the sphere of R^128 (docs/derivations/lemmas-39-41-42.md)."""
    n_cand = ctx.pick(quick=3000, full=30000)
    packings = []
    plan = list(itertools.product(("l2", "l1"), LEMMA41_DIMS, LEMMA41_EPS))
    plan += [("l1", d, eps) for d, eps in MAUREY_ACTIVE]
    for ball, d, eps in plan:
        g = ctx.generator("lemma-41/candidates", d, LEMMA41_EPS.index(eps), device=ctx.device)
        structured = _structured(d, eps, ball, ctx.device)
        cand = torch.cat([structured, sample_ball(n_cand, d, ball, generator=g)])
        packings.append(Packing(ball, d, eps, greedy_packing(cand, eps), cand))
    sphere, kept = _sphere_packing(ctx)
    return Lemma41Inputs((*packings, sphere), kept)


@claim.scope_with
def lemma41_scope(inp: Lemma41Inputs) -> str:
    """The (ball, d, eps) packed, and the sphere."""
    dims = sorted({(P.ball, P.d) for P in inp.packings[:-1]})
    return (
        "greedy packings (lattice points, then random points of the ball: samples, not built "
        "objects) "
        + ", ".join(f"{b} d={d}" for b, d in dims)
        + f" at eps {', '.join(f'{e:g}' for e in LEMMA41_EPS)}; {inp.sphere} random unit vectors"
        + f"; bounds pinned at 40 digits for d in {PIN_DIMS[:-1]} and 10^6"
    )


@claim.check("log M <= bound", evidence="monte-carlo")
def lemma41_holds(inp: Lemma41Inputs) -> Verdict:
    """Lemma 41: log M <= d log(1 + 2/eps) (l2) and <= min(that, log C(2d + k, k)) (l1), for every
    greedy packing of lattice and random points; the packing with the largest log M - bound
    (docs/derivations/lemmas-39-41-42.md)."""

    def gap(P: Packing) -> Verdict:
        log_m, bound = math.log(P.points.shape[0]), inp.bound(P.d, P.eps, P.ball)
        what = "no rounding term: M is a count and both bounds are closed forms"
        return at_most(log_m, bound, detail=f"log M = {log_m:.3f} vs {bound:.3f}; {what}")

    # ranked by log M - bound (the derivation's number); the volume bound is nearly tight in d = 1
    rows = ((str(P), gap(P)) for P in inp.packings)
    return worst(rows, key=lambda v: v.measured - v.bound)


def _branches(d: int, eps: float) -> Tuple[float, float]:
    """(d ln(1 + 2/eps), ln C(2d + k, k)), k = ceil(4/eps^2), at 40 digits (the binomial exact)."""
    k = math.ceil(4 / eps**2)
    with mpmath.workdps(40):
        vol = d * mpmath.log(1 + 2 / mpmath.mpf(eps))
        return float(vol), float(mpmath.log(math.comb(2 * d + k, k)))


@claim.check("l1 bound = the smaller branch, each active", evidence="formula", agreement=True)
def lemma41_branches(inp: Lemma41Inputs) -> Verdict:
    """Lemma 41 on the l1 ball: the bound is min(volume, Maurey) written from the lemma at 40
    digits, on a grid of (d, eps) where each branch is the smaller one (d = 1..3 and around the
    crossover d* of each eps): the largest relative gap; inf if either branch is never active."""
    grid = [(d, e) for e in LEMMA41_EPS for d in (1, 2, 3, *_around_crossover(e))]
    active, rows = set(), []
    for d, eps in grid:
        vol, maurey = _branches(d, eps)
        active.add("volume" if vol <= maurey else "Maurey")
        gap = abs(inp.bound(d, eps, "l1") - min(vol, maurey)) / min(vol, maurey)
        what = "relative gap (an agreement with 40 digits: m/b = gap / 1e-12, not a slack)"
        rows.append((f"d={d} eps={eps:g}", at_most(gap, 1e-12, detail=what)))
    if active != {"volume", "Maurey"}:
        return at_most(math.inf, 1e-12, detail=f"only the {active} branch active on the grid")
    return worst(rows, key=by_measured)


def _around_crossover(eps: float) -> Tuple[int, ...]:
    """d* - 1, d*, d* + 5 for d* the first dimension where Maurey's branch is the smaller."""
    d = next(d for d in range(1, 10**4) if _branches(d, eps)[1] < _branches(d, eps)[0])
    return (d - 1, d, d + 5)


@claim.check("packings eps-separated", evidence="exact")
def lemma41_separated(inp: Lemma41Inputs) -> Verdict:
    """Every packing is an eps-packing: the smallest pairwise distance over eps, over packings
    (> 1 by the greedy rule; equality would already be a defect)."""
    ratios = (
        (str(P), at_least(min_pairwise_distance(P.points) / P.eps, 1.0)) for P in inp.packings
    )
    return worst(ratios, key=lambda v: -v.measured)  # a packing of one point: inf, never the worst


@claim.check("greedy packings maximal", evidence="exact")
def lemma41_maximal(inp: Lemma41Inputs) -> Verdict:
    """Every greedy packing is maximal among its candidates: each candidate lies within eps of a
    kept point (so the kept points also cover them, the step behind M >= covering numbers);
    the largest distance to the nearest kept point over eps."""

    def reach(P: Packing) -> Verdict:
        ratio = float(torch.cdist(P.candidates, P.points).min(dim=1).values.max()) / P.eps
        rnd = Rounding(n=P.d + 2, scale=4.0 / P.eps, what="(d + 2) eps (|x| + |y|)^2 / eps")
        return at_most(ratio, 1.0, rnd, detail=f"{P.candidates.shape[0]} candidates")

    return worst(((str(P), reach(P)) for P in inp.packings), key=by_measured)


@claim.check("D = 128 sphere beats the Maurey form", evidence="monte-carlo")
def lemma41_sphere(inp: Lemma41Inputs) -> Verdict:
    """The Maurey form fails for the Euclidean sphere: a greedy 1.2-packing of random unit vectors
    of R^128 has log M above ln(2D + 1) / eps^2 (docs/derivations/lemmas-39-41-42.md)."""
    S, log_m = inp.sphere, math.log(inp.sphere.points.shape[0])
    what = f"log M = {log_m:.2f}; volume bound {volume_log_packing_bound(S.d, S.eps):.1f}"
    return at_least(log_m, inp.maurey_form(S.d, S.eps), detail=f"{S} of {SPHERE_M} vectors: {what}")


@claim.check("counterexample = greedy packing", evidence="exact")
def lemma41_counterexample(inp: Lemma41Inputs) -> Verdict:
    """euclidean_packing_counterexample (the Gram-matrix test <x, y> <= 1 - sep^2 / 2) keeps as
    many of the sphere's vectors as the greedy packing by distances: the count users cite."""
    S, kept = inp.sphere, inp.sphere_kept
    what = f"{S}: counterexample {kept}, greedy packing {S.points.shape[0]}; counts, no rounding"
    return close(kept, S.points.shape[0], 0.0, detail=what)


def _maurey_margin(d: int, eps: float) -> float:
    """d log(1/eps) - log C(2d + k, k), k = ceil(4/eps^2), at 40 digits (the binomial exact)."""
    k = math.ceil(4 / eps**2)
    with mpmath.workdps(40):
        return float(d * mpmath.log(1 / mpmath.mpf(eps)) - mpmath.log(math.comb(2 * d + k, k)))


@claim.check("Maurey false for B_2^d from d* on", evidence="formula")
def lemma41_violation(inp: Lemma41Inputs) -> Verdict:
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
    found = "; ".join(f"eps = {e}: d* = {k}" for _, e, k in parts)
    what = (
        f"smallest margin at eps = {eps}; both sides at 40 digits, no rounding; a margin "
        "against 0 (so m/b reads 0: an agreement of d* with its definition, not a slack)"
    )
    return at_least(m, 0.0, detail=f"{found}; {what}")


@claim.check("simplified Maurey form dominates", evidence="formula")
def lemma41_simplified(inp: Lemma41Inputs) -> Verdict:
    """The simplified Maurey bound dominates the exact one: (8 / eps^2) log(2d + 1) >=
    log C(2d + k, k), k = ceil(4 / eps^2) (ceil(a) <= 2a for a >= 1, and C(2d + k, k) <=
    (2d + 1)^k), for d up to 10^6 and every eps < 2 of the claim and 0.1 (the binomial exact,
    its log at 40 digits). Measured: the smallest margin."""

    def margin(d: int, eps: float) -> Verdict:
        k = math.ceil(4 / eps**2)
        with mpmath.workdps(40):
            exact = float(mpmath.log(math.comb(2 * d + k, k)))
        rnd = Rounding(n=4, scale=exact, what="4 eps |log C|")
        what = f"log C = {exact:.4g}; a margin against 0 (m/b reads 0; the form is a step)"
        return at_least(inp.simplified(d, eps) - exact, 0.0, rnd, detail=what)

    cases = itertools.product(SIMPLE_DIMS, LEMMA41_EPS + (0.1,))
    margins = ((f"d = {d}, eps = {eps}", margin(d, eps)) for d, eps in cases)
    return worst(margins, key=lambda v: -v.measured)


def volume_mp(d: int, eps: float):
    """d ln(1 + 2/eps) in mpmath (docs/derivations/lemmas-39-41-42.md, Lemma 41 (i))."""
    return d * mpmath.log(1 + 2 / mpmath.mpf(eps))


def maurey_mp(d: int, eps: float):
    """ln C(2d + k, k), k = ceil(4/eps^2) at the working precision, the binomial an exact integer;
    0 for eps >= 2 (Lemma 41 (ii))."""
    if eps >= 2:
        return mpmath.mpf(0)
    k = int(mpmath.ceil(4 / mpmath.mpf(eps) ** 2))
    return mpmath.log(math.comb(2 * d + k, k))


def simple_mp(d: int, eps: float):
    """(8/eps^2) ln(2d + 1), 0 for eps >= 2 (the simplified Maurey form)."""
    return mpmath.mpf(0) if eps >= 2 else 8 / mpmath.mpf(eps) ** 2 * mpmath.log(2 * d + 1)


def _pin_cases(inp: "Lemma41Inputs", d: int, eps: float):
    """(name, float64 value, 40-digit value, rounding scale) of every bound function at (d, eps)."""
    vol, mau, sim = volume_mp(d, eps), maurey_mp(d, eps), simple_mp(d, eps)
    k = math.ceil(4 / eps**2)
    cancel = mpmath.loggamma(2 * d + k + 1) / mau if mau else 0  # the lgamma difference's rounding
    return (
        ("volume", inp.volume(d, eps), vol, 1.0),
        ("Maurey", inp.maurey(d, eps), mau, float(cancel)),
        ("simplified", inp.simplified(d, eps), sim, 1.0),
        ("bound l2", inp.bound(d, eps, "l2"), vol, 1.0),
        ("bound l1", inp.bound(d, eps, "l1"), min(vol, mau), float(cancel) if mau < vol else 1.0),
    )


@claim.check("bound functions = 40-digit evaluation", evidence="formula")
def lemma41_pin(inp: Lemma41Inputs) -> Verdict:
    """volume_log_packing_bound, maurey_log_packing_bound, maurey_simple_bound and
    packing_log_bound (l1 and l2), the functions the claim's inequalities read, against Lemma 41's
    formulas evaluated in mpmath at 40 digits (docs/derivations/lemmas-39-41-42.md), at the
    claim's (d, eps) and the edges d = 1, 10^6, eps = 0.1, 2, 3; the largest relative gap."""

    def gap(name: str, got: float, want, scale: float) -> Verdict:
        rel = (0.0 if got == 0 else math.inf) if want == 0 else float(abs(got - want) / want)
        what = "4 eps lgamma(2d + k + 1) / log C: three lgammas cancel" if scale > 1 else ""
        rnd = Rounding(n=4, scale=scale, what=what) if what else None
        return at_most(rel, PIN_RTOL, rnd, detail="relative gap")

    with mpmath.workdps(PIN_DPS):
        rows = [
            (f"{name} d={d} eps={eps:g}", gap(name, got, want, scale))
            for d in PIN_DIMS
            for eps in PIN_EPS
            for name, got, want, scale in _pin_cases(inp, d, eps)
        ]
    return worst(rows)  # the least slack: relative gap against 1e-12 plus its rounding term


def _maurey_k2(d: int, eps: float) -> float:
    """Maurey's branch with k = ceil(2/eps^2), half the lemma's empirical-mean size."""
    k = math.ceil(2 / eps**2)
    return math.lgamma(2 * d + k + 1) - math.lgamma(k + 1) - math.lgamma(2 * d + 1)


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


def _point_twice(P: Packing) -> Packing:
    """The packing with its first point kept twice."""
    return replace(P, points=torch.cat([P.points, P.points[:1]]))


def _scan_stopped_halfway(P: Packing) -> Packing:
    """The packing of a greedy scan stopped after half of its candidates (a loop bound slip)."""
    return replace(P, points=greedy_packing(P.candidates[: P.candidates.shape[0] // 2], P.eps))


claim.fault("both constants divided by 4", breaks=lemma41_holds, apply=replaced(bound=_quartered))
claim.fault(
    "Maurey's k = ceil(2/eps^2)",
    breaks=lemma41_branches,
    apply=replaced(bound=lambda d, eps, ball: min(*_branches(d, eps)[:1], _maurey_k2(d, eps))),
)
claim.fault("a point kept twice", breaks=lemma41_separated, apply=mapped("packings", _point_twice))
claim.fault(
    "greedy scan stopped halfway",
    breaks=lemma41_maximal,
    apply=mapped("packings", _scan_stopped_halfway),
)
# the Maurey form with its constant 8 (maurey_simple_bound), which R^128 cannot beat
claim.fault(
    "the Maurey form with its constant 8",
    breaks=lemma41_sphere,
    apply=replaced(maurey_form=maurey_simple_bound),
)


claim.fault(
    "volume bound in log base 10",
    breaks=lemma41_pin,
    apply=replaced(volume=lambda d, eps: d * math.log10(1 + 2 / eps)),
)
claim.fault(
    "Maurey's binomial C(d + k, k) (d atoms, not 2d + 1)",
    breaks=lemma41_pin,
    apply=replaced(
        maurey=lambda d, eps: (
            0.0
            if eps >= 2
            else math.log(math.comb(d + math.ceil(4 / eps**2), math.ceil(4 / eps**2)))
        )
    ),
)


@claim.fault("counterexample from half its vectors", breaks=lemma41_counterexample)
def _counterexample_half(inp: Lemma41Inputs) -> Lemma41Inputs:
    """The counterexample's count from the first half of its vectors (a loop bound slip)."""
    S = inp.sphere
    return replace(inp, sphere_kept=greedy_packing(S.candidates[: SPHERE_M // 2], S.eps).shape[0])


@claim.fault("first violating dimension one late", breaks=lemma41_violation)
def _violation_one_late(inp: Lemma41Inputs) -> Lemma41Inputs:
    """The first violating dimension reported one too high (a search that stops one late)."""
    return replace(inp, violation=lambda eps: maurey_violation_dimension(eps) + 1)


@claim.fault("atoms counted as d, not 2d + 1", breaks=lemma41_simplified)
def _atoms_as_d(inp: Lemma41Inputs) -> Lemma41Inputs:
    """The simplified form counting d atoms, not the 2d + 1 of conv{+-e_i, 0}:
    (8 / eps^2) log d."""
    return replace(inp, simplified=lambda d, eps: 8.0 / eps**2 * math.log(d))
