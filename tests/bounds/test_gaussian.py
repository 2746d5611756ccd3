import pytest
import torch

from qstr.bounds.gaussian import conditional_sqnorm_variance, mc_conditional_sqnorm_variance, random_orthonormal_rows


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
    est = mc_conditional_sqnorm_variance(V, n_outer=400, n_inner=200, generator=gen, confidence=0.999)
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
