"""The RS-Hadamard codes (verify/claims/rs_hadamard_codes.py) through its declared structure."""

import pytest

from qstr.constructions.codes import gf_mul_table

CID = "rs-hadamard-codes"


def test_rs_codes_reducible_moduli_named(declared):
    """The reducible moduli at m = 4 and 8 are the two tables found with zero divisors."""
    d = declared(CID)
    v = d.verdict("GF(2^m) tables are fields", d.broken("reducible"))
    assert v.measured == 2 and "m = [4, 8]" in v.detail


def test_a_reducible_modulus_has_a_nonzero_square_equal_to_zero():
    """x^4 + x^2 + 1 = (x^2 + x + 1)^2: x^2 + x + 1 = 0b111 squares to 0; degree checked."""
    assert gf_mul_table(4, 0b10101)[0b111, 0b111] == 0
    with pytest.raises(ValueError, match="poly must be an int of degree"):
        gf_mul_table(4, 0b111)


def test_rs_codes_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()
