import math

import pytest
import torch

from qstr.bounds.gaussian import (
    VarianceEstimate,
    conditional_sqnorm_variance,
    mc_conditional_sqnorm_variance,
    random_orthonormal_rows,
)


def test_closed_form():
    assert conditional_sqnorm_variance(5, 0) == 10.0
    assert conditional_sqnorm_variance(5, 5) == 0.0
    assert conditional_sqnorm_variance(7, 3) == 8.0
    for k, r in ((0, 0), (3, 4), (3, -1)):
        with pytest.raises(ValueError):
            conditional_sqnorm_variance(k, r)


def test_orthonormal_rows(gen):
    V = random_orthonormal_rows(4, 9, generator=gen)
    assert V.shape == (4, 9)
    assert torch.allclose(V @ V.T, torch.eye(4, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("k, r", [(1, 0), (8, 3), (12, 11)])
def test_monte_carlo_agrees(gen, k, r):
    V = random_orthonormal_rows(r, k, generator=gen)
    est = mc_conditional_sqnorm_variance(
        V, n_outer=400, n_inner=200, generator=gen, confidence=0.999
    )
    assert est.contains(2 * (k - r))
    assert not est.contains(2 * (k - r - 1))  # one rank off is far outside the interval
    assert est.samples == 80_000


def test_full_rank_conditioning_has_zero_variance(gen):
    V = random_orthonormal_rows(6, 6, generator=gen)
    est = mc_conditional_sqnorm_variance(V, n_outer=50, n_inner=20, generator=gen)
    assert est.estimate < 1e-20


def test_non_orthonormal_v_is_not_lemma_40(gen):
    """The estimator samples x | Vx only for orthonormal V: a scaled V breaks the identity."""
    V = 2.0 * random_orthonormal_rows(3, 8, generator=gen)
    est = mc_conditional_sqnorm_variance(V, n_outer=400, n_inner=200, generator=gen)
    assert not est.contains(2 * (8 - 3))


def test_bad_arguments(gen):
    V = random_orthonormal_rows(2, 4, generator=gen)
    with pytest.raises(ValueError, match="n_inner"):
        mc_conditional_sqnorm_variance(V, n_outer=10, n_inner=1, generator=gen)
    with pytest.raises(ValueError, match="confidence"):
        mc_conditional_sqnorm_variance(V, n_outer=10, n_inner=10, generator=gen, confidence=1.5)
    with pytest.raises(ValueError, match="V contains NaN"):
        mc_conditional_sqnorm_variance(V * float("nan"), n_outer=10, n_inner=10, generator=gen)


def test_variance_estimate_interval_zscore_and_default_confidence():
    """An estimate 2 with stderr 0.5 at 95% has interval 2 +- 0.5 x 1.959964 (contains 2.97, not
    2.99 nor 1.01) and z-score |value - 2| / 0.5; with stderr 0 the z-score is 0 at the estimate
    and inf elsewhere; the estimator's default confidence is 0.999."""
    z975 = 1.959963984540054
    e = VarianceEstimate(estimate=2.0, stderr=0.5, confidence=0.95, samples=100)
    lo, hi = e.interval
    assert lo == pytest.approx(2 - 0.5 * z975, abs=1e-12)
    assert hi == pytest.approx(2 + 0.5 * z975, abs=1e-12)
    assert e.contains(2.97) and not e.contains(2.99) and not e.contains(1.01)
    assert e.zscore(3.0) == 2.0
    exact = VarianceEstimate(estimate=2.0, stderr=0.0, confidence=0.95, samples=100)
    assert exact.zscore(2.0) == 0.0 and exact.zscore(2.1) == float("inf") and exact.contains(2.0)
    one_row = torch.eye(2, dtype=torch.float64)[:1]
    default = mc_conditional_sqnorm_variance(
        one_row, n_outer=2, n_inner=2, generator=torch.Generator().manual_seed(0)
    )
    assert default.confidence == 0.999


def test_the_standard_error_is_of_the_within_group_variances_unbiased():
    """stderr = std(within, unbiased) / sqrt(n_outer), the within-group variances rebuilt from the
    same stream (a = Vx drawn first, then the n_outer x n_inner conditional draws)."""
    V = torch.eye(5, dtype=torch.float64)[:2]
    est = mc_conditional_sqnorm_variance(
        V, n_outer=3, n_inner=4, generator=torch.Generator().manual_seed(11)
    )
    g = torch.Generator().manual_seed(11)
    a = torch.randn(3, 5, generator=g, dtype=torch.float64) @ V.T
    z = torch.randn(3, 4, 5, generator=g, dtype=torch.float64)
    x = (a @ V)[:, None, :] + z - (z @ V.T) @ V
    within = (x * x).sum(-1).var(dim=1, unbiased=True)
    assert est.estimate == pytest.approx(float(within.mean()), rel=1e-12)
    assert est.stderr == pytest.approx(float(within.std(unbiased=True)) / math.sqrt(3), rel=1e-12)
