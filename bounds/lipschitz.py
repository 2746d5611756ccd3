"""Lemma 42 (Bach 2017): the parameters and the certified sup-error of the two-layer ReLU nets
for an L-Lipschitz f on the radius-R ball of R^k, and the grid certificate.

``lemma42_net`` picks the interval count (k = 1) or the kernel degree, the split of the error
and the per-ridge interval counts (k >= 2) from eps, L and R, builds the net with
``qstr.constructions.lipschitz`` at them and returns it with its guarantee (``LipschitzNet``).
Every constant of docs/derivations/lemmas-39-41-42.md is computed here: the FK moments and the
smoothing error (steps 3-4), the ridge budget and interval counts (step 6), the error bound
(step 7) and the independent certificate (``certify_sup_error``, ``ball_grid``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch

from qstr.constructions import validate
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.lipschitz import (
    FourierRidges,
    fk_coefficients,
    fourier_ridges,
    interpolation_net,
    project_ball,
    ridge_net,
    scalar_values,
    weight_norms,
)

__all__ = [
    "RIDGE_FRACTION",
    "MAX_DEGREE",
    "LipschitzNet",
    "lemma42_net",
    "fk_moments",
    "smoothing_error_bound",
    "ridge_curvatures",
    "ridge_interval_counts",
    "net_lipschitz_bound",
    "ball_grid",
    "SupCertificate",
    "certify_sup_error",
]

#: Step 6: the ridges' share f of the error when a degree is given (eps_ridge = f/(1-f) eps_smooth).
RIDGE_FRACTION = 0.1
#: The largest kernel degree lemma42_net searches for an eps.
MAX_DEGREE = 4096


def _eps(eps) -> float:
    return validate.positive_float("eps", eps)


@dataclass(frozen=True, eq=False)
class LipschitzNet:
    """A two-layer ReLU net for an L-Lipschitz f on the radius-R ball of R^k and its guarantee
    (Lemma 42; docs/derivations/lemmas-39-41-42.md).

    ``error_bound`` is the a priori certified sup_{||x|| <= R} |f(x) - net(x)| (``smooth_error``
    + ``ridge_error`` for k >= 2; L h / 2 for k = 1); ``ridge_budget`` is the share of the error
    given to the ridge interpolation (eps_ridge >= ``ridge_error``, step 6; k = 1: the bound
    itself); ``ridges`` (k >= 2): (S_v, K_v) per ridge direction, the bound on |g_v''| and the
    interval count (step 6). ``width`` m, ``weight_norms``: ||a||, ||W||_F, ||b||,
    r_a = ||a|| sqrt(m), r_w = ||(W, b)||_F / sqrt(m), and the path norm
    sum_i |a_i| ||(w_i, b_i)|| (``qstr.constructions.lipschitz.weight_norms``).
    ``lipschitz_bound``: :func:`net_lipschitz_bound` of the net.
    """

    net: TwoLayerNet
    k: int
    R: float
    L: float
    error_bound: float
    smooth_error: float
    ridge_error: float
    width: int
    weight_norms: dict
    lipschitz_bound: float
    method: str
    degree: int = 0
    directions: int = 0
    ridge_budget: float = 0.0
    ridges: tuple = ()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """net(x) for x of shape (..., k)."""
        return self.net(x.unsqueeze(-2))


def fk_moments(n: int, k: int) -> Tuple[float, float]:
    """(m2, m4) = exact E[sigma^2], E[sigma^4] of sigma^2 = sum_i sin^2(theta_i/2) under the tensor
    FK weights of degree n in k coordinates (valid on any uniform grid with G >= n + 3 points;
    step 3 of docs/derivations/lemmas-39-41-42.md)."""
    n = validate.positive_int("n", n, minimum=1)
    k = validate.positive_int("k", k)
    c = fk_coefficients(n)
    c1, c2 = float(c[1]), float(c[2]) if n >= 2 else 0.0
    s2 = (1 - c1) / 2  # E sin^2(theta/2)
    s4 = (1.5 - 2 * c1 + 0.5 * c2) / 4  # E sin^4(theta/2)
    return k * s2, k * s4 + k * (k - 1) * s2 * s2


def smoothing_error_bound(n: int, k: int, L: float, R: float) -> float:
    """eps_smooth = L (2R/pi)(2 sqrt(m2) + (pi - 2) sqrt(m2 m4)): sup |F - T| for an L-Lipschitz,
    4R-periodic F and its discrete FK smoothing T of degree n
    (step 4 of docs/derivations/lemmas-39-41-42.md)."""
    L = validate.positive_float("L", L)
    R = validate.positive_float("R", R)
    m2, m4 = fk_moments(n, k)
    return L * (2 * R / math.pi) * (2 * math.sqrt(m2) + (math.pi - 2) * math.sqrt(m2 * m4))


def ridge_curvatures(ridges: FourierRidges) -> Tuple[float, ...]:
    """Lemma 42, step 5 (docs/derivations/lemmas-39-41-42.md): S_v = sum_m A (w0 m |v|)^2 >=
    sup |g_v''| per ridge, in the order of ``ridges.ridges``."""
    return tuple(
        sum(A * (ridges.w0 * m * r.norm) ** 2 for m, A, _ in r.terms) for r in ridges.ridges
    )


def ridge_interval_counts(
    S: Tuple[float, ...], eps_ridge: float, R: float
) -> Tuple[Tuple[int, ...], float]:
    """Lemma 42, step 6: K_v = ceil(2R / h_v), h_v = sqrt(8 eps_ridge S_v^(-2/3) / sum_u S_u^(1/3))
    (K_v = 1 where S_v = 0), and the ridges' certified interpolation error
    sum_v S_v (2R / K_v)^2 / 8 <= eps_ridge."""
    total_cuberoot = sum(s ** (1 / 3) for s in S if s > 0)
    counts, ridge_err = [], 0.0
    for s in S:
        if s > 0:
            h = math.sqrt(8 * eps_ridge * s ** (-2 / 3) / total_cuberoot)
            K = max(1, math.ceil(2 * R / h))
        else:
            K = 1
        h = 2 * R / K
        ridge_err += s * h * h / 8
        counts.append(K)
    return tuple(counts), ridge_err


def net_lipschitz_bound(net: TwoLayerNet, tol: float = 1e-9) -> float:
    """An upper bound on the Euclidean Lipschitz constant of x -> a^T relu(W x + b), rigorous
    (the certificate of docs/derivations/lemmas-39-41-42.md uses it).

    Hidden units are grouped by the line of their weight vector (w_i / ||w_i|| up to sign,
    compared to ``tol``); a group is a 1-D piecewise-linear function of <theta, x>, whose
    largest |slope| is computed exactly from its breakpoints; the bound is the sum over
    groups (triangle inequality). Units with w_i = 0 are constant and contribute nothing.
    """
    W, b, a = net.W.double(), net.b.double(), net.a.double()
    norms = W.norm(dim=1)
    live = norms > 0
    W, b, a, norms = W[live], b[live], a[live], norms[live]
    if W.shape[0] == 0:
        return 0.0
    dirs = W / norms[:, None]
    # canonical sign: first entry with |.| > tol positive
    first = (dirs.abs() > tol).to(torch.int64).argmax(dim=1)
    sign = torch.sign(dirs[torch.arange(dirs.shape[0]), first])
    dirs = dirs * sign[:, None]
    keys = torch.round(dirs / tol).to(torch.int64)
    _, group = torch.unique(keys, dim=0, return_inverse=True)
    total = 0.0
    for gidx in range(int(group.max()) + 1):
        sel = group == gidx
        slope = norms[sel] * sign[sel]  # unit i reads relu(slope_i s + b_i), s = <theta, x>
        bi, ai = b[sel], a[sel]
        brk = torch.sort(-bi / slope).values
        pts = torch.cat([brk[:1] - 1, (brk[1:] + brk[:-1]) / 2, brk[-1:] + 1])
        active = (slope[None, :] * pts[:, None] + bi[None, :]) > 0
        slopes = (active.to(torch.float64) * (ai * slope)[None, :]).sum(dim=1)
        total += float(slopes.abs().max())
    return total


def lemma42_net(
    f: Callable[[torch.Tensor], torch.Tensor],
    *,
    L: float,
    R: float,
    k: int,
    eps: Optional[float] = None,
    degree: Optional[int] = None,
    ridge_fraction: float = RIDGE_FRACTION,
    grid: Optional[int] = None,
) -> LipschitzNet:
    """Lemma 42: a two-layer ReLU net within a certified sup-error of f on {||x|| <= R} in R^k.

    ``f`` maps (..., k) float64 tensors to (...); it must be L-Lipschitz (Euclidean) on the
    ball -- the certificate relies on it. k = 1: give ``eps`` (target error; K = ceil(L R / eps)
    intervals) or ``degree`` = K; the net is the interpolant at K + 1 equally spaced knots
    (``qstr.constructions.lipschitz.interpolation_net``), error_bound = L h / 2 (<= eps),
    h = 2R / K. k >= 2: give ``degree`` n of the smoothing kernel (or ``eps``: the smallest n
    with eps_smooth <= (1 - ridge_fraction) eps); the ridge interpolation gets
    ridge_fraction * (total) of the error budget. ``grid`` (k >= 2): points per period and
    coordinate for the discrete convolution, default 2(n + 2) (>= n + 3 is required). The net:
    ``fourier_ridges`` at (n, grid), ``ridge_net`` at the interval counts of step 6
    (docs/derivations/lemmas-39-41-42.md).
    """
    L = validate.positive_float("L", L)
    R = validate.positive_float("R", R)
    k = validate.positive_int("k", k)
    if not callable(f):
        raise ValueError(f"f must be callable, got {type(f).__name__}")
    if k == 1:
        return _interpolation(f, L, R, eps, degree)
    ridge_fraction = validate.probability("ridge_fraction", ridge_fraction)
    if degree is None:
        if eps is None:
            raise ValueError("k >= 2 needs degree (kernel degree n) or eps (target sup-error)")
        eps = _eps(eps)
        n = 1
        while smoothing_error_bound(n, k, L, R) > (1 - ridge_fraction) * eps:
            n += 1
            if n > MAX_DEGREE:
                raise ValueError(f"eps = {eps} needs a kernel degree above {MAX_DEGREE}; raise eps")
    else:
        n = validate.positive_int("degree", degree)
    eps_s = smoothing_error_bound(n, k, L, R)
    eps_r = ridge_fraction / (1 - ridge_fraction) * eps_s if eps is None else max(eps - eps_s, 0.0)
    if eps_r <= 0:
        raise ValueError(
            f"eps = {eps} is below the smoothing error {eps_s:.3g} of degree {n}; "
            "raise degree or eps"
        )
    G = 2 * (n + 2) if grid is None else validate.positive_int("grid", grid)
    if G < n + 3:
        raise ValueError(f"grid must be >= degree + 3 = {n + 3} (exact kernel moments), got {G}")
    ridges = fourier_ridges(f, R=R, k=k, degree=n, grid=G)
    S = ridge_curvatures(ridges)
    counts, ridge_err = ridge_interval_counts(S, eps_r, R)
    net = ridge_net(ridges, counts)
    return LipschitzNet(
        net=net,
        k=k,
        R=R,
        L=L,
        error_bound=eps_s + ridge_err,
        smooth_error=eps_s,
        ridge_error=ridge_err,
        ridge_budget=eps_r,
        ridges=tuple(zip(S, counts, strict=True)),
        width=net.m,
        weight_norms=weight_norms(net),
        lipschitz_bound=net_lipschitz_bound(net),
        method="fourier-ridge",
        degree=n,
        directions=len(ridges.ridges),
    )


def _interpolation(f, L: float, R: float, eps, degree) -> LipschitzNet:
    """k = 1: K = ceil(L R / eps) intervals (or K = degree), error bound L h / 2, h = 2R / K."""
    if eps is None and degree is None:
        raise ValueError(
            "k = 1 needs eps (the target sup-error) or degree (the number of intervals K)"
        )
    K = (
        max(1, math.ceil(L * R / _eps(eps)))
        if eps is not None
        else validate.positive_int("degree", degree)
    )
    knots = torch.linspace(-R, R, K + 1, dtype=torch.float64)
    h = 2 * R / K
    net = interpolation_net(f, knots)
    err = L * h / 2
    return LipschitzNet(
        net=net,
        k=1,
        R=R,
        L=L,
        error_bound=err,
        smooth_error=0.0,
        ridge_error=err,
        ridge_budget=err,
        width=net.m,
        weight_norms=weight_norms(net),
        lipschitz_bound=net_lipschitz_bound(net),
        method="interpolation",
        degree=K,
        directions=1,
    )


def ball_grid(R: float, k: int, spacing: float) -> Tuple[torch.Tensor, float]:
    """Lemma 42's certificate grid: points of the lattice spacing * Z^k within spacing sqrt(k)/2 of
    the R-ball, projected onto the ball, and the covering radius rho = spacing sqrt(k) / 2: every
    point of the ball is within rho of one of them (projection onto the ball is 1-Lipschitz)."""
    R = validate.positive_float("R", R)
    k = validate.positive_int("k", k)
    spacing = validate.positive_float("spacing", spacing)
    rho = spacing * math.sqrt(k) / 2
    M = math.ceil((R + rho) / spacing)
    axis = spacing * torch.arange(-M, M + 1, dtype=torch.float64)
    pts = torch.stack(torch.meshgrid(*([axis] * k), indexing="ij"), dim=-1).reshape(-1, k)
    pts = pts[pts.norm(dim=1) <= R + rho]
    return project_ball(pts, R), rho


@dataclass(frozen=True)
class SupCertificate:
    """Lemma 42's certificate: sup_ball |f - net| lies in [lower, upper]: ``lower`` the largest
    error seen, ``upper`` = max on the grid + (L + Lip(net)) rho (rigorous)."""

    lower: float
    upper: float
    grid_max: float
    slack: float
    points: int


def certify_sup_error(
    f: Callable[[torch.Tensor], torch.Tensor],
    net: TwoLayerNet,
    *,
    L: float,
    R: float,
    k: int,
    spacing: float,
    chunk: int = 65536,
) -> SupCertificate:
    """Rigorous upper bound on sup_{||x|| <= R} |f(x) - net(x)| from a grid of ``spacing``
    (the independent certificate of docs/derivations/lemmas-39-41-42.md).

    |f - net| is (L + Lip(net))-Lipschitz on the ball and every ball point is within rho of a
    (projected) grid point, so sup <= max_grid |f - net| + (L + Lip(net)) rho.
    """
    L = validate.positive_float("L", L)
    pts, rho = ball_grid(R, k, spacing)
    pts = pts.to(net.W.device)  # the grid follows the net's device
    worst = 0.0
    for s in range(0, pts.shape[0], chunk):
        x = pts[s : s + chunk]
        err = (scalar_values(f, x, "f") - net(x.unsqueeze(-2))).abs()
        worst = max(worst, float(err.max()))
    slack = (L + net_lipschitz_bound(net)) * rho
    return SupCertificate(
        lower=worst, upper=worst + slack, grid_max=worst, slack=slack, points=int(pts.shape[0])
    )
