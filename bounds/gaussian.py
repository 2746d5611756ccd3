"""Gaussian facts of the lower bounds: Lemma 40, Var(||x||^2 | Vx) = 2 (k - r) for x ~ N(0, I_k)
and V with r orthonormal rows, in closed form and by Monte Carlo (a regression estimator of a
conditional variance from joint samples, which models nothing of the conditional law).
Derivation: docs/derivations/few-heads.md (section 1)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Tuple

import torch

from qstr.constructions import validate


def conditional_sqnorm_variance(k: int, r: int) -> float:
    """Var(||x||^2 | Vx) = 2 (k - r) for x ~ N(0, I_k) and V with r orthonormal rows (Lemma 40)."""
    k = validate.positive_int("k", k)
    r = validate.positive_int("r", r, minimum=0)
    if r > k:
        raise ValueError(f"r must satisfy 0 <= r <= k = {k}, got r = {r}")
    return 2.0 * (k - r)


def random_orthonormal_rows(r: int, k: int, *, generator: torch.Generator) -> torch.Tensor:
    """A (r, k) matrix with orthonormal rows, Haar distributed (QR of a Gaussian matrix),
    float64."""
    g = torch.randn(k, max(r, 1), generator=generator, dtype=torch.float64, device=generator.device)
    Q, R = torch.linalg.qr(g)
    Q = Q * torch.sign(torch.diagonal(R))  # Haar measure: fix the signs of the QR factor
    return Q.T[:r]


@dataclass(frozen=True)
class VarianceEstimate:
    """A Monte Carlo estimate with a two-sided confidence interval."""

    estimate: float
    stderr: float
    confidence: float
    samples: int

    @property
    def halfwidth(self) -> float:
        from scipy import stats  # noqa: PLC0415 - lazy: scipy takes ~1 s to import

        return stats.norm.ppf(0.5 + self.confidence / 2) * self.stderr

    @property
    def interval(self) -> tuple:
        return (self.estimate - self.halfwidth, self.estimate + self.halfwidth)

    def contains(self, value: float) -> bool:
        lo, hi = self.interval
        return lo <= value <= hi

    def zscore(self, value: float) -> float:
        if self.stderr == 0:
            return 0.0 if self.estimate == value else math.inf
        return abs(self.estimate - value) / self.stderr


def mc_conditional_sqnorm_variance(
    V: torch.Tensor,
    *,
    n_outer: int,
    n_inner: int,
    generator: torch.Generator,
    confidence: float = 0.999,
) -> VarianceEstimate:
    """Monte Carlo estimate of E[Var(||x||^2 | Vx)] for x ~ N(0, I_k) (Lemma 40), with a CI.

    It samples the conditional law the lemma's proof asserts, so it is no evidence for the lemma
    (claim lemma-40 uses :func:`regression_conditional_variance` on joint samples). For each of
    ``n_outer`` draws x, keep a = Vx and draw ``n_inner`` samples from the conditional law
    x' = V^T a + (I - V^T V) g, g ~ N(0, I_k) (the Gaussian conditional law when V has orthonormal
    rows). The within-group sample variances are i.i.d. and unbiased for the
    conditional variance; their mean and standard error give the estimate and a normal interval.
    V need not be orthonormal for the code to run, but then the sampled law is not x | Vx.
    """
    validate.finite_tensor("V", V)
    validate.shape("V", V, (None, None))
    n_outer = validate.positive_int("n_outer", n_outer, minimum=2)
    n_inner = validate.positive_int("n_inner", n_inner, minimum=2)
    confidence = validate.probability("confidence", confidence)
    V = V.to(torch.float64)
    r, k = V.shape
    kw = dict(generator=generator, dtype=torch.float64, device=generator.device)
    V = V.to(generator.device)
    a = torch.randn(n_outer, k, **kw) @ V.T  # (n_outer, r): the conditioning values Vx
    g = torch.randn(n_outer, n_inner, k, **kw)
    x = (a @ V)[:, None, :] + g - (g @ V.T) @ V  # V^T a + (I - V^T V) g
    within = (x * x).sum(-1).var(dim=1, unbiased=True)  # (n_outer,)
    return VarianceEstimate(
        estimate=float(within.mean()),
        stderr=float(within.std(unbiased=True)) / math.sqrt(n_outer),
        confidence=confidence,
        samples=n_outer * n_inner,
    )


def polynomial_features(a: torch.Tensor, degree: int = 2) -> torch.Tensor:
    """The monomials of the rows of a (n, r) of degree at most ``degree``, as the columns of an
    (n, p) matrix: 1, a_i, a_i a_j (i <= j), ...; p = C(r + degree, degree)."""
    degree = validate.positive_int("degree", degree, minimum=0)
    cols = [torch.ones(a.shape[0], 1, dtype=a.dtype, device=a.device)]
    for deg in range(1, degree + 1):
        combos = list(itertools.combinations_with_replacement(range(a.shape[1]), deg))
        if not combos:
            continue
        idx = torch.tensor(combos, device=a.device)  # (m, deg)
        block = a[:, idx[:, 0]]
        for c in range(1, deg):
            block = block * a[:, idx[:, c]]
        cols.append(block)
    return torch.cat(cols, dim=1)


@dataclass(frozen=True)
class ConditionalVarianceEstimate:
    """Var(y | a) estimated from joint samples (a, y): pooled over the samples and per bin of
    ||a||^2 (lowest bin first; none when a has no columns), with the regression's width p."""

    pooled: VarianceEstimate
    bins: Tuple[VarianceEstimate, ...]
    features: int

    @property
    def all(self) -> Tuple[VarianceEstimate, ...]:
        """The pooled estimate, then the bins'."""
        return (self.pooled, *self.bins)


def regression_conditional_variance(
    a: torch.Tensor,
    y: torch.Tensor,
    *,
    degree: int = 2,
    bins: int = 4,
    confidence: float = 0.999,
) -> ConditionalVarianceEstimate:
    """Var(y | a) from n joint samples (a_i, y_i), with no model of the conditional law
    (docs/derivations/few-heads.md, section 1).

    Least squares of y on the p monomials of a up to ``degree`` give residuals e and leverages
    h_i. Pooled: ||e||^2 / (n - p), the degrees-of-freedom (Bessel) correction; per sample:
    u_i = e_i^2 / (1 - h_i). Both are unbiased for Var(y | a) whenever E[y | a] lies in the span
    of the monomials and Var(y | a) is constant; a mean outside the span only adds to them.
    The u_i are averaged within ``bins`` bins of equal count by ||a_i||^2. Each standard error is
    the sample standard deviation of the u_i averaged over sqrt(their count).
    """
    validate.finite_tensor("a", a)
    validate.finite_tensor("y", y)
    validate.shape("a", a, (None, None))
    validate.shape("y", y, (a.shape[0],))
    bins = validate.positive_int("bins", bins)
    confidence = validate.probability("confidence", confidence)
    a, y = a.to(torch.float64), y.to(torch.float64).to(a.device)
    Phi = polynomial_features(a, degree)
    n, p = Phi.shape
    if n < p + 2 * bins:
        raise ValueError(f"need n >= p + 2 bins = {p + 2 * bins} samples, got n = {n}")
    L = torch.linalg.cholesky(Phi.T @ Phi)  # Phi^T Phi = L L^T
    S = torch.linalg.solve_triangular(L, Phi.T, upper=False)  # (p, n): S^T spans the monomials
    e = y - S.T @ (S @ y)  # the least-squares residual
    u = e * e / (1 - (S * S).sum(dim=0))  # e_i^2 / (1 - h_i), h_i the leverage

    def estimate(value: float, part: torch.Tensor) -> VarianceEstimate:
        se = float(part.std(unbiased=True)) / math.sqrt(part.numel())
        return VarianceEstimate(value, se, confidence, part.numel())

    pooled = estimate(float(e @ e) / (n - p), u)
    if a.shape[1] == 0:
        return ConditionalVarianceEstimate(pooled, (), p)
    order = torch.argsort((a * a).sum(dim=1))
    parts = [u[idx] for idx in torch.tensor_split(order, bins)]
    return ConditionalVarianceEstimate(
        pooled, tuple(estimate(float(q.mean()), q) for q in parts), p
    )
