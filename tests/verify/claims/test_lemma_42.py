"""Lemma 42 (verify/claims/lemma_42.py) through its checks and faults; every claim with all its
faults also runs in tests/verify/claims/test_registered.py."""

from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")


def test_lemma42_checks_hold_with_the_cone_closest_to_its_bound():
    """Lemma 42: every certificate within its bound (closest: the cone ||x||, 0.91 as derived), the
    bounds within eps, the errors seen within the certificates, and the certificate's steps."""
    claim = all_claims()["lemma-42"]
    inp = claim.inputs(CTX)
    for check in claim.checks:
        assert check.run(inp, CTX).holds, check.name
    head = claim.check_named("certified sup-error <= error bound").run(inp, CTX)
    assert 0.85 < head.measured < 1 and "||x|| (k=2" in head.detail


def test_lemma42_twice_as_steep_doubles_the_one_dimensional_error():
    """A 2-Lipschitz tent against a net built for L = 1: certified about twice the bound."""
    claim = all_claims()["lemma-42"]
    inp = claim.inputs(CTX)
    steep = next(f for f in claim.faults if "twice as steep" in f.name).apply(inp, CTX)
    v = claim.check_named("certified sup-error <= error bound").run(steep, CTX)
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
            assert not claim.check_named(name).run(broken, CTX).holds, (fault.name, name)


def test_lemma42_unit_ball_certificate_is_exceeded_on_the_sqrt2_ball():
    """Certified on the unit ball only, xy on the sqrt2-ball: its error 0.19 is seen beyond it."""
    claim = all_claims()["lemma-42"]
    inp = claim.inputs(CTX)
    unit = next(f for f in claim.faults if "unit ball" in f.name).apply(inp, CTX)
    v = claim.check_named("error seen <= certified").run(unit, CTX)
    assert v.measured > 2 and not v.holds and "xy on the sqrt2-ball" in v.detail
