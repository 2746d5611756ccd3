"""RNN bounds: Prop 8 (width and norm lower bounds via Prop 35; seed numbering, conference Prop 6),
Theorem 9 (the memorising crossover n*(N); conf. Thm 7) and Theorem 7 (the explicit upper bound;
conf. Thm 5). Statements, constants and the uncertified Maurey step:
docs/derivations/rnn-lower-bounds.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Optional, Sequence

import torch

from qstr.bounds.search import smallest_true
from qstr.constructions import validate
from qstr.bounds.attention import lemma12_radius
from qstr.bounds.interpolation import C36_PRIME
from qstr.bounds.packing import volume_log_packing_bound
from qstr.bounds.transformer import default_code_dim, loglog_slope, validate_problem_constants
from qstr.constructions.codes import coherence, rs_hadamard_codebook
from qstr.constructions.links import TwoLayerNet, make_link
from qstr.constructions.recurrent import (
    RNNConstruction,
    Transition,
    code_stats,
    codes_of,
    rnn_tokens,
    rnn_weights,
    transition_weights,
)
from qstr.constructions.relu import gate_bands, product_error

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
    "theorem9_log_crossover",
    "Theorem7Params",
    "Layer",
    "lemma12_radius",
    "prop28_layers",
    "layer_sensitivities",
    "rnn_parameter_lipschitz",
    "rnn_state_gain",
    "prop28_norm2",
    "Theorem7Bound",
    "theorem7_bound",
    "theorem7_sample_size",
    "loglog_slope",
    "DEFAULT_MARGIN",
    "MU_TOL",
    "token_radius",
    "TransitionKnots",
    "TransitionGuarantee",
    "prop26_transition",
    "RNNGuarantee",
    "prop28_rnn",
    "teacher_rnn",
]

SQRT2 = math.sqrt(2.0)
F64 = torch.float64

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
    K: float = 2.0,
    gamma: float = 0.5,
) -> float:
    """ln of the ||vec theta||^2 a depth-``depth`` output net needs for risk <= c (Prop 8 + AM-GM).

    ||vec||^2 >= sum_l ||W_l||_F^2 >= depth (prod_l ||W_l||_op)^{2/depth}
              >= depth (UL / r_h)^{2/depth},
    with UL from ``form="paper"`` (:func:`prop8_norm_lower_bound_paper` at its Maurey constant
    C_M = 8, uncertified) or
    ``form="volume"`` (:func:`prop8_log_norm_lower_bound`, rigorous). -inf when vacuous.
    """
    depth = validate.positive_int("depth", depth, minimum=2)
    r_h = validate.positive_float("r_h", r_h)
    if form == "paper":
        v = prop8_norm_lower_bound_paper(N, c, d_h, K=K, gamma=gamma)
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


def theorem9_log_crossover(log_requirement: float, *, depth: int = 2, K_y: float = 6.0) -> float:
    """Theorem 9's crossover in logs (docs/derivations/rnn-lower-bounds.md, section 3): ln n*, n*
    the real n with memoriser_norm2_bound(n) = exp(log_requirement): for n < n*
    min-norm ERM prefers the memoriser over any generalising RNN (whose ||vec||^2 >=
    exp(log_requirement)); -inf where the requirement is vacuous. In logs, so that a requirement
    exponential in N (the volume form at d_h = sqrt N) never overflows."""
    depth = validate.positive_int("depth", depth, minimum=2)
    K_y = validate.positive_float("K_y", K_y)
    if log_requirement == -math.inf:
        return -math.inf
    return (log_requirement - _memoriser_log_coeff(depth, K_y)) * depth / (depth + 4.0)


def theorem9_crossover(log_requirement: float, *, depth: int = 2, K_y: float = 6.0) -> float:
    """n* = exp(:func:`theorem9_log_crossover`): 0.0 where the requirement is vacuous, math.inf
    beyond float range."""
    lg = theorem9_log_crossover(log_requirement, depth=depth, K_y=K_y)
    if lg == -math.inf:
        return 0.0
    return math.exp(lg) if lg < 709.0 else math.inf


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
    reads_h       : the paper's class: the transitions read h, each (1/N)-Lipschitz in it
                    (reconstructed; docs/derivations/rnn-lower-bounds.md, section 4, item 5);
                    False (the default): they do not (the class of :func:`prop28_layers`).
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
    reads_h: bool = False

    def __post_init__(self):
        validate_problem_constants(self, mu_reason="the gates need <omega_i, omega_j> <= mu < 1")
        if not isinstance(self.reads_h, bool):
            raise ValueError(f"reads_h must be True or False, got {self.reads_h!r}")

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
    return 2.0 * sum(l.radius**2 for l in trans) + sum(l.radius**2 for l in out)


def layer_sensitivities(radii: Sequence[float], biases: Sequence[bool], r_in: float) -> list:
    """Lemma 30 (reconstructed; docs/derivations/rnn-lower-bounds.md, section 4, item 5): for ReLU
    nets whose layers have ||[W_l b_l]||_F <= R_l, on inputs of norm <= r_in, changing layer l by
    Delta_l moves the output by at most sum_l c_l ||Delta_l||_F with
    c_l = (prod_{k > l} R_k) sqrt(a_{l-1}^2 + 1) (a_{l-1} without a bias), a_0 = r_in,
    a_l = R_l sqrt(a_{l-1}^2 + 1) (R_l a_{l-1} without a bias). Returns [c_1, ..., c_L]."""
    a = [float(r_in)]
    for R, bias in zip(radii, biases, strict=True):
        a.append(R * (math.sqrt(a[-1] ** 2 + 1.0) if bias else a[-1]))
    return [
        math.prod(radii[l + 1 :]) * (math.sqrt(a[l] ** 2 + 1.0) if bias else a[l])
        for l, bias in enumerate(biases)
    ]


def rnn_state_gain(lip_h: float, N: int) -> float:
    """Lemma 29's accumulation over the N - 1 transitions a state adds up, when each is lip_h-
    Lipschitz in h: sum_{j=0}^{N-2} (1 + lip_h)^j = ((1 + lip_h)^{N-1} - 1) / lip_h (N - 1 at
    lip_h = 0: transitions that do not read h). At lip_h = 1/N it is below (e - 1) N."""
    if lip_h < 0:
        raise ValueError(f"lip_h must be >= 0, got {lip_h}")
    if lip_h == 0:
        return float(N - 1)
    return math.expm1((N - 1) * math.log1p(lip_h)) / lip_h


def rnn_parameter_lipschitz(
    A_y: float, Lam_y: float, A_h: float, N: int, lip_h: float = 0.0
) -> float:
    """Lemma 29 (reconstructed): |y_hat_i(theta) - y_hat_i(theta')| <= A ||theta - theta'|| with
    A = sqrt(A_y^2 + (S Lam_y A_h)^2), S = :func:`rnn_state_gain` (lip_h, N): a transition change
    moves a state by at most the changes of the (at most N - 1) transition outputs it adds up,
    each carried on by a factor 1 + lip_h per step through h (the projection is 1-Lipschitz;
    S = N - 1 when the transitions do not read h), which f_y passes on with slope Lam_y."""
    S = rnn_state_gain(lip_h, N)
    return math.sqrt(A_y**2 + (S * Lam_y * A_h) ** 2)


def rnn_output_growth(
    radii: Sequence[float], biases: Sequence[bool], r_h: float, q: int
) -> tuple[float, float]:
    """Lemma 34's growth (reconstructed; docs/derivations/rnn-lower-bounds.md, section 4, item 3):
    an RNN of the class whose output net has ||[W_l b_l]||_F <= R_l, with states in the r_h-ball
    and unit codes (||z_i||^2 = ||x_i||^2 + q + 1), outputs |y_hat_i| <= Lam ||x_i|| + beta_0,
    Lam = prod R_l, beta_0 = Lam sqrt(2 r_h^2 + q + 1) + b_y, b_y = the output bound at input 0
    by a_l <= R_l (a_{l-1} + 1). Returns (Lam, beta_0)."""
    lam, b_y = 1.0, 0.0
    for R, bias in zip(radii, biases, strict=True):
        lam *= R
        b_y = R * (b_y + 1.0) if bias else R * b_y
    return lam, lam * math.sqrt(2.0 * r_h * r_h + q + 1.0) + b_y


def token_norm_moment(r: float, C_x: float, d: int) -> float:
    """Assumption 1's token moments: (E ||x||^r)^{1/r} <= sqrt(r C_x d), r >= 1."""
    return math.sqrt(r * C_x * d)


def rnn_output_moment(lam: float, beta_0: float, p: float, C_x: float, d: int) -> float:
    """Lemma 34 (reconstructed, item 3): (E |y_hat_i|^{2p})^{1/(2p)} <= beta_0 + Lam sqrt(2p C_x d)
    (Minkowski on the growth, with :func:`token_norm_moment` at r = 2p)."""
    return beta_0 + lam * token_norm_moment(2.0 * p, C_x, d)


def _parameter_lipschitz(layers: Sequence[Layer], r_in: float) -> float:
    """||c|| with c_l from :func:`layer_sensitivities` (Lemma 30): the net's output moves by at
    most ||c|| ||Delta|| on inputs of norm <= r_in."""
    c = layer_sensitivities([l.radius for l in layers], [l.bias for l in layers], r_in)
    return math.sqrt(sum(x * x for x in c))


@dataclass(frozen=True)
class Theorem7Bound:
    """R(theta_hat) <= total (w.p. >= confidence), and its pieces
    (docs/derivations/rnn-lower-bounds.md)."""

    n: int
    N: int
    total: float
    approximation: float  # eps_2NN (the construction is exact on the r_x-ball)
    tail: float  # E[loss(theta*); some token outside the r_x-ball] <= m_2 N^{-1/4} n^{-3/4}
    estimation: float  # 2 Rad + 3 tau sqrt(ln(4/delta)/(2n)) + tau sqrt(ln(4/delta)/(2n))
    truncation: float  # (1 + 4/delta) tau e^{-p}
    confidence: float  # 1 - delta - (nN)^{-1/2}
    r_x: float
    r_h: float
    d_e: int
    n_params: int
    radius: float  # R_Theta = sqrt(sum of squared layer radii)
    lipschitz: float  # A: |y_hat(theta) - y_hat(theta')| <= A ||theta - theta'|| on the sample
    log_covering: float  # P ln(1 + 4 R_Theta A sqrt(n / tau))
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

    A = sqrt(A_y^2 + ((N - 1) Lambda_y A_h)^2) (``params.reads_h``: S = ((1 + 1/N)^{N-1} - 1) N
    for N - 1, A_h on inputs (h, z), and q d more columns per transition in P),
    tau = e m_p, p = max(1, ln((1 + 4/delta) sqrt n)),
    m_p = 2 ((beta_0 + Lambda_y sqrt(2 p C_x d))^2 + C_y (2p)^{2s}).
    Derivation: docs/derivations/rnn-lower-bounds.md.
    """
    n = validate.float_count("n", n)
    N = validate.float_count("N", N, minimum=2)
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
    # parameter-Lipschitz constants on the sample (all tokens in the r_x-ball); the paper's class
    # (reads_h): the transitions read (h, z), of norm <= sqrt(r_h^2 + r_z^2), (1/N)-Lipschitz in h
    lip_h = 1.0 / float(N) if P_.reads_h else 0.0
    A_h = _parameter_lipschitz(trans, math.sqrt(r_h * r_h + r_z * r_z) if P_.reads_h else r_z)
    r_in_y = math.sqrt(2.0 * r_h * r_h + r_z * r_z)
    A_y = _parameter_lipschitz(out, r_in_y)
    # output growth |y_hat| <= Lam_y ||x_i|| + beta_0 for every theta in the class and every prompt
    Lam_y, beta_0 = rnn_output_growth([l.radius for l in out], [l.bias for l in out], r_h, q)
    A = rnn_parameter_lipschitz(A_y, Lam_y, A_h, N, lip_h)
    n_params = 2 * sum(l.n_params for l in trans) + sum(l.n_params for l in out)
    if P_.reads_h:  # the transitions' first layers read h: q d more columns each
        n_params += 2 * trans[0].width * q * d
    theta2 = 2.0 * sum(l.radius**2 for l in trans) + sum(l.radius**2 for l in out)
    R_theta = math.sqrt(theta2)

    def m_p(p):
        y_hat = rnn_output_moment(Lam_y, beta_0, p, P_.C_x, d)
        return 2.0 * (y_hat**2 + P_.C_y * (2.0 * p) ** (2.0 * P_.s))

    p = max(1.0, math.log((1.0 + 4.0 / delta) * math.sqrt(n)))
    tau = math.e * m_p(p)
    truncation = (1.0 + 4.0 / delta) * tau * math.exp(-p)
    log_cov = n_params * math.log1p(4.0 * R_theta * A * math.sqrt(n / tau))
    rad = tau / math.sqrt(n) + tau * math.sqrt(2.0 * log_cov / n)
    dev = math.sqrt(math.log(4.0 / delta) / (2.0 * n))
    estimation = 2.0 * rad + 4.0 * tau * dev
    tail = m_p(2.0) * N**-0.25 * n**-0.75
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


def theorem7_sample_size(
    target: float, N: int, params: Optional[Theorem7Params] = None, *, n_max: int = 10**300
) -> int:
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


# ---------------------------------------------------------------------------------------------
# Props 26-28: the RNN construction's parameters and guarantees
# (docs/derivations/rnn-transition.md; the weights: qstr.constructions.recurrent)
# ---------------------------------------------------------------------------------------------

DEFAULT_MARGIN = 1e-9  # float safety margin on the inner products (see the derivation, section 4)
MU_TOL = 1e-9  # coherence measured in floating point may exceed 1/2 by rounding (rotated codes)


def token_radius(d: int, n_tokens: int, delta: float = 1e-3) -> float:
    """Lemma 12's token radius r_x = sqrt(d) + sqrt(2 ln(n_tokens / delta)): all of ``n_tokens``
    N(0, I_d) tokens have norm <= r_x with probability >= 1 - delta (Gaussian concentration of the
    1-Lipschitz norm, E||x|| <= sqrt(d), and a union bound)."""
    d = validate.positive_int("d", d)
    n_tokens = validate.positive_int("n_tokens", n_tokens)
    delta = validate.probability("delta", delta)
    return math.sqrt(d) + math.sqrt(2 * math.log(n_tokens / delta))


@dataclass(frozen=True)
class TransitionKnots:
    """Knot counts given to :func:`prop26_transition` in place of those derived from eps:
    ``product`` (K1, Lemma 22's square interpolants) and ``gate`` (K2, Lemma 24's bands)."""

    product: Optional[int] = None
    gate: Optional[int] = None


@dataclass(frozen=True)
class TransitionGuarantee:
    """What the four-layer transition promises (Prop 26), with every constant of its eps budget.

    For every position i, tuple t of codeword indices, and x_i with ||x_i|| <= r_x:
    ``f(u)_l == 0`` exactly when t_l != i, and ||f(u)_l - x_i||_inf <= ``eps`` when t_l = i.
    eps = threshold + gate_error + 2 r_x (inner_product_error + norm_defect).
    """

    eps: float  # certified target error (sup norm per block)
    eps_requested: Optional[float]
    r_x: float
    mu: float  # coherence of the codebook (measured)
    norm_defect: float  # nu = max_i | ||omega_i||^2 - 1 |
    code_range: float  # R = max |omega_ij|: products are taken on [-R, R]^2
    product_knots: int
    product_certificate: (
        str  # "uniform" (any codes in [-R, R]) or "alphabet" (exact on these codes)
    )
    product_error: float  # Lemma 22 sup error per coordinate product on [-R, R]^2 (h^2/16)
    inner_product_error: float  # delta_1: certified |s_hat - <omega_i, omega_t>| on codeword pairs
    gate_knots: int
    gate_delta: float
    gate_slope: float  # M = 2 r_x / delta, the largest weight
    gate_error: float  # r_x delta (Lemma 24)
    s_max: float  # gate domain: s_hat <= 1 + nu + delta_1 + margin
    non_target_excess: float  # e = max(0, mu + delta_1 - 1/2) + margin
    threshold: float  # b = r_x min(4 e, 2 e + delta) >= sup |gate| at non-targets
    margin: float
    d: int
    q: int
    d_e: int
    widths: tuple  # hidden widths (w1, w2, w3) and the output q d
    norms: tuple  # per layer: {"fro", "max_abs", "bias_norm"}

    def as_dict(self) -> dict:
        return asdict(self)


def prop26_transition(
    omega,
    d: int,
    q: int,
    *,
    eps: Optional[float] = 0.1,
    r_x: float,
    mu: Optional[float] = None,
    knots: TransitionKnots = TransitionKnots(),
    margin: float = DEFAULT_MARGIN,
) -> Transition:
    """Prop 26: the four-layer transition for the codes ``omega`` (Codebook or (N, d_e) tensor),
    tokens in R^d, q slots, with its :class:`TransitionGuarantee` attached as ``.guarantee``.

    ``eps``: the requested target accuracy; the knot counts are derived from it (half of eps
    for the gate, half for products and threshold; docs/derivations/rnn-transition.md) unless
    ``knots.product`` / ``knots.gate`` are given. The weights are
    ``qstr.constructions.recurrent.transition_weights`` at those knots, gate bands and threshold.
    The certified eps (<= requested) is ``transition.guarantee.eps``. ``r_x``: the token radius
    the guarantee covers. ``mu``: the coherence (default: the Codebook's exact mu, or measured);
    must be <= 1/2 (Assumption 3).
    Codes whose entries all lie in {0, +-R} (Rademacher, RS-Hadamard) get 3 or 5 product knots,
    exact on every codeword pair ("alphabet" certificate); other codes get the uniform Lemma 22
    certificate d_e h^2 / 16.
    """
    d = validate.positive_int("d", d)
    q = validate.positive_int("q", q)
    r_x = validate.positive_float("r_x", r_x)
    margin = validate.positive_float("margin", margin)
    if not isinstance(knots, TransitionKnots):
        raise ValueError(f"knots must be a TransitionKnots, got {type(knots).__name__}")
    product_knots, gate_knots = knots.product, knots.gate
    om, book_mu = codes_of(omega)
    om = om.detach().to(device="cpu", dtype=F64)
    N, d_e = om.shape
    if mu is None:
        mu = book_mu if book_mu is not None else coherence(om)
    mu = validate.positive_float("mu", mu, allow_zero=True)
    if mu > 0.5 + MU_TOL:
        raise ValueError(
            f"omega has coherence mu = {mu:.6g} but Prop 26 needs mu <= 1/2 (Assumption 3); "
            f"use constructions.codes.rs_hadamard_codebook or a larger d_e"
        )
    R, nu, alpha = code_stats(om)
    if R == 0:
        raise ValueError("omega must not be all zeros")
    if eps is not None:
        eps = validate.positive_float("eps", eps)
    elif product_knots is None or gate_knots is None:
        raise ValueError(
            "eps must be a positive number unless both knots.product and knots.gate are given"
        )

    # ---------------- products (Lemma 22)
    if product_knots is not None:
        K1 = validate.positive_int("product_knots", product_knots, minimum=2)
        exact = alpha is not None and (K1 - 1) % (alpha - 1) == 0
        delta1 = 0.0 if exact else d_e * product_error(R, K1)
    elif alpha is not None:
        K1, exact, delta1 = alpha, True, 0.0
    else:
        exact = False
        dA = min(eps / (4 * r_x) - nu, (0.5 - mu - margin) * (1 - 1e-9))
        dB = (eps / 2 - 2 * r_x * nu - 4 * r_x * (mu - 0.5 + margin)) / (6 * r_x)
        if dB <= 0.5 - mu:  # dB prices b ~ 4 r_x (mu + delta_1 - 1/2): only valid when that is > 0
            dB = -math.inf
        target = max(dA, dB)
        if target <= 0:
            raise ValueError(
                f"eps = {eps:g} is too small for r_x = {r_x:g}, mu = {mu:g} "
                f"and the code norm defect {nu:.3g}"
            )
        K1 = max(2, math.ceil(1 + math.sqrt(d_e * R * R / target)))
        delta1 = d_e * product_error(R, K1)
    s_max = 1 + nu + delta1 + margin
    excess = max(0.0, mu + delta1 - 0.5) + margin

    # ---------------- gate (Lemma 24) and threshold
    if gate_knots is not None:
        bands = gate_bands(r_x, validate.positive_int("gate_knots", gate_knots), s_max)
    else:
        budget = eps - 4 * r_x * excess - 2 * r_x * (delta1 + nu)
        if budget <= 0:
            raise ValueError(
                f"eps = {eps:g} is too small: the products and threshold already need "
                f"{eps - budget:.3g} (r_x = {r_x:g}, mu = {mu:g})"
            )
        bands = gate_bands(r_x, max(1, math.ceil((s_max - 0.5) * r_x / budget)), s_max)
    b = bands.leak(excess)
    eps_cert = b + bands.error + 2 * r_x * (delta1 + nu)

    t = transition_weights(om, d, q, product_knots=K1, bands=bands, threshold=b)
    norms = t.norms()
    t.guarantee = TransitionGuarantee(
        eps=eps_cert,
        eps_requested=eps,
        r_x=r_x,
        mu=mu,
        norm_defect=nu,
        code_range=R,
        product_knots=K1,
        product_certificate="alphabet" if exact else "uniform",
        product_error=product_error(R, K1),
        inner_product_error=delta1,
        gate_knots=bands.knots,
        gate_delta=bands.delta,
        gate_slope=bands.M,
        gate_error=bands.error,
        s_max=s_max,
        non_target_excess=excess,
        threshold=b,
        margin=margin,
        d=d,
        q=q,
        d_e=d_e,
        widths=t.widths + (t.d_h,),
        norms=norms,
    )
    return t


@dataclass(frozen=True)
class RNNGuarantee:
    """Cor 27 and Prop 28 for the construction.

    Cor 27: for ||x_j|| <= r_x, h_fwd_i block l is exactly 0 when t_l >= i and within
    ``state_eps`` (sup norm) of x_{t_l} when t_l < i (symmetrically for h_bwd), for every N.
    Prop 28: |y_hat_i - g_net(x_{t_1..q})| <= ``prediction_error`` = lipschitz sqrt(q d) state_eps,
    lipschitz = ||a_g|| ||W_g||_op; add eps_2NN for |y_hat_i - g(x_t)|.
    """

    state_eps: float
    r_x: float
    r_h: float
    mu: float
    lipschitz: float
    prediction_error: float
    transition_widths: tuple
    output_widths: tuple
    transition: TransitionGuarantee

    def as_dict(self) -> dict:
        return asdict(self)


def _rnn_guarantee(rnn: RNNConstruction, mu: float) -> RNNGuarantee:
    """Cor 27's state error and Prop 28's prediction error of ``rnn`` (its transition's guarantee
    attached)."""
    tg = rnn.transition.guarantee
    g_net = rnn.g_net
    W_g = g_net.W.to(F64)
    lip = float(g_net.a.to(F64).norm() * torch.linalg.matrix_norm(W_g, ord=2))
    qd = rnn.transition.d_h
    return RNNGuarantee(
        state_eps=tg.eps,
        r_x=tg.r_x,
        r_h=rnn.r_h,
        mu=mu,
        lipschitz=lip,
        prediction_error=lip * math.sqrt(qd) * tg.eps,
        transition_widths=rnn.transition.widths,
        output_widths=rnn.output_widths,
        transition=tg,
    )


def prop28_rnn(
    omega,
    d: int,
    g_net: TwoLayerNet,
    *,
    q: Optional[int] = None,
    eps: float = 0.1,
    r_x: Optional[float] = None,
    r_h: Optional[float] = None,
    **transition_kw,
) -> RNNConstruction:
    """Prop 28: the RNN for simple-qSTR with Assumption 2 net ``g_net`` on vec(x_{t_1..q}) in
    R^{q d}, with its :class:`RNNGuarantee` attached as ``.guarantee`` (and the transition's
    :class:`TransitionGuarantee` as ``.transition.guarantee``).

    ``omega``: Codebook (or (N, d_e) tensor) of the N positions. ``r_x`` defaults to
    :func:`token_radius` (d, N). ``r_h`` defaults to sqrt(q)(r_x + sqrt(d) eps_cert) (Cor 27);
    a smaller value is refused. Extra keywords (``mu``, ``knots``, ``margin``) go to
    :func:`prop26_transition`; the weights are ``qstr.constructions.recurrent.rnn_weights``.
    """
    d = validate.positive_int("d", d)
    q = rnn_tokens(g_net, d, q)
    om, _ = codes_of(omega)
    N = om.shape[0]
    if q > N:
        raise ValueError(f"q must satisfy 1 <= q <= N = {N}, got {q}")
    r_x = token_radius(d, N) if r_x is None else validate.positive_float("r_x", r_x)
    tr = prop26_transition(omega, d, q, eps=eps, r_x=r_x, **transition_kw)
    need = math.sqrt(q) * (r_x + math.sqrt(d) * tr.guarantee.eps)
    if r_h is None:
        r_h = need
    elif not (float(r_h) >= need):
        raise ValueError(
            f"r_h must be >= sqrt(q)(r_x + sqrt(d) eps) = {need:.6g} (Cor 27), got {r_h}"
        )
    rnn = rnn_weights(omega, tr, g_net, r_h=float(r_h))
    rnn.guarantee = _rnn_guarantee(rnn, tr.guarantee.mu)
    return rnn


def teacher_rnn(N: int, d: int, q: int, eps: float = 0.1, seed: int = 0, width: int = 8):
    """Prop 28's RNN for a seeded teacher link: RS-Hadamard codes (mu <= 1/2), a width-``width``
    teacher from ``seed``, r_x = token_radius(d, N) (what ``qstr construct rnn`` writes)."""
    N = validate.positive_int("N", N)
    d = validate.positive_int("d", d)
    q = validate.positive_int("q", q)
    if q > N:
        raise ValueError(f"q must satisfy 1 <= q <= N = {N}, got {q}")
    seed = validate.seed("seed", seed)
    eps = validate.positive_float("eps", eps)
    g = torch.Generator().manual_seed(seed)
    link = make_link("teacher", q, d, generator=g, width=width)
    book = rs_hadamard_codebook(N, mu=0.5, dtype=F64)
    return prop28_rnn(book, d, link.two_layer_net(), q=q, eps=eps)
