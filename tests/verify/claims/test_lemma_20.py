"""Lemma 20 (verify/claims/lemma_20.py): the output envelope attained by a constructed class member
and never exceeded, the maximum's moments (test_registered.py runs every fault)."""

import pytest

from qstr.verify.claims.lemma_20 import _ratios


def test_lemma20_envelope_is_attained_and_never_exceeded(declared):
    d = declared("lemma-20")
    assert d.verdict("B(X) attained").measured == pytest.approx(1.0, abs=1e-12)
    v = d.verdict("|f(X)_i| <= B(X)")
    assert v.holds and v.measured == pytest.approx(1.0, abs=1e-12)
    # the built module and random members sit well inside the envelope
    inp = d.inputs
    assert float(_ratios(inp, inp.members[0]).max()) < 0.5
    broken = d.broken("without the bias's 1")
    assert not d.verdict("|f(X)_i| <= B(X)", broken).holds


def test_lemma20_moments_and_the_forgotten_maximum(declared):
    d = declared("lemma-20")
    v = d.verdict("(E M^{2p})^{1/p} <= C_x d psi(p)")
    assert v.holds and 0.1 < v.measured / v.bound < 1
    assert not d.verdict("(E M^{2p})^{1/p} <= C_x d psi(p)", d.broken("psi(p) = 2p")).holds
    d.faults_leave_the_honest_inputs()


def test_lemma20_pins_and_the_recorded_c(declared):
    """B(X) and psi(p) agree with their 40-digit evaluations to float64 rounding; the slips the
    pins exist for (psi without its minimum, a c of 1) fail them; the built encoding's c holds."""
    d = declared("lemma-20")
    for name in ("B(X) = 40-digit evaluation", "psi(p) = 40-digit evaluation"):
        v = d.verdict(name)
        assert v.holds and v.measured < 1e-14, name
    v = d.verdict("psi(p) = 40-digit evaluation", d.broken("psi without its minimum"))
    assert not v.holds and v.measured > 1e-3
    check = "c^2 (q+1) = ||z_j||^2 - ||x_j||^2 of the built encoding"
    assert d.verdict(check).holds
    v = d.verdict(check, d.broken("c recorded as"))
    assert not v.holds and v.measured == pytest.approx(d.inputs.c**2 * 3 - 3, rel=1e-9)
