"""Lemma 12 (verify/claims/lemma_12.py) through its declared structure."""

import math

import pytest

from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")


@pytest.fixture(scope="module")
def declared():
    """The claim and its honest inputs (built once per module)."""
    claim = all_claims()["lemma-12"]
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


def test_lemma12_slipped_radii(declared):
    """Without the union bound r_x = sqrt(6 e); without concentration token_radius = sqrt(2)."""
    claim, inp = declared
    broken = _fault(claim, "r_x without").apply(inp, CTX)
    v = claim.check_named("max ||x_j|| <= r_x").run(broken, CTX)
    assert v.bound == pytest.approx(math.sqrt(6 * math.e))
    broken = _fault(claim, "token_radius without").apply(inp, CTX)
    v = claim.check_named("max ||x_j|| <= token_radius").run(broken, CTX)
    assert v.bound == pytest.approx(2**0.5)
