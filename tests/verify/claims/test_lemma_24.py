"""Lemma 24 (verify/claims/lemma_24.py) through its public structure: inputs, named checks and
faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""

import pytest

from qstr.verify.certified import Budget, certified_gate
from qstr.verify.claims._transition import certified_gadgets

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


def test_lemma24_certified_encloses_the_attained_certificate(declared):
    d = declared(CID)
    v = d.verdict("sup |G(x,s) - 2x relu(s-1/2)| <= r_x delta (certified)")
    assert v.holds and v.certified is True
    lo, hi = v.enclosure
    assert lo <= v.bound * (1 + 1e-12) and v.bound <= hi * (1 + 1e-12) and hi - lo < 1e-15
    for fault in ("unit 2's bias", "output weights"):
        broken = d.verdict(
            "sup |G(x,s) - 2x relu(s-1/2)| <= r_x delta (certified)", d.broken(fault)
        )
        assert not broken.holds and broken.certified is True
        assert broken.enclosure[0] > broken.bound_enclosure[1]


def test_a_case_the_fallback_decides_is_not_hidden(declared):
    """One gadget's branch and bound stopped after 3 boxes: not certified, its float64 search
    decides; the worst case is that one (certified False), though the other is certified."""
    d = declared(CID)
    first = d.inputs.cases[0].gadget

    def prove(g, rtol):
        return certified_gate(g, rtol=rtol, budget=Budget(boxes=3) if g is first else None)

    v = certified_gadgets(d.inputs, prove)
    assert v.holds and v.certified is False and "the float64 check decides" in v.detail
    assert [case.certified for _, case in v.cases] == [False, True]
    assert v.detail.startswith(f"worst {d.inputs.cases[0].label}")
    assert v.measured == pytest.approx(d.inputs.cases[0].sup_error())  # the float64 search's
