"""Assumption 1 (verify/claims/assumption_1.py) through its declared structure."""

import math

import pytest

from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")


@pytest.fixture(scope="module")
def declared():
    """The claim and its honest inputs (built once per module)."""
    claim = all_claims()["assumption-1"]
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


def test_assumption1_wide_tokens_measure_c_x_near_2_25(declared):
    """Tokens of standard deviation 1.5 give C_x about 2.25 x 0.97 at d = 16."""
    claim, inp = declared
    broken = _fault(claim, "tokens with").apply(inp, CTX)
    assert claim.check_named("C_x <= 1").run(broken, CTX).measured > 1.4


@pytest.mark.parametrize(
    "d, r, want", [(1, 1, 2 / math.pi), (1, 2, 0.5), (3, 2, 1 / 2), (2, 1, math.pi / 4)]
)
def test_chi_closed_form_hand_values(declared, d, r, want):
    """E|z| = sqrt(2/pi); E||x||^2 = d; E||x|| = sqrt(pi/2) at d = 2."""
    _, inp = declared
    assert inp.chi_ratio(d, r) == pytest.approx(want, rel=1e-12)


def test_chi_ratio_largest_at_r_1_and_normal_hand_values(declared):
    """The chi ratio is largest at r = 1 and below 1; E y^2 / 4 = 1/4, (E|y|)^2 = 2/pi."""
    _, inp = declared
    for d in (1, 2, 16, 256):
        vals = [inp.chi_ratio(d, r) for r in (1, 1.5, 2, 4, 8, 32)]
        assert max(vals) == vals[0] < 1
    assert inp.normal_ratio(2.0) == pytest.approx(1 / 4)
    assert inp.normal_ratio(1.0) == pytest.approx(2 / math.pi)
