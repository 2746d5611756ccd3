"""Lemma 42 (Bach 2017): two-layer ReLU nets for Lipschitz functions, with a certified sup-error.

Construction and certificate: docs/derivations/lemmas-39-41-42.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch

from qstr.constructions import validate
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.relu import interpolant

__all__ = [
    "LipschitzNet", "lipschitz_net", "fk_coefficients", "fk_moments", "smoothing_error_bound",
    "net_lipschitz_bound", "ball_grid", "SupCertificate", "certify_sup_error",
]


def _eps(eps) -> float:
    return validate.positive_float("eps", eps)


@dataclass(frozen=True, eq=False)
class LipschitzNet:
    """A two-layer ReLU net for an L-Lipschitz f on the radius-R ball of R^k and its certificate.

    ``error_bound`` is the a priori certified sup_{||x|| <= R} |f(x) - net(x)| (``smooth_error``
    + ``ridge_error`` for k >= 2; L h / 2 for k = 1); ``ridge_budget`` is the share of the error
    given to the ridge interpolation (eps_ridge >= ``ridge_error``,
    docs/derivations/lemmas-39-41-42.md step 6; k = 1: the bound itself); ``ridges`` (k >= 2):
    (S_v, K_v) per ridge direction, the bound on |g_v''| and the interval count (step 6).
    ``width`` m, ``weight_norms``: ||a||,
    ||W||_F, ||b||, r_a = ||a|| sqrt(m), r_w = ||(W, b)||_F / sqrt(m), and the path norm
    sum_i |a_i| ||(w_i, b_i)||. ``lipschitz_bound``: :func:`net_lipschitz_bound` of the net.
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


def _weight_norms(net: TwoLayerNet) -> dict:
    Wb = torch.cat([net.W, net.b[:, None]], dim=1)
    return {
        "a": float(net.a.norm()), "W": float(net.W.norm()), "b": float(net.b.norm()),
        "r_a": net.r_a, "r_w": net.r_w, "path": float((net.a.abs() * Wb.norm(dim=1)).sum()),
    }


def fk_coefficients(n: int) -> torch.Tensor:
    """Fourier coefficients c_0..c_n of the Fejér-Korovkin kernel of degree n (float64).

    kappa(theta) = |sum_{j=0}^n a_j e^{i j theta}|^2 / sum_j a_j^2 with a_j = sin((j+1) pi/(n+2)),
    so kappa >= 0, c_0 = 1 (mean one) and c_m = sum_j a_j a_{j+m} / sum_j a_j^2;
    c_1 = cos(pi/(n+2)).
    """
    n = validate.positive_int("n", n, minimum=0)
    j = torch.arange(n + 1, dtype=torch.float64)
    a = torch.sin((j + 1) * math.pi / (n + 2))
    norm = float((a * a).sum())
    return torch.stack([(a[: n + 1 - m] * a[m:]).sum() / norm for m in range(n + 1)])


def fk_moments(n: int, k: int) -> Tuple[float, float]:
    """(m2, m4) = exact E[sigma^2], E[sigma^4] of sigma^2 = sum_i sin^2(theta_i/2) under the tensor
    FK weights of degree n in k coordinates (valid on any uniform grid with G >= n + 3 points)."""
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
    (docs/derivations/lemmas-39-41-42.md)."""
    L = validate.positive_float("L", L)
    R = validate.positive_float("R", R)
    m2, m4 = fk_moments(n, k)
    return L * (2 * R / math.pi) * (2 * math.sqrt(m2) + (math.pi - 2) * math.sqrt(m2 * m4))


def _fold(x: torch.Tensor, R: float) -> torch.Tensor:
    """Triangle wave of period 4R onto [-R, R] (identity on [-R, R]), coordinatewise,
    1-Lipschitz."""
    return R - (torch.remainder(x + R, 4 * R) - 2 * R).abs()


def _project_ball(x: torch.Tensor, R: float) -> torch.Tensor:
    nrm = x.norm(dim=-1, keepdim=True)
    return x * torch.clamp(R / nrm.clamp_min(1e-300), max=1.0)


def _primitive(v: tuple) -> tuple:
    g = 0
    for c in v:
        g = math.gcd(g, abs(c))
    w = tuple(c // g for c in v)
    first = next(c for c in w if c != 0)
    return w if first > 0 else tuple(-c for c in w)


def _lift(
    net1d: TwoLayerNet, direction: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """A 1-D interpolant net (its last unit is the constant relu(0 z + 1)) as units on R^k reading
    <direction, x>; returns (W, b, a) without the constant unit, and the constant."""
    W = net1d.W[:-1] * direction[None, :]
    return W, net1d.b[:-1], net1d.a[:-1], float(net1d.a[-1])


def _assemble(parts, constant: float, k: int) -> TwoLayerNet:
    Ws = [p[0] for p in parts] + [torch.zeros(1, k, dtype=torch.float64)]
    bs = [p[1] for p in parts] + [torch.ones(1, dtype=torch.float64)]
    as_ = [p[2] for p in parts] + [torch.tensor([constant], dtype=torch.float64)]
    return TwoLayerNet(a=torch.cat(as_), W=torch.cat(Ws), b=torch.cat(bs))


def lipschitz_net(
    f: Callable[[torch.Tensor], torch.Tensor],
    *,
    L: float,
    R: float,
    k: int,
    eps: Optional[float] = None,
    degree: Optional[int] = None,
    ridge_fraction: float = 0.1,
    grid: Optional[int] = None,
) -> LipschitzNet:
    """Lemma 42: a two-layer ReLU net within a certified sup-error of f on {||x|| <= R} in R^k.

    ``f`` maps (..., k) float64 tensors to (...); it must be L-Lipschitz (Euclidean) on the
    ball -- the certificate relies on it. k = 1: give ``eps`` (target error; K = ceil(L R / eps)
    intervals) or ``degree`` = K; the net is the interpolant at K + 1 equally spaced knots,
    error_bound = L h / 2 (<= eps), h = 2R / K. k >= 2: give
    ``degree`` n of the smoothing kernel (or ``eps``: the smallest n with
    eps_smooth <= (1 - ridge_fraction) eps); the ridge interpolation gets
    ridge_fraction * (total) of the error budget. ``grid`` (k >= 2): points per period and
    coordinate for the discrete convolution, default 2(n + 2) (>= n + 3 is required).
    """
    L = validate.positive_float("L", L)
    R = validate.positive_float("R", R)
    k = validate.positive_int("k", k)
    if not callable(f):
        raise ValueError(f"f must be callable, got {type(f).__name__}")
    if k == 1:
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
        net1d = interpolant(lambda z: _scalar(f, z[:, None], "f"), knots)
        net = TwoLayerNet(a=net1d.a, W=net1d.W, b=net1d.b)
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
            weight_norms=_weight_norms(net),
            lipschitz_bound=net_lipschitz_bound(net),
            method="interpolation",
            degree=K,
            directions=1,
        )
    ridge_fraction = validate.probability("ridge_fraction", ridge_fraction)
    if degree is None:
        if eps is None:
            raise ValueError("k >= 2 needs degree (kernel degree n) or eps (target sup-error)")
        eps = _eps(eps)
        n = 1
        while smoothing_error_bound(n, k, L, R) > (1 - ridge_fraction) * eps:
            n += 1
            if n > 4096:
                raise ValueError(f"eps = {eps} needs a kernel degree above 4096; raise eps")
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
    P = 4 * R
    # values of the periodic extension on the grid and their DFT
    axis = -2 * R + P * torch.arange(G, dtype=torch.float64) / G
    mesh = torch.stack(torch.meshgrid(*([axis] * k), indexing="ij"), dim=-1)  # (G,)*k + (k,)
    Fvals = _scalar(f, _project_ball(_fold(mesh, R), R), "f")
    Fhat = torch.fft.fftn(Fvals.to(torch.complex128)) / G ** k  # index l <-> frequency l (mod G)
    # the grid starts at y_0 = -2R: F_hat_l = fft[l mod G] / G^k * e^{i w0 2R sum(l)}, w0 2R = pi
    c = fk_coefficients(n)
    w0 = 2 * math.pi / P
    coeff = {}
    for ell in _frequencies(n, k):
        idx = tuple(e % G for e in ell)
        val = Fhat[idx] * complex(math.cos(w0 * 2 * R * sum(ell)), math.sin(w0 * 2 * R * sum(ell)))
        ck = 1.0
        for e in ell:
            ck *= float(c[abs(e)])
        coeff[ell] = ck * complex(val)
    constant = coeff.pop(tuple([0] * k)).real
    # group the half-space frequencies by primitive direction:
    # ridge g_v(s) = sum_m A cos(w0 m |v| s + phi)
    ridges = {}
    for ell, z in coeff.items():
        v = _primitive(ell)  # first nonzero entry positive
        m = _mult(ell, v)
        if m < 0:
            continue  # the pair (ell, -ell) is one real cosine, carried by m > 0
        ridges.setdefault(v, []).append((m, 2 * abs(z), math.atan2(z.imag, z.real)))
    S = {}
    for v, terms in ridges.items():
        nv = math.sqrt(sum(e * e for e in v))
        S[v] = sum(A * (w0 * m * nv) ** 2 for m, A, _ in terms)
    total_cuberoot = sum(s ** (1 / 3) for s in S.values() if s > 0)
    parts, ridge_err, counts = [], 0.0, []
    for v, terms in ridges.items():
        nv = math.sqrt(sum(e * e for e in v))
        if S[v] > 0:
            h = math.sqrt(8 * eps_r * S[v] ** (-2 / 3) / total_cuberoot)
            K = max(1, math.ceil(2 * R / h))
        else:
            K = 1
        h = 2 * R / K
        ridge_err += S[v] * h * h / 8
        counts.append((S[v], K))
        knots = torch.linspace(-R, R, K + 1, dtype=torch.float64)
        net1d = interpolant(_ridge(terms, w0 * nv), knots)
        direction = torch.tensor(v, dtype=torch.float64) / nv
        W, b, a, const = _lift(net1d, direction)
        parts.append((W, b, a))
        constant += const
    net = _assemble(parts, constant, k)
    return LipschitzNet(
        net=net,
        k=k,
        R=R,
        L=L,
        error_bound=eps_s + ridge_err,
        smooth_error=eps_s,
        ridge_error=ridge_err,
        ridge_budget=eps_r,
        ridges=tuple(counts),
        width=net.m,
        weight_norms=_weight_norms(net),
        lipschitz_bound=net_lipschitz_bound(net),
        method="fourier-ridge",
        degree=n,
        directions=len(ridges),
    )


def _frequencies(n: int, k: int):
    """All l in [-n, n]^k (as tuples)."""
    if k == 1:
        return [(e,) for e in range(-n, n + 1)]
    return [(e,) + rest for e in range(-n, n + 1) for rest in _frequencies(n, k - 1)]


def _mult(ell: tuple, v: tuple) -> int:
    """The signed integer m with ell = m v (v primitive)."""
    for e, c in zip(ell, v):
        if c != 0:
            return e // c
    return 0


def _ridge(terms, scale: float):
    def g(s: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(s)
        for m, A, phi in terms:
            out = out + A * torch.cos(scale * m * s + phi)
        return out

    return g


def _scalar(f, x: torch.Tensor, name: str) -> torch.Tensor:
    y = f(x)
    if not isinstance(y, torch.Tensor) or tuple(y.shape) != tuple(x.shape[:-1]):
        got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(
            f"{name} must map (..., k) tensors to (...) tensors, "
            f"got {got} for input {tuple(x.shape)}"
        )
    validate.finite_tensor(f"{name}(x)", y)
    return y.to(torch.float64)


def net_lipschitz_bound(net: TwoLayerNet, tol: float = 1e-9) -> float:
    """An upper bound on the Euclidean Lipschitz constant of x -> a^T relu(W x + b), rigorous.

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
        slope = (norms[sel] * sign[sel])  # unit i reads relu(slope_i s + b_i), s = <theta, x>
        bi, ai = b[sel], a[sel]
        brk = torch.sort(-bi / slope).values
        pts = torch.cat([brk[:1] - 1, (brk[1:] + brk[:-1]) / 2, brk[-1:] + 1])
        active = (slope[None, :] * pts[:, None] + bi[None, :]) > 0
        slopes = (active.to(torch.float64) * (ai * slope)[None, :]).sum(dim=1)
        total += float(slopes.abs().max())
    return total


def ball_grid(R: float, k: int, spacing: float) -> Tuple[torch.Tensor, float]:
    """Points of the lattice spacing * Z^k within spacing * sqrt(k)/2 of the R-ball, projected onto
    the ball, and the covering radius rho = spacing sqrt(k) / 2: every point of the ball is
    within rho of one of them (projection onto the ball is 1-Lipschitz)."""
    R = validate.positive_float("R", R)
    k = validate.positive_int("k", k)
    spacing = validate.positive_float("spacing", spacing)
    rho = spacing * math.sqrt(k) / 2
    M = math.ceil((R + rho) / spacing)
    axis = spacing * torch.arange(-M, M + 1, dtype=torch.float64)
    pts = torch.stack(torch.meshgrid(*([axis] * k), indexing="ij"), dim=-1).reshape(-1, k)
    pts = pts[pts.norm(dim=1) <= R + rho]
    return _project_ball(pts, R), rho


@dataclass(frozen=True)
class SupCertificate:
    """sup_ball |f - net| lies in [lower, upper]: ``lower`` the largest error seen, ``upper``
    = max on the grid + (L + Lip(net)) rho (rigorous)."""

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
    """Rigorous upper bound on sup_{||x|| <= R} |f(x) - net(x)| from a grid of ``spacing``.

    |f - net| is (L + Lip(net))-Lipschitz on the ball and every ball point is within rho of a
    (projected) grid point, so sup <= max_grid |f - net| + (L + Lip(net)) rho.
    """
    L = validate.positive_float("L", L)
    pts, rho = ball_grid(R, k, spacing)
    pts = pts.to(net.W.device)  # the grid follows the net's device
    worst = 0.0
    for s in range(0, pts.shape[0], chunk):
        x = pts[s:s + chunk]
        err = (_scalar(f, x, "f") - net(x.unsqueeze(-2))).abs()
        worst = max(worst, float(err.max()))
    slack = (L + net_lipschitz_bound(net)) * rho
    return SupCertificate(
        lower=worst, upper=worst + slack, grid_max=worst, slack=slack, points=int(pts.shape[0])
    )
