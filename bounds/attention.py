"""Lemma 11, Lemma 12 and the single sparse-averaging head: the closed-form bounds, and the
builders that choose alpha from them and attach the :class:`Guarantee`. Derivations:
docs/derivations/lemma11.md, docs/derivations/sparse-averaging.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np
import torch

from qstr.constructions import validate
from qstr.bounds.sparse_averaging import separation_limit
from qstr.constructions.attention import Construction, lemma11_weights, sparse_average_weights
from qstr.constructions.links import TwoLayerNet

__all__ = [
    "Guarantee",
    "lemma11",
    "lemma11_guarantee",
    "lemma11_leak",
    "lemma11_error_bound",
    "lemma11_alpha",
    "lemma12_radius",
    "sparse_average_head",
    "sparse_average_guarantee",
    "sparse_average_leak",
    "sparse_average_within",
    "sparse_average_error_bound",
    "sparse_average_alpha",
    "sparse_average_mu_needed",
]


# ============================================================================ the record


@dataclass(frozen=True)
class Guarantee:
    """What a construction promises (all plain numbers).

    ``error_bound``: sup, over prompts whose tokens all satisfy ||x_j|| <= r_x, of
    |y_hat_i - g_net(x_{t_i})| (Lemma 11: against the Assumption 2 net; the end-to-end
    error against the link g adds ``eps_2nn``, see :attr:`end_to_end_bound`). For the
    sparse-averaging head it is the sup of the Euclidean error ||y_hat_i - mean_i||_2.
    ``alpha``: the attention scale; ``gap`` (Delta): the score gap between the target(s)
    and every other key; ``leak`` (delta): the bound on the softmax mass off the target(s);
    ``mu``: the measured coherence carried into the bound; ``c``: the encoding prefactor;
    ``N, q, d, d_e``: sizes (q = index slots of the encoding); ``H``: heads;
    ``lipschitz``: Lipschitz constant of the output net used in the bound
    (``TwoLayerNet.lipschitz`` = ||a|| ||W||_op for Lemma 11; 1 for the exact identity net
    of the averaging head); ``eps_2nn``: sup |g - g_net| on the r_x-ball (user supplied,
    0 for a teacher link); ``weight_norms``: Frobenius norms (``W_QK`` a tuple, one per
    head; ``W``, ``a``, ``b``); ``assumptions``: what the bound relies on, in words.
    """

    error_bound: float
    alpha: float
    gap: float
    leak: float
    mu: float
    r_x: float
    c: float
    N: int
    q: int
    d: int
    d_e: int
    lipschitz: float
    eps_2nn: float
    weight_norms: dict
    assumptions: Tuple[str, ...]
    H: int = 1
    kind: str = "lemma11"

    @property
    def end_to_end_bound(self) -> float:
        """error_bound + eps_2nn: the promised sup |y_hat_i - g(x_{t_i})| on the r_x-ball."""
        return self.error_bound + self.eps_2nn

    def as_dict(self) -> dict:
        """Plain floats / ints / strings / lists only
        (safe for ``torch.load(weights_only=True)``)."""
        norms = {}
        for k, v in self.weight_norms.items():
            norms[k] = [float(x) for x in v] if isinstance(v, (tuple, list)) else float(v)
        return {
            "error_bound": float(self.error_bound),
            "end_to_end_bound": float(self.end_to_end_bound),
            "alpha": float(self.alpha),
            "gap": float(self.gap),
            "leak": float(self.leak),
            "mu": float(self.mu),
            "r_x": float(self.r_x),
            "c": float(self.c),
            "N": int(self.N),
            "q": int(self.q),
            "d": int(self.d),
            "d_e": int(self.d_e),
            "H": int(self.H),
            "kind": str(self.kind),
            "lipschitz": float(self.lipschitz),
            "eps_2nn": float(self.eps_2nn),
            "weight_norms": norms,
            "assumptions": [str(s) for s in self.assumptions],
        }


# ============================================================================ closed forms


def _logistic(z: float) -> float:
    """1 / (1 + e^{-z}) without overflow."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _real(name: str, value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


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


# ---------------------------------------------------------------- sparse averaging


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


# ============================================================================ certified builders


def _weight_norms(model) -> dict:
    with torch.no_grad():
        return {
            "W_QK": tuple(float(model.W_QK[h].norm()) for h in range(model.H)),
            "W": float(model.W.norm()),
            "a": float(model.a.norm()),
            "b": float(model.b.norm()),
        }


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
