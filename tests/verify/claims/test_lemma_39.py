"""Lemma 39 (verify/claims/lemma_39.py) through its checks and faults; every claim with all its
faults also runs in tests/verify/claims/test_registered.py."""

import pytest

from qstr.verify.claims.lemma_39 import holder_rhs

CID = "lemma-39"


def test_lemma39_checks_hold_and_the_swapped_exponents_break_both(declared):
    """Lemma 39: lhs/rhs <= 1 everywhere, = 1 at the equality case; the swapped form fails both."""
    d = declared(CID)
    bound, tight = d.verdict("lhs <= rhs"), d.verdict("equality case attained")
    assert bound.holds and tight.holds and abs(tight.measured - 1.0) <= 1e-13
    broken = d.broken("swapped")
    assert d.verdict("lhs <= rhs", broken).measured > 1.5  # the derivation's 2.96
    assert not d.verdict("equality case attained", broken).holds
    assert d.inputs.rhs is holder_rhs  # the honest inputs are left as they were


def test_lemma39_a_loose_rhs_is_caught_by_tightness_only(declared):
    """A right-hand side twice too large still bounds lhs; only the equality case catches it."""
    d = declared(CID)
    doubled = d.broken("doubled")
    assert d.verdict("lhs <= rhs", doubled).holds
    assert d.verdict("equality case attained", doubled).measured == pytest.approx(0.5, rel=1e-12)


def test_lemma39_pin_holds_and_sees_a_lost_outer_power(declared):
    """The 40-digit pin of mixed_norm and conjugate holds on the honest functions and fails when
    the outer 1/q power is lost or the conjugate slips."""
    d = declared(CID)
    pin = "mixed norm and conjugate = 40-digit evaluation"
    assert d.verdict(pin).holds and d.verdict(pin).measured <= 1e-12
    assert not d.verdict(pin, d.broken("outer 1/q")).holds
    assert not d.verdict(pin, d.broken("r/(r + 1)")).holds
