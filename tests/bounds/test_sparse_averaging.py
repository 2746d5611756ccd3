"""The single averaging head's separation limit (bounds/sparse_averaging.py, remark after
Prop 3)."""

import pytest

from qstr.bounds.sparse_averaging import separation_limit


@pytest.mark.parametrize("q", [1, 2, 3, 17])
def test_the_limit_is_where_the_score_bounds_meet(q):
    """At mu = 1/(2q - 1) the in-set floor 1 - (q - 1) mu equals the out-of-set ceiling q mu."""
    mu = separation_limit(q)
    assert mu == pytest.approx(1 / (2 * q - 1), rel=1e-15)
    assert 1 - (q - 1) * mu == pytest.approx(q * mu, rel=1e-14)


def test_q_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="q"):
        separation_limit(0)
