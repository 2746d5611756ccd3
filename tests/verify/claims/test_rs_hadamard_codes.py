"""The RS-Hadamard codes (verify/claims/rs_hadamard_codes.py) through its declared structure."""

import pytest

from qstr.constructions.codes import gf_mul_table
from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")


@pytest.fixture(scope="module")
def declared():
    """The claim and its honest inputs (built once per module)."""
    claim = all_claims()["rs-hadamard-codes"]
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


def test_rs_codes_reducible_moduli_named(declared):
    """The reducible moduli at m = 4 and 8 are the two tables found with zero divisors."""
    claim, inp = declared
    broken = _fault(claim, "reducible").apply(inp, CTX)
    v = claim.check_named("GF(2^m) tables are fields").run(broken, CTX)
    assert v.measured == 2 and "m = [4, 8]" in v.detail


def test_a_reducible_modulus_has_a_nonzero_square_equal_to_zero():
    """x^4 + x^2 + 1 = (x^2 + x + 1)^2: x^2 + x + 1 = 0b111 squares to 0; degree checked."""
    assert gf_mul_table(4, 0b10101)[0b111, 0b111] == 0
    with pytest.raises(ValueError, match="poly must be an int of degree"):
        gf_mul_table(4, 0b111)
