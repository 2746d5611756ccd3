"""Lemma 22 (verify/claims/lemma_22.py) through its public structure: inputs, named checks and
faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""

import pytest

CID = "lemma-22"


def test_lemma22_sup_error_is_the_certificate_attained(declared):
    d = declared(CID)
    v = d.verdict("sup |P(x,y) - xy| <= h^2/16")
    assert v.holds and v.measured == pytest.approx(v.bound, rel=1e-3)
    assert d.verdict("h^2/16 attained").holds


def test_lemma22_faults_leave_the_honest_inputs_alone(declared):
    d = declared(CID)
    inp, half = d.inputs, d.broken("half the knots")
    assert [c.gadget.knots for c in half.cases] == [max(2, c.args[1] // 2) for c in inp.cases]
    # certified for the full count
    assert [c.args for c in half.cases] == [c.args for c in inp.cases]
    v = d.verdict("sup |P(x,y) - xy| <= h^2/16", half)
    assert not v.holds and v.measured > 3 * v.bound  # h doubles: the error quadruples
    loose = d.broken("certificate h^2/8")
    assert d.verdict("sup |P(x,y) - xy| <= h^2/16", loose).holds  # an upper bound still...
    assert not d.verdict("h^2/16 attained", loose).holds  # ...but not attained


def test_lemma22_keeps_its_reference(declared):
    claim = declared(CID).claim
    assert claim.ref.seed == claim.ref.conference == "Lemma 22"
    assert claim.derivation == "docs/derivations/rnn-transition.md"


def test_lemma22_certified_encloses_the_attained_certificate(declared):
    """Proved over the whole box: the sup error's enclosure is h^2/16 itself (attained), decided
    by the balls, not the float64 fallback."""
    d = declared(CID)
    v = d.verdict("sup |P(x,y) - xy| <= h^2/16 (certified)")
    assert v.holds and v.certified is True
    lo, hi = v.enclosure
    assert lo <= v.bound <= hi * (1 + 1e-12) and hi - lo < 1e-15
    assert all(case.certified for _, case in v.cases) and len(v.cases) == len(d.inputs.cases)


def test_lemma22_certified_faults_violate(declared):
    """A knot 1e-9 off its place and the output 1 + 1e-9 too large: the balls prove the sup error
    above h^2/16 (violated, not a fallback)."""
    d = declared(CID)
    for fault in ("unit 2's bias", "output weights"):
        v = d.verdict("sup |P(x,y) - xy| <= h^2/16 (certified)", d.broken(fault))
        assert not v.holds and v.certified is True and v.enclosure[0] > v.bound_enclosure[1]
