"""Lemma 41 (verify/claims/lemma_41.py) through its checks and faults; every claim with all its
faults also runs in tests/verify/claims/test_registered.py."""

from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")


def test_lemma41_checks_hold_with_the_closest_case_in_one_dimension():
    """Lemma 41: every greedy packing within its bound (closest: l2, d = 1, eps = 0.3, M = 7),
    eps-separated, and the R^128 sphere's log M above the Maurey form."""
    claim = all_claims()["lemma-41"]
    inp = claim.inputs(CTX)
    head = claim.check_named("log M <= bound").run(inp, CTX)
    assert head.holds and -0.2 < head.measured < 0 and "d=1 eps=0.3" in head.detail
    assert claim.check_named("packings eps-separated").run(inp, CTX).measured > 1.0
    sphere = claim.check_named("D = 128 sphere beats the Maurey form").run(inp, CTX)
    assert sphere.holds and sphere.measured > sphere.bound


def test_lemma41_faults_break_their_checks_and_leave_the_inputs():
    """Quartered constants exceed by about 3.6 (the derivation's +3.614); a repeated point has
    distance 0; the Maurey form with its constant 8 is not beaten in R^128."""
    claim = all_claims()["lemma-41"]
    inp = claim.inputs(CTX)
    sizes = [P.points.shape[0] for P in inp.packings]
    for fault in claim.faults:
        broken = fault.apply(inp, CTX)
        for name in fault.breaks:
            assert not claim.check_named(name).run(broken, CTX).holds, (fault.name, name)
    quartered = next(f for f in claim.faults if "divided by 4" in f.name).apply(inp, CTX)
    assert claim.check_named("log M <= bound").run(quartered, CTX).measured > 3
    assert [P.points.shape[0] for P in inp.packings] == sizes
