"""Assumption 3 (verify/claims/assumption_3.py) through its declared structure."""

import pytest

from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")


@pytest.fixture(scope="module")
def declared():
    """The claim and its honest inputs (built once per module)."""
    claim = all_claims()["assumption-3"]
    return claim, claim.inputs(CTX)


def _fault(claim, start):
    return next(f for f in claim.faults if f.name.startswith(start))


def test_checks_hold_and_each_fault_fails_its_checks(declared):
    """Every check holds on the honest inputs; every fault makes each named check fail, and returns
    new inputs."""
    claim, inp = declared
    for check in claim.checks:
        v = check.run(inp, CTX)
        assert v.holds, (check.name, v)
    for fault in claim.faults:
        broken = fault.apply(inp, CTX)
        assert broken is not inp
        for name in fault.breaks:
            v = claim.check_named(name).run(broken, CTX)
            assert not v.holds, (fault.name, name, v)


def test_assumption3_headline_and_the_experimental_codes(declared):
    """The headline is Assumption 3's mu <= 1/2; the experiments' codes measure mu > 1/2."""
    claim, inp = declared
    assert claim.checks[0].name == "coherence <= 1/2"
    v = claim.check_named("coherence <= 1/2").run(_fault(claim, "d_e = floor").apply(inp, CTX), CTX)
    assert v.measured > 0.5 and "experimental" in v.detail


def test_assumption3_short_rows_miss_one_by_one_over_d_e_plus_one(declared):
    """Rows scaled by sqrt(d_e / (d_e + 1)): | ||w||^2 - 1 | = 1/(d_e + 1), coherence kept."""
    claim, inp = declared
    short = _fault(claim, "rows normalised").apply(inp, CTX)
    d_e = short.books[0][1].d_e
    off = claim.check_named("unit rows").run(short, CTX).measured
    assert off == pytest.approx(1 / (d_e + 1), rel=1e-5)
    assert claim.check_named("coherence <= 1/2").run(short, CTX).holds


def test_assumption3_union_bound_straddles_delta(declared):
    """At the exact rule's d_e the union bound is <= delta, at d_e - 1 above it."""
    claim, inp = declared
    assert claim.check_named("union bound <= delta at d_e").run(inp, CTX).measured <= 1
    assert claim.check_named("union bound > delta at d_e - 1").run(inp, CTX).measured > 1
