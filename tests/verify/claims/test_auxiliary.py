"""The auxiliary-lemma claims (verify/claims/auxiliary.py) through their checks and faults; every
claim with all its faults also runs in tests/verify/claims/test_registered.py."""

import pytest

from qstr.verify.claims import all_claims
from qstr.verify.claims.auxiliary import holder_rhs
from qstr.verify.registry import Context

CTX = Context(profile="quick")


def test_lemma39_checks_hold_and_the_swapped_exponents_break_both():
    """Lemma 39: lhs/rhs <= 1 everywhere, = 1 at the equality case; the swapped form fails both."""
    claim = all_claims()["lemma-39"]
    inp = claim.inputs(CTX)
    bound = claim.check("lhs <= rhs").run(inp, CTX)
    tight = claim.check("equality case attained").run(inp, CTX)
    assert bound.holds and tight.holds and abs(tight.measured - 1.0) <= 1e-13
    swapped = next(f for f in claim.faults if "swapped" in f.name)
    broken = swapped.apply(inp, CTX)
    assert claim.check("lhs <= rhs").run(broken, CTX).measured > 1.5  # the derivation's 2.96
    assert not claim.check("equality case attained").run(broken, CTX).holds
    assert inp.rhs is holder_rhs  # the honest inputs are left as they were


def test_lemma39_a_loose_rhs_is_caught_by_tightness_only():
    """A right-hand side twice too large still bounds lhs; only the equality case catches it."""
    claim = all_claims()["lemma-39"]
    inp = claim.inputs(CTX)
    doubled = next(f for f in claim.faults if "doubled" in f.name).apply(inp, CTX)
    assert claim.check("lhs <= rhs").run(doubled, CTX).holds
    assert claim.check("equality case attained").run(doubled, CTX).measured == pytest.approx(
        0.5, rel=1e-12
    )


def test_lemma41_checks_hold_with_the_closest_case_in_one_dimension():
    """Lemma 41: every greedy packing within its bound (closest: l2, d = 1, eps = 0.3, M = 7),
    eps-separated, and the R^128 sphere's log M above the Maurey form."""
    claim = all_claims()["lemma-41"]
    inp = claim.inputs(CTX)
    head = claim.check("log M <= bound").run(inp, CTX)
    assert head.holds and -0.2 < head.measured < 0 and "d=1 eps=0.3" in head.detail
    assert claim.check("packings eps-separated").run(inp, CTX).measured > 1.0
    sphere = claim.check("D = 128 sphere beats the Maurey form").run(inp, CTX)
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
            assert not claim.check(name).run(broken, CTX).holds, (fault.name, name)
    quartered = next(f for f in claim.faults if "divided by 4" in f.name).apply(inp, CTX)
    assert claim.check("log M <= bound").run(quartered, CTX).measured > 3
    assert [P.points.shape[0] for P in inp.packings] == sizes


def test_lemma42_checks_hold_with_the_cone_closest_to_its_bound():
    """Lemma 42: every certificate within its bound (closest: the cone ||x||, 0.91 as derived), the
    bounds within eps, the errors seen within the certificates, and the certificate's steps."""
    claim = all_claims()["lemma-42"]
    inp = claim.inputs(CTX)
    for check in claim.checks:
        assert check.run(inp, CTX).holds, check.name
    head = claim.check("certified sup-error <= error bound").run(inp, CTX)
    assert 0.85 < head.measured < 1 and "||x|| (k=2" in head.detail


def test_lemma42_twice_as_steep_doubles_the_one_dimensional_error():
    """A 2-Lipschitz tent against a net built for L = 1: certified about twice the bound."""
    claim = all_claims()["lemma-42"]
    inp = claim.inputs(CTX)
    steep = next(f for f in claim.faults if "twice as steep" in f.name).apply(inp, CTX)
    v = claim.check("certified sup-error <= error bound").run(steep, CTX)
    assert 1.9 < v.measured < 2.2 and not v.holds
    assert [c.name for c in inp.cases][0] == "sin(3x)"  # the honest inputs are left as they were


def test_lemma42_each_fault_breaks_its_checks():
    """Scaled weights, unit-ball certificates, a degree too low, fewer ridge intervals, off-by-one
    moments, a short grid."""
    claim = all_claims()["lemma-42"]
    inp = claim.inputs(CTX)
    for fault in claim.faults:
        broken = fault.apply(inp, CTX)
        for name in fault.breaks:
            assert not claim.check(name).run(broken, CTX).holds, (fault.name, name)


def test_lemma42_unit_ball_certificate_is_exceeded_on_the_sqrt2_ball():
    """Certified on the unit ball only, xy on the sqrt2-ball: its error 0.19 is seen beyond it."""
    claim = all_claims()["lemma-42"]
    inp = claim.inputs(CTX)
    unit = next(f for f in claim.faults if "unit ball" in f.name).apply(inp, CTX)
    v = claim.check("error seen <= certified").run(unit, CTX)
    assert v.measured > 2 and not v.holds and "xy on the sqrt2-ball" in v.detail
