"""RNN bounds: Prop 8 (width and norm lower bounds via Prop 35; seed numbering, conference Prop 6),
Theorem 9 (the memorising crossover n*(N); conf. Thm 7) and Theorem 7 (the explicit upper bound;
conf. Thm 5). Statements, constants and the uncertified Maurey step:
docs/derivations/rnn-lower-bounds.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Optional, Sequence

from qstr.bounds.search import smallest_true
from qstr.constructions import validate
from qstr.bounds.attention import lemma12_radius
from qstr.bounds.interpolation import C36_PRIME
from qstr.bounds.packing import volume_log_packing_bound
from qstr.bounds.transformer import default_code_dim, loglog_slope, validate_problem_constants

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
    "generalising_log_norm2",
    "memoriser_norm2_bound",
    "theorem9_crossover",
    "Theorem7Params",
    "Layer",
    "lemma12_radius",
    "prop28_layers",
    "prop28_norm2",
    "Theorem7Bound",
    "theorem7_bound",
    "theorem7_sample_size",
    "loglog_slope",
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
    c_max = answer_sep ** 2 / (4.0 * K)
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
    return Prop8Packing(N=N, c=c, K=K, gamma=gamma, rate=rate, M=M, M_good=M_good,
                        log_M_good=math.log(M_good) if M_good >= 1 else 0.0, answer_sep=answer_sep,
                        sep=sep, failure=fail)


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


def prop8_norm_lower_bound_paper(N: int, c: float, d_h: int, *, C_M: float = 8.0, K: float = 2.0,
                                 gamma: float = 0.5) -> float:
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
    import torch

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
    return k, math.log(k), log_packing_volume(D, sep), math.log(2 * D + 1) / sep ** 2


# ---------------------------------------------------------------------------------------------
# Theorem 9
# ---------------------------------------------------------------------------------------------


def generalising_log_norm2(
    N: int,
    c: float,
    d_h: int,
    *,
    depth: int = 2,
    r_h: float = 1.0,
    form: str = "paper",
    C_M: float = 8.0,
    K: float = 2.0,
    gamma: float = 0.5,
) -> float:
    """ln of the ||vec theta||^2 a depth-``depth`` output net needs for risk <= c (Prop 8 + AM-GM).

    ||vec||^2 >= sum_l ||W_l||_F^2 >= depth (prod_l ||W_l||_op)^{2/depth}
              >= depth (UL / r_h)^{2/depth},
    with UL from ``form="paper"`` (:func:`prop8_norm_lower_bound_paper`, uncertified) or
    ``form="volume"`` (:func:`prop8_log_norm_lower_bound`, rigorous). -inf when vacuous.
    """
    depth = validate.positive_int("depth", depth, minimum=2)
    r_h = validate.positive_float("r_h", r_h)
    if form == "paper":
        v = prop8_norm_lower_bound_paper(N, c, d_h, C_M=C_M, K=K, gamma=gamma)
        lg = math.log(v) if v > 0 else -math.inf
    elif form == "volume":
        lg = prop8_log_norm_lower_bound(N, c, d_h, K=K, gamma=gamma)
    else:
        raise ValueError(f"form must be 'paper' or 'volume', got {form!r}")
    if lg == -math.inf:
        return -math.inf
    return math.log(depth) + (2.0 / depth) * (lg - math.log(r_h))


def _memoriser_log_coeff(depth: int, K_y: float) -> float:
    return math.log(depth) + math.log(C36_PRIME * K_y) / depth  # C36_PRIME = (144/pi)(5 + pi/72)


def memoriser_norm2_bound(n: int, *, depth: int = 2, K_y: float = 6.0) -> float:
    """Certified ||vec||^2 of Theorem 9's memoriser when ||y||^2 <= K_y n:
    depth ((144/pi)(5 + pi/72) K_y)^{1/depth} n^{(depth + 4)/depth};
    for depth 2 this is C36 sqrt(K_y) n^3 (``qstr.bounds.interpolation``: ``C36_PRIME``,
    ``lemma36_constant``)."""
    n = validate.positive_int("n", n, minimum=2)
    depth = validate.positive_int("depth", depth, minimum=2)
    K_y = validate.positive_float("K_y", K_y)
    return math.exp(_memoriser_log_coeff(depth, K_y) + (depth + 4.0) / depth * math.log(n))


def theorem9_crossover(log_requirement: float, *, depth: int = 2, K_y: float = 6.0) -> float:
    """Real n* with memoriser_norm2_bound(n*) = exp(log_requirement): for n < n* min-norm ERM
    prefers the memoriser over any generalising RNN (whose ||vec||^2 >= exp(log_requirement))."""
    depth = validate.positive_int("depth", depth, minimum=2)
    K_y = validate.positive_float("K_y", K_y)
    if log_requirement == -math.inf:
        return 0.0
    return math.exp((log_requirement - _memoriser_log_coeff(depth, K_y)) * depth / (depth + 4.0))


# ---------------------------------------------------------------------------------------------
# Theorem 7
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Theorem7Params:
    """Problem constants of Theorem 7 (seed; conference Thm 5), simple-qSTR.

    q, d          : relevant tokens per prompt, token dimension.
    r_a, r_w, m_g : Assumption 2 net: ||a_g|| <= r_a / sqrt(m_g), ||(W_g, b_g)||_F <= sqrt(m_g) r_w,
                    width m_g.
    eps_2nn       : Assumption 2 error, E[(y - g_net(x_t))^2 ; all tokens in the r_x-ball]
                    <= eps_2nn.
    C_x, C_y, s   : Assumption 1 constants.
    mu            : coherence of the codebook (entries +-1/sqrt(d_e), mu < 1).
    delta         : failure probability (the bound holds w.p. >= 1 - delta - (nN)^{-1/2}).
    d_e           : code dimension; None means ceil(8 ln(N^2 / delta)).
    """

    q: int = 1
    d: int = 4
    r_a: float = 1.0
    r_w: float = 1.0
    m_g: int = 16
    eps_2nn: float = 0.01
    C_x: float = 1.0
    C_y: float = 1.0
    s: float = 1.0
    mu: float = 0.5
    delta: float = 0.05
    d_e: Optional[int] = None

    def __post_init__(self):
        validate_problem_constants(self, mu_reason="the gates need <omega_i, omega_j> <= mu < 1")

    def code_dim(self, N: int) -> int:
        return default_code_dim(N, self.delta) if self.d_e is None else self.d_e


@dataclass(frozen=True)
class Layer:
    """One linear layer of the class: ``fan_in`` -> ``width``, bias or not,
    ||[W b]||_F <= ``radius``."""

    fan_in: int
    width: int
    bias: bool
    radius: float

    @property
    def n_params(self) -> int:
        return self.width * (self.fan_in + (1 if self.bias else 0))


def prop28_layers(N: int, params: Theorem7Params, r_x: float) -> tuple[list, list]:
    """(transition layers, output layers) of the exact four-layer RNN for simple-qSTR (our Prop 28).

    Codes with entries +-1/sqrt(d_e) (Rademacher / Hadamard) and coherence mu. Radii are the exact
    Frobenius norms of the construction's weights (the g_net layer: its Assumption 2 bound).
    Transition (input z, D_e = d + (q+1) d_e; does not read h; output q d):
      1. relu(+-x); relu(+-(omega_ij + omega_{t_l} j))      width 2d + 2 q d_e, R^2 = 2d + 4 q d_e
      2. relu(+-(x+ - x-)); g_l = relu((s_l - mu)/(1 - mu))  width 2d + q,
                                                             R^2 = 4d + q (2 + (1+mu)^2)/(1-mu)^2
         with s_l = <omega_i, omega_{t_l}> = c sum_j |omega_ij + omega_{t_l} j| - 1, c = 1/sqrt(d_e)
      3. relu(+-x_k + r_x g_l - r_x)                          width 2 q d, R^2 = 2 q d (2 + 2 r_x^2)
      4. difference                                           width q d (no bias), R^2 = 2 q d
    Output f_y on (h_fwd, h_bwd, z): layers 1-3 of the transition plus a pass-through of
    h_fwd + h_bwd (4 q d more in R^2 each), then W_g [I, -I, I, -I] (R^2 <= 4 m_g r_w^2), then a_g
    (R^2 <= r_a^2 / m_g). N enters only through r_x and d_e.
    """
    N = validate.positive_int("N", N, minimum=2)
    r_x = validate.positive_float("r_x", r_x)
    P = params
    q, d, mu = P.q, P.d, P.mu
    d_e = P.code_dim(N)
    D_e = d + (q + 1) * d_e
    qd = q * d
    g2 = (2.0 + (1.0 + mu) ** 2) / (1.0 - mu) ** 2
    trans = [
        Layer(D_e, 2 * d + 2 * q * d_e, True, math.sqrt(2 * d + 4 * q * d_e)),
        Layer(2 * d + 2 * q * d_e, 2 * d + q, True, math.sqrt(4 * d + q * g2)),
        Layer(2 * d + q, 2 * qd, True, math.sqrt(2 * qd * (2.0 + 2.0 * r_x * r_x))),
        Layer(2 * qd, qd, False, math.sqrt(2 * qd)),
    ]
    out = [
        Layer(
            2 * qd + D_e,
            2 * d + 2 * q * d_e + 2 * qd,
            True,
            math.sqrt(2 * d + 4 * q * d_e + 4 * qd),
        ),
        Layer(
            2 * d + 2 * q * d_e + 2 * qd,
            2 * d + q + 2 * qd,
            True,
            math.sqrt(4 * d + q * g2 + 4 * qd),
        ),
        Layer(
            2 * d + q + 2 * qd, 4 * qd, True, math.sqrt(2 * qd * (2.0 + 2.0 * r_x * r_x) + 4 * qd)
        ),
        Layer(4 * qd, P.m_g, True, 2.0 * math.sqrt(P.m_g) * P.r_w),
        Layer(P.m_g, 1, False, P.r_a / math.sqrt(P.m_g)),
    ]
    return trans, out


def prop28_norm2(N: int, params: Theorem7Params, *, n: int = 1000) -> float:
    """||vec theta*||^2 of the four-layer construction (both transitions and f_y)
    at r_x = r_x(n, N).

    The sum of squared radii of :func:`prop28_layers`: N-free except through r_x^2 ~ ln(nN) and
    d_e ~ ln N (polylogarithmic)."""
    N = validate.positive_int("N", N, minimum=2)
    n = validate.positive_int("n", n)
    trans, out = prop28_layers(N, params, lemma12_radius(params.d, n, N, params.C_x))
    return 2.0 * sum(l.radius ** 2 for l in trans) + sum(l.radius ** 2 for l in out)


def _net_constants(layers: Sequence[Layer], r_in: float):
    """(output bound at input radius r_in, input-Lipschitz prod R_l, parameter-Lipschitz ||c||,
    affine intercept).

    a_0 = r_in, a_l = R_l sqrt(a_{l-1}^2 + 1) (biased layers), a_L = R_L a_{L-1};
    c_l = (prod_{k > l} R_k) sqrt(a_{l-1}^2 + 1) (or a_{L-1} without bias).
    The intercept b is the output bound at r_in = 0 using a_l <= R_l (a_{l-1} + 1), so that the
    output is <= Lambda r + b for any input norm r.
    """
    a = [r_in]
    for l in layers:
        a.append(l.radius * (math.sqrt(a[-1] ** 2 + 1.0) if l.bias else a[-1]))
    Lam = math.prod(l.radius for l in layers)
    c2 = 0.0
    for idx, l in enumerate(layers):
        tail = math.prod(k.radius for k in layers[idx + 1:])
        feed = math.sqrt(a[idx] ** 2 + 1.0) if l.bias else a[idx]
        c2 += (tail * feed) ** 2
    b = 0.0
    for l in layers:
        b = l.radius * ((b + 1.0) if l.bias else b)
    return a[-1], Lam, math.sqrt(c2), b


@dataclass(frozen=True)
class Theorem7Bound:
    """R(theta_hat) <= total (w.p. >= confidence), and its pieces
    (docs/derivations/rnn-lower-bounds.md)."""

    n: int
    N: int
    total: float
    approximation: float  # eps_2NN (the construction is exact on the r_x-ball)
    tail: float  # E[loss(theta*); some token outside the r_x-ball] <= m_2 N^{-1/4} n^{-3/4}
    estimation: float      # 2 Rad + 3 tau sqrt(ln(4/delta)/(2n)) + tau sqrt(ln(4/delta)/(2n))
    truncation: float      # (1 + 4/delta) tau e^{-p}
    confidence: float      # 1 - delta - (nN)^{-1/2}
    r_x: float
    r_h: float
    d_e: int
    n_params: int
    radius: float          # R_Theta = sqrt(sum of squared layer radii)
    lipschitz: float       # A: |y_hat(theta) - y_hat(theta')| <= A ||theta - theta'|| on the sample
    log_covering: float    # P ln(1 + 4 R_Theta A sqrt(n / tau))
    rademacher: float
    tau: float
    p: float
    theta_star_norm2: float

    def terms(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def theorem7_bound(n: int, N: int, params: Theorem7Params) -> Theorem7Bound:
    """Explicit Theorem 7 bound for constrained ERM (point-wise risk) over the RNN class of
    :func:`prop28_layers`.

    With probability >= 1 - delta - (nN)^{-1/2} over n training prompts of length N:

        R(theta_hat) <= eps_2NN + m_2 N^{-1/4} n^{-3/4}
                        + 2 [tau / sqrt n + tau sqrt(2 P ln(1 + 4 R_Theta A sqrt(n / tau)) / n)]
                        + 4 tau sqrt(ln(4/delta) / (2 n)) + (1 + 4/delta) tau e^{-p},

    A = sqrt(A_y^2 + ((N - 1) Lambda_y A_h)^2), tau = e m_p, p = max(1, ln((1 + 4/delta) sqrt n)),
    m_p = 2 ((beta_0 + Lambda_y sqrt(2 p C_x d))^2 + C_y (2p)^{2s}).
    Derivation: docs/derivations/rnn-lower-bounds.md.
    """
    n = validate.positive_int("n", n)
    N = validate.positive_int("N", N, minimum=2)
    if not isinstance(params, Theorem7Params):
        raise ValueError(f"params must be a Theorem7Params, got {type(params).__name__}")
    P_ = params
    q, d, delta = P_.q, P_.d, P_.delta
    nN = float(n) * float(N)
    r_x = lemma12_radius(d, n, N, P_.C_x)
    r_h = math.sqrt(q) * r_x
    r_z = math.sqrt(r_x * r_x + q + 1.0)
    trans, out = prop28_layers(N, P_, r_x)
    d_e = P_.code_dim(N)
    # parameter-Lipschitz constants on the sample (all tokens in the r_x-ball)
    _, _, A_h, _ = _net_constants(trans, r_z)
    r_in_y = math.sqrt(2.0 * r_h * r_h + r_z * r_z)
    _, Lam_y, A_y, b_y = _net_constants(out, r_in_y)
    A = math.sqrt(A_y ** 2 + ((N - 1) * Lam_y * A_h) ** 2)
    n_params = 2 * sum(l.n_params for l in trans) + sum(l.n_params for l in out)
    theta2 = 2.0 * sum(l.radius ** 2 for l in trans) + sum(l.radius ** 2 for l in out)
    R_theta = math.sqrt(theta2)
    # output growth |y_hat| <= Lam_y ||x_i|| + beta_0 for every theta in the class and every prompt
    beta_0 = Lam_y * math.sqrt(2.0 * r_h * r_h + q + 1.0) + b_y

    def m_p(p):
        return 2.0 * (
            (beta_0 + Lam_y * math.sqrt(2.0 * p * P_.C_x * d)) ** 2
            + P_.C_y * (2.0 * p) ** (2.0 * P_.s)
        )

    p = max(1.0, math.log((1.0 + 4.0 / delta) * math.sqrt(n)))
    tau = math.e * m_p(p)
    truncation = (1.0 + 4.0 / delta) * tau * math.exp(-p)
    log_cov = n_params * math.log1p(4.0 * R_theta * A * math.sqrt(n / tau))
    rad = tau / math.sqrt(n) + tau * math.sqrt(2.0 * log_cov / n)
    dev = math.sqrt(math.log(4.0 / delta) / (2.0 * n))
    estimation = 2.0 * rad + 4.0 * tau * dev
    tail = m_p(2.0) * N ** -0.25 * n ** -0.75
    approximation = P_.eps_2nn
    total = approximation + tail + estimation + truncation
    return Theorem7Bound(
        n=n,
        N=N,
        total=total,
        approximation=approximation,
        tail=tail,
        estimation=estimation,
        truncation=truncation,
        confidence=1.0 - delta - nN**-0.5,
        r_x=r_x,
        r_h=r_h,
        d_e=d_e,
        n_params=n_params,
        radius=R_theta,
        lipschitz=A,
        log_covering=log_cov,
        rademacher=rad,
        tau=tau,
        p=p,
        theta_star_norm2=theta2,
    )


def theorem7_sample_size(target: float, N: int, params: Optional[Theorem7Params] = None, *,
                         n_max: int = 10 ** 300) -> int:
    """Smallest n with ``theorem7_bound(n, N, params).total <= target``
    (doubling, then bisection on n).

    Raises ``ValueError`` unless ``target`` exceeds the floor eps_2NN (the bound's limit as
    n -> infinity), or if no n <= n_max reaches it.
    """
    params = Theorem7Params() if params is None else params
    target = validate.positive_float("target", target)
    N = validate.positive_int("N", N, minimum=2)
    if not isinstance(params, Theorem7Params):
        raise ValueError(f"params must be a Theorem7Params, got {type(params).__name__}")
    if not target > params.eps_2nn:
        raise ValueError(
            f"target must exceed the floor eps_2nn = {params.eps_2nn:g}, got target = {target:g}"
        )
    n = smallest_true(
        lambda n: theorem7_bound(n, N, params).total <= target, limit=n_max, log_bisect=True
    )
    if n is None:
        raise ValueError(
            f"target = {target:g} is not reached for n <= n_max = {n_max:.3g}; raise n_max"
        )
    return n
