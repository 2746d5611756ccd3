"""Assumption 2, the links (verify/claims/assumption_2.py) through its declared structure."""

import pytest

CID = "assumption-2"


def test_assumption2_stated_moments_hand_values(declared):
    """E g^2 as stated at q = 3, d = 4: linear and hermite 1, sqnorm 2, mean d/q, projected 1/q;
    the teacher's (1 + 1/12) / 2 = 13/24."""
    inp = declared(CID).inputs
    want = {"linear": 1.0, "hermite": 1.0, "sqnorm": 2.0, "mean": 4 / 3, "mean-projected": 1 / 3}
    assert {k: f(3, 4) for k, f in inp.stated.items()} == pytest.approx(want)
    assert inp.teacher_closed(3, 4) == pytest.approx(13 / 24)


def test_assumption2_unscaled_teacher_is_about_8_times_too_large(declared):
    """Teachers without 1/sqrt(m) (m = 8): E g^2 about 8 x 13/24."""
    d = declared(CID)
    broken = d.broken("a teacher without")
    assert d.verdict("teacher E g^2 = (1 + 1/(qd)) / 2", broken).measured > 2.0


def test_assumption2_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()
