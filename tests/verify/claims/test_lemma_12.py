"""Lemma 12 (verify/claims/lemma_12.py) through its declared structure."""

import math

import pytest

CID = "lemma-12"


def test_lemma12_slipped_radii(declared):
    """Without the union bound r_x = sqrt(6 e); without concentration token_radius = sqrt(2)."""
    d = declared(CID)
    v = d.verdict("max ||x_j|| <= r_x", d.broken("r_x without"))
    assert v.bound == pytest.approx(math.sqrt(6 * math.e))
    v = d.verdict("max ||x_j|| <= token_radius", d.broken("token_radius without"))
    assert v.bound == pytest.approx(2**0.5)


def test_lemma12_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()


def test_lemma12_pins_agree_to_rounding_and_see_a_log_base(declared):
    """r_x and token_radius equal their 40-digit evaluations to float64 rounding; a log2 or log10
    slip, which the token maxima do not see, fails the pins."""
    d = declared(CID)
    for name in ("r_x = 40-digit evaluation", "token_radius = 40-digit evaluation"):
        v = d.verdict(name)
        assert v.holds and v.measured < 1e-14, name
    assert d.verdict("max ||x_j|| <= r_x", d.broken("r_x with log2")).holds
    assert not d.verdict("r_x = 40-digit evaluation", d.broken("r_x with log2")).holds
    assert not d.verdict("token_radius = 40-digit evaluation", d.broken("with log10")).holds
