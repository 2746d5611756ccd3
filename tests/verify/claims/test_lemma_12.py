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
