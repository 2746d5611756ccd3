"""Lemma 41 (verify/claims/lemma_41.py) through its checks and faults; every claim with all its
faults also runs in tests/verify/claims/test_registered.py."""

CID = "lemma-41"


def test_lemma41_checks_hold_with_the_closest_case_in_one_dimension(declared):
    """Lemma 41: every greedy packing within its bound (closest: l2, d = 1, eps = 0.3, M = 7),
    eps-separated, and the R^128 sphere's log M above the Maurey form."""
    d = declared(CID)
    head = d.verdict("log M <= bound")
    assert head.holds and -0.2 < head.measured < 0 and "d=1 eps=0.3" in head.detail
    assert d.verdict("packings eps-separated").measured > 1.0
    sphere = d.verdict("D = 128 sphere beats the Maurey form")
    assert sphere.holds and sphere.measured > sphere.bound


def test_lemma41_faults_break_their_checks_and_leave_the_inputs(declared):
    """Quartered constants exceed by about 3.6 (the derivation's +3.614); a repeated point has
    distance 0; the Maurey form with its constant 8 is not beaten in R^128. No fault changes the
    honest packings."""
    d = declared(CID)
    sizes = [P.points.shape[0] for P in d.inputs.packings]
    d.faults_leave_the_honest_inputs()
    assert d.verdict("log M <= bound", d.broken("divided by 4")).measured > 3
    assert [P.points.shape[0] for P in d.inputs.packings] == sizes
