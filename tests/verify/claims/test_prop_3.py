"""Tests of verify/claims/prop_3.py through the declared claims (Props 21 and 3, few heads): which
checks and faults run where, the allowance the explicit check states, a floor substituted in the
inputs (test_registered.py runs every check and every fault)."""

import dataclasses
from statistics import NormalDist

import pytest


@pytest.mark.parametrize("cid", ["prop-21", "prop-3"])
def test_few_heads_checks_hold_and_q_heads_beat_the_floor(declared, cid):
    """The trained models run on full and gpu only, with their fault; the first fault holds the
    H = q model to the H = q - 1 floor."""
    d = declared(cid)
    claim, inp = d
    assert "trained risk >= floor" not in [c.name for c in claim.checks_in("quick")]
    assert [f.name for f in claim.faults if "quick" not in f.profiles] == [
        "floor with the heads counted from 0"
    ]
    q_heads = d.broken(claim.faults[0].name)
    assert q_heads.explicit.estimate.heads == inp.H + 1 and inp.explicit.estimate.heads == inp.H


@pytest.mark.parametrize("cid", ["prop-21", "prop-3"])
def test_few_heads_explicit_allowance_is_a_stated_confidence(declared, cid):
    """'explicit risk >= floor' allows z standard errors below the floor with z the one-sided
    normal quantile at confidence 0.999 (3.09), stated in its detail."""
    d = declared(cid)
    v = d.verdict("explicit risk >= floor")
    est, floor = d.inputs.explicit.estimate, d.inputs.floor_at(d.inputs.H)
    assert v.bound == pytest.approx(floor - NormalDist().inv_cdf(0.999) * est.se, rel=1e-12)
    assert "family confidence 0.999" in v.detail and "z = 3.090" in v.detail


def test_few_heads_an_unclipped_floor_is_a_different_function(declared):
    """A floor function substituted in the inputs is the one the checks read: a floor 10% above
    the closed form makes the explicit model beat it."""
    d = declared("prop-21")
    high = dataclasses.replace(d.inputs, floor=lambda q, H, d, r: 1.1 * 2 * (q - H) / q + 0.1)
    assert not d.verdict("explicit risk >= floor", high).holds
