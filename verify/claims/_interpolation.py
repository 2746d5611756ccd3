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

from qstr.bounds.prop8 import (
    prop8_log_norm_lower_bound,
    prop8_norm_lower_bound_paper,
    prop8_packing,
    prop8_width_lower_bound,
)
from qstr.bounds.theorem9 import generalising_log_norm2
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


# ------------------------------------------------ the pins: 40-digit evaluations of the pages
# Written from docs/derivations/interpolation.md and rnn-lower-bounds.md (sections 1-3), not from
# bounds/: every constant and formula again, in mpmath at PIN_DPS digits, the float64 inputs
# taken as the exact values of their floats.

PIN_DPS = 40
# float64 bound against its 40-digit evaluation: each bound is a few dozen float operations
# (log, sqrt, exp, products) on O(1)..O(1e5) exponents, each off by <= 2^-53 relative, so the
# float64 value is within ~1e-14 relative (measured <= 2e-15); 1e-12 leaves room and still sees
# any slip of a constant, a power or a log base.
PIN_RTOL = 1e-12


def mp_c36_prime() -> mpmath.mpf:
    """(C36 / 2)^2 = 16 (9 / pi) (5 + pi / 72): Lemma 38's 16 times 1 / eps_n^2 = 9 n^4 / pi times
    Lemma 36's P <= (5 + pi / 72) n (interpolation.md, Lemma 36)."""
    pi = mpmath.pi
    return 16 * 9 / pi * (5 + pi / 72)


def mp_gap_threshold(n: int) -> mpmath.mpf:
    """eps_n = sqrt(pi) / (3 n^2) (interpolation.md, Lemma 37)."""
    return mpmath.sqrt(mpmath.pi) / (3 * mpmath.mpf(n) ** 2)


def mp_union_bound(n: int, eps: float) -> mpmath.mpf:
    """C(n, 2) 2 eps / sqrt(4 pi): the union bound of Lemma 37's steps 1-3."""
    return mpmath.binomial(n, 2) * 2 * mpmath.mpf(eps) / mpmath.sqrt(4 * mpmath.pi)


def mp_lemma38_bound(y: torch.Tensor, eps: float) -> mpmath.mpf:
    """16 ||y||^2 / eps^2 (interpolation.md, Lemma 38), ||y||^2 summed at 40 digits."""
    y2 = mpmath.fsum(mpmath.mpf(float(v)) ** 2 for v in y.tolist())
    return 16 * y2 / mpmath.mpf(eps) ** 2


def mp_lemma36_bounds(y2: float, eps: float, z2: float, m: int, depth: int = 2) -> tuple:
    """Lemma 36's certified bounds (interpolation.md): A = 16 ||y||^2 / eps^2, P = m + 2 ||z||^2 +
    2 eps^2, depth L: L (A P m^(L-2))^(1/L) (2 sqrt(A P) at L = 2); and C36 m^(5/2) ||y||."""
    A = 16 * mpmath.mpf(y2) / mpmath.mpf(eps) ** 2
    P = m + 2 * mpmath.mpf(z2) + 2 * mpmath.mpf(eps) ** 2
    deep = depth * (A * P * mpmath.mpf(m) ** (depth - 2)) ** (mpmath.mpf(1) / depth)
    return A, deep, 2 * mpmath.sqrt(mp_c36_prime()) * mpmath.mpf(m) ** 2.5 * mpmath.sqrt(y2)


def mp_memoriser_bound(n: int, depth: int = 2, K_y: float = 6.0) -> mpmath.mpf:
    """Theorem 9's memoriser bound L (C36' K_y)^(1/L) n^((L + 4)/L) (rnn-lower-bounds.md section 3;
    C36 sqrt(K_y) n^3 at L = 2)."""
    L = mpmath.mpf(depth)
    return L * (mp_c36_prime() * mpmath.mpf(K_y)) ** (1 / L) * mpmath.mpf(n) ** ((L + 4) / L)


def mp_crossover(log_requirement: float, depth: int = 2, K_y: float = 6.0) -> mpmath.mpf:
    """n* with mp_memoriser_bound(n*) = e^requirement, solved in closed form."""
    L = mpmath.mpf(depth)
    coeff = L * (mp_c36_prime() * mpmath.mpf(K_y)) ** (1 / L)
    return (mpmath.exp(mpmath.mpf(log_requirement)) / coeff) ** (L / (L + 4))


def mp_packing(N: int, c: float, K: float = 2.0, gamma: float = 0.5) -> dict:
    """Prop 35's packing (rnn-lower-bounds.md section 1): I = (a - 1 - ln a) / 2, a = 1 - gamma; M
    the largest integer with M (M - 1) <= e^{(N-1) I}; M' = ceil((1 - 1/K) M / 2); the failure bound
    M (M-1)/2 e^{-(N-1) I} + e^{-M (1 - 1/K)^2 / 2}; s~ = sqrt(2a(N-1)/N) - 2 sqrt(K c); it exists
    where M' >= 2 and the failure bound < 1."""
    a, K, c = 1 - mpmath.mpf(gamma), mpmath.mpf(K), mpmath.mpf(c)
    rate = (a - 1 - mpmath.log(a)) / 2
    X = mpmath.exp((N - 1) * rate)
    M = mpmath.floor((1 + mpmath.sqrt(1 + 4 * X)) / 2)
    M = M - 1 if M * (M - 1) > X else M
    frac = 1 - 1 / K
    good = mpmath.ceil(frac * M / 2)
    fail = M * (M - 1) / 2 / X + mpmath.exp(-M * frac**2 / 2)
    answer = mpmath.sqrt(2 * a * (N - 1) / N)
    sep = answer - 2 * mpmath.sqrt(K * c)
    exists = good >= 2 and fail < 1
    return dict(rate=rate, M=M, good=good, fail=fail, answer=answer, sep=sep, exists=exists)


def mp_width(N: int, c: float, UL: float, K: float = 2.0, gamma: float = 0.5) -> mpmath.mpf:
    """Prop 8's width bound ln M' / (2 ln(1 + 2 sqrt 2 UL / s~)), 0 where no packing exists."""
    pk = mp_packing(N, c, K, gamma)
    if not pk["exists"]:
        return mpmath.mpf(0)
    return mpmath.log(pk["good"]) / (2 * mpmath.log(1 + 2 * mpmath.sqrt(2) * UL / pk["sep"]))


def mp_log_norm(N: int, c: float, d_h: int, K: float = 2.0, gamma: float = 0.5):
    """ln of Prop 8's volume norm bound (s~ / (2 sqrt 2)) (exp(ln M' / (2 d_h)) - 1); -inf where no
    packing exists."""
    pk = mp_packing(N, c, K, gamma)
    if not pk["exists"]:
        return -mpmath.inf
    grow = mpmath.expm1(mpmath.log(pk["good"]) / (2 * d_h))
    return mpmath.log(pk["sep"] / (2 * mpmath.sqrt(2)) * grow)


def mp_paper_norm(N: int, c: float, d_h: int, C_M: float = 8.0, K: float = 2.0, gamma=0.5):
    """The paper's (uncertified) form (s~ / sqrt 2) sqrt(ln M' / (C_M ln(4 d_h + 1))); 0 where no
    packing exists."""
    pk = mp_packing(N, c, K, gamma)
    if not pk["exists"]:
        return mpmath.mpf(0)
    log_good = mpmath.log(pk["good"])
    return pk["sep"] / mpmath.sqrt(2) * mpmath.sqrt(log_good / (C_M * mpmath.log(4 * d_h + 1)))


def mp_requirement(N: int, c: float, d_h: int, depth: int, form: str, r_h: float = 1.0):
    """Theorem 9's requirement ln L + (2 / L)(ln UL_min - ln r_h) (AM-GM over L layers), UL_min of
    the paper's form or the volume form; -inf where no packing exists."""
    if form == "paper":
        v = mp_paper_norm(N, c, d_h)
        lg = mpmath.log(v) if v > 0 else -mpmath.inf
    else:
        lg = mp_log_norm(N, c, d_h)
    if lg == -mpmath.inf:
        return lg
    return mpmath.log(depth) + mpmath.mpf(2) / depth * (lg - mpmath.log(r_h))


def relative_gap(got: float, want) -> float:
    """|got - want| / |want| (0 when both are 0 or both -inf; inf when only one is)."""
    if want == 0 or want == -mpmath.inf:
        return 0.0 if got == float(want) else math.inf
    return float(abs(mpmath.mpf(got) - want) / abs(want))


# ------------------------------------------- adversarial data: where Lemma 36's bounds are tight

ADV_ACCEPT = 0.95  # spacing eps_n / 0.95: a random v passes Lemma 37's gap iff |<v, w>| >= 0.95
ADV_NORM = 1.96  # ||z||^2 <= 1.96 n for every unit v (the norm event holds; near its 2n)


def collinear_points(n: int, d: int, norm2: float, device) -> torch.Tensor:
    """n points (float64, (n, d)) on the line through w = (1, ..., 1) / sqrt d, spaced eps_n /
    ADV_ACCEPT, with sum of squared positions ``norm2`` (0: centred on the origin). Any accepted v
    has every gap in [eps_n, eps_n / 0.95] and ||z||^2 = <v, w>^2 norm2: Lemma 38's ||a'||^2 is
    then near its bound for alternating labels (interpolation.md, 'Slack')."""
    kw = dict(dtype=torch.float64, device=device)
    eps = math.sqrt(math.pi) / (3.0 * n * n)
    offsets = (torch.arange(n, **kw) - (n - 1) / 2) * (eps / ADV_ACCEPT)
    spread = float(offsets @ offsets)
    centre = math.sqrt(max(norm2 - spread, 0.0) / n)
    w = torch.ones(d, **kw) / math.sqrt(d)
    return (centre + offsets)[:, None] * w[None, :]


def alternating_labels(n: int, scale: float, device) -> torch.Tensor:
    """y_j = scale (-1)^j: alternating in the points' order along the line (either direction)."""
    return scale * (1.0 - 2.0 * (torch.arange(n, device=device) % 2)).to(torch.float64)


# ------------------------------------------------------------------- Theorem 9's pins

T9_PIN_NS = (2, 8, 32, 1000, 10**6)
T9_PIN_LENGTHS = (2**8, 2**14, 2**20)


def thm9_pin_gaps(inp, c: float, d: int, depth: int) -> list:
    """(what, relative gap) of the memoriser bound C n^3, the crossover n*, the requirement (both
    forms, depth 2 by default and 3 at r_h = 2.5) and the requirement tables against their 40-digit
    evaluation (rnn-lower-bounds.md section 3, interpolation.md)."""
    gaps = [
        (f"C n^3, n = {n}", relative_gap(inp.memoriser_bound(n), mp_memoriser_bound(n)))
        for n in T9_PIN_NS
    ]
    gaps += [
        (f"n*({lr})", relative_gap(inp.crossover(lr), mp_crossover(lr)))
        for lr in (-3.0, 0.0, 10.0, 400.0)
    ]
    points = [(N, d_h) for N in T9_PIN_LENGTHS for d_h in (math.isqrt(N), N // 8, N * d)]
    for N, d_h in points:
        for form in ("paper", "volume"):
            got = inp.requirement(N, c, d_h, form=form)  # depth and r_h at their defaults
            gaps.append(
                (
                    f"{form} N = {N}, d_h = {d_h}",
                    relative_gap(got, mp_requirement(N, c, d_h, 2, form)),
                )
            )
            got = inp.requirement(N, c, d_h, depth=3, r_h=2.5, form=form)
            want = mp_requirement(N, c, d_h, 3, form, 2.5)
            gaps.append((f"{form} depth 3, N = {N}, d_h = {d_h}", relative_gap(got, want)))
    tables = {**inp.requirements, **inp.wide}
    for name, logs in tables.items():
        form = "paper" if name.startswith("paper") else "volume"
        width = {"sqrt N": math.isqrt, "N d": lambda N: N * d, "N / 8": lambda N: N // 8}
        d_h = next((w for k, w in width.items() if f"d_h = {k}" in name), None)
        if d_h is not None:
            gaps += [
                (
                    f"{name}, N = {N}",
                    relative_gap(v, mp_requirement(N, c, d_h(N), depth, form)),
                )
                for N, v in logs.items()
            ]
    return gaps
