"""Prop 26 (verify/claims/prop_26.py) through its public structure: inputs, named checks and
faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""

import pytest

from qstr.verify.claim import Context
from qstr.verify.claims import all_claims

CTX = Context(profile="quick")
CLAIM = all_claims()["prop-26"]


@pytest.fixture(scope="module")
def inp():
    """The claim's honest inputs, built once."""
    return CLAIM.inputs(CTX)


def run(name, inputs):
    return CLAIM.check_named(name).run(inputs, CTX)


def broken(fault, inputs):
    return CLAIM.fault_named(fault).apply(inputs, CTX)


def test_prop26_keeps_its_reference():
    assert CLAIM.ref.seed == CLAIM.ref.conference == "Prop 26"
    assert CLAIM.derivation == "docs/derivations/rnn-transition.md"


def test_prop26_checks_hold(inp):
    for check in CLAIM.checks:
        assert check.run(inp, CTX).holds, check.name
    v = run("target error <= eps", inp)
    assert 0.3 < v.measured / v.bound < 1  # the rotated codes spend the budget (0.82 at seed 0)


def test_prop26_without_rectifier_leaks_and_the_states_grow(inp):
    gate = broken("rectifying layers 3-4 removed", inp)
    assert all(c.transition is not g.transition for c, g in zip(inp.cases, gate.cases, strict=True))
    assert run("exactly 0 off target", gate).measured > 0
    v = run("states within eps at every N", gate)
    assert not v.holds and v.measured > 2 * v.bound
    assert run("exactly 0 off target", inp).holds  # the honest inputs are untouched


def test_prop26_budget_faults_break_only_their_step(inp):
    slip = broken("s_max without the margin", inp)
    assert not run("s_max = 1 + nu + delta_1 + margin", slip).holds
    assert run("b = r_x min(4e, 2e + delta)", slip).holds
    fewer = broken("one gate knot fewer", inp)
    assert not run("knots as derived", fewer).holds


def test_prop26_budget_slips_break_their_step_and_leave_the_record_alone(inp):
    """Each slip of the error budget (docs/derivations/rnn-transition.md, section 4) fails its
    own step only; the honest guarantees are not edited."""
    slips = {
        "product error h^2/4 (the square's, not the product's)": "product error = h^2/16",
        "delta_1 without its d_e factor": "delta_1 = d_e h^2/16",
        "excess without its max(0, .)": "excess as derived",
        "threshold r_x min(2e, 2e + delta)": "b = r_x min(4e, 2e + delta)",
    }
    for fault, step in slips.items():
        slip = broken(fault, inp)
        assert not run(step, slip).holds, fault
        assert run("eps = b + r_x delta + 2 r_x (delta_1 + nu)", slip).holds, fault
    assert run("b = r_x min(4e, 2e + delta)", inp).holds


def test_prop26_dense_slip_and_eps_doubled(inp):
    """A factor 2 dropped from the dense layer 3 separates it from the closed form (the honest
    transitions keep theirs); a transition built for 2 eps certifies more than asked."""
    half = broken("layer 3 reads delta sum_k H_k (factor 2 dropped)", inp)
    assert all(c.transition is not h.transition for c, h in zip(inp.cases, half.cases, strict=True))
    assert run("dense layers = closed form", half).measured > 0.1
    assert run("dense layers = closed form", inp).holds
    v = run("certified eps <= asked", broken("built for twice the eps asked", inp))
    assert not v.holds and v.measured > 1.5 * v.bound


def test_prop26_thresholds_too_low_and_too_high(inp):
    low = broken("threshold b / 8", inp)
    assert not run("|gate| <= b off target", low).holds
    assert not run("exactly 0 off target", low).holds  # the leak passes layer 3
    high = broken("threshold 3 b", inp)
    assert not run("target error <= eps", high).holds
