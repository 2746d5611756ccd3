"""Tests of verify/claims/prop_3.py through the declared claims (Props 21 and 3, few heads): which
checks and faults run where, the allowance the explicit check states, a floor substituted in the
inputs, Prop 3's second, larger shape (test_registered.py runs every check and every fault)."""

import dataclasses
from statistics import NormalDist

import pytest

SHAPES = {"prop-21": [(8, 1, 3)], "prop-3": [(8, 16, 2), (8, 16, 3)]}  # quick (N, d, q)


def _alone(inputs, k: int):
    """The inputs of shape ``k`` alone (every check then reads that shape only)."""
    return dataclasses.replace(inputs, cases=(inputs.cases[k],))


@pytest.mark.parametrize("cid", ["prop-21", "prop-3"])
def test_few_heads_checks_hold_and_q_heads_beat_the_floor(declared, cid):
    """The trained models run on full and gpu only, with their fault; the first fault holds the
    H = q model to the H = q - 1 floor, in every shape."""
    d = declared(cid)
    claim, inp = d
    assert "trained risk >= floor" not in [c.name for c in claim.checks_in("quick")]
    assert [f.name for f in claim.faults if "quick" not in f.profiles] == [
        "floor with the heads counted from 0"
    ]
    assert [(c.shape.N, c.shape.d, c.shape.q) for c in inp.cases] == SHAPES[cid]
    q_heads = d.broken(claim.faults[0].name)
    for honest, broken in zip(inp.cases, q_heads.cases, strict=True):
        assert honest.H == honest.shape.q - 1 == honest.explicit.estimate.heads
        assert broken.explicit.estimate.heads == honest.shape.q
        assert broken.explicit.estimate.risk < 1e-3  # every token retrieved: ~ 1e-4


@pytest.mark.parametrize("cid", ["prop-21", "prop-3"])
def test_few_heads_explicit_allowance_is_a_stated_confidence(declared, cid):
    """'explicit risk >= floor' allows z standard errors below each shape's floor with z the
    one-sided normal quantile at family confidence 0.999 over the shapes (Bonferroni: 3.090 for
    one, 3.291 for two), stated in its detail; the bound is the worst shape's."""
    d = declared(cid)
    k = len(d.inputs.cases)
    z = NormalDist().inv_cdf(1 - 0.001 / k)
    v = d.verdict("explicit risk >= floor")
    bounds = [
        d.inputs.floor_at(c) - z * c.explicit.estimate.se for c in d.inputs.cases
    ]  # one per shape
    assert any(v.bound == pytest.approx(b, rel=1e-12) for b in bounds), (v.bound, bounds)
    assert "family confidence 0.999" in v.detail and f"z = {z:.3f}" in v.detail
    assert f"over {k} case(s)" in v.detail


def test_few_heads_an_unclipped_floor_is_a_different_function(declared):
    """A floor function substituted in the inputs is the one the checks read: a floor 10% above
    the closed form makes the explicit model beat it."""
    d = declared("prop-21")
    high = dataclasses.replace(d.inputs, floor=lambda q, H, d, r: 1.1 * 2 * (q - H) / q + 0.1)
    assert not d.verdict("explicit risk >= floor", high).holds


def test_prop3_scope_names_every_shape(declared):
    d = declared("prop-3")
    scope = d.claim.scope(d.inputs)
    assert "N = 8, d = 16, q = 2, H = 1 (4096 prompts)" in scope
    assert "N = 8, d = 16, q = 3, H = 2 (1536 prompts)" in scope and "0 trained" in scope


def test_prop3_larger_shape_values(declared):
    """q = 3, d = 16 alone: the H = 2 explicit model's risk is its closed form 2/3 within a few
    standard errors, above the floor 2 (1 - 2 * 19/48) = 5/12 by 2H/d = 1/4 (over 7 se), the
    floor reached exactly (ratio 1 at H = 2), the squared-norm net's error attained."""
    d = declared("prop-3")
    case = d.inputs.cases[1]
    est = case.explicit.estimate
    assert d.inputs.floor_at(case) == pytest.approx(5 / 12, rel=1e-12)
    assert abs(est.risk - 2 / 3) < 3 * est.se and 0.02 < est.se < 0.04
    assert (est.risk - 5 / 12) / est.se > 6
    alone = _alone(d.inputs, 1)
    v = {c.name: c.run(alone, d.ctx) for c in d.claim.checks_in("quick")}
    assert all(x.holds for x in v.values()), v
    assert v["explicit risk = closed form"].bound == pytest.approx(2 / 3)
    assert v["closed form - floor <= 2H/d"].measured == pytest.approx(1.0, abs=1e-12)
    assert "largest at H = 2" in v["closed form - floor <= 2H/d"].detail
    sq = v["squared-norm net's error attained"]
    assert sq.bound == pytest.approx(case.explicit.sq_err) and sq.measured == pytest.approx(
        sq.bound, rel=1e-9
    )


@pytest.mark.parametrize("k", [0, 1])
def test_prop3_every_fault_breaks_each_shape_alone(declared, k):
    """Each quick fault, applied to one shape alone, makes each check it names fail there."""
    d = declared("prop-3")
    alone = _alone(d.inputs, k)
    for fault in d.claim.faults_in("quick"):
        broken = fault.apply(alone, d.ctx)
        held = [n for n in fault.breaks if d.claim.check_named(n).run(broken, d.ctx).holds]
        assert not held, (fault.name, held)
