"""Lemma 11 and Lemma 12: the closed-form bounds, and the builder that chooses alpha from them and
attaches the :class:`~qstr.bounds.guarantee.Guarantee`. Derivation: docs/derivations/lemma11.md.

The single sparse-averaging head's bounds and builder are ``qstr.bounds.sparse_averaging``'s and
the record ``qstr.bounds.guarantee``'s; both stay importable from here (listed in ``__all__``).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from qstr.bounds.guarantee import Guarantee, _logistic, _real, _weight_norms
from qstr.bounds.sparse_averaging import (
    sparse_average_alpha,
    sparse_average_error_bound,
    sparse_average_guarantee,
    sparse_average_head,
    sparse_average_leak,
    sparse_average_mu_needed,
    sparse_average_within,
)
from qstr.constructions import validate
from qstr.constructions.attention import Construction, lemma11_weights
from qstr.constructions.links import TwoLayerNet

__all__ = [
    "Guarantee",
    "lemma11",
    "lemma11_guarantee",
    "lemma11_leak",
    "lemma11_error_bound",
    "lemma11_alpha",
    "lemma12_radius",
    # re-exported: the single sparse-averaging head (qstr.bounds.sparse_averaging)
    "sparse_average_head",
    "sparse_average_guarantee",
    "sparse_average_leak",
    "sparse_average_within",
    "sparse_average_error_bound",
    "sparse_average_alpha",
    "sparse_average_mu_needed",
]


# ============================================================================ closed forms


def _lemma11_mu(mu) -> float:
    mu = _real("mu", mu)
    if not mu < 1:
        raise ValueError(
            f"mu must be < 1 for the Lemma 11 gap (coherence of the codes), got mu = {mu}"
        )
    if mu < 0:
        raise ValueError(f"mu must be >= 0 (a coherence), got {mu}")
    return mu


def lemma11_leak(N: int, gap: float) -> float:
    """delta = (N-1) e^{-gap} / (1 + (N-1) e^{-gap}): the softmax mass off the target (Lemma 11).

    If the target key scores at least ``gap`` above each of the other N - 1 keys, its
    softmax weight is >= 1 / (1 + (N-1) e^{-gap}), so the rest is at most delta. N = 1: 0.
    """
    return _leak(validate.positive_int("N", N), _real("gap", gap))


def _leak(N: int, gap: float) -> float:
    return 0.0 if N == 1 else _logistic(math.log(N - 1) - gap)


def lemma11_error_bound(
    *, N: int, q: int, mu: float, c: float, alpha: float, r_x: float, lipschitz: float
) -> float:
    """lipschitz * sqrt(q) * 2 * delta * r_x with delta = lemma11_leak(N, alpha c^2 (1 - mu)).

    ``q`` is the number of heads whose outputs the net reads (H = q in Lemma 11; H =
    len(slots) for :func:`lemma11` with fewer heads). Bound on |y_hat_i - g_net(x_{t_i})|
    over prompts with ||x_j|| <= r_x for all j (derivation: docs/derivations/lemma11.md).
    """
    N = validate.positive_int("N", N)
    q = validate.positive_int("q", q)
    mu = _lemma11_mu(mu)
    c = validate.positive_float("c", c)
    alpha = validate.positive_float("alpha", alpha, allow_zero=True)
    r_x = validate.positive_float("r_x", r_x)
    lipschitz = validate.positive_float("lipschitz", lipschitz, allow_zero=True)
    return _lemma11_error_bound(N, q, mu, c, alpha, r_x, lipschitz)


def _lemma11_error_bound(N, q, mu, c, alpha, r_x, lipschitz) -> float:
    return lipschitz * math.sqrt(q) * 2.0 * _leak(N, alpha * c * c * (1 - mu)) * r_x


def lemma11_alpha(
    *, N: int, q: int, mu: float, c: float, r_x: float, lipschitz: float, eps: float
) -> float:
    """The smallest alpha >= 0 with lemma11_error_bound(...) <= eps (exact inversion).

    With delta* = eps / (2 lipschitz sqrt(q) r_x): leak <= delta* iff
    gap >= ln((N-1)(1-delta*)/delta*), so alpha = that gap / (c^2 (1 - mu)), clamped at 0
    (alpha = 0 already suffices when delta* >= (N-1)/N, i.e. uniform attention is good
    enough, or when lipschitz = 0). Grows like ln N / (c^2 (1 - mu)).
    """
    N = validate.positive_int("N", N)
    q = validate.positive_int("q", q)
    mu = _lemma11_mu(mu)
    c = validate.positive_float("c", c)
    r_x = validate.positive_float("r_x", r_x)
    lipschitz = validate.positive_float("lipschitz", lipschitz, allow_zero=True)
    eps = validate.positive_float("eps", eps)
    return _lemma11_alpha(N=N, q=q, mu=mu, c=c, r_x=r_x, lipschitz=lipschitz, eps=eps)


def _lemma11_alpha(*, N, q, mu, c, r_x, lipschitz, eps) -> float:
    if lipschitz == 0 or N == 1:
        return 0.0
    target = eps / (2.0 * lipschitz * math.sqrt(q) * r_x)
    if target >= (N - 1) / N:
        return 0.0
    gap = math.log(N - 1) + math.log1p(-target) - math.log(target)
    alpha = max(0.0, gap / (c * c * (1 - mu)))
    for _ in range(64):  # guard against the last-ulp rounding of the inversion
        if _lemma11_error_bound(N, q, mu, c, alpha, r_x, lipschitz) <= eps:
            return alpha
        alpha = alpha * (1 + 4e-16) + 1e-300
    raise ArithmeticError(
        f"lemma11_alpha: alpha = {alpha!r} does not reach eps = {eps!r} (N={N}, q={q}, mu={mu}, "
        f"c={c}, r_x={r_x}, lipschitz={lipschitz}); a bug in the inversion, please report it"
    )


def lemma12_radius(d: int, n: int, N: int, C_x: float = 1.0) -> float:
    """r_x = sqrt(3 C_x e d log(n N)): Lemma 12's w.h.p. bound on all n N token norms."""
    d = validate.positive_int("d", d)
    n = validate.positive_float("n", n)  # a sample count; bounds evaluate it at real n
    N = validate.positive_int("N", N)
    C_x = validate.positive_float("C_x", C_x)
    if n * N < 2:
        raise ValueError(
            f"n * N must be >= 2 for the Lemma 12 radius (log(n N) > 0), got n = {n}, N = {N}"
        )
    return math.sqrt(3.0 * C_x * math.e * d * math.log(n * N))


# ============================================================================ certified builder


def _net_lipschitz(net: TwoLayerNet) -> float:
    lip = net.lipschitz
    if not math.isfinite(lip):
        raise ValueError("net has a non-finite Lipschitz constant (NaN weights?)")
    return lip


def _lemma11_record(
    cons: Construction, *, r_x: float, lipschitz: float, eps_2nn: float
) -> Guarantee:
    """The Lemma 11 guarantee of ``cons`` (arguments already validated)."""
    mu, c, alpha = cons.mu, cons.c, cons.alpha
    gap = alpha * c * c * (1 - mu)
    leak = _leak(cons.N, gap)
    bound = _lemma11_error_bound(cons.N, cons.H, mu, c, alpha, r_x, lipschitz)
    book = cons.codebook
    return Guarantee(
        error_bound=bound,
        alpha=alpha,
        gap=gap,
        leak=leak,
        mu=mu,
        r_x=r_x,
        c=c,
        N=cons.N,
        q=cons.q,
        d=cons.d,
        d_e=cons.d_e,
        lipschitz=lipschitz,
        eps_2nn=eps_2nn,
        weight_norms=_weight_norms(cons.model),
        assumptions=(
            f"Assumption 3 with measured mu={mu:.6g} "
            f"({book.kind} codebook, d_e={cons.d_e}, {book.N} rows)",
            f"||x_j|| <= r_x = {r_x:.6g} for every token of the prompt",
            f"bound against the Assumption 2 net (Lipschitz ||a|| ||W||_op = {lipschitz:.6g}); "
            f"|g - g_net| <= eps_2nn = {eps_2nn:.6g} on the r_x-ball is the user's claim",
            f"heads read slots {list(cons.slots)} of q={cons.q}",
        ),
        H=cons.H,
        kind="lemma11",
    )


def lemma11_guarantee(
    construction: Construction, net: TwoLayerNet, *, r_x: float, eps_2nn: float = 0.0
) -> Guarantee:
    """What Lemma 11 promises for weights built by ``lemma11_weights(..., net)``: the error bound at
    their alpha for tokens with ||x_j|| <= r_x (docs/derivations/lemma11.md)."""
    if not isinstance(construction, Construction) or construction.kind != "lemma11":
        raise ValueError("construction must be a Lemma 11 Construction (kind='lemma11')")
    if not isinstance(net, TwoLayerNet):
        raise ValueError(
            f"net must be a qstr.constructions.links.TwoLayerNet, got {type(net).__name__}"
        )
    return _lemma11_record(
        construction,
        r_x=validate.positive_float("r_x", r_x),
        lipschitz=_net_lipschitz(net),
        eps_2nn=validate.positive_float("eps_2nn", eps_2nn, allow_zero=True),
    )


def lemma11(  # noqa: PLR0913 - the paper's symbols (Lemma 11)
    N: int,
    d: int,
    q: int,
    net: TwoLayerNet,
    *,
    codebook=None,
    eps: Optional[float] = None,
    alpha: Optional[float] = None,
    r_x: float,
    c: Optional[float] = None,
    slots: Optional[Sequence[int]] = None,
    eps_2nn: float = 0.0,
    dtype=torch.float64,
    device=None,
) -> Construction:
    """Lemma 11: H = len(slots) heads within ``eps`` of the Assumption 2 ``net`` on the r_x-ball,
    with the :class:`Guarantee` attached (docs/derivations/lemma11.md).

    Exactly one of ``eps`` (alpha = :func:`lemma11_alpha`, the smallest that reaches it) and
    ``alpha`` (the bound is computed for it). The weights, and the other arguments, are those of
    :func:`qstr.constructions.attention.lemma11_weights`; ``eps_2nn`` (sup |g - net| on the
    r_x-ball) is only recorded.
    """
    if (eps is None) == (alpha is None):
        raise ValueError(
            "give exactly one of eps (alpha is then chosen) and alpha (bound computed for it)"
        )
    r_x = validate.positive_float("r_x", r_x)
    eps_2nn = validate.positive_float("eps_2nn", eps_2nn, allow_zero=True)
    eps = None if eps is None else validate.positive_float("eps", eps)
    cons = lemma11_weights(
        N,
        d,
        q,
        net,
        alpha=0.0 if alpha is None else alpha,
        codebook=codebook,
        c=c,
        slots=slots,
        dtype=dtype,
        device=device,
    )
    lip = _net_lipschitz(net)
    if eps is not None:
        cons = cons.with_alpha(
            _lemma11_alpha(
                N=cons.N, q=cons.H, mu=cons.mu, c=cons.c, r_x=r_x, lipschitz=lip, eps=eps
            )
        )
    return cons.with_guarantee(_lemma11_record(cons, r_x=r_x, lipschitz=lip, eps_2nn=eps_2nn))
