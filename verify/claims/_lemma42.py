"""Lemma 42's second code paths for verify/claims/lemma_42.py (docs/derivations/lemmas-39-41-42.md):
the smoothing T by discrete convolution and the kernel moments summed over a grid (float64), and
its constants written in mpmath apart from qstr.bounds.lipschitz and qstr.constructions.lipschitz
(the pins): the FK coefficients and moments (steps 2-3), eps_smooth (step 4), the ridge
curvatures (step 5), the interval counts and ridge error (step 6) and the net's guarantee
(step 7; k = 1: interpolation). Call the ``_mp`` functions inside ``mpmath.workdps``. And
the claim's inputs: its cases (``LipschitzCase``, ``Lemma42Inputs``) and the functions and
starting points they are built from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import math

import mpmath as mp
import torch

from qstr.bounds.lipschitz import LipschitzNet, ball_grid, fk_moments, net_lipschitz_bound
from qstr.bounds.lipschitz import ridge_curvatures, ridge_interval_counts, smoothing_error_bound
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.lipschitz import FourierRidges, fk_coefficients, fourier_ridges
from qstr.verify.claim import Context, Verdict, at_most
from qstr.verify.rounding import Rounding, two_layer

DPS = 40
# float64 constants (sums of <= 320 terms, roots, powers) against 40 digits: measured gaps up to
# 2e-13 (the FK coefficients' float sums at n = 16); 1e-12 leaves room for that rounding, not for
# a slipped constant or power (those move the values by 1e-2 or more)
RTOL = 1e-12
# the ridges' share f of the error when a degree is given (step 6), restated from the derivation
RIDGE_FRACTION = mp.mpf(1) / 10


def fk_coefficients_mp(n: int) -> List:
    """c_0..c_n of the Fejer-Korovkin kernel: c_m = sum_j a_j a_{j+m} / sum_j a_j^2,
    a_j = sin((j + 1) pi / (n + 2)), j = 0..n (step 2)."""
    a = [mp.sin((j + 1) * mp.pi / (n + 2)) for j in range(n + 1)]
    norm = mp.fsum(x * x for x in a)
    return [mp.fsum(a[j] * a[j + m] for j in range(n + 1 - m)) / norm for m in range(n + 1)]


def moments_mp(n: int, k: int) -> Tuple:
    """(m2, m4) = E sigma^2, E sigma^4 of sigma^2 = sum_i sin^2(theta_i / 2) under the tensor FK
    weights (step 3): m2 = k (1 - c1)/2, m4 = k (3/2 - 2 c1 + c2/2)/4 + k (k - 1) ((1 - c1)/2)^2."""
    c = fk_coefficients_mp(n) + [mp.mpf(0)]  # c_2 = 0 for n = 1
    s2 = (1 - c[1]) / 2
    s4 = (mp.mpf(3) / 2 - 2 * c[1] + c[2] / 2) / 4
    return k * s2, k * s4 + k * (k - 1) * s2 * s2


def smoothing_mp(n: int, k: int, L: float, R: float):
    """eps_smooth = L (2R/pi) (2 sqrt(m2) + (pi - 2) sqrt(m2 m4)) (step 4)."""
    m2, m4 = moments_mp(n, k)
    return mp.mpf(L) * (2 * mp.mpf(R) / mp.pi) * (2 * mp.sqrt(m2) + (mp.pi - 2) * mp.sqrt(m2 * m4))


def curvature_mp(direction: Sequence[int], terms, R: float):
    """S_v = sum_m A_m (w0 m |v|)^2 >= sup |g_v''|, w0 = 2 pi / (4R), |v| from the integer
    direction (step 5)."""
    w0 = 2 * mp.pi / (4 * mp.mpf(R))
    v2 = sum(int(e) * int(e) for e in direction)
    return mp.fsum(mp.mpf(A) * (w0 * m) ** 2 * v2 for m, A, _ in terms)


def interval_counts_mp(S: Sequence[float], eps_ridge: float, R: float) -> Tuple[List[int], object]:
    """K_v = max(1, ceil(2R / h_v)), h_v = sqrt(8 eps_ridge / (S_v^(2/3) sum_u S_u^(1/3))), 1 where
    S_v = 0, and the certified ridge error sum_v S_v (2R / K_v)^2 / 8 (step 6)."""
    S = [mp.mpf(s) for s in S]
    total = mp.fsum(mp.cbrt(s) for s in S if s > 0)
    counts = []
    for s in S:
        if s > 0:
            h = mp.sqrt(8 * mp.mpf(eps_ridge) / (mp.cbrt(s) ** 2 * total))
            counts.append(max(1, int(mp.ceil(2 * mp.mpf(R) / h))))
        else:
            counts.append(1)
    err = mp.fsum(s * (2 * mp.mpf(R) / K) ** 2 / 8 for s, K in zip(S, counts, strict=True))
    return counts, err


def guarantee_mp(k: int, L: float, R: float, eps: Optional[float], degree: int, S=None) -> dict:
    """What lemma42_net's record must hold (step 7): k = 1: K = ceil(L R / eps) (or the degree),
    error L h / 2, h = 2R / K; k >= 2: the degree (given, or the least n with eps_smooth <=
    (1 - f) eps), eps_smooth, eps_ridge = f / (1 - f) eps_smooth or eps - eps_smooth, the counts
    of step 6 on the curvatures S, the ridge error and their sum."""
    L_, R_ = mp.mpf(L), mp.mpf(R)
    if k == 1:
        K = degree if eps is None else max(1, int(mp.ceil(L_ * R_ / mp.mpf(eps))))
        err = L_ * (2 * R_ / K) / 2
        return dict(degree=K, smooth=mp.mpf(0), budget=err, ridge=err, bound=err, counts=None)
    n = degree
    if eps is not None:
        n = 1
        while smoothing_mp(n, k, L, R) > (1 - RIDGE_FRACTION) * mp.mpf(eps):
            n += 1
    smooth = smoothing_mp(n, k, L, R)
    f = RIDGE_FRACTION
    budget = f / (1 - f) * smooth if eps is None else mp.mpf(eps) - smooth
    counts, ridge = interval_counts_mp(S, float(budget), R) if S is not None else (None, None)
    bound = smooth + ridge if ridge is not None else None
    return dict(degree=n, smooth=smooth, budget=budget, ridge=ridge, bound=bound, counts=counts)


def rel(got: float, want) -> float:
    """|got - want| / |want| in mpmath, as a float (0 when both are 0)."""
    if want == 0:
        return 0.0 if got == 0 else float("inf")
    return float(abs(mp.mpf(got) - want) / abs(want))


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


def grid_moments(n: int, k: int) -> Tuple[float, float]:
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


# ---------------------------------------------------------------- the pins' and record's cases
def fk_points(inp, cases) -> list:
    """(n, k, L, R) of the pin: the (n, k) ``cases`` and n = 1, 2 at L = R = 1 and (3, 2), and
    every k >= 2 net's own."""
    nk = sorted({*cases, (1, 2), (2, 2)})
    own = {(c.built.degree, c.built.k, c.built.L, c.built.R) for c in inp.cases if c.built.k >= 2}
    return sorted({(n, k, L, R) for n, k in nk for L, R in ((1.0, 1.0), (3.0, 2.0))} | own)


def ridge_pin(c, inp) -> Verdict:
    """ridge_curvatures on the case's ridges and ridge_interval_counts at its budget against steps
    5-6 at 40 digits: counts that differ, plus the largest relative gap of S_v and the error."""
    b, fr = c.built, c.fourier
    S = inp.curvatures(fr)
    S_mp = [curvature_mp(r.direction, r.terms, b.R) for r in fr.ridges]
    counts, err = inp.counts(S, b.ridge_budget, b.R)
    counts_mp, err_mp = interval_counts_mp(S_mp, b.ridge_budget, b.R)
    off = sum(K != K_mp for K, K_mp in zip(counts, counts_mp, strict=True))
    gap = max(rel(err, err_mp), *(rel(s, w) for s, w in zip(S, S_mp, strict=True) if w > 0))
    detail = f"{len(S)} ridges, {off} counts off, largest relative gap {gap:.2g}"
    return at_most(off + gap, RTOL, detail=detail)


def guarantee_gap(c, inp) -> Verdict:
    """The record's degree, counts, eps_smooth, eps_ridge, ridge error and error bound against
    step 7 at 40 digits (the curvatures from the case's ridges, in mpmath)."""
    b = c.built
    S = [curvature_mp(r.direction, r.terms, b.R) for r in c.fourier.ridges] if c.fourier else None
    g = guarantee_mp(b.k, b.L, b.R, c.eps, b.degree, S)
    off = int(b.degree != g["degree"])
    pairs = [
        (b.ridge_budget, g["budget"]),
        (b.ridge_error, g["ridge"]),
        (b.error_bound, g["bound"]),
    ]
    if b.k >= 2:
        off += sum(K != Kg for (_, K), Kg in zip(b.ridges, g["counts"], strict=True))
        pairs.append((b.smooth_error, g["smooth"]))
    gap = max(rel(x, w) for x, w in pairs)
    detail = (
        f"degree {b.degree} vs {g['degree']}, bound {b.error_bound:.6g} vs {float(g['bound']):.6g}"
    )
    return at_most(off + gap, RTOL, detail=detail)


def blocks_off(W: torch.Tensor, ridges) -> float:
    """How far the net's rows are from the record's K_v: per ridge a block of K_v + 1 rows along one
    line (+-v/|v|); the largest 1 - |cos| inside a block, 1 per row unaccounted for."""
    rows, start, worst_cos = W / W.norm(dim=1, keepdim=True).clamp_min(1e-300), 0, 0.0
    for _, K in ridges:
        block = rows[start : start + K + 1]
        worst_cos = max(worst_cos, float((1 - (block @ block[0]).abs()).max()))
        start += K + 1
    return worst_cos + abs(W.shape[0] - 1 - start)


def record_gap(c, inp) -> Verdict:
    """The record's width, weight norms, Lipschitz bound and interval counts against the built
    net's weights, read here: units off plus the largest relative gap."""
    b, net = c.built, c.built.net
    a, W, bias = net.a.detach(), net.W.detach(), net.b.detach()
    m, Wb = W.shape[0], torch.cat([W, bias[:, None]], 1)
    norms = dict(a=a.norm(), W=W.norm(), b=bias.norm(), r_a=a.norm() * math.sqrt(m))
    norms.update(r_w=Wb.norm() / math.sqrt(m), path=(a.abs() * Wb.norm(dim=1)).sum())
    gap = max(abs(b.weight_norms[k] - float(v)) / max(float(v), 1e-300) for k, v in norms.items())
    gap = max(gap, abs(b.lipschitz_bound - inp.lipschitz(net)) / inp.lipschitz(net))
    off = abs(b.width - m) + (blocks_off(W, b.ridges) if b.k >= 2 else abs(b.degree + 2 - m))
    detail = f"width {b.width} vs {m}, r_w {b.weight_norms['r_w']:.6g} vs {float(norms['r_w']):.6g}"
    return at_most(off + gap, RTOL, detail=detail)


# ---------------------------------------------------------------- probes and slipped functions
def sphere_probes(ctx, k: int) -> torch.Tensor:
    """2048 points uniform in the unit ball of R^k, then 2048 on its sphere."""
    g = ctx.generator("lemma-42/probes", k)
    x = torch.randn(4096, k, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True)
    x[:2048] *= torch.rand(2048, 1, generator=g, dtype=torch.float64) ** (1 / k)
    return x


def smoothing_pi_minus_1(n: int, k: int, L: float, R: float) -> float:
    """eps_smooth with (pi - 1) in place of (pi - 2) (the arcsine constant misread)."""
    m2, m4 = fk_moments(n, k)
    return L * (2 * R / math.pi) * (2 * math.sqrt(m2) + (math.pi - 1) * math.sqrt(m2 * m4))


def counts_h2_over_4(S, eps_ridge: float, R: float):
    """Step 6 with the interpolation constant 4 in place of 8 (h^2/4 read for h^2/8)."""
    return ridge_interval_counts(S, eps_ridge / 2, R)


def curvatures_without_v(fr) -> tuple:
    """Step 5 with |v|^2 lost: S_v = sum_m A (w0 m)^2 (a fault of the pin)."""
    return tuple(sum(A * (fr.w0 * m) ** 2 for m, A, _ in r.terms) for r in fr.ridges)


# ---------------------------------------------------------------- the claim's inputs
@dataclass(frozen=True)
class LipschitzCase:
    """An L-Lipschitz ``f`` on the R-ball of R^k, the net built for it, and how it is probed."""

    name: str
    f: Callable[[torch.Tensor], torch.Tensor]
    L: float  # f's Lipschitz constant: the certificate's slack uses it
    built: LipschitzNet
    eps: Optional[float]  # the sup-error asked for (None: built for a degree)
    starts: torch.Tensor  # (64, 1, k) starting points of the adversarial search
    cert_R: float  # the radius certify_sup_error is run on (the net's R)
    rounding: Rounding  # the net's rounding term on the ball
    fourier: Optional[FourierRidges] = None  # k >= 2: steps 1-5 recomputed, the pins' ridges

    def __str__(self) -> str:
        b = self.built
        return f"{self.name} (k={b.k}, L={self.L:.3g}, R={b.R:.3g}, {b.method} n={b.degree})"


@dataclass(frozen=True)
class Lemma42Inputs:
    """Lemma 42's nets with their functions; the kernel moments, smoothing bound and grid that its
    certificate rests on (docs/derivations/lemmas-39-41-42.md)."""

    cases: Tuple[LipschitzCase, ...]
    probes: Tuple[torch.Tensor, ...]  # per k = 1, 2: 4096 points of the unit ball and sphere
    steps: int  # projected-Adam steps of the adversarial search
    moments: Callable[[int, int], Tuple[float, float]] = fk_moments  # (n, k) -> (m2, m4)
    curvatures: Callable[[FourierRidges], Tuple[float, ...]] = ridge_curvatures  # step 5
    counts: Callable = ridge_interval_counts  # step 6: (S, eps_ridge, R) -> (K_v, ridge error)
    smoothing: Callable[[int, int, float, float], float] = smoothing_error_bound  # (n, k, L, R)
    grid: Callable[[float, int, float], Tuple[torch.Tensor, float]] = ball_grid  # (R, k, spacing)
    lipschitz: Callable[[TwoLayerNet], float] = net_lipschitz_bound  # the certificate's Lip(net)


def _starts(ctx: Context, i: int, k: int, R: float) -> torch.Tensor:
    g = ctx.generator("lemma-42/starts", i, device=ctx.device)
    kw = dict(generator=g, dtype=torch.float64, device=ctx.device)
    x0 = torch.randn(64, 1, k, **kw)
    return x0 / x0.norm(dim=-1, keepdim=True) * R * torch.rand(64, 1, 1, **kw)


def _functions(ctx: Context):
    """(name, f, L, R, k, build arguments): 1-D and 2-D Lipschitz functions, Lemma 22's product."""
    deg, r2 = dict(degree=ctx.pick(quick=8, full=16)), math.sqrt(2)
    return [
        ("sin(3x)", lambda x: torch.sin(3 * x[..., 0]), 3.0, 1.0, 1, dict(eps=0.05)),
        ("|x - 1/3| - 1/2", lambda x: (x[..., 0] - 1 / 3).abs() - 0.5, 1.0, 2.0, 1, dict(eps=0.01)),
        ("xy on the sqrt2-ball (Lemma 22)", lambda x: x[..., 0] * x[..., 1], r2, r2, 2, deg),
        ("||x||", lambda x: x.norm(dim=-1), 1.0, 1.0, 2, deg),
        ("||x|| to eps 0.6", lambda x: x.norm(dim=-1), 1.0, 1.0, 2, dict(eps=0.6)),
        ("sin x1 + cos 2x2", _sin_cos, math.sqrt(5), 1.0, 2, deg),
    ]


def _sin_cos(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x[..., 0]) + torch.cos(2 * x[..., 1])


def _case(ctx: Context, name: str, f, L: float, b: LipschitzNet, eps, starts) -> LipschitzCase:
    """The case with its certificate, certify_sup_error on ctx.device (grid + (L + Lip(net)) rho),
    and the net's rounding term on the ball (its corners bound |x|)."""
    net = b.net.to(device=ctx.device)
    corners = b.R * torch.ones(1, b.k, dtype=torch.float64, device=ctx.device)
    what = "(k + width + 2) eps max|a|(|W| R + |b|)"
    rnd = two_layer(net.W, net.b, net.a[None, :], corners, what=what)
    fourier = None
    if b.method == "fourier-ridge":  # the builder's steps 1-5 at its own degree and grid
        fourier = fourier_ridges(f, R=b.R, k=b.k, degree=b.degree, grid=2 * (b.degree + 2))
    return LipschitzCase(name, f, L, b, eps, starts, b.R, rnd, fourier)
