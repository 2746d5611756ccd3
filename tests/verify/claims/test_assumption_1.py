"""Assumption 1 (verify/claims/assumption_1.py) through its declared structure."""

import math

import pytest

CID = "assumption-1"


def test_assumption1_wide_tokens_measure_c_x_near_2_25(declared):
    """Tokens of standard deviation 1.5 give C_x about 2.25 x 0.97 at d = 16."""
    d = declared(CID)
    assert d.verdict("C_x <= 1", d.broken("tokens with")).measured > 1.4


@pytest.mark.parametrize(
    "d, r, want", [(1, 1, 2 / math.pi), (1, 2, 0.5), (3, 2, 1 / 2), (2, 1, math.pi / 4)]
)
def test_chi_closed_form_hand_values(declared, d, r, want):
    """E|z| = sqrt(2/pi); E||x||^2 = d; E||x|| = sqrt(pi/2) at d = 2."""
    assert declared(CID).inputs.chi_ratio(d, r) == pytest.approx(want, rel=1e-12)


def test_chi_ratio_largest_at_r_1_and_normal_hand_values(declared):
    """The chi ratio is largest at r = 1 and below 1; E y^2 / 4 = 1/4, (E|y|)^2 = 2/pi."""
    inp = declared(CID).inputs
    for d in (1, 2, 16, 256):
        vals = [inp.chi_ratio(d, r) for r in (1, 1.5, 2, 4, 8, 32)]
        assert max(vals) == vals[0] < 1
    assert inp.normal_ratio(2.0) == pytest.approx(1 / 4)
    assert inp.normal_ratio(1.0) == pytest.approx(2 / math.pi)


def test_assumption1_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()
