"""Lemma 41 (verify/claims/lemma_41.py) through its checks and faults; every claim with all its
faults also runs in tests/verify/claims/test_registered.py."""

CID = "lemma-41"


def test_lemma41_checks_hold_with_the_closest_case_in_one_dimension(declared):
    """Lemma 41: every greedy packing within its bound (closest: l2, d = 1, eps = 0.3, M = 7),
    eps-separated, and the R^128 sphere's log M above the Maurey form."""
    d = declared(CID)
    head = d.verdict("log M <= bound")
    gap = head.measured - head.bound
    assert head.holds and -0.2 < gap < 0 and "d=1 eps=0.3" in head.detail
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
    quartered = d.verdict("log M <= bound", d.broken("divided by 4"))
    assert quartered.measured - quartered.bound > 3
    assert [P.points.shape[0] for P in d.inputs.packings] == sizes


def test_lemma41_pin_holds_and_sees_a_log_base(declared):
    """The 40-digit pin of the packing bounds holds on the honest functions; a volume bound in
    log base 10 and a Maurey binomial over d atoms fail it."""
    d = declared(CID)
    pin = "bound functions = 40-digit evaluation"
    assert d.verdict(pin).holds
    for fault in ("log base 10", "C(d + k, k)"):
        assert not d.verdict(pin, d.broken(fault)).holds
