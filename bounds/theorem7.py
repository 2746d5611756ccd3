"""Theorem 7 (seed numbering; conference Thm 5): the explicit sample bound for constrained ERM
over the exact four-layer RNN class for simple-qSTR: the class's layer table (``prop28_layers``),
Lemmas 29-30's parameter-Lipschitz constants, Lemma 34's output growth and moments, the bound and
the sample size it needs. docs/derivations/rnn-lower-bounds.md, section 4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Optional, Sequence

from qstr.bounds.attention import lemma12_radius
from qstr.bounds.search import smallest_true
from qstr.bounds.transformer import default_code_dim, validate_problem_constants
from qstr.constructions import validate

__all__ = [
    "Theorem7Params",
    "Layer",
    "prop28_layers",
    "prop28_norm2",
    "layer_sensitivities",
    "rnn_state_gain",
    "rnn_parameter_lipschitz",
    "rnn_output_growth",
    "token_norm_moment",
    "rnn_output_moment",
    "Theorem7Bound",
    "theorem7_bound",
    "theorem7_sample_size",
]


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
