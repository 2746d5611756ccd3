"""Assumption 3 (verify/claims/assumption_3.py) through its declared structure."""

import pytest

CID = "assumption-3"


def test_assumption3_headline_and_the_experimental_codes(declared):
    """The headline is Assumption 3's mu <= 1/2; the experiments' codes measure mu > 1/2."""
    d = declared(CID)
    assert d.claim.checks[0].name == "coherence <= 1/2"
    v = d.verdict("coherence <= 1/2", d.broken("d_e = floor"))
    assert v.measured > 0.5 and "experimental" in v.detail


def test_assumption3_short_rows_miss_one_by_one_over_d_e_plus_one(declared):
    """Rows scaled by sqrt(d_e / (d_e + 1)): | ||w||^2 - 1 | = 1/(d_e + 1), coherence kept."""
    d = declared(CID)
    short = d.broken("rows normalised")
    d_e = short.books[0][1].d_e
    assert d.verdict("unit rows", short).measured == pytest.approx(1 / (d_e + 1), rel=1e-5)
    assert d.verdict("coherence <= 1/2", short).holds


def test_assumption3_union_bound_straddles_delta(declared):
    """At the exact rule's d_e the union bound is <= delta, at d_e - 1 above it."""
    d = declared(CID)
    assert d.verdict("union bound <= delta at d_e").measured <= 1
    assert d.verdict("union bound > delta at d_e - 1").measured > 1


def test_assumption3_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()
