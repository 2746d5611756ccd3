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
