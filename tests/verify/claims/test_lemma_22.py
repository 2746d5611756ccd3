"""Lemma 22 (verify/claims/lemma_22.py) through its public structure: inputs, named checks and
faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""

import pytest

from qstr.verify.claim import Context
from qstr.verify.claims import all_claims

CTX = Context(profile="quick")
CLAIM = all_claims()["lemma-22"]


@pytest.fixture(scope="module")
def inp():
    """The claim's honest inputs, built once."""
    return CLAIM.inputs(CTX)


def run(name, inputs):
    return CLAIM.check_named(name).run(inputs, CTX)


def broken(fault, inputs):
    return CLAIM.fault_named(fault).apply(inputs, CTX)


def test_lemma22_keeps_its_reference():
    assert CLAIM.ref.seed == CLAIM.ref.conference == "Lemma 22"
    assert CLAIM.derivation == "docs/derivations/rnn-transition.md"


def test_lemma22_sup_error_is_the_certificate_attained(inp):
    v = run("sup |P(x,y) - xy| <= h^2/16", inp)
    assert v.holds and v.measured == pytest.approx(v.bound, rel=1e-3)
    assert run("h^2/16 attained", inp).holds


def test_lemma22_faults_leave_the_honest_inputs_alone(inp):
    half = broken("half the knots", inp)
    assert [c.gadget.knots for c in half.cases] == [max(2, c.args[1] // 2) for c in inp.cases]
    assert [c.args for c in half.cases] == [
        c.args for c in inp.cases
    ]  # certified for the full count
    v = run("sup |P(x,y) - xy| <= h^2/16", half)
    assert not v.holds and v.measured > 3 * v.bound  # h doubles: the error quadruples
    loose = broken("certificate h^2/8", inp)
    assert run("sup |P(x,y) - xy| <= h^2/16", loose).holds  # an upper bound still...
    assert not run("h^2/16 attained", loose).holds  # ...but not attained
