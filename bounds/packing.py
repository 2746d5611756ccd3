"""Lemmas 39 (mixed-norm Hölder) and 41 (packing numbers); Lemma 42's nets and certificate are
``qstr.bounds.lipschitz`` (weights: ``qstr.constructions.lipschitz``).
Derivations: docs/derivations/lemmas-39-41-42.md.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from qstr.bounds.search import smallest_true
from qstr.constructions import validate

INF = math.inf

# ============================================================================ Lemma 39


def _exponent(name: str, p) -> float:
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [1, inf], got {p!r}") from None
    if math.isnan(p) or p < 1:
        raise ValueError(f"{name} must lie in [1, inf], got {p}")
    return p


def conjugate(r: float) -> float:
    """The Hölder conjugate s of r: 1/r + 1/s = 1 (1 <-> inf)."""
    r = _exponent("r", r)
    if r == 1:
        return INF
    if r == INF:
        return 1.0
    return r / (r - 1)


def mixed_norm(M: torch.Tensor, p: float, q: float) -> torch.Tensor:
    """||M||_{p,q}: the p-norm of every row of M, then the q-norm of the row norms.

    M has shape (..., a, b) (leading axes are a batch); returns shape (...).
    """
    if not isinstance(M, torch.Tensor):
        raise ValueError(f"M must be a torch.Tensor, got {type(M).__name__}")
    if M.dim() < 2:
        raise ValueError(f"M must have shape (..., a, b), got {tuple(M.shape)}")
    p, q = _exponent("p", p), _exponent("q", q)
    rows = torch.linalg.vector_norm(M, ord=p, dim=-1)
    return torch.linalg.vector_norm(rows, ord=q, dim=-1)


def _lemma39_args(A, B, p, q, r, s):
    for nm, M in (("A", A), ("B", B)):
        if not isinstance(M, torch.Tensor):
            raise ValueError(f"{nm} must be a torch.Tensor, got {type(M).__name__}")
        validate.shape(nm, M, (None, None))
        validate.finite_tensor(nm, M)
    if A.shape[1] != B.shape[0]:
        raise ValueError(
            f"A and B must be compatible (A: m x n, B: n x k), "
            f"got {tuple(A.shape)} and {tuple(B.shape)}"
        )
    p, q, r = _exponent("p", p), _exponent("q", q), _exponent("r", r)
    s = conjugate(r) if s is None else _exponent("s", s)
    lhs = (1 / r if r < INF else 0.0) + (1 / s if s < INF else 0.0)
    if abs(lhs - 1.0) > 1e-12:
        raise ValueError(
            f"r and s must be conjugate (1/r + 1/s = 1), got r = {r}, s = {s} (sum {lhs})"
        )
    return p, q, r, s


def lemma39(
    A: torch.Tensor, B: torch.Tensor, p: float, q: float, r: float, s: Optional[float] = None
) -> Tuple[float, float]:
    """(lhs, rhs) = (||A B||_{p,q}, ||A||_{r,q} ||B||_{p,s}); Lemma 39 says lhs <= rhs.

    ``s`` defaults to the conjugate of ``r``; a non-conjugate pair is a ``ValueError``.
    Computed in float64.
    """
    p, q, r, s = _lemma39_args(A, B, p, q, r, s)
    A, B = A.double(), B.double()
    lhs = float(mixed_norm(A @ B, p, q))
    rhs = float(mixed_norm(A, r, q) * mixed_norm(B, p, s))
    return lhs, rhs


def lemma39_swapped_rhs(
    A: torch.Tensor, B: torch.Tensor, p: float, q: float, r: float, s: Optional[float] = None
) -> float:
    """The FALSE variant used as a falsifier: ||A||_{q,r} ||B||_{s,p} (inner and outer exponents
    of both factors exchanged, so the Hölder pair no longer meets over the summed index)."""
    p, q, r, s = _lemma39_args(A, B, p, q, r, s)
    return float(mixed_norm(A.double(), q, r) * mixed_norm(B.double(), s, p))


def lemma39_equality_case(
    n: int, k: int, p: float, q: float, r: float, *, generator: torch.Generator, m: int = 1
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(A, B) attaining ||A B||_{p,q} = ||A||_{r,q} ||B||_{p,s} (float64).

    B = beta v^T with beta_j >= 0 (every row a nonnegative multiple of one vector v, so the
    triangle inequality is an equality), and A's rows all equal to the Hölder-dual of beta:
    alpha_j = beta_j^{s - 1} (s < inf), alpha = indicator of argmax beta (s = inf),
    alpha = 1 (s = 1).
    """
    n = validate.positive_int("n", n)
    k = validate.positive_int("k", k)
    m = validate.positive_int("m", m)
    p, q, r = _exponent("p", p), _exponent("q", q), _exponent("r", r)
    s = conjugate(r)
    kw = dict(generator=generator, dtype=torch.float64, device=generator.device)
    beta = torch.rand(n, **kw) + 0.1
    v = torch.randn(k, **kw)
    B = beta[:, None] * v[None, :]
    if s == INF:
        alpha = torch.zeros(n, dtype=torch.float64, device=beta.device)
        alpha[int(beta.argmax())] = 1.0
    elif s == 1:
        alpha = torch.ones(n, dtype=torch.float64, device=beta.device)
    else:
        alpha = beta ** (s - 1)
    A = alpha[None, :].expand(m, n).clone()
    return A, B


# ============================================================================ Lemma 41


def _eps(eps) -> float:
    return validate.positive_float("eps", eps)


def volume_log_packing_bound(d: int, eps: float) -> float:
    """d log(1 + 2/eps) >= log M(K, eps) for every K inside the Euclidean unit ball B_2^d.

    Balls of radius eps/2 around an eps-packing are disjoint and lie in (1 + eps/2) B_2^d:
    M (eps/2)^d <= (1 + eps/2)^d.
    """
    d = validate.positive_int("d", d)
    return d * math.log1p(2.0 / _eps(eps))


def maurey_k(eps: float) -> int:
    """k = ceil(4 / eps^2): averages of k atoms are within 1/sqrt(k) <= eps/2
    of any point of B_1^d."""
    return math.ceil(4.0 / _eps(eps) ** 2)


def maurey_log_packing_bound(d: int, eps: float) -> float:
    """log C(2d + k, k) >= log M(B_1^d, eps), k = ceil(4/eps^2); 0 for eps >= 2 (diameter 2).

    Maurey's empirical method: every x in B_1^d = conv{+-e_i, 0} is within 1/sqrt(k) of an
    average of k atoms; two points of an eps-packing cannot share an average (they would be
    within 2/sqrt(k) <= eps), and there are C(2d + k, k) multisets of k atoms out of 2d + 1.
    """
    d = validate.positive_int("d", d)
    eps = _eps(eps)
    if eps >= 2:
        return 0.0
    k = maurey_k(eps)
    return math.lgamma(2 * d + k + 1) - math.lgamma(k + 1) - math.lgamma(2 * d + 1)


def maurey_simple_bound(d: int, eps: float) -> float:
    """(8 / eps^2) log(2d + 1) >= the Maurey bound (k <= 8/eps^2 and C(2d+k, k) <= (2d+1)^k)."""
    d = validate.positive_int("d", d)
    eps = _eps(eps)
    return 0.0 if eps >= 2 else 8.0 / eps**2 * math.log(2 * d + 1)


def packing_log_bound(d: int, eps: float, ball: str = "l1") -> float:
    """Lemma 41's bound on log M: min(volume, Maurey) for ball="l1", the volume bound for "l2"."""
    if ball not in ("l1", "l2"):
        raise ValueError(f"ball must be 'l1' or 'l2', got {ball!r}")
    vol = volume_log_packing_bound(d, eps)
    return min(vol, maurey_log_packing_bound(d, eps)) if ball == "l1" else vol


def smaller_bound(d: int, eps: float) -> str:
    """Which of Lemma 41's two bounds is smaller at (d, eps): "volume", "maurey" (or "equal")."""
    v, m = volume_log_packing_bound(d, eps), maurey_log_packing_bound(d, eps)
    return "equal" if v == m else ("volume" if v < m else "maurey")


def crossover_dimension(eps: float, d_max: int = 10**7) -> Optional[int]:
    """Smallest d with maurey_log_packing_bound(d, eps) < volume_log_packing_bound(d, eps).

    The Maurey bound grows like log d and the volume bound like d, so the answer exists for
    every eps; ``None`` only when it exceeds ``d_max``. Found by doubling then bisection
    (the difference volume - Maurey is increasing in d once positive; checked on both sides).
    """
    eps = _eps(eps)

    def better(d):
        return maurey_log_packing_bound(d, eps) < volume_log_packing_bound(d, eps)

    return smallest_true(better, limit=d_max)


def euclidean_packing_log_lower(d: int, eps: float) -> float:
    """d log(1/eps) <= log M(B_2^d, eps) for eps < 1: a maximal eps-packing is an eps-covering."""
    d = validate.positive_int("d", d)
    eps = _eps(eps)
    if eps >= 1:
        raise ValueError(f"eps must be < 1 for the covering lower bound, got {eps}")
    return d * math.log(1.0 / eps)


def maurey_violation_dimension(eps: float, d_max: int = 10**7) -> Optional[int]:
    """Smallest d with d log(1/eps) > maurey_log_packing_bound(d, eps): from there on the Maurey
    bound is provably FALSE for the Euclidean ball B_2^d (it holds for B_1^d only)."""
    eps = _eps(eps)
    if eps >= 1:
        raise ValueError(f"eps must be < 1, got {eps}")

    def bad(d):
        return euclidean_packing_log_lower(d, eps) > maurey_log_packing_bound(d, eps)

    return smallest_true(bad, limit=d_max)


def sample_ball(B: int, d: int, ball: str, *, generator: torch.Generator) -> torch.Tensor:
    """B points uniform in the l2 ("l2") or l1 ("l1") unit ball of R^d (float64)."""
    B = validate.positive_int("B", B)
    d = validate.positive_int("d", d)
    kw = dict(generator=generator, dtype=torch.float64, device=generator.device)
    if ball == "l2":
        g = torch.randn(B, d, **kw)
        r = torch.rand(B, 1, **kw) ** (1.0 / d)
        return g / g.norm(dim=1, keepdim=True) * r
    if ball == "l1":
        e = -torch.log(
            torch.rand(B, d + 1, **kw)
        )  # Exp(1): (e_1..e_d)/sum_{d+1} is uniform on the simplex interior
        signs = torch.where(torch.rand(B, d, **kw) < 0.5, -1.0, 1.0)
        return signs * e[:, :d] / e.sum(dim=1, keepdim=True)
    raise ValueError(f"ball must be 'l1' or 'l2', got {ball!r}")


def greedy_packing(
    candidates: torch.Tensor, eps: float, block: int = 512, *, p: float = 2.0
) -> torch.Tensor:
    """Greedy eps-packing: scan ``candidates`` (M, d) in order, keep a point iff it is > eps
    from every point kept so far in the l_p distance (``p``: 2, or ``math.inf`` for the sup
    norm). Returns the kept points (pairwise distances > eps)."""
    validate.finite_tensor("candidates", candidates)
    validate.shape("candidates", candidates, (None, None))
    eps = _eps(eps)
    if p not in (2.0, math.inf):
        raise ValueError(f"p must be 2 or math.inf, got {p!r}")
    kept = candidates[:0]
    for start in range(0, candidates.shape[0], block):
        c = candidates[start : start + block]
        if kept.shape[0]:
            c = c[torch.cdist(c, kept, p=p).min(dim=1).values > eps]
        if c.shape[0] == 0:
            continue
        conflict = (
            (torch.cdist(c, c, p=p) <= eps).cpu().numpy()
        )  # resolve conflicts inside the block, in order (host loop)
        keep = [True] * c.shape[0]
        for i in range(c.shape[0]):
            if keep[i]:
                for j in conflict[i, i + 1 :].nonzero()[0]:
                    keep[i + 1 + j] = False
        kept = torch.cat([kept, c[torch.tensor(keep, device=c.device)]])
    return kept


def min_pairwise_distance(P: torch.Tensor) -> float:
    """Smallest distance between two distinct rows of P (inf for fewer than two rows)."""
    if P.shape[0] < 2:
        return INF
    D = torch.cdist(P, P)
    D.fill_diagonal_(INF)
    return float(D.min())
