"""Props 26-28: the RNN construction's parameters and guarantees (the transition's knots and
threshold from eps, Prop 26; the states' radius, Cor 27; the prediction error, Prop 28), Lemma 12's
token radius, and ``teacher_rnn`` (the RNN ``qstr construct rnn`` writes).
docs/derivations/rnn-transition.md; the weights: qstr.constructions.transition (Prop 26) and
qstr.constructions.recurrent (Prop 28).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional

import torch

from qstr.constructions import validate
from qstr.constructions.codes import coherence, rs_hadamard_codebook
from qstr.constructions.links import TwoLayerNet, make_link
from qstr.constructions.recurrent import RNNConstruction, rnn_tokens, rnn_weights
from qstr.constructions.transition import Transition, code_stats, codes_of, transition_weights
from qstr.bounds.gadgets import gate_error, gate_leak, product_error
from qstr.constructions.relu import gate_bands

__all__ = [
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

F64 = torch.float64

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
    ``qstr.constructions.transition.transition_weights`` at those knots, gate bands and threshold.
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
    b = gate_leak(excess, r_x, bands.knots, s_max)
    eps_cert = b + gate_error(r_x, bands.knots, s_max) + 2 * r_x * (delta1 + nu)

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
        gate_error=gate_error(r_x, bands.knots, s_max),
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
