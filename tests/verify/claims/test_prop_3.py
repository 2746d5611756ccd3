"""Tests of verify/claims/prop_3.py through the declared claims (Props 21 and 3, few heads): each
check holds, each fault makes its checks fail."""

import dataclasses
from statistics import NormalDist

import pytest

from qstr.verify.claim import Context
from qstr.verify.claims import all_claims


@pytest.mark.parametrize("cid", ["prop-21", "prop-3"])
def test_few_heads_checks_hold_and_q_heads_beat_the_floor(cid):
    """Every quick check holds (the trained models run on full and gpu only, with their fault);
    each quick fault breaks its checks: the H = q model held to the H = q - 1 floor fails both
    explicit checks."""
    claim, ctx = all_claims()[cid], Context()
    inp = claim.inputs(ctx)
    assert "trained risk >= floor" not in [c.name for c in claim.checks_in("quick")]
    assert [f.name for f in claim.faults if "quick" not in f.profiles] == [
        "floor with the heads counted from 0"
    ]
    for check in claim.checks_in("quick"):
        assert check.run(inp, ctx).holds, check.name
    for fault in claim.faults_in("quick"):
        broken = fault.apply(inp, ctx)
        for name in fault.breaks:
            assert not claim.check_named(name).run(broken, ctx).holds, (fault.name, name)
    q_heads = claim.faults[0].apply(inp, ctx)
    assert q_heads.explicit.estimate.heads == inp.H + 1 and inp.explicit.estimate.heads == inp.H


@pytest.mark.parametrize("cid", ["prop-21", "prop-3"])
def test_few_heads_explicit_allowance_is_a_stated_confidence(cid):
    """'explicit risk >= floor' allows z standard errors below the floor with z the one-sided
    normal quantile at confidence 0.999 (3.09), stated in its detail."""
    claim, ctx = all_claims()[cid], Context()
    inp = claim.inputs(ctx)
    v = claim.check_named("explicit risk >= floor").run(inp, ctx)
    est, floor = inp.explicit.estimate, inp.floor_at(inp.H)
    assert v.bound == pytest.approx(floor - NormalDist().inv_cdf(0.999) * est.se, rel=1e-12)
    assert "family confidence 0.999" in v.detail and "z = 3.090" in v.detail


def test_few_heads_an_unclipped_floor_is_a_different_function():
    """A floor function substituted in the inputs is the one the checks read: a floor 10% above
    the closed form makes the explicit model beat it."""
    claim, ctx = all_claims()["prop-21"], Context()
    inp = claim.inputs(ctx)
    high = dataclasses.replace(inp, floor=lambda q, H, d, r: 1.1 * 2 * (q - H) / q + 0.1)
    assert not claim.check_named("explicit risk >= floor").run(high, ctx).holds
