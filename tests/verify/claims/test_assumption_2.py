"""Assumption 2, the links (verify/claims/assumption_2.py) through its declared structure."""

import pytest

from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")


@pytest.fixture(scope="module")
def declared():
    """The claim and its honest inputs (built once per module)."""
    claim = all_claims()["assumption-2"]
    return claim, claim.inputs(CTX)


def _fault(claim, start):
    return next(f for f in claim.faults if f.name.startswith(start))


def test_checks_hold_and_each_fault_fails_its_checks(declared):
    """Every check holds on the honest inputs; every fault makes each named check fail, and returns
    new inputs."""
    claim, inp = declared
    for check in claim.checks:
        v = check.run(inp, CTX)
        assert v.holds, (check.name, v)
    for fault in claim.faults:
        broken = fault.apply(inp, CTX)
        assert broken is not inp
        for name in fault.breaks:
            v = claim.check_named(name).run(broken, CTX)
            assert not v.holds, (fault.name, name, v)


def test_assumption2_stated_moments_hand_values(declared):
    """E g^2 as stated at q = 3, d = 4: linear and hermite 1, sqnorm 2, mean d/q, projected 1/q;
    the teacher's (1 + 1/12) / 2 = 13/24."""
    _, inp = declared
    want = {"linear": 1.0, "hermite": 1.0, "sqnorm": 2.0, "mean": 4 / 3, "mean-projected": 1 / 3}
    assert {k: f(3, 4) for k, f in inp.stated.items()} == pytest.approx(want)
    assert inp.teacher_closed(3, 4) == pytest.approx(13 / 24)


def test_assumption2_unscaled_teacher_is_about_8_times_too_large(declared):
    """Teachers without 1/sqrt(m) (m = 8): E g^2 about 8 x 13/24."""
    claim, inp = declared
    broken = _fault(claim, "a teacher without").apply(inp, CTX)
    assert claim.check_named("teacher E g^2 = (1 + 1/(qd)) / 2").run(broken, CTX).measured > 2.0
