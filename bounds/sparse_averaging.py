"""The single sparse-averaging head (remark after Prop 3): the coherence below which it separates
the q keys of a set from the others, the closed-form bound on its error, the alpha chosen from it,
and the builder that attaches the :class:`~qstr.bounds.guarantee.Guarantee`. Derivation:
docs/derivations/sparse-averaging.md."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from qstr.bounds.guarantee import Guarantee, _logistic, _real, _weight_norms
from qstr.constructions import validate
from qstr.constructions.attention import Construction, sparse_average_weights

__all__ = [
    "separation_limit",
    "sparse_average_head",
    "sparse_average_guarantee",
    "sparse_average_leak",
    "sparse_average_within",
    "sparse_average_error_bound",
    "sparse_average_alpha",
    "sparse_average_mu_needed",
]


def separation_limit(q: int) -> float:
    """1 / (2q - 1) (remark after Prop 3): the single averaging head separates in-set from
    out-of-set keys only for mu below it (in-set scores >= A(1 - (q-1) mu) beat out-of-set
    scores <= A q mu); ``sparse_average_head`` refuses codes at or above it."""
    q = validate.positive_int("q", q)
    return 1.0 / (2 * q - 1)


# ============================================================================ closed forms


def _sparse_args(N, q, mu):
    N = validate.positive_int("N", N)
    q = validate.positive_int("q", q)
    if q > N:
        raise ValueError(f"q must satisfy 1 <= q <= N = {N} (distinct indices), got q = {q}")
    mu = _real("mu", mu)
    limit = separation_limit(q)
    if not 0 <= mu < limit:
        raise ValueError(
            f"mu must lie in [0, 1/(2q - 1)) = [0, {limit:.6g}) for the single "
            f"sparse-averaging head "
            f"(in-set scores >= A(1 - (q-1) mu) must beat out-of-set scores <= A q mu), "
            f"got mu = {mu:.6g}"
        )
    return N, q, mu


def sparse_average_leak(*, N: int, q: int, mu: float, A: float) -> float:
    """L <= X / (1 + X), X = ((N - q) / q) e^{-A (1 - (2q - 1) mu)}: softmax mass outside the set.

    A = alpha c^2. Keys in the set score >= A (1 - (q-1) mu), keys outside <= A q mu.
    """
    N, q, mu = _sparse_args(N, q, mu)
    return _sparse_leak(N, q, mu, validate.positive_float("A", A, allow_zero=True))


def _sparse_leak(N, q, mu, A) -> float:
    return 0.0 if N == q else _logistic(math.log((N - q) / q) - A * (1 - (2 * q - 1) * mu))


def sparse_average_within(*, q: int, leak: float, rho: float) -> float:
    """2 max_{0 <= k <= q-1} [(1 - L) k rho / (k rho + q - k) - k / q]_+
    (the in-set part of ||pi - w||_1).

    For a within-set softmax whose weights differ by a factor <= rho, and outside mass L.
    """
    q = validate.positive_int("q", q)
    L = _real("leak", leak)
    rho = _real("rho", rho)
    best = 0.0
    for k in range(1, q):
        best = max(best, (1 - L) * k * rho / (k * rho + q - k) - k / q)
    return 2.0 * best


def _sparse_bound_A(N, q, mu, A):
    """r_x-free bound on ||pi - w||_1 at A = alpha c^2 (arguments already validated)."""
    L = _sparse_leak(N, q, mu, A)
    rho = math.exp(min(2 * A * max(q - 2, 0) * mu, 700.0))
    return 2 * L + sparse_average_within(q=q, leak=L, rho=rho)


def sparse_average_error_bound(
    *, N: int, q: int, mu: float, c: float, alpha: float, r_x: float
) -> float:
    """sup ||y_hat_i - (1/q) sum_k x_{t_ik}||_2 <= r_x (2 L + within(L, rho)) (distinct indices).

    A = alpha c^2, L = :func:`sparse_average_leak`, rho = e^{2 A (q - 2) mu} (the spread of
    the in-set scores: the common term <omega_a, omega_b> cancels, so only q - 2 cross terms
    differ), within = :func:`sparse_average_within`. Derivation and tightness discussion:
    docs/derivations/sparse-averaging.md. Needs mu < 1/(2q - 1).
    """
    N, q, mu = _sparse_args(N, q, mu)
    c = validate.positive_float("c", c)
    alpha = validate.positive_float("alpha", alpha, allow_zero=True)
    r_x = validate.positive_float("r_x", r_x)
    return r_x * _sparse_bound_A(N, q, mu, alpha * c * c)


def _sparse_min_A(N, q, mu):
    """(A*, min bound / r_x) over A >= 0; A* = inf when the bound only decreases
    (q <= 2 or mu = 0)."""
    if N == q:  # no outside keys: L = 0 and the bound only grows with A (rho = 1 at A = 0)
        return 0.0, 0.0
    if q <= 2 or mu == 0:
        return math.inf, 0.0
    grid = np.concatenate([[0.0], np.logspace(-3, 6, 721)])
    vals = np.array([_sparse_bound_A(N, q, mu, A) for A in grid])
    i = int(vals.argmin())
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    from scipy.optimize import minimize_scalar  # noqa: PLC0415 - lazy: scipy takes ~1 s to import

    res = minimize_scalar(
        lambda A: _sparse_bound_A(N, q, mu, A),
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-10 * max(hi, 1.0)},
    )
    A, v = (
        (float(res.x), float(res.fun)) if res.fun <= vals[i] else (float(grid[i]), float(vals[i]))
    )
    return A, v


def sparse_average_mu_needed(*, N: int, q: int, r_x: float, eps: float) -> float:
    """The largest mu (to 1e-6 relative) for which min over alpha of the bound is <= eps.

    For q <= 2 every mu < 1/(2q - 1) works (the bound tends to 0 as alpha grows): returns
    1/(2q - 1) (an open limit). Otherwise bisection (the minimal bound increases with mu).
    Scaling: mu ~ eps / (r_x (q - 2) ln(N r_x / eps)) (docs/derivations/sparse-averaging.md).
    """
    N = validate.positive_int("N", N)
    q = validate.positive_int("q", q)
    r_x = validate.positive_float("r_x", r_x)
    eps = validate.positive_float("eps", eps)
    return _sparse_mu_needed(N, q, r_x, eps)


def _sparse_mu_needed(N, q, r_x, eps) -> float:
    limit = separation_limit(q)
    if q <= 2 or N == q:
        return limit
    lo, hi = 0.0, limit
    while hi - lo > 1e-6 * hi:
        mid = 0.5 * (lo + hi)
        if r_x * _sparse_min_A(N, q, mid)[1] <= eps:
            lo = mid
        else:
            hi = mid
    return lo


def sparse_average_alpha(
    *, N: int, q: int, mu: float, c: float, r_x: float, eps: Optional[float] = None
) -> float:
    """alpha for the single averaging head.

    ``eps=None``: the alpha minimising :func:`sparse_average_error_bound` (1-D: log grid then
    scipy's bounded Brent); needs q >= 3 and mu > 0, otherwise the bound decreases to 0 as
    alpha grows and there is no minimiser (``ValueError``: pass eps). ``eps`` given: the
    smallest alpha with bound <= eps (first crossing on a fine log grid, then bisection);
    ``ValueError`` naming the mu that would be needed when eps is out of reach.
    """
    N, q, mu = _sparse_args(N, q, mu)
    c = validate.positive_float("c", c)
    r_x = validate.positive_float("r_x", r_x)
    eps = None if eps is None else validate.positive_float("eps", eps)
    return _sparse_alpha(N, q, mu, c, r_x, eps)


def _sparse_alpha(N, q, mu, c, r_x, eps) -> float:
    A_star, best = _sparse_min_A(N, q, mu)
    if eps is None:
        if math.isinf(A_star):
            raise ValueError(
                f"eps must be given for q = {q}, mu = {mu:.6g}, N = {N}: "
                f"the bound decreases to 0 as alpha "
                f"grows (no minimising alpha)"
            )
        return A_star / (c * c)
    f = lambda A: r_x * _sparse_bound_A(N, q, mu, A)  # noqa: E731
    if f(0.0) <= eps:
        return 0.0
    if math.isinf(A_star):
        # bound = 2 r_x L(A) with L decreasing to 0: invert exactly
        target = eps / (2 * r_x)
        A = (math.log((N - q) / q) + math.log1p(-target) - math.log(target)) / (
            1 - (2 * q - 1) * mu
        )
        while f(A) > eps:
            A = A * (1 + 4e-16) + 1e-300
        return A / (c * c)
    if r_x * best > eps:
        need = _sparse_mu_needed(N, q, r_x, eps)
        raise ValueError(
            f"eps = {eps:.6g} is out of reach for mu = {mu:.6g} "
            f"(N = {N}, q = {q}, r_x = {r_x:.6g}): the "
            f"best bound is {r_x * best:.6g}; mu <= {need:.6g} would be needed "
            f"(a codebook with smaller coherence)"
        )
    grid = np.concatenate([[0.0], np.logspace(-3, math.log10(max(A_star, 1e-3)), 2000), [A_star]])
    grid.sort()
    vals = np.array([f(A) for A in grid])
    j = int(np.argmax(vals <= eps))  # first grid point below eps
    lo, hi = float(grid[max(j - 1, 0)]), float(grid[j])
    for _ in range(200):
        if hi - lo <= 1e-13 * hi:
            break
        mid = 0.5 * (lo + hi)
        if f(mid) <= eps:
            hi = mid
        else:
            lo = mid
    return hi / (c * c)


# ============================================================================ certified builder


def _sparse_record(cons: Construction, *, r_x: float) -> Guarantee:
    """The single-head averaging guarantee of ``cons`` (arguments already validated)."""
    N, q, mu, c, alpha = cons.N, cons.q, cons.mu, cons.c, cons.alpha
    A = alpha * c * c
    return Guarantee(
        error_bound=r_x * _sparse_bound_A(N, q, mu, A),
        alpha=alpha,
        gap=A * (1 - (2 * q - 1) * mu),
        leak=_sparse_leak(N, q, mu, A),
        mu=mu,
        r_x=r_x,
        c=c,
        N=N,
        q=q,
        d=cons.d,
        d_e=cons.d_e,
        lipschitz=1.0,
        eps_2nn=0.0,
        weight_norms=_weight_norms(cons.model),
        assumptions=(
            f"Assumption 3 with measured mu={mu:.6g} < 1/(2q-1) = {separation_limit(q):.6g} "
            f"({cons.codebook.kind} codebook, d_e={cons.d_e})",
            f"||x_j|| <= r_x = {r_x:.6g} for every token of the prompt",
            "the q indices of each position are distinct",
            "error is the Euclidean norm of y_hat_i - (1/q) sum_k x_{t_ik}; "
            "output net is the exact identity",
        ),
        H=1,
        kind="sparse-average",
    )


def sparse_average_guarantee(construction: Construction, *, r_x: float) -> Guarantee:
    """What the single averaging head (remark after Prop 3) promises at its alpha for tokens with
    ||x_j|| <= r_x (docs/derivations/sparse-averaging.md)."""
    if not isinstance(construction, Construction) or construction.kind != "sparse-average":
        raise ValueError(
            "construction must be a sparse-averaging Construction (kind='sparse-average')"
        )
    _sparse_args(construction.N, construction.q, construction.mu)  # mu < separation_limit(q)
    return _sparse_record(construction, r_x=validate.positive_float("r_x", r_x))


def sparse_average_head(  # noqa: PLR0913 - the paper's symbols (Lemma 11, sparse)
    N: int,
    d: int,
    q: int,
    *,
    codebook,
    r_x: float,
    alpha: Optional[float] = None,
    eps: Optional[float] = None,
    c: Optional[float] = None,
    dtype=torch.float64,
    device=None,
) -> Construction:
    """ONE head computing (1/q) sum_k x_{t_ik} (remark after Prop 3) with its :class:`Guarantee`
    (docs/derivations/sparse-averaging.md).

    alpha: given, or the smallest reaching ``eps``, or (both None; q >= 3) the minimiser of the
    bound (:func:`sparse_average_alpha`). The weights and the other arguments are those of
    :func:`qstr.constructions.attention.sparse_average_weights`.
    """
    if alpha is not None and eps is not None:
        raise ValueError("give at most one of eps and alpha")
    r_x = validate.positive_float("r_x", r_x)
    eps = None if eps is None else validate.positive_float("eps", eps)
    cons = sparse_average_weights(
        N,
        d,
        q,
        codebook=codebook,
        alpha=0.0 if alpha is None else alpha,
        c=c,
        dtype=dtype,
        device=device,
    )
    _sparse_args(cons.N, cons.q, cons.mu)  # refuses codes at or above separation_limit(q)
    if alpha is None:
        cons = cons.with_alpha(_sparse_alpha(cons.N, cons.q, cons.mu, cons.c, r_x, eps))
    return cons.with_guarantee(_sparse_record(cons, r_x=r_x))
