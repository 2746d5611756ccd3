"""Lemma 42 (verify/claims/lemma_42.py) through its checks and faults; every claim with all its
faults also runs in tests/verify/claims/test_registered.py."""

CID = "lemma-42"


def test_lemma42_checks_hold_with_the_cone_closest_to_its_bound(declared):
    """Lemma 42: the certificate closest to its bound is the cone ||x||, 0.91 as derived."""
    head = declared(CID).verdict("certified sup-error <= error bound")
    assert 0.85 < head.measured < 1 and "||x|| (k=2" in head.detail


def test_lemma42_twice_as_steep_doubles_the_one_dimensional_error(declared):
    """A 2-Lipschitz tent against a net built for L = 1: certified about twice the bound."""
    d = declared(CID)
    v = d.verdict("certified sup-error <= error bound", d.broken("twice as steep"))
    assert 1.9 < v.measured < 2.2 and not v.holds
    assert [c.name for c in d.inputs.cases][
        0
    ] == "sin(3x)"  # the honest inputs are left as they were


def test_lemma42_unit_ball_certificate_is_exceeded_on_the_sqrt2_ball(declared):
    """Certified on the unit ball only, xy on the sqrt2-ball: its error 0.19 is seen beyond it."""
    d = declared(CID)
    v = d.verdict("error seen <= certified", d.broken("unit ball"))
    assert v.measured > 2 and not v.holds and "xy on the sqrt2-ball" in v.detail


def test_lemma42_pins_and_record_hold_and_see_their_slips(declared):
    """The 40-digit pins (steps 2-7) and the record check hold on the honest nets; a misread
    arcsine constant, |v|^2 lost, the h^2/4 constant, the k = 1 bound L h and a record's r_w
    without its biases each fail the check they name."""
    d = declared(CID)
    for check, fault in (
        ("FK moments and eps_smooth = 40-digit evaluation", "(pi - 1)"),
        ("ridge curvatures and counts = 40-digit evaluation", "|v|^2"),
        ("ridge curvatures and counts = 40-digit evaluation", "h^2/4"),
        ("guarantee = 40-digit evaluation", "L h, not"),
        ("record = the built net (width, norms, Lip, K_v)", "r_w without"),
    ):
        assert d.verdict(check).holds and d.verdict(check).measured <= 1e-12
        assert not d.verdict(check, d.broken(fault)).holds, fault
