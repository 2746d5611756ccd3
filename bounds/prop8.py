"""Prop 8's lower bounds (seed numbering; conference Prop 6): the packing of Prop 35, the width
and norm bounds it gives (the rigorous volume form and the paper's uncertified Maurey form) and
Lemma 41's volume count. Statements and constants: docs/derivations/rnn-lower-bounds.md,
sections 1-2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from qstr.bounds.packing import volume_log_packing_bound
from qstr.constructions import validate

__all__ = [
    "log_packing_volume",
    "chi2_lower_rate",
    "Prop8Packing",
    "prop8_packing",
    "prop8_width_lower_bound",
    "prop8_log_norm_lower_bound",
    "prop8_norm_lower_bound",
    "prop8_norm_lower_bound_paper",
    "euclidean_packing_counterexample",
]

SQRT2 = math.sqrt(2.0)

# ---------------------------------------------------------------------------------------------
# Lemma 41 (volume part), inlined
# ---------------------------------------------------------------------------------------------


def log_packing_volume(D: int, eps: float) -> float:
    """Lemma 41 (volume): ln of the eps-packing number of the unit ball of R^D is
    <= D ln(1 + 2/eps).

    Balls of radius eps/2 around the packing points are disjoint and lie in the ball of radius
    1 + eps/2, so M (eps/2)^D <= (1 + eps/2)^D.
    Delegates to ``bounds.packing.volume_log_packing_bound``.
    """
    return volume_log_packing_bound(D, eps)


def chi2_lower_rate(a: float) -> float:
    """I(a) = (a - 1 - ln a) / 2 with P(chi^2_k <= a k) <= exp(-k I(a)) for 0 < a < 1 (Chernoff)."""
    a = validate.probability("a", a)
    return (a - 1.0 - math.log(a)) / 2.0


# ---------------------------------------------------------------------------------------------
# Prop 8 / Prop 35
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prop8Packing:
    """The packing of Prop 35 at length N and risk level c (docs/derivations/rnn-lower-bounds.md).

    ``M`` prompts sharing x_i are drawn; ``log_M_good`` = ln M' of the guaranteed good,
    pairwise separated ones; ``answer_sep`` = sqrt(2 a (N-1)/N) is the normalised separation of
    their answer vectors, ``sep`` = answer_sep - 2 sqrt(K c) the separation left after the
    prediction error (the states w must then be >= sep / lambda apart). ``failure`` bounds the
    probability that the events fail (< 1 means a packing of size M' exists).
    """

    N: int
    c: float
    K: float
    gamma: float
    rate: float
    M: int
    M_good: int
    log_M_good: float
    answer_sep: float
    sep: float
    failure: float

    @property
    def vacuous(self) -> bool:
        return (
            0 <= self.M_good < 2 or self.failure >= 1.0
        )  # M_good = -1: too many prompts to count, not vacuous


def _risk_args(N, c, K, gamma):
    N = validate.positive_int("N", N, minimum=2)
    c = validate.positive_float("c", c)
    K = validate.positive_float("K", K)
    if not K > 1.0:
        raise ValueError(f"K must be > 1 (a fraction 1 - 1/K of prompts is good), got {K}")
    gamma = validate.probability("gamma", gamma)
    a = 1.0 - gamma
    answer_sep = math.sqrt(2.0 * a * (N - 1) / N)
    c_max = answer_sep**2 / (4.0 * K)
    if not c < c_max:
        raise ValueError(
            f"c must be < (sqrt(2 a (N-1)/N))^2 / (4 K) = {c_max:.4g} "
            f"for N = {N}, K = {K}, gamma = {gamma} "
            f"(otherwise the prediction error can hide the separation), got c = {c}"
        )
    return N, c, K, gamma, a, answer_sep


def prop8_packing(N: int, c: float, *, K: float = 2.0, gamma: float = 0.5) -> Prop8Packing:
    """Size and separation of the Prop 35 packing at length N for position risk R_i <= c."""
    N, c, K, gamma, a, answer_sep = _risk_args(N, c, K, gamma)
    rate = chi2_lower_rate(a)
    # largest M with C(M, 2) exp(-(N-1) I) <= 1/2, i.e. M (M - 1) <= exp((N-1) I)
    E = (N - 1) * rate
    frac = 1.0 - 1.0 / K
    sep = answer_sep - 2.0 * math.sqrt(K * c)
    if (
        E > 60.0
    ):  # very many prompts: work in logs (M >= e^{E/2} - 1, ln M' >= ln(frac (e^{E/2} - 1) / 2))
        log_good = E / 2.0 + math.log1p(-math.exp(-E / 2.0)) + math.log(frac / 2.0)
        return Prop8Packing(
            N=N,
            c=c,
            K=K,
            gamma=gamma,
            rate=rate,
            M=-1,
            M_good=-1,
            log_M_good=log_good,
            answer_sep=answer_sep,
            sep=sep,
            failure=0.5,
        )
    M = max(1, int(math.floor(0.5 + math.sqrt(0.25 + math.exp(E)))))  # exact enough: e^E < 2^87
    while M > 1 and M * (M - 1) > math.exp(E):
        M -= 1
    M_good = int(math.ceil(frac * M / 2.0))
    fail = M * (M - 1) / 2.0 * math.exp(-E) + math.exp(-M * frac * frac / 2.0)
    return Prop8Packing(
        N=N,
        c=c,
        K=K,
        gamma=gamma,
        rate=rate,
        M=M,
        M_good=M_good,
        log_M_good=math.log(M_good) if M_good >= 1 else 0.0,
        answer_sep=answer_sep,
        sep=sep,
        failure=fail,
    )


def _usable(pk: Prop8Packing) -> bool:
    return not pk.vacuous


def prop8_width_lower_bound(
    N: int, c: float, UL: float, *, K: float = 2.0, gamma: float = 0.5
) -> float:
    """Rigorous Prop 8 width bound: any RNN with R_i <= c has
    d_h >= ln M' / (2 ln(1 + 2 sqrt2 UL / s~)).

    ``UL`` = ||U||_op * L (L = lambda r_h, lambda the Lipschitz constant of f_y in the state).
    Returns 0.0 when the packing is vacuous (small N). Grows like N / ln(UL).
    """
    UL = validate.positive_float("UL", UL)
    pk = prop8_packing(N, c, K=K, gamma=gamma)
    if not _usable(pk):
        return 0.0
    return pk.log_M_good / (2.0 * math.log1p(2.0 * SQRT2 * UL / pk.sep))


def prop8_log_norm_lower_bound(
    N: int, c: float, d_h: int, *, K: float = 2.0, gamma: float = 0.5
) -> float:
    """ln of the rigorous (volume) norm bound UL >= (s~ / (2 sqrt2)) (exp(ln M' / (2 d_h)) - 1);
    -inf if vacuous."""
    d_h = validate.positive_int("d_h", d_h)
    pk = prop8_packing(N, c, K=K, gamma=gamma)
    if not _usable(pk):
        return -math.inf
    x = pk.log_M_good / (2.0 * d_h)
    log_expm1 = x + math.log1p(-math.exp(-x)) if x > 0 else -math.inf
    return math.log(pk.sep / (2.0 * SQRT2)) + log_expm1


def prop8_norm_lower_bound(
    N: int, c: float, d_h: int, *, K: float = 2.0, gamma: float = 0.5
) -> float:
    """Rigorous Prop 8 norm bound (volume form):
    ||U||_op L >= (s~ / (2 sqrt2)) (exp(ln M' / (2 d_h)) - 1).

    Strong (exponential in N / d_h) for d_h << N, weak for d_h >~ N: a Lipschitz/packing argument
    cannot give more there (docs/derivations/rnn-lower-bounds.md, "the norm bound"). Overflow
    returns ``math.inf``; use :func:`prop8_log_norm_lower_bound` for logs.
    """
    lg = prop8_log_norm_lower_bound(N, c, d_h, K=K, gamma=gamma)
    return 0.0 if lg == -math.inf else (math.exp(lg) if lg < 700 else math.inf)


def prop8_norm_lower_bound_paper(
    N: int, c: float, d_h: int, *, C_M: float = 8.0, K: float = 2.0, gamma: float = 0.5
) -> float:
    """The paper's form ||U||_op L >~ sqrt(N / ln d_h):
    (s~ / sqrt2) sqrt(ln M' / (C_M ln(4 d_h + 1))). UNCERTIFIED.

    Obtained by replacing the volume bound with the Maurey bound ln M <= (C_M / eps^2) ln(2D + 1),
    D = 2 d_h, eps = s / rho = s~ / (sqrt 2 UL). With C_M = 8 that is Lemma 41's bound for the l1
    ball (``bounds.packing.maurey_simple_bound``); for the Euclidean ball, where the states live,
    it is false for eps < 1 (see :func:`euclidean_packing_counterexample`), so this function
    reproduces the paper's scaling, not a proved inequality.
    """
    d_h = validate.positive_int("d_h", d_h)
    C_M = validate.positive_float("C_M", C_M)
    pk = prop8_packing(N, c, K=K, gamma=gamma)
    if not _usable(pk):
        return 0.0
    return pk.sep / SQRT2 * math.sqrt(pk.log_M_good / (C_M * math.log(4.0 * d_h + 1.0)))


def euclidean_packing_counterexample(D: int, M: int, *, generator, sep: float = 1.0):
    """Greedy sep-packing of the unit sphere of R^D from M random unit vectors (torch generator).

    Returns (number of points kept, ln of that number, D ln(1 + 2/sep) volume bound,
    ln(2D + 1) / sep^2 Maurey-type value without its constant). The kept count's log grows
    linearly in D (up to the cap ln M) while the Maurey form grows like ln D: for large D it
    exceeds C ln(2D + 1) / sep^2 for any fixed C, refuting that form in the Euclidean metric.
    """
    D = validate.positive_int("D", D)
    M = validate.positive_int("M", M)
    sep = validate.positive_float("sep", sep)
    X = torch.randn(M, D, generator=generator, dtype=torch.float64, device=generator.device)
    X = X / X.norm(dim=1, keepdim=True)
    G = X @ X.T
    thr = 1.0 - sep * sep / 2.0  # ||x - y|| >= sep  <=>  <x, y> <= 1 - sep^2 / 2
    kept: list[int] = []
    for i in range(M):
        if not kept or bool((G[i, kept] <= thr).all()):
            kept.append(i)
    k = len(kept)
    return k, math.log(k), log_packing_volume(D, sep), math.log(2 * D + 1) / sep**2
