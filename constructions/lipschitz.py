"""Lemma 42 (Bach 2017): the weights of two-layer ReLU nets for Lipschitz functions, built from
given parameters (knots; kernel degree, grid and per-ridge interval counts).

The degree and interval counts that reach a sup-error eps, the error bounds and the grid
certificate are ``qstr.bounds.lipschitz`` (``lemma42_net``). Construction:
docs/derivations/lemmas-39-41-42.md (k = 1: interpolation; k >= 2: steps 1-7).
"""

from __future__ import annotations

import importlib
import math
import warnings
from dataclasses import dataclass
from typing import Callable, Tuple

import torch

from qstr.constructions import validate
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.relu import interpolant

__all__ = [
    "fk_coefficients",
    "interpolation_net",
    "Ridge",
    "FourierRidges",
    "fourier_ridges",
    "ridge_net",
    "weight_norms",
    "net_lipschitz_bound",  # noqa: F822 - deprecated alias (__getattr__): qstr.bounds.lipschitz
    "project_ball",
    "scalar_values",
]


def weight_norms(net: TwoLayerNet) -> dict:
    """The net's weight norms: ||a||, ||W||_F, ||b||, r_a = ||a|| sqrt(m),
    r_w = ||(W, b)||_F / sqrt(m), and the path norm sum_i |a_i| ||(w_i, b_i)||."""
    Wb = torch.cat([net.W, net.b[:, None]], dim=1)
    return {
        "a": float(net.a.norm()),
        "W": float(net.W.norm()),
        "b": float(net.b.norm()),
        "r_a": net.r_a,
        "r_w": net.r_w,
        "path": float((net.a.abs() * Wb.norm(dim=1)).sum()),
    }


def fk_coefficients(n: int) -> torch.Tensor:
    """Fourier coefficients c_0..c_n of the Fejér-Korovkin kernel of degree n (float64; step 2 of
    docs/derivations/lemmas-39-41-42.md).

    kappa(theta) = |sum_{j=0}^n a_j e^{i j theta}|^2 / sum_j a_j^2 with a_j = sin((j+1) pi/(n+2)),
    so kappa >= 0, c_0 = 1 (mean one) and c_m = sum_j a_j a_{j+m} / sum_j a_j^2;
    c_1 = cos(pi/(n+2)).
    """
    n = validate.positive_int("n", n, minimum=0)
    j = torch.arange(n + 1, dtype=torch.float64)
    a = torch.sin((j + 1) * math.pi / (n + 2))
    norm = float((a * a).sum())
    return torch.stack([(a[: n + 1 - m] * a[m:]).sum() / norm for m in range(n + 1)])


def _callable(f) -> None:
    if not callable(f):
        raise ValueError(f"f must be callable, got {type(f).__name__}")


def interpolation_net(
    f: Callable[[torch.Tensor], torch.Tensor], knots: torch.Tensor
) -> TwoLayerNet:
    """Lemma 42, k = 1: the piecewise-linear interpolant of f at ``knots`` as a two-layer net on
    R^1 (``qstr.constructions.relu.interpolant``; width len(knots) + 1, its last unit the
    constant relu(0 z + 1)). ``f`` maps (..., 1) float64 tensors to (...)."""
    _callable(f)
    net1d = interpolant(lambda z: scalar_values(f, z[:, None], "f"), knots)
    return TwoLayerNet(a=net1d.a, W=net1d.W, b=net1d.b)


def _fold(x: torch.Tensor, R: float) -> torch.Tensor:
    """Triangle wave of period 4R onto [-R, R] (identity on [-R, R]), coordinatewise,
    1-Lipschitz."""
    return R - (torch.remainder(x + R, 4 * R) - 2 * R).abs()


def project_ball(x: torch.Tensor, R: float) -> torch.Tensor:
    """The points x (..., k) projected onto the ball {||x|| <= R} (1-Lipschitz)."""
    nrm = x.norm(dim=-1, keepdim=True)
    return x * torch.clamp(R / nrm.clamp_min(1e-300), max=1.0)


def _primitive(v: tuple) -> tuple:
    g = 0
    for c in v:
        g = math.gcd(g, abs(c))
    w = tuple(c // g for c in v)
    first = next(c for c in w if c != 0)
    return w if first > 0 else tuple(-c for c in w)


@dataclass(frozen=True)
class Ridge:
    """One ridge g_v(s) = sum_m A cos(w0 m |v| s + phi) of the smoothing T (step 5):
    ``direction`` v (primitive integer vector, first nonzero entry positive), ``norm`` |v|,
    ``terms`` the (m, A, phi) with m >= 1."""

    direction: tuple
    norm: float
    terms: tuple


@dataclass(frozen=True)
class FourierRidges:
    """Lemma 42, steps 1-5 (docs/derivations/lemmas-39-41-42.md): the FK smoothing T of degree
    ``degree`` of f (periodic extension of period P = 4R, ``grid`` points per period and coordinate)
    as ``constant`` + sum of ``ridges``, with w0 = 2 pi / P."""

    k: int
    R: float
    degree: int
    grid: int
    w0: float
    constant: float
    ridges: Tuple[Ridge, ...]


def fourier_ridges(
    f: Callable[[torch.Tensor], torch.Tensor], *, R: float, k: int, degree: int, grid: int
) -> FourierRidges:
    """Lemma 42, k >= 2, steps 1-5: the discrete FK smoothing T of degree ``degree`` of the
    folded, ball-projected f on a grid of ``grid`` points per period and coordinate (FFT),
    grouped into one ridge per primitive frequency direction.

    ``f`` maps (..., k) float64 tensors to (...). The smoothing error bound (it needs
    grid >= degree + 3) is ``qstr.bounds.lipschitz.smoothing_error_bound``.
    """
    _callable(f)
    R = validate.positive_float("R", R)
    k = validate.positive_int("k", k)
    n = validate.positive_int("degree", degree)
    G = validate.positive_int("grid", grid)
    P = 4 * R
    # values of the periodic extension on the grid and their DFT
    axis = -2 * R + P * torch.arange(G, dtype=torch.float64) / G
    mesh = torch.stack(torch.meshgrid(*([axis] * k), indexing="ij"), dim=-1)  # (G,)*k + (k,)
    Fvals = scalar_values(f, project_ball(_fold(mesh, R), R), "f")
    Fhat = torch.fft.fftn(Fvals.to(torch.complex128)) / G**k  # index l <-> frequency l (mod G)
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
    return FourierRidges(
        k=k,
        R=R,
        degree=n,
        grid=G,
        w0=w0,
        constant=constant,
        ridges=tuple(
            Ridge(v, math.sqrt(sum(e * e for e in v)), tuple(terms)) for v, terms in ridges.items()
        ),
    )


def ridge_net(ridges: FourierRidges, counts: Tuple[int, ...]) -> TwoLayerNet:
    """Lemma 42, k >= 2, step 7: each ridge g_v interpolated at counts[v] + 1 equally spaced knots
    of [-R, R] and lifted to R^k (rows v / |v| and -v / |v|), the constants merged into one last
    unit relu(0 x + 1): width sum_v (K_v + 1) + 1."""
    if len(counts) != len(ridges.ridges):
        raise ValueError(
            f"counts must give one interval count per ridge ({len(ridges.ridges)}), "
            f"got {len(counts)}"
        )
    R, k = ridges.R, ridges.k
    parts, constant = [], ridges.constant
    for ridge, K in zip(ridges.ridges, counts, strict=True):
        K = validate.positive_int("K", K)
        knots = torch.linspace(-R, R, K + 1, dtype=torch.float64)
        net1d = interpolant(_ridge(ridge.terms, ridges.w0 * ridge.norm), knots)
        direction = torch.tensor(ridge.direction, dtype=torch.float64) / ridge.norm
        W, b, a, const = _lift(net1d, direction)
        parts.append((W, b, a))
        constant += const
    return _assemble(parts, constant, k)


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


def _frequencies(n: int, k: int):
    """All l in [-n, n]^k (as tuples)."""
    if k == 1:
        return [(e,) for e in range(-n, n + 1)]
    return [(e,) + rest for e in range(-n, n + 1) for rest in _frequencies(n, k - 1)]


def _mult(ell: tuple, v: tuple) -> int:
    """The signed integer m with ell = m v (v primitive)."""
    for e, c in zip(ell, v, strict=True):
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


def scalar_values(f, x: torch.Tensor, name: str = "f") -> torch.Tensor:
    """f(x) as float64 for x of shape (..., k), refused unless it has shape (...) and is
    finite."""
    y = f(x)
    if not isinstance(y, torch.Tensor) or tuple(y.shape) != tuple(x.shape[:-1]):
        got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(
            f"{name} must map (..., k) tensors to (...) tensors, "
            f"got {got} for input {tuple(x.shape)}"
        )
    validate.finite_tensor(f"{name}(x)", y)
    return y.to(torch.float64)


# Names that moved to qstr.bounds (issue 56): the old import path still works, with a
# DeprecationWarning, and loads qstr.bounds only when the name is asked for.
_MOVED_TO_BOUNDS = {
    "net_lipschitz_bound": "qstr.bounds.lipschitz",  # now lives in qstr.bounds.lipschitz
}


def __getattr__(name: str):
    """The deprecated path of a name that moved to ``qstr.bounds`` (PEP 562)."""
    if name not in _MOVED_TO_BOUNDS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home = _MOVED_TO_BOUNDS[name]
    warnings.warn(
        f"{__name__}.{name} moved to {home}.{name}; import it from there",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)
