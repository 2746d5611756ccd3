import math

import pytest
import torch

from qstr.bounds.gaussian import (
    VarianceEstimate,
    conditional_sqnorm_variance,
    mc_conditional_sqnorm_variance,
    polynomial_features,
    random_orthonormal_rows,
    regression_conditional_variance,
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


def test_polynomial_features_are_the_monomials(gen):
    """Degree 2 on r = 3: 1, a_i, a_i a_j (i <= j), C(5, 2) = 10 columns; degree 0 the constant;
    degree 3 on r = 2 has C(5, 3) = 10 columns, a_0 a_1^2 among them."""
    a = torch.randn(7, 3, generator=gen, dtype=torch.float64)
    Phi = polynomial_features(a)
    assert Phi.shape == (7, math.comb(3 + 2, 2))
    want = [torch.ones(7, dtype=torch.float64), *a.T]
    want += [a[:, i] * a[:, j] for i in range(3) for j in range(i, 3)]
    assert torch.equal(Phi, torch.stack(want, dim=1))
    assert torch.equal(polynomial_features(a, degree=0), torch.ones(7, 1, dtype=torch.float64))
    b = a[:, :2]
    cubic = polynomial_features(b, degree=3)
    assert cubic.shape == (7, math.comb(2 + 3, 3))
    assert any(torch.allclose(col, b[:, 0] * b[:, 1] ** 2, rtol=1e-15) for col in cubic.T)


def test_regression_estimator_is_least_squares_with_its_corrections(gen):
    """Pooled = ||e||^2 / (n - p) and each bin's estimate = the mean of e_i^2 / (1 - h_i) over its
    quarter of the samples by ||a||^2, e and h from lstsq and the hat matrix; standard errors the
    sample standard deviation over sqrt(count)."""
    n, a = 40, torch.randn(40, 2, generator=gen, dtype=torch.float64)
    y = a[:, 0] ** 3 + torch.randn(n, generator=gen, dtype=torch.float64)
    est = regression_conditional_variance(a, y)
    Phi = polynomial_features(a)
    beta = torch.linalg.lstsq(Phi, y[:, None]).solution[:, 0]
    e = y - Phi @ beta
    H = Phi @ torch.linalg.inv(Phi.T @ Phi) @ Phi.T
    u = e * e / (1 - torch.diagonal(H))
    p = Phi.shape[1]
    assert est.features == p == 6
    assert est.pooled.estimate == pytest.approx(float(e @ e) / (n - p), rel=1e-10)
    assert est.pooled.stderr == pytest.approx(float(u.std()) / math.sqrt(n), rel=1e-10)
    order = torch.argsort((a * a).sum(dim=1))
    for got, idx in zip(est.bins, order.view(4, 10), strict=True):
        assert got.estimate == pytest.approx(float(u[idx].mean()), rel=1e-10)
        assert got.samples == 10
    assert est.all == (est.pooled, *est.bins)


def test_regression_estimator_without_conditioning_is_the_sample_variance(gen):
    """With r = 0 the regression is on the constant: pooled = the unbiased sample variance, no
    bins."""
    y = torch.randn(50, generator=gen, dtype=torch.float64) * 3
    est = regression_conditional_variance(torch.zeros(50, 0, dtype=torch.float64), y)
    assert est.bins == () and est.features == 1
    assert est.pooled.estimate == pytest.approx(float(y.var(unbiased=True)), rel=1e-12)


def test_regression_estimator_sees_lemma_40_from_joint_samples(gen):
    """x ~ N(0, I_8) drawn plainly, V with 3 orthonormal rows: every estimate (pooled, 4 bins)
    within 4.5 standard errors of 2(8 - 3); the pooled one is 4.5 standard errors from 2(8 - 4)."""
    V = random_orthonormal_rows(3, 8, generator=gen)
    x = torch.randn(20000, 8, generator=gen, dtype=torch.float64)
    est = regression_conditional_variance(x @ V.T, (x * x).sum(dim=1))
    assert all(e.zscore(conditional_sqnorm_variance(8, 3)) < 4.5 for e in est.all)
    assert est.pooled.zscore(conditional_sqnorm_variance(8, 4)) > 4.5


def test_regression_estimator_bad_arguments(gen):
    a = torch.randn(12, 2, generator=gen, dtype=torch.float64)
    y = torch.randn(12, generator=gen, dtype=torch.float64)
    with pytest.raises(ValueError, match="need n >= p"):
        regression_conditional_variance(a, y)  # p = 6, 4 bins: 14 samples at least
    with pytest.raises(ValueError, match="y must have shape"):
        regression_conditional_variance(a, y[:-1])
    with pytest.raises(ValueError, match="a contains NaN"):
        regression_conditional_variance(a * float("nan"), y)
    with pytest.raises(ValueError, match="bins"):
        regression_conditional_variance(a, y, bins=0)
