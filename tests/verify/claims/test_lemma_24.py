"""Lemma 24 (verify/claims/lemma_24.py) through its public structure: inputs, named checks and
faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""

import pytest

CID = "lemma-24"


def test_lemma24_checks_hold_and_each_fault_breaks_its_own(declared):
    d = declared(CID)
    shifted = d.broken("band offsets shifted up by M/10")
    assert not d.verdict("G = 0 for s < 1/2", shifted).holds
    assert all(
        c.gadget.b1 is not s.gadget.b1 for c, s in zip(d.inputs.cases, shifted.cases, strict=True)
    )
    v = d.verdict("sup |G(x,s) - 2x relu(s-1/2)| <= r_x delta", d.broken("half the knots"))
    assert not v.holds and v.measured == pytest.approx(2 * v.bound, rel=1e-3)  # delta doubles


def test_lemma24_keeps_its_reference(declared):
    claim = declared(CID).claim
    assert claim.ref.seed == claim.ref.conference == "Lemma 24"
    assert claim.derivation == "docs/derivations/rnn-transition.md"
