"""Tests for verify/rounding.py: the rounding term added to the bounds the claims check."""

import pytest
import torch

from qstr.verify.rounding import Rounding, largest, two_layer


def test_term_is_n_eps_scale_and_stated():
    r = Rounding(n=100, scale=3.0, what="N eps |y|max")
    assert r.term == pytest.approx(100 * 2.0**-52 * 3.0)
    assert r.within(1.0 + r.term, 1.0) and not r.within(1.0 + 2 * r.term, 1.0)
    assert "N eps |y|max" in str(r) and "float64" in str(r)
    assert Rounding(n=1, scale=1.0, dtype=torch.float32).term == pytest.approx(2.0**-23)


def test_terms_add_and_scale():
    a, b = Rounding(n=10, scale=1.0), Rounding(n=5, scale=2.0)
    assert (a + b).term == pytest.approx(a.term + b.term)
    assert (a + b).times(3.0, "L").term == pytest.approx(3 * (a.term + b.term))
    assert largest([a, None, b]) is a


def test_two_layer_scale_is_the_sum_of_magnitudes():
    W1, b1, W2 = (
        torch.tensor([[1.0], [-2.0]]),
        torch.tensor([0.5, 1.0]),
        torch.tensor([[3.0, -1.0]]),
    )
    r = two_layer(W1, b1, W2, torch.tensor([[2.0]]))
    assert r.n == 1 + 2 + 2 and r.scale == pytest.approx(3 * 2.5 + 1 * 5.0)
