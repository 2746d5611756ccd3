"""The experiments' encoding, Appendix E (verify/claims/experimental_encoding.py) through its
declared structure."""

from fractions import Fraction

import pytest

CID = "experimental-encoding"


def test_experimental_tail_hand_value_and_the_one_sided_tail(declared):
    """89104 / 2^23 per pair, 52.58 of 4950 pairs; the one-sided tail predicts half."""
    d = declared(CID)
    assert d.inputs.d_e == 23 and d.inputs.pair_tail(23, 0.5) == float(Fraction(89104, 2**23))
    v = d.verdict("mean violations = C(N, 2) tail")
    assert v.bound == pytest.approx(52.58, abs=0.01)
    v = d.verdict("mean violations = C(N, 2) tail", d.broken("the one-sided"))
    assert v.bound == pytest.approx(26.29, abs=0.01)


def test_experimental_encoding_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()
