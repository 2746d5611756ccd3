"""Lemma 39 (verify/claims/lemma_39.py) through its checks and faults; every claim with all its
faults also runs in tests/verify/claims/test_registered.py."""

import pytest

from qstr.verify.claims import all_claims
from qstr.verify.claims.lemma_39 import holder_rhs
from qstr.verify.registry import Context

CTX = Context(profile="quick")


def test_lemma39_checks_hold_and_the_swapped_exponents_break_both():
    """Lemma 39: lhs/rhs <= 1 everywhere, = 1 at the equality case; the swapped form fails both."""
    claim = all_claims()["lemma-39"]
    inp = claim.inputs(CTX)
    bound = claim.check_named("lhs <= rhs").run(inp, CTX)
    tight = claim.check_named("equality case attained").run(inp, CTX)
    assert bound.holds and tight.holds and abs(tight.measured - 1.0) <= 1e-13
    swapped = next(f for f in claim.faults if "swapped" in f.name)
    broken = swapped.apply(inp, CTX)
    assert claim.check_named("lhs <= rhs").run(broken, CTX).measured > 1.5  # the derivation's 2.96
    assert not claim.check_named("equality case attained").run(broken, CTX).holds
    assert inp.rhs is holder_rhs  # the honest inputs are left as they were


def test_lemma39_a_loose_rhs_is_caught_by_tightness_only():
    """A right-hand side twice too large still bounds lhs; only the equality case catches it."""
    claim = all_claims()["lemma-39"]
    inp = claim.inputs(CTX)
    doubled = next(f for f in claim.faults if "doubled" in f.name).apply(inp, CTX)
    assert claim.check_named("lhs <= rhs").run(doubled, CTX).holds
    assert claim.check_named("equality case attained").run(doubled, CTX).measured == pytest.approx(
        0.5, rel=1e-12
    )
