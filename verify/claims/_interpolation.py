"""What the interpolation and RNN lower-bound claims share (Lemma 36, Prop 8, Theorem 9;
docs/derivations/interpolation.md and docs/derivations/rnn-lower-bounds.md): the general-1STR
prompts, the codes, Lemma 36's constants, the norm-check pieces, and Prop 8's bound functions
with their derivation written out again (the faults' slips)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import mpmath
import torch

from qstr.bounds.recurrent import generalising_log_norm2, prop8_log_norm_lower_bound
from qstr.bounds.recurrent import prop8_norm_lower_bound_paper, prop8_packing
from qstr.bounds.recurrent import prop8_width_lower_bound
from qstr.constructions.codes import build_codebook
from qstr.verify.rounding import Rounding

L36_D = 3  # token dimension of the memorisers' prompts
K_Y = 6.0  # ||y||^2 <= K_y n: the label hypothesis of Lemma 36's C n^3
C36_DERIVED = 2.0 * math.sqrt(144.0 / math.pi * (5.0 + math.pi / 72.0))  # interpolation.md
P8_C = 0.05  # risk level c of Prop 35 (Prop 8's packing and Theorem 9's requirement)
P8_K = 2.0  # good prompts: conditional error <= K c
P8_GAMMA = 0.5  # answer vectors separated by sqrt(2 (1 - gamma) (N-1) / N)
ROOT2 = math.sqrt(2.0)


def prompts(n: int, N: int, g: torch.Generator, device):
    """General 1STR (q = 1) training prompts in float64: x (n, N, d), t (n, N, 1), y (n, N)."""
    x = torch.randn(n, N, L36_D, generator=g, dtype=torch.float64, device=device)
    t = torch.randint(N, (n, N, 1), generator=g, device=device)
    u = torch.randn(L36_D, generator=g, dtype=torch.float64, device=device)
    u = u / u.norm()
    return x, t, labels(x, t, u)


def labels(x: torch.Tensor, t: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The 1STR labels <u, x_(t_i)> of every position."""
    return (x[torch.arange(x.shape[0], device=x.device)[:, None], t[..., 0]] * u).sum(-1)


def codes(N: int, device) -> torch.Tensor:
    """The float64 Reed-Solomon-Hadamard codes omega (N, d_e) of the RNN encoding."""
    return build_codebook(N, kind="rs-hadamard", dtype=torch.float64, device=device).omega


def norm_rounding(model: torch.nn.Module, scale: float) -> Rounding:
    """||vec theta||^2: a sum of squares of the module's parameters, relative to ``scale``."""
    count = sum(p.numel() for p in model.parameters())
    return Rounding(n=count, scale=scale, what="(parameter count) eps ||vec||^2")


def net_norm2(net) -> float:
    """||a||^2 + ||W||^2 + ||b||^2 of a two-layer net (Lemma 38's and Lemma 36's)."""
    return float(net.a @ net.a + (net.W**2).sum() + net.b @ net.b)


# ---------------------------------------------------------------- Prop 8's bound functions


def am_gm_log_norm2(log_UL: float, depth: int, r_h: float = 1.0) -> float:
    """ln ||vec||^2 a depth-L net needs to reach ln UL_min (AM-GM over L layers): ln L + (2 / L)
    (ln UL_min - ln r_h) (docs/derivations/rnn-lower-bounds.md)."""
    return math.log(depth) + 2 / depth * (log_UL - math.log(r_h))


@dataclass(frozen=True)
class Prop8Bounds:
    """Prop 8's bound functions (docs/derivations/rnn-lower-bounds.md): the packing, the width
    bound, the volume and paper norm bounds, and the depth-L requirement built on them."""

    packing: Callable  # (N, c, K=, gamma=) -> Prop8Packing
    width: Callable  # (N, c, UL, K=, gamma=) -> the least d_h
    log_norm: Callable  # (N, c, d_h, K=, gamma=) -> ln UL_min, the volume form
    paper: Callable  # (N, c, d_h, K=, gamma=) -> UL_min, the paper's form
    requirement: Callable  # (N, c, d_h, form=, K=, gamma=) -> ln ||vec||^2 over L layers

    def at(self, N: int, gamma: float = P8_GAMMA):
        """The packing at length N, risk level c, K and ``gamma``."""
        return self.packing(N, P8_C, K=P8_K, gamma=gamma)


LIBRARY_BOUNDS = Prop8Bounds(
    prop8_packing,
    prop8_width_lower_bound,
    prop8_log_norm_lower_bound,
    prop8_norm_lower_bound_paper,
    generalising_log_norm2,
)


# Prop 35's packing derived again (the checks' references)


def packing_exists(pk) -> bool:
    """M' >= 2 and M(M-1)/2 e^{-(N-1) I} + e^{-M (1 - 1/K)^2 / 2} < 1 (recomputed from M, I)."""
    if pk.M == -1:  # too many prompts to count: e^{(N-1) I} > e^60
        return True
    frac = 1 - 1 / P8_K
    fail = pk.M * (pk.M - 1) / 2 * math.exp(-(pk.N - 1) * pk.rate) + math.exp(-pk.M * frac**2 / 2)
    return math.ceil(frac * pk.M / 2) >= 2 and fail < 1


def chernoff_rate(a: float) -> float:
    """sup_theta [ln(1 + 2 theta) / 2 - theta a], the chi^2 lower-tail exponent, numerically."""
    from scipy import optimize  # noqa: PLC0415 - lazy: scipy takes ~1 s to import

    res = optimize.minimize_scalar(
        lambda th: th * a - 0.5 * math.log1p(2 * th),
        bounds=(0.0, 1e6),
        method="bounded",
        options={"xatol": 1e-12},
    )
    return float(-res.fun)


def derived_counts(N: int, rate: float):
    """M = the largest integer with M (M - 1) <= e^{(N-1) I}, M' = ceil((1 - 1/K) M / 2) and the
    failure bound, at 40 digits (rnn-lower-bounds.md section 1)."""
    frac = 1 - 1 / P8_K
    with mpmath.workdps(40):
        X = mpmath.exp((N - 1) * mpmath.mpf(rate))
        M = int(mpmath.floor((1 + mpmath.sqrt(1 + 4 * X)) / 2))
        M = M - 1 if M * (M - 1) > X else M  # guard the floor at an exact square
        fail = float(M * (M - 1) / 2 / X + mpmath.exp(-M * frac * frac / 2))
    return M, math.ceil(frac * M / 2), fail


# The faults' bound functions: Prop 8's derivation (rnn-lower-bounds.md section 1) written out
# again with one slip each, every later function built on the slipped earlier one.


def slipped_packing(rate_factor=1.0, good_divisor=2.0, error_factor=2.0) -> Callable:
    """``prop8_packing`` as derived, with the rate I(a) times ``rate_factor``, M' = ceil((1 - 1/K)
    M / good_divisor) and s~ = sqrt(2a(N-1)/N) - error_factor sqrt(K c)."""

    def packing(N, c, *, K=2.0, gamma=0.5):
        pk = prop8_packing(N, c, K=K, gamma=gamma)
        rate, frac = rate_factor * pk.rate, 1 - 1 / K
        E, sep = (N - 1) * rate, pk.answer_sep - error_factor * math.sqrt(K * c)
        if E > 60.0:
            log_good = E / 2 + math.log1p(-math.exp(-E / 2)) + math.log(frac / good_divisor)
            return replace(pk, rate=rate, M=-1, M_good=-1, log_M_good=log_good, sep=sep)
        M = int(math.floor(0.5 + math.sqrt(0.25 + math.exp(E))))
        while M > 1 and M * (M - 1) > math.exp(E):
            M -= 1
        good = math.ceil(frac * M / good_divisor)
        fail = M * (M - 1) / 2 * math.exp(-E) + math.exp(-M * frac * frac / 2)
        log_good = math.log(good) if good >= 1 else 0.0
        return replace(pk, rate=rate, M=M, M_good=good, log_M_good=log_good, sep=sep, failure=fail)

    return packing


def no_packing(pk) -> bool:
    """No packing: M' < 2 or failure bound >= 1 (M' = -1: too many to count, a packing)."""
    return 0 <= pk.M_good < 2 or pk.failure >= 1.0


def fewer_than_two_good(pk) -> bool:
    """Vacuous only where M' < 2 (the failure bound < 1 not required)."""
    return 0 <= pk.M_good < 2


def bounds_on(packing, vacuous=no_packing, norm_vacuous=no_packing, grow=math.expm1) -> Prop8Bounds:
    """Width, volume and paper norm bounds and the requirement on ``packing``, as derived: the
    width and the norms are 0 (ln: -inf) where ``vacuous`` / ``norm_vacuous``; the volume form
    is (s~ / (2 sqrt 2)) grow(ln M' / (2 d_h))."""

    def width(N, c, UL, *, K=2.0, gamma=0.5):
        pk = packing(N, c, K=K, gamma=gamma)
        return 0.0 if vacuous(pk) else pk.log_M_good / (2 * math.log1p(2 * ROOT2 * UL / pk.sep))

    def log_norm(N, c, d_h, *, K=2.0, gamma=0.5):
        pk = packing(N, c, K=K, gamma=gamma)
        if norm_vacuous(pk) or pk.log_M_good <= 0:
            return -math.inf
        return math.log(pk.sep / (2 * ROOT2) * grow(pk.log_M_good / (2 * d_h)))

    def paper(N, c, d_h, *, C_M=8.0, K=2.0, gamma=0.5):
        pk = packing(N, c, K=K, gamma=gamma)
        if norm_vacuous(pk):
            return 0.0
        return pk.sep / ROOT2 * math.sqrt(pk.log_M_good / (C_M * math.log(4 * d_h + 1)))

    def requirement(N, c, d_h, *, depth=2, r_h=1.0, form="volume", K=2.0, gamma=0.5):
        lg = log_norm(N, c, d_h, K=K, gamma=gamma)
        return -math.inf if lg == -math.inf else am_gm_log_norm2(lg, depth, r_h)

    return Prop8Bounds(packing, width, log_norm, paper, requirement)
