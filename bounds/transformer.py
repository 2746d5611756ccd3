"""Transformer bounds: the few-heads floors of Prop 3 [conf. Prop 4] and Prop 21,
Theorem 4 [conf. Thm 3] (general form Theorem 10) with explicit constants, and Theorem 6's FFN
requirement n >= N d [conf. Thm 9] for comparison.
Derivations: docs/derivations/few-heads.md, docs/derivations/theorem4.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Callable, Optional, Sequence

import numpy as np

from qstr.bounds.perturbation import attention_lipschitz, state_radius
from qstr.bounds.search import smallest_true
from qstr.constructions import validate

__all__ = [
    "few_heads_floor",
    "few_heads_floor_per_position",
    "floor_fraction",
    "Theorem4Params",
    "Theorem4Bound",
    "theorem4_bound",
    "theorem4_sample_size",
    "ffn_sample_size",
    "loglog_slope",
    "C_APPROX",
    "default_code_dim",
    "max_moment_factor",
    "output_envelope",
]

# ---------------------------------------------------------------------------------------------
# Few heads: Props 3 and 21
# ---------------------------------------------------------------------------------------------


def _bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def floor_fraction(N: Optional[int] = None) -> float:
    """Fraction of output positions that carry the floor: (N - N//2) / N
    (positions i >= N//2, 0-based).

    ``N=None`` means an even N, fraction exactly 1/2. For odd N it is (N + 1) / (2N).
    """
    if N is None:
        return 0.5
    N = validate.positive_int("N", N, minimum=2)
    return (N - N // 2) / N


def few_heads_floor_per_position(q: int, H: int, d: int, restricted: bool) -> float:
    """Lower bound on E (y_hat_i - y_i)^2 at one position i >= N/2 of the few-heads task.

    ``restricted=True`` (Prop 21; needs d == 1): 2 (q - H) / q, clipped at 0.
    ``restricted=False`` (Prop 3): 2 (1 - H (q + d) / (q d)), clipped at 0.
    See :func:`few_heads_floor` for the statement and ``docs/derivations/few-heads.md``.
    """
    q = validate.positive_int("q", q)
    H = validate.positive_int("H", H)
    d = validate.positive_int("d", d)
    restricted = _bool("restricted", restricted)
    if restricted:
        if d != 1:
            raise ValueError(
                f"d must equal 1 when restricted=True (Prop 21 is the d = 1 case), got d = {d}"
            )
        return max(0.0, 2.0 * (q - H) / q)
    return max(0.0, 2.0 * (1.0 - H * (q + d) / (q * d)))


def few_heads_floor(q: int, H: int, d: int, restricted: bool, *, N: Optional[int] = None) -> float:
    """Lower bound on the position-averaged risk R = (1/N) sum_i E (y_hat_i - y_i)^2
    of an H-head layer.

    Task (Prop 3): tokens x_j ~ N(0, I_d) for j < N//2 and x_j = 0 for j >= N//2
    (0-based); at positions i >= N//2 the index tuple is t_i = (first q tokens), at the other
    positions t_i is drawn independently of x; y_i = (1/sqrt(q d)) sum_k (||x_{t_ik}||^2 - d).
    The lower bound holds for *every* choice of attention matrices W^(1..H) and every feedforward
    layer (any width, any weights), i.e. it is an approximation lower bound, with infinite data.

    Prop 3 (seed; conference Prop 4), ``restricted=False``, any W_QK:
        R >= fraction * 2 (1 - H (q + d) / (q d)),   clipped at 0.
    Prop 21 (seed and conference), ``restricted=True``, d = 1 and W^(h) block-diagonal between the
    data and positional parts of the token (no data-position cross terms):
        R >= fraction * 2 (q - H) / q,   clipped at 0; zero exactly when H >= q.

    Here fraction = (N - N//2) / N is the share of positions that carry the floor (1/2 for even N,
    and for ``N=None``).

    Why (Lemma 40: Var(||g||^2 | V g) = 2 (k - r) for g ~ N(0, I_k), V with r orthonormal rows):
    at a position i >= N//2 the query token z_i contains no data (x_i = 0), so head h's logit for
    key j is <W^(h)T z_i, z_j> = <v_h, x_j> + (terms free of x), with v_h the data block of
    W^(h)T z_i, a fixed vector. Hence the logits see x_{1:q} only through the q functionals
    <v_h, x_k>, k = 1..q. Conditioned on these (and on the tokens j >= q, independent of
    x_{1:q}), the attention weights are fixed and the head's data output sum_j A_ij x_j is an
    affine map of x_{1:q} with d rows. So all H heads see x_{1:q} (qd Gaussian coordinates)
    through at most H (q + d) linear functionals (coefficients fixed after the conditioning) and
    Var(y_i | head outputs) >= 2 (qd - H (q + d)) / (qd). In the restricted class the logits are
    free of x altogether (the query has no data and there are no data-position terms), leaving
    H functionals of q scalar coordinates: floor 2 (q - H) / q. Full argument:
    ``docs/derivations/few-heads.md``.

    Parameters
    ----------
    q : number of relevant tokens (>= 1; with N given, q <= N//2 so that they are random).
    H : number of heads (>= 1).
    d : token dimension (>= 1; must be 1 when ``restricted``).
    restricted : Prop 21's block-diagonal class (True) or Prop 3's general class (False).
    N : sequence length (>= 2), or None for an even N (fraction 1/2).
    """
    per = few_heads_floor_per_position(q, H, d, restricted)
    frac = floor_fraction(N)
    if N is not None and q > N // 2:
        raise ValueError(
            f"q must satisfy 1 <= q <= N//2 = {N // 2} (the first q tokens must be random), "
            f"got q = {q}"
        )
    return frac * per


# ---------------------------------------------------------------------------------------------
# Theorem 4 with explicit constants
# ---------------------------------------------------------------------------------------------

C_APPROX = 4.0
"""Multiplier of eps_2NN in the approximation term: (sqrt(eps) + sqrt(eps))^2 = 4 eps
(Lemma 11 + Assumption 2)."""


def default_code_dim(N: int, delta: float) -> int:
    """d_e = ceil(8 ln(N^2 / delta)): Hoeffding + union bound for a Rademacher codebook with
    mu <= 1/2 w.p. 1 - delta."""
    return int(math.ceil(8.0 * (2.0 * math.log(N) - math.log(delta))))


def validate_problem_constants(params, *, mu_reason: str) -> None:
    """Check and normalise, in place, the constants shared by Theorems 4 and 7 (Assumptions 1-3)
    on a frozen dataclass: q, d, m_g, r_a, r_w, eps_2nn, C_x, C_y, s, mu in [0, 1), delta, d_e."""
    set_ = lambda k, v: object.__setattr__(params, k, v)  # noqa: E731 (frozen dataclass)
    for name in ("q", "d", "m_g"):
        set_(name, validate.positive_int(name, getattr(params, name)))
    for name in ("r_a", "r_w", "eps_2nn", "C_x", "C_y"):
        set_(name, validate.positive_float(name, getattr(params, name)))
    set_("s", validate.positive_float("s", params.s, allow_zero=True))
    mu = validate.positive_float("mu", params.mu, allow_zero=True)
    if not mu < 1.0:
        raise ValueError(f"mu must lie in [0, 1) ({mu_reason}), got {mu}")
    set_("mu", mu)
    set_("delta", validate.probability("delta", params.delta))
    if params.d_e is not None:
        set_("d_e", validate.positive_int("d_e", params.d_e))


@dataclass(frozen=True)
class Theorem4Params:
    """Problem constants of Theorem 4 (seed; conference Thm 3).
    H = q heads and width m = m_g are implied.

    q, d          : relevant tokens per output, token dimension.
    r_a, r_w, m_g : Assumption 2 net: ||a_g|| <= r_a / sqrt(m_g), ||(W_g, b_g)||_F <= sqrt(m_g) r_w,
                    width m_g.
    eps_2nn       : Assumption 2 error, E[(y_i - g_net(x_{t_i}))^2 ; all tokens in the r_x-ball]
                    <= eps_2nn.
    C_x, C_y, s   : Assumption 1: E||x||^r <= (C_x d r)^{r/2}, E|y|^r <= (sqrt(C_y) r^s)^r, r >= 1.
    mu            : coherence of the codebook (Assumption 3 has mu <= 1/2;
                    the derivation needs mu < 1).
    delta         : failure probability (the guarantee holds w.p. >= 1 - delta - (nN)^{-1/2}).
    c             : positional prefactor; None means sqrt(d / q).
    d_e           : code dimension; None means ceil(8 ln(N^2 / delta)) (grows like 16 ln N).
    """

    q: int
    d: int
    r_a: float
    r_w: float
    m_g: int
    eps_2nn: float
    C_x: float
    C_y: float
    s: float
    mu: float
    delta: float
    c: Optional[float] = None
    d_e: Optional[int] = None

    def __post_init__(self):
        validate_problem_constants(
            self, mu_reason="the score gap alpha c^2 (1 - mu) must be positive"
        )
        if self.c is not None:
            object.__setattr__(self, "c", validate.positive_float("c", self.c))

    @classmethod
    def default(cls, **overrides) -> "Theorem4Params":
        """The reference object used in the docs' tables: q = 2, d = 4, r_a = r_w = 1, m_g = 16,
        eps_2nn = 0.01, C_x = C_y = s = 1, mu = 1/2, delta = 0.05, c = sqrt(d/q),
        d_e by the Hoeffding rule."""
        base = dict(
            q=2,
            d=4,
            r_a=1.0,
            r_w=1.0,
            m_g=16,
            eps_2nn=0.01,
            C_x=1.0,
            C_y=1.0,
            s=1.0,
            mu=0.5,
            delta=0.05,
        )
        base.update(overrides)
        return cls(**base)

    @property
    def prefactor(self) -> float:
        return math.sqrt(self.d / self.q) if self.c is None else float(self.c)

    def code_dim(self, N: int) -> int:
        return default_code_dim(N, self.delta) if self.d_e is None else self.d_e

    @property
    def floor(self) -> float:
        """C_approx * eps_2NN: the bound's limit as n -> infinity."""
        return C_APPROX * self.eps_2nn


@dataclass(frozen=True)
class Theorem4Bound:
    """The explicit Theorem 4 bound R(Theta_hat) <= total and its pieces
    (docs/derivations/theorem4.md).

    total = approximation + tail + estimation + truncation, valid with probability >= confidence
    over the n training prompts (given a codebook with coherence mu).
    """

    n: int
    N: int
    total: float
    approximation: float  # C_approx * eps_2NN = 4 eps_2NN                      (step A)
    tail: float  # approximation error of Theta* off the r_x-ball     (step A')
    estimation: float  # 2 Rad + McDiarmid + Hoeffding                     (steps E1-E3)
    truncation: float  # (1 + 3/delta) sup_Theta E (loss - tau)_+           (step T)
    confidence: float  # 1 - delta - (nN)^{-1/2}
    # intermediate quantities
    r_x: float  # Lemma 12 radius sqrt(3 C_x e d ln(nN))
    r_z: float  # sqrt(r_x^2 + c^2 (q + 1))
    alpha: float  # Lemma 11 attention scale
    r_qk: float  # ||W^(h)||_F radius = alpha sqrt(d_e)
    r_ma: float  # ||a|| radius = r_a / sqrt(m_g)
    R_mw: float  # ||(W, b)||_F radius = sqrt(m_g) r_w
    R: float  # ||vec Theta*|| = sqrt(r_ma^2 + R_mw^2 + q r_qk^2)
    d_e: int
    D_e: int  # d + (q + 1) d_e
    n_params: int  # P = m_g (q D_e + 2) + q D_e^2
    lipschitz: float  # A = max(A1, A2): sup-norm Lipschitz constant of the parameter cover
    log_covering: float  # ln N(loss class, beta, L2(S)) <= P ln(1 + 2 A sqrt(n / tau))
    #                      at beta = tau / sqrt(n)
    rademacher: float  # bound on the empirical Rademacher complexity of the truncated loss class
    tau: float  # truncation level
    p: float  # moment order of the truncation step

    def terms(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def max_moment_factor(p: float, N: int) -> float:
    """Lemma 20's moment of the maximum (docs/derivations/theorem4.md, (1b); Lemma 12's union
    bound): psi(p) = min_{r >= 2p} r N^{2/r}, and under Assumption 1
    (E max_j ||x_j||^{2p})^{1/p} <= C_x d psi(p) for the maximum over N tokens."""
    r = max(2.0 * p, 2.0 * math.log(N))
    return r * math.exp(2.0 * math.log(N) / r)


def output_envelope(M, K: float, q: int, c: float):
    """Lemma 20's output envelope (docs/derivations/theorem4.md, (2.1)): |f_Theta(X)_i| <= B(X) =
    K sqrt(q (M^2 + c^2 (q+1)) + 1) for every Theta with ||a|| ||(W, b)||_F <= K and q heads,
    M = max_j ||x_j||; its 4 B^2 = kappa_1 M^2 + kappa_0."""
    return K * (q * (M * M + c * c * (q + 1)) + 1) ** 0.5


def theorem4_bound(n: int, N: int, params: Theorem4Params) -> Theorem4Bound:
    """Explicit form of Theorem 4 (seed; conference Thm 3; general Thm 10)
    for n prompts of length N.

    Constrained ERM on the point-wise empirical risk (one uniform position per training prompt)
    over the class  ||a|| <= r_a / sqrt(m_g),  ||(W, b)||_F <= sqrt(m_g) r_w,  ||W^(h)||_F <= r_qk
    (h = 1..q), r_qk = alpha sqrt(d_e), which contains the Lemma 11 construction. With probability
    >= 1 - delta - (nN)^{-1/2}:

        R(Theta_hat) <= 4 eps_2NN + tail + estimation + truncation,

        estimation = (tau / sqrt n) [8 + 12 sqrt(P ln(1 + 2 A sqrt(n / tau)))
                                     + 3 sqrt(ln(6/delta) / 2) + sqrt(ln(3/delta) / 2)],
        truncation = 2 tau e^{-p} (1 + 3/delta)  (= tau / sqrt n for the chosen p),
        tail       = 2 (K^2 (q C_x d psi(2) + q c^2 (q+1) + 1) + C_y 16^s) n^{-3/4} N^{-1/4},

    with K = r_a r_w, p = ln(2 (1 + 3/delta) sqrt n), tau = e max(4 C_y (2p)^{2s},
    4 K^2 q (C_x d psi(p) + c^2 (q+1)) + 4 K^2), psi(p) = min_{r >= 2p} r N^{2/r},
    P = m_g (q D_e + 2) + q D_e^2 and A = 6 K max(sqrt(q r_z^2 + 1), sqrt(q) r_qk r_z^3).
    N enters only through ln N (r_x, alpha, d_e, psi) and the decreasing factor N^{-1/4}.
    Every step is proved in docs/derivations/theorem4.md.
    """
    n = validate.float_count("n", n)
    N = validate.positive_int("N", N, minimum=2)  # in logs: any N
    if not isinstance(params, Theorem4Params):
        raise ValueError(f"params must be a Theorem4Params, got {type(params).__name__}")
    P_ = params
    q, d, m = P_.q, P_.d, P_.m_g
    delta = P_.delta
    c2 = P_.prefactor**2
    K = P_.r_a * P_.r_w
    r_ma, R_mw = P_.r_a / math.sqrt(m), math.sqrt(m) * P_.r_w
    ln_N = math.log(N)  # math.log is exact for huge ints; everything below stays in log space
    ln_nN = math.log(n) + ln_N

    # Lemma 12 and the encoding radius
    r_x = math.sqrt(3.0 * P_.C_x * math.e * d * ln_nN)
    r_z = math.sqrt(r_x * r_x + c2 * (q + 1))
    # Lemma 11: attention scale, weights of the construction
    d_e = P_.code_dim(N)
    D_e = d + (q + 1) * d_e
    ln_arg = math.log(N - 1) + math.log(2.0 * K * math.sqrt(q) * r_x / math.sqrt(P_.eps_2nn))
    alpha = max(0.0, ln_arg) / (c2 * (1.0 - P_.mu))
    r_qk = alpha * math.sqrt(d_e)
    R = math.sqrt(r_ma**2 + R_mw**2 + q * r_qk**2)

    # truncation level (step T)
    p = max(1.0, math.log(2.0 * (1.0 + 3.0 / delta) * math.sqrt(n)))
    kappa1 = 4.0 * K * K * q
    kappa0 = 4.0 * K * K * (q * c2 * (q + 1) + 1.0)
    tau = math.e * max(
        4.0 * P_.C_y * (2.0 * p) ** (2.0 * P_.s),
        kappa1 * P_.C_x * d * max_moment_factor(p, N) + kappa0,
    )
    truncation = 2.0 * tau * math.exp(-p) * (1.0 + 3.0 / delta)

    # covering (Lemmas 13-16, Prop 17) and Dudley (Lemma 18)
    n_params = m * (q * D_e + 2) + q * D_e * D_e
    rho = state_radius(r_z, q)  # Lemma 13
    A = 6.0 * K * max(rho, math.sqrt(q) * r_qk * attention_lipschitz(r_z))  # Lemma 15
    sqrt_n = math.sqrt(n)
    log_cov = n_params * math.log1p(2.0 * A * sqrt_n / math.sqrt(tau))
    rad = 4.0 * tau / sqrt_n + 6.0 * tau * math.sqrt(log_cov / n)
    estimation = 2.0 * rad + tau * (
        3.0 * math.sqrt(math.log(6.0 / delta) / (2.0 * n))
        + math.sqrt(math.log(3.0 / delta) / (2.0 * n))
    )

    # approximation (Lemma 11 + Assumption 2) and its tail off the r_x-ball
    approximation = C_APPROX * P_.eps_2nn
    l2_loss = 2.0 * (
        K * K * (q * P_.C_x * d * max_moment_factor(2.0, N) + q * c2 * (q + 1) + 1.0)
        + P_.C_y * 16.0**P_.s
    )
    tail = l2_loss * math.exp(0.5 * ln_N - 0.75 * ln_nN)  # sqrt(N (nN)^{-3/2}) = n^{-3/4} N^{-1/4}

    total = approximation + tail + estimation + truncation
    return Theorem4Bound(
        n=n,
        N=N,
        total=total,
        approximation=approximation,
        tail=tail,
        estimation=estimation,
        truncation=truncation,
        confidence=1.0 - delta - math.exp(-0.5 * ln_nN),
        r_x=r_x,
        r_z=r_z,
        alpha=alpha,
        r_qk=r_qk,
        r_ma=r_ma,
        R_mw=R_mw,
        R=R,
        d_e=d_e,
        D_e=D_e,
        n_params=n_params,
        lipschitz=A,
        log_covering=log_cov,
        rademacher=rad,
        tau=tau,
        p=p,
    )


def theorem4_sample_size(
    target: float, N: int, params: Theorem4Params, *, n_max: Optional[int] = None
) -> int:
    """Smallest n with ``theorem4_bound(n, N, params).total <= target``
    (bracketing + bisection on log n).

    Doubling from n = 1 brackets the first power of two that meets ``target``; bisection at the
    geometric midpoint then finds the crossing n with bound(n) <= target < bound(n - 1). This is
    the smallest such n when the bound is nonincreasing in n (checked on grids in the tests). For
    n beyond 2^53 the bound is evaluated at float(n), so the last digits are only as exact as a
    double allows. Raises ``ValueError`` if ``target`` is not above the floor 4 eps_2NN (the
    limit of the bound as n -> infinity), or if no n <= n_max (default 10^300) reaches it.
    """
    n_max = 10**300 if n_max is None else validate.positive_int("n_max", n_max)
    target = validate.positive_float("target", target)
    N = validate.positive_int("N", N, minimum=2)
    floor = params.floor
    if not target > floor:
        raise ValueError(
            f"target must exceed the approximation floor C_approx * eps_2nn = "
            f"{C_APPROX:g} * {params.eps_2nn:g}"
            f" = {floor:g}, got target = {target:g}"
        )
    n = smallest_true(
        lambda n: theorem4_bound(n, N, params).total <= target, limit=n_max, log_bisect=True
    )
    if n is None:
        raise ValueError(
            f"target = {target:g} is not reached for n <= n_max = {n_max:.3g}; raise n_max"
        )
    return n


def ffn_sample_size(N: int, d: int) -> int:
    """Theorem 6 (seed; conference Thm 9): FFNs need n >= N d samples (E_u R >= 1 - n/(N d))."""
    N = validate.positive_int("N", N)
    d = validate.positive_int("d", d)
    return N * d


def loglog_slope(fn: Callable[[int], float], Ns: Sequence[int]) -> np.ndarray:
    """Successive slopes d log fn / d log N between consecutive Ns (length len(Ns) - 1).

    Polylogarithmic growth shows slopes tending to 0 (n = (ln N)^k has slope k / ln N); the FFN's
    n = N d has slope exactly 1.
    """
    Ns = [int(N) for N in Ns]
    if len(Ns) < 2:
        raise ValueError(f"Ns must hold at least 2 values, got {len(Ns)}")
    if any(N <= 0 for N in Ns) or any(b <= a for a, b in zip(Ns, Ns[1:], strict=False)):
        raise ValueError("Ns must be positive and strictly increasing")
    vals = [fn(N) for N in Ns]
    try:  # math.log handles huge Python ints (sample sizes and N beyond float range)
        log_v = np.array([math.log(v) for v in vals], dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        raise ValueError("fn must return finite positive values on Ns") from None
    if not np.all(np.isfinite(log_v)):
        raise ValueError("fn must return finite positive values on Ns")
    log_N = np.array([math.log(N) for N in Ns], dtype=np.float64)
    return np.diff(log_v) / np.diff(log_N)
