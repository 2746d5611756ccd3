"""Lemma 40 for the built V (verify/certified/lemma40.py): the exact conditional variance
2 (k - rank V), rank in exact rational arithmetic, equals the closed form at the claim's (k, r);
a repeated row and the claim's wrong closed forms are violated."""

import pytest
import torch

from qstr.bounds.gaussian import conditional_sqnorm_variance, random_orthonormal_rows
from qstr.verify.ball import CERTIFIED, VIOLATED
from qstr.verify.certified import faults
from qstr.verify.certified.lemma40 import certified_lemma40, exact_rank
from qstr.verify.claims.lemma_40 import LEMMA40_FULL_CASES


def _V(k: int, r: int) -> torch.Tensor:
    return random_orthonormal_rows(r, k, generator=torch.Generator().manual_seed(k * 100 + r))


@pytest.mark.parametrize("k, r", LEMMA40_FULL_CASES)
def test_closed_form_certified_on_the_built_V(k, r):
    res = certified_lemma40(_V(k, r))
    assert res.status == CERTIFIED and res.measured.upper == 0.0
    assert f"rank V = {r} (exact)" in res.detail


def test_exact_rank_sees_what_float_rank_may_not():
    V = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    assert exact_rank(V) == 2 and exact_rank(V[:0]) == 0
    tiny = V.clone()
    tiny[1, 2] = 1e-300  # the second row stays independent of the first
    tiny[1, 1] = 0.0
    assert exact_rank(tiny) == 2 and int(torch.linalg.matrix_rank(tiny)) == 1
    with pytest.raises(ValueError):
        exact_rank(torch.zeros(3))


@pytest.mark.parametrize("k, r", [(6, 2), (20, 7), (40, 39)])
def test_a_repeated_row_is_violated(k, r):
    res = certified_lemma40(faults.lemma40_row_repeated(_V(k, r)))
    assert res.status == VIOLATED and res.measured.lower == 2.0


def test_the_claims_wrong_closed_forms_are_violated():
    V = _V(20, 7)
    plus_one = certified_lemma40(V, variance=lambda k, r: conditional_sqnorm_variance(k, r + 1))
    unconditioned = certified_lemma40(V, variance=lambda k, r: 2.0 * k)
    assert plus_one.status == VIOLATED and plus_one.measured.lower == 2.0
    assert unconditioned.status == VIOLATED and unconditioned.measured.lower == 14.0
