"""The experiments' encoding, Appendix E (verify/claims/experimental_encoding.py) through its
declared structure."""

from fractions import Fraction

import pytest

from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")


@pytest.fixture(scope="module")
def declared():
    """The claim and its honest inputs (built once per module)."""
    claim = all_claims()["experimental-encoding"]
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


def test_experimental_tail_hand_value_and_the_one_sided_tail(declared):
    """89104 / 2^23 per pair, 52.58 of 4950 pairs; the one-sided tail predicts half."""
    claim, inp = declared
    assert inp.d_e == 23 and inp.pair_tail(23, 0.5) == float(Fraction(89104, 2**23))
    v = claim.check_named("mean violations = C(N, 2) tail").run(inp, CTX)
    assert v.bound == pytest.approx(52.58, abs=0.01)
    broken = _fault(claim, "the one-sided").apply(inp, CTX)
    v = claim.check_named("mean violations = C(N, 2) tail").run(broken, CTX)
    assert v.bound == pytest.approx(26.29, abs=0.01)
