"""Gaussian facts of the lower bounds: Lemma 40, Var(||x||^2 | Vx) = 2 (k - r) for x ~ N(0, I_k)
and V with r orthonormal rows, in closed form and by Monte Carlo.
Derivation: docs/derivations/few-heads.md (section 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass


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

    For each of ``n_outer`` draws x, keep a = Vx and draw ``n_inner`` samples from the conditional
    law x' = V^T a + (I - V^T V) g, g ~ N(0, I_k) (the Gaussian conditional law when V has
    orthonormal rows). The within-group sample variances are i.i.d. and unbiased for the
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
