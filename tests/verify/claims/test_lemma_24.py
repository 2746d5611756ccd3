"""Lemma 24 (verify/claims/lemma_24.py) through its public structure: inputs, named checks and
faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""

import pytest

from qstr.verify.claim import Context
from qstr.verify.claims import all_claims

CTX = Context(profile="quick")
CLAIM = all_claims()["lemma-24"]


@pytest.fixture(scope="module")
def inp():
    """The claim's honest inputs, built once."""
    return CLAIM.inputs(CTX)


def run(name, inputs):
    return CLAIM.check_named(name).run(inputs, CTX)


def broken(fault, inputs):
    return CLAIM.fault_named(fault).apply(inputs, CTX)


def test_lemma24_keeps_its_reference():
    assert CLAIM.ref.seed == CLAIM.ref.conference == "Lemma 24"
    assert CLAIM.derivation == "docs/derivations/rnn-transition.md"


def test_lemma24_checks_hold_and_each_fault_breaks_its_own(inp):
    names = [c.name for c in CLAIM.checks]
    assert all(run(n, inp).holds for n in names)
    shifted = broken("band offsets shifted up by M/10", inp)
    assert not run("G = 0 for s < 1/2", shifted).holds
    assert all(
        c.gadget.b1 is not s.gadget.b1 for c, s in zip(inp.cases, shifted.cases, strict=True)
    )
    v = run(
        "sup |G(x,s) - 2x relu(s-1/2)| <= r_x delta",
        broken("half the knots", inp),
    )
    assert not v.holds and v.measured == pytest.approx(2 * v.bound, rel=1e-3)  # delta doubles
