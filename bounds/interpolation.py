"""Lemmas 36-38's constants and guarantees, Theorem 9's memoriser (seed numbering; conference
Theorem 7) and the generalising slot-memory RNN it competes with (Prop 8's quantities).

Each function picks the parameters the lemma prescribes (Lemma 37's gap eps_n and norm factor 2,
the state radius sqrt(N - 1) r_x), calls the builder of ``qstr.constructions.interpolation`` with
them and attaches the guarantee derived in docs/derivations/interpolation.md. Every constant is
defined here, once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Union

import torch

from qstr.constructions import validate
from qstr.constructions.codes import coherence
from qstr.constructions.interpolation import (
    Lemma36Net,
    MemoriserLayout,
    float64_points,
    interpolate_points,
    memorised_points,
    memorising_rnn,
    parameter_norm2,
    separating_direction,
)
from qstr.constructions.paper_models import DeepTransitionBiRNN
from qstr.constructions.slot_memory import slot_memory_rnn

__all__ = [
    "C38_A",
    "C36_PRIME",
    "C36",
    "LEMMA37_NORM_FACTOR",
    "gap_threshold",
    "lemma37_union_bound",
    "lemma38_bound",
    "lemma36_constant",
    "Lemma36Guarantee",
    "lemma36_net",
    "MemoriserGuarantee",
    "memoriser",
    "SlotMemoryGuarantee",
    "slot_memory",
]

#: Lemma 38: ||a'||^2 <= C38_A ||y||^2 / eps^2 (derived; tight for alternating labels).
C38_A = 16.0
#: (144/pi)(5 + pi/72) = (C36 / 2)^2: Lemma 36's A P <= C36_PRIME n^5 ||y||^2 at eps_n.
C36_PRIME = C38_A * 9.0 / math.pi * (5.0 + math.pi / 72.0)
#: ||vec||^2 <= C36 n^{5/2} ||y|| for the Lemma 36 net (gaps eps_n, ||z||^2 <= 2n, n >= 2): ~= 30.41
C36 = 2.0 * math.sqrt(C36_PRIME)
#: Lemma 37's norm event ||z||^2 <= LEMMA37_NORM_FACTOR n (Markov: probability >= 1/2).
LEMMA37_NORM_FACTOR = 2.0


# ---------------------------------------------------------------------------------- Lemma 37


def gap_threshold(n: int) -> float:
    """eps_n = sqrt(pi) / (3 n^2), the pairwise gap Lemma 37 guarantees with probability >= 1/3."""
    n = validate.positive_int("n", n, minimum=2)
    return math.sqrt(math.pi) / (3.0 * n * n)


def lemma37_union_bound(n: int, eps: float) -> float:
    """Lemma 37, steps 1-3: P(some |z_i - z_j| < eps) <= C(n, 2) 2 eps / sqrt(4 pi), the density
    of z_i - z_j ~ N(0, 2) being at most 1 / sqrt(4 pi); (n - 1) / (6n) at eps_n
    (docs/derivations/interpolation.md)."""
    return math.comb(n, 2) * eps / math.sqrt(math.pi)


# ---------------------------------------------------------------------------------- Lemma 38


def lemma38_bound(y: torch.Tensor, eps: float) -> float:
    """Lemma 38's bound ||a'||^2 <= 16 ||y||^2 / eps^2 on the net of
    ``qstr.constructions.interpolation.interpolate_sorted(z, y, eps)``
    (docs/derivations/interpolation.md)."""
    return C38_A * float(y @ y) / eps**2


# ---------------------------------------------------------------------------------- Lemma 36


def lemma36_constant(K_y: float = 6.0) -> float:
    """C with ||vec||^2 <= C n^3 whenever ||y||^2 <= K_y n: C36 sqrt(K_y) (K_y = 6: ~74.5).

    For labels with E y^2 = 1 (general 1STR: y ~ N(0, 1)) Markov gives ||y||^2 <= K_y n with
    probability >= 1 - 1/K_y; with Lemma 37's 1/3 the whole Lemma 36 holds w.p. >= 1/3 - 1/K_y.
    """
    K_y = validate.positive_float("K_y", K_y)
    return C36 * math.sqrt(K_y)


@dataclass(frozen=True)
class Lemma36Guarantee:
    """What Lemma 36 promises for a net built on a direction with gap ``eps``
    (docs/derivations/interpolation.md).

    ``a_bound`` = C38_A ||y||^2 / eps^2 bounds Lemma 38's ||a'||^2; ``bound`` = 2 sqrt(a_bound
    (n + 2 ||z||^2 + 2 eps^2)) bounds ||vec||^2 for this instance (measured ||y||, ||z||);
    ``bound_n`` = C36 n^{5/2} ||y|| is the bound that uses only ||z||^2 <= 2n and eps = eps_n.
    """

    eps: float
    a_bound: float
    bound: float
    bound_n: float


def _lemma36_guarantee(net: Lemma36Net, y2: float) -> Lemma36Guarantee:
    """Lemma 36's bounds for ``net`` on labels with ||y||^2 = y2."""
    n, direction = net.order.shape[0], net.direction
    eps = direction.threshold
    a_bound = C38_A * y2 / eps**2
    return Lemma36Guarantee(
        eps=eps,
        a_bound=a_bound,
        bound=2.0 * math.sqrt(a_bound * (n + 2.0 * direction.z_norm2 + 2.0 * eps**2)),
        bound_n=C36 * n**2.5 * math.sqrt(y2),
    )


def lemma36_net(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    generator: torch.Generator,
    threshold: Optional[float] = None,
    max_tries: int = 1000,
) -> tuple[Lemma36Net, Lemma36Guarantee]:
    """Lemma 36: a width-n two-layer ReLU net with f(x^(j)) = y^(j) for all j,
    ||vec||^2 = O(n^{5/2} ||y||), and its guarantee.

    x: (n, D) float64 points (Gaussian in the lemma; any distinct points work, with more tries),
    y: (n,) float64 labels. Lemma 37 picks v (gap eps = ``threshold``, default eps_n, and
    ||z||^2 <= 2n; :func:`~qstr.constructions.interpolation.separating_direction`), and
    :func:`~qstr.constructions.interpolation.interpolate_points` builds the net on it.
    """
    x = float64_points("x", x)
    n = x.shape[0]
    thr = gap_threshold(n) if threshold is None else threshold
    direction = separating_direction(
        x,
        generator=generator,
        threshold=thr,
        norm_factor=LEMMA37_NORM_FACTOR,
        max_tries=max_tries,
    )
    net = interpolate_points(x, y, direction)
    return net, _lemma36_guarantee(net, float(y @ y))


# ------------------------------------------------------------------- Theorem 9: the memoriser


@dataclass(frozen=True)
class MemoriserGuarantee:
    """What :func:`memoriser` promises.

    The model's output at the memorised position(s) equals the training labels exactly (up to
    float64 rounding) on the n training prompts, for ANY codebook and index tuples, because f_y
    reads only the x-block of z_i and the transitions are zero (U = 0: states unused).
    ``norm2`` is ||vec theta||^2 of the whole RNN (measured, all parameters); ``bound`` its
    certified bound after the depth rebalancing; ``n_points`` = n (one position) or n N (all).
    ``lemma36`` is the Lemma 36 net inside f_y, ``lemma36_guarantee`` its bounds.
    """

    position: Union[int, str]
    n_prompts: int
    N: int
    n_points: int
    depth: int
    width: int
    norm2: float
    bound: float
    bound_n: float  # C36 m^{5/2} ||y|| (depth 2), m = n_points
    lemma36: Lemma36Net
    lemma36_guarantee: Lemma36Guarantee
    tries: int


def memoriser(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    D_in: int,
    position: Union[int, str],
    generator: torch.Generator,
    layout: Optional[MemoriserLayout] = None,
    threshold: Optional[float] = None,
    max_tries: int = 1000,
) -> tuple[DeepTransitionBiRNN, MemoriserGuarantee]:
    """Theorem 9's interpolating RNN on n training prompts x (n, N, d), labels y (n, N), and its
    guarantee (docs/derivations/interpolation.md).

    ``position=i`` (0-based): memorise the labels y[:, i] (the point-wise empirical risk at
    position i is 0); inputs are the n tokens x[:, i] -- i.i.d. N(0, I_d), whatever N is -- so the
    norm is N-free. ``position="all"``: memorise every label using the n N tokens as points
    (exact, but the norm then grows with N). The RNN input z must have the x-block first
    (``D_in`` >= d, e.g. d + 2 d_e for the q = 1 RNN encoding). :func:`lemma36_net` on those
    points, then :func:`~qstr.constructions.interpolation.memorising_rnn` with ``layout`` (depth
    L of f_y, d_h, r_h; default ``MemoriserLayout()``). Certified: ||vec||^2 <= L (A P
    m^{L-2})^{1/L}, A = C38_A ||y||^2 / eps^2, P = m + 2 ||z||^2 + 2 eps^2 (m points); at depth
    2, <= C36 m^{5/2} ||y||.
    """
    layout = MemoriserLayout() if layout is None else layout
    pts, labels = memorised_points(x, y, position)
    n, N = x.shape[0], x.shape[1]
    l36, l36_gu = lemma36_net(
        pts, labels, generator=generator, threshold=threshold, max_tries=max_tries
    )
    model = memorising_rnn(l36, D_in=D_in, layout=layout)
    m, depth, direction = pts.shape[0], layout.depth, l36.direction
    y2 = float(labels @ labels)
    eps = direction.threshold
    A_bound = C38_A * y2 / eps**2
    P_bound = m + 2.0 * direction.z_norm2 + 2.0 * eps**2
    bound = depth * (A_bound * P_bound * float(m) ** (depth - 2)) ** (1.0 / depth)
    guarantee = MemoriserGuarantee(
        position=position,
        n_prompts=n,
        N=N,
        n_points=m,
        depth=depth,
        width=m,
        norm2=parameter_norm2(model),
        bound=bound,
        bound_n=C36 * m**2.5 * math.sqrt(y2),
        lemma36=l36,
        lemma36_guarantee=l36_gu,
        tries=direction.tries,
    )
    return model, guarantee


# ------------------------------------------------------------- the generalising RNN (Prop 8)


@dataclass(frozen=True)
class SlotMemoryGuarantee:
    """What :func:`slot_memory` promises (general 1STR, q = 1, y_i = <u, x_{t_i}>).

    Exact: y_hat_i = <u, x_{t_i}> at every position of every prompt whose tokens have
    ||x_j||_inf <= r_x and |<u, x_j>| <= r_x (true when ||x_j|| <= r_x), for any codebook with
    coherence ``mu`` < 1. Prop 8's quantities: state width ``d_h`` = N d, states in the
    ``r_h`` = sqrt(N - 1) r_x ball (never clipped on such prompts), read through U = identity
    on (h_fwd, h_bwd) (``U_op`` = 1), f_y(., z) is ``lipschitz``-Lipschitz in the state on the
    convex set where every block satisfies |<u, block>| <= r_x (sqrt 2: f_y reads one block of
    h_fwd + h_bwd), so L = ``lipschitz`` * r_h. ``norm2`` = ||vec theta||^2 (grows with N).
    """

    N: int
    d: int
    d_h: int
    r_x: float
    r_h: float
    mu: float
    U_op: float
    lipschitz: float
    L: float
    norm2: float


def slot_memory(
    omega: torch.Tensor,
    u: torch.Tensor,
    *,
    r_x: float,
    mu: Optional[float] = None,
) -> tuple[DeepTransitionBiRNN, SlotMemoryGuarantee]:
    """The exact generalising RNN for general 1STR of
    :func:`~qstr.constructions.slot_memory.slot_memory_rnn` with Prop 8's quantities attached
    (docs/derivations/interpolation.md, docs/derivations/rnn-lower-bounds.md).

    omega: (N, d_e) float64 unit codes (coherence mu < 1; ``mu`` defaults to the measured
    coherence); u: (d,) unit vector of the link; ``r_x``: the token radius. The state radius is
    r_h = sqrt(N - 1) r_x: N - 1 blocks of norm <= r_x (block i stays empty).
    """
    measured = coherence(omega)
    mu = measured if mu is None else mu
    r_x = validate.positive_float("r_x", r_x)
    N = omega.shape[0]
    r_h = math.sqrt(N - 1) * r_x
    model = slot_memory_rnn(omega, u, r_x=r_x, r_h=r_h, mu=mu)
    d = u.shape[0]
    lip = math.sqrt(2.0)
    guarantee = SlotMemoryGuarantee(
        N=N,
        d=d,
        d_h=N * d,
        r_x=r_x,
        r_h=r_h,
        mu=float(mu),
        U_op=1.0,
        lipschitz=lip,
        L=lip * r_h,
        norm2=parameter_norm2(model),
    )
    return model, guarantee
