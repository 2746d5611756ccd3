"""Theorem 6 (seed numbering; conference Theorem 9): an FFN trained by an algorithm of
Definition 5 has risk >= 1 - n/(N d) on simple-1STR -- the floor in closed form, the Bayes risk
given the span by Monte Carlo, span distances. Derivation: docs/derivations/theorem6.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from qstr.constructions import validate
from qstr.bounds.gaussian import VarianceEstimate

__all__ = [
    "risk_floor",
    "orthonormal_row_basis",
    "span_distance",
    "embed_direction",
    "floor_for_direction",
    "mc_bayes_risk",
    "mc_bayes_risk_from_training",
    "BayesRiskEstimate",
]


def risk_floor(n: int, N: int, d: int) -> float:
    """Theorem 6's floor on E_u[R] for simple-1STR: max(0, 1 - n / (N d)).

    ``n`` training prompts (n >= 0), length ``N``, token dimension ``d``. For n >= N d the
    theorem says nothing and the floor is 0.
    """
    n = validate.positive_int("n", n, minimum=0)
    N = validate.positive_int("N", N)
    d = validate.positive_int("d", d)
    return max(0.0, 1.0 - n / (N * d))


def _matrix(name: str, M) -> torch.Tensor:
    if not isinstance(M, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(M).__name__}")
    validate.shape(name, M, (None, None))
    if not M.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got {M.dtype}")
    validate.finite_tensor(name, M)
    return M


def orthonormal_row_basis(X: torch.Tensor, *, rtol: Optional[float] = None) -> torch.Tensor:
    """V (r, D) with orthonormal rows spanning the rows of X (n, D), r = numerical rank of X.

    Computed in float64 by an SVD of X (singular values below ``rtol * s_max`` count as zero;
    default rtol = max(n, D) * machine epsilon, numpy's matrix_rank rule). For Gaussian X with
    n <= D this is a QR-equivalent basis of rank n with probability 1. An all-zero X gives r = 0.
    """
    X = _matrix("X", X).to(torch.float64)
    n, D = X.shape
    if n == 0 or D == 0:
        raise ValueError(f"X must have at least one row and one column, got shape {tuple(X.shape)}")
    _, S, Vh = torch.linalg.svd(X, full_matrices=False)
    if rtol is None:
        rtol = max(n, D) * torch.finfo(torch.float64).eps
    rtol = validate.positive_float("rtol", rtol)
    smax = float(S.max()) if S.numel() else 0.0
    r = int((S > rtol * smax).sum()) if smax > 0 else 0
    return Vh[:r]


def span_distance(W: torch.Tensor, X: torch.Tensor) -> float:
    """||W (I - V^T V)||_F / ||W||_F with V an orthonormal basis of the rows of X.

    ``W`` (m, D): a first layer's columns acting on vec(x) (e.g. ``VecFFN.first_layer_x_weight()``);
    ``X`` (n, D): the training inputs vec(x^(1)), ..., vec(x^(n)). Theorem 6's Definition 5
    algorithms return W with span distance 0. Computed in float64. Returns 0.0 for W = 0
    (the zero matrix lies in every span).
    """
    W = _matrix("W", W).to(torch.float64)
    X = _matrix("X", X).to(torch.float64)
    if W.shape[1] != X.shape[1]:
        raise ValueError(
            f"W and X must have the same number of columns (N d), got {W.shape[1]} and {X.shape[1]}"
        )
    X = X.to(W.device)
    V = orthonormal_row_basis(X)
    total = float(torch.linalg.matrix_norm(W))
    if total == 0.0:
        return 0.0
    outside = W - (W @ V.T) @ V
    return float(torch.linalg.matrix_norm(outside)) / total


def embed_direction(u: torch.Tensor, t: torch.Tensor, N: int) -> torch.Tensor:
    """P_t u = e_t kron u in R^{N d}: rows (B, N d) for u (B, d) or (d,)
    and t (B,) long in [0, N)."""
    N = validate.positive_int("N", N)
    if u.dim() == 1:
        u = u.expand(t.shape[0], -1)
    B, d = u.shape
    if t.dtype != torch.long or t.shape != (B,):
        raise ValueError(f"t must be a long tensor of shape ({B},), got {t.dtype} {tuple(t.shape)}")
    if B and (int(t.min()) < 0 or int(t.max()) >= N):
        raise ValueError(f"t entries must lie in [0, N) = [0, {N})")
    out = torch.zeros(B, N, d, dtype=u.dtype, device=u.device)
    out[torch.arange(B, device=u.device), t] = u
    return out.reshape(B, N * d)


def _check_basis(V: torch.Tensor, N: int, d: int, atol: float = 1e-8) -> torch.Tensor:
    V = _matrix("V", V).to(torch.float64)
    if V.shape[1] != N * d:
        raise ValueError(f"V must have N d = {N * d} columns, got {V.shape[1]}")
    if V.shape[0] > N * d:
        raise ValueError(f"V must have at most N d = {N * d} rows, got {V.shape[0]}")
    gram = V @ V.T
    eye = torch.eye(V.shape[0], dtype=V.dtype, device=V.device)
    if V.shape[0] and float((gram - eye).abs().max()) > atol:
        raise ValueError("V must have orthonormal rows (V V^T = I); use orthonormal_row_basis(X)")
    return V


def floor_for_direction(V: torch.Tensor, u: torch.Tensor, N: int) -> float:
    """Exact Bayes risk given (V x, t) for ONE fixed direction u, averaged over t ~ Unif[N]:

        (1/N) sum_t ||(I - V^T V) P_t u||^2 = ||u||^2 - (1/N) sum_t ||V_{:, block t} u||^2.

    Any predictor whose dependence on x goes through V x (e.g. an FFN whose first-layer rows
    lie in the row span of V, whatever its width and however t is encoded) has risk >= this
    for that u. Its mean over u ~ Unif(S^{d-1}) is 1 - rank(V) / (N d).
    """
    N = validate.positive_int("N", N)
    u = validate.finite_tensor("u", u)
    if u.dim() != 1:
        raise ValueError(f"u must be a vector of shape (d,), got {tuple(u.shape)}")
    d = u.shape[0]
    V = _check_basis(V, N, d)
    u = u.to(torch.float64).to(V.device)
    blocks = V.reshape(V.shape[0], N, d)  # (r, N, d)
    proj = torch.einsum("rnd,d->rn", blocks, u)  # V_{:, block t} u for every t
    return float((u @ u) - (proj * proj).sum() / N)


@dataclass(frozen=True)
class BayesRiskEstimate(VarianceEstimate):
    """Monte Carlo Bayes risk given V x (``estimate`` with its interval) and the closed-form floor.

    ``floor`` = 1 - rank / (N d); ``rank`` = number of rows of V; ``n`` = training prompts
    (equal to ``rank`` with probability 1 when V is built from Gaussian inputs, n <= N d).
    """

    floor: float = float("nan")
    rank: int = 0
    n: Optional[int] = None

    @property
    def agrees(self) -> bool:
        """Whether the closed-form floor lies in the confidence interval."""
        return self.contains(self.floor)


def _unit_sphere(B: int, d: int, generator: torch.Generator) -> torch.Tensor:
    u = torch.randn(B, d, generator=generator, dtype=torch.float64, device=generator.device)
    return u / u.norm(dim=1, keepdim=True)


MC_CHUNK_ROWS = 65536  # samples drawn at once by mc_bayes_risk ...
MC_CHUNK_ENTRIES = 2**24  # ... at most this many float64 entries of x (128 MiB) at once


def mc_bayes_risk(
    V: torch.Tensor,
    N: int,
    d: int,
    *,
    samples: int,
    generator: torch.Generator,
    confidence: float = 0.999,
    sample_x: bool = True,
    u: Optional[torch.Tensor] = None,
) -> BayesRiskEstimate:
    """Monte Carlo estimate of E_{u,t,x}[(y - E[y | V x, u, t])^2] with a confidence interval.

    Per sample: u ~ Unif(S^{d-1}) (or the fixed direction ``u`` when given), t ~ Unif[N],
    a = P_t u (u in block t of R^{N d}).
    With ``sample_x=True`` (default) also x ~ N(0, I_{N d}), y = <a, x>, and the Bayes predictor
    y_hat = <V a, V x> (the conditional mean for Gaussian x and orthonormal V); the sample is
    (y - y_hat)^2. With ``sample_x=False`` the sample is the conditional variance
    ||(I - V^T V) a||^2 = 1 - ||V a||^2 itself (same mean, smaller variance).
    The interval is the normal interval of the sample mean at level ``confidence``; the
    record carries the closed form ``floor`` = 1 - rank(V) / (N d) for comparison (for a fixed
    ``u``: :func:`floor_for_direction`, exact for that u).
    """
    N = validate.positive_int("N", N)
    d = validate.positive_int("d", d)
    samples = validate.positive_int("samples", samples, minimum=2)
    confidence = validate.probability("confidence", confidence)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    V = _check_basis(V, N, d).to(generator.device)
    D = N * d
    chunk = min(MC_CHUNK_ROWS, max(1, MC_CHUNK_ENTRIES // D))  # (chunk, D) float64 draws at once
    if u is not None:
        u = validate.finite_tensor("u", u)
        validate.shape("u", u, (d,))
        u = u.to(dtype=torch.float64, device=generator.device)
        if abs(float(u.norm()) - 1.0) > 1e-8:
            raise ValueError(f"u must be a unit vector, got norm {float(u.norm())}")
    fixed = u
    total, total_sq = 0.0, 0.0
    done = 0
    while done < samples:
        B = min(chunk, samples - done)
        uu = _unit_sphere(B, d, generator) if fixed is None else fixed.expand(B, d)
        t = torch.randint(N, (B,), generator=generator, device=generator.device)
        a = embed_direction(uu, t, N)  # (B, D)
        Va = a @ V.T  # (B, r)
        if sample_x:
            x = torch.randn(B, D, generator=generator, dtype=torch.float64, device=generator.device)
            err = (a * x).sum(1) - (Va * (x @ V.T)).sum(1)
            vals = err * err
        else:
            vals = (a * a).sum(1) - (Va * Va).sum(1)
        total += float(vals.sum())
        total_sq += float((vals * vals).sum())
        done += B
    mean = total / samples
    var = max(0.0, (total_sq - samples * mean * mean) / (samples - 1))
    floor = 1.0 - V.shape[0] / D if fixed is None else floor_for_direction(V, fixed, N)
    return BayesRiskEstimate(
        estimate=mean,
        stderr=math.sqrt(var / samples),
        confidence=confidence,
        samples=samples,
        floor=floor,
        rank=int(V.shape[0]),
    )


def mc_bayes_risk_from_training(
    n: int,
    N: int,
    d: int,
    *,
    samples: int,
    generator: torch.Generator,
    confidence: float = 0.999,
    sample_x: bool = True,
) -> BayesRiskEstimate:
    """Draw n training inputs x^(i) ~ N(0, I_{N d}), build V by QR, and run :func:`mc_bayes_risk`.

    The QR of the (N d, n) matrix of inputs gives an orthonormal basis of their span (rank n
    with probability 1 when n <= N d; for n > N d the span is all of R^{N d} and V = I).
    """
    n = validate.positive_int("n", n)
    N = validate.positive_int("N", N)
    d = validate.positive_int("d", d)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    D = N * d
    X = torch.randn(n, D, generator=generator, dtype=torch.float64, device=generator.device)
    if n >= D:
        V = torch.eye(D, dtype=torch.float64, device=generator.device)
    else:
        Q, _ = torch.linalg.qr(X.T)  # (D, n), orthonormal columns spanning the inputs
        V = Q.T
    est = mc_bayes_risk(
        V, N, d, samples=samples, generator=generator, confidence=confidence, sample_x=sample_x
    )
    return BayesRiskEstimate(
        estimate=est.estimate,
        stderr=est.stderr,
        confidence=est.confidence,
        samples=est.samples,
        floor=est.floor,
        rank=est.rank,
        n=n,
    )


def zcrit(confidence: float) -> float:
    """Two-sided normal critical value for ``confidence``."""
    confidence = validate.probability("confidence", confidence)
    from scipy import stats  # noqa: PLC0415 - lazy: scipy takes ~1 s to import

    return float(stats.norm.ppf(0.5 + confidence / 2))
