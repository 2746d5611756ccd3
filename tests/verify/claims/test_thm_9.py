"""The claim thm-9 of verify/claims/thm_9.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses

import pytest

from qstr.verify.claim import Context
from qstr.verify.claims import all_claims


def _run(cid, ctx=None):
    """The claim's inputs and each check's verdict on them."""
    ctx = ctx or Context(profile="quick")
    claim = all_claims()[cid]
    inp = claim.inputs(ctx)
    return claim, inp, {c.name: c.run(inp, ctx) for c in claim.checks_in(ctx.profile)}


def _faults_caught(cid):
    """Every fault of the claim makes each check it names fail (without crashing)."""
    claim, inp, verdicts = _run(cid)
    ctx = Context(profile="quick")
    assert all(v.holds for v in verdicts.values()), verdicts
    for f in claim.faults_in(ctx.profile):
        broken = f.apply(inp, ctx)
        for name in f.breaks:
            assert not claim.check_named(name).run(broken, ctx).holds, (f.name, name)
    return claim, inp, verdicts


def test_claim_registered_with_references():
    c = all_claims()["thm-9"]
    assert c.ref.seed and c.ref.conference and c.statement and c.faults


def test_thm9_checks_and_faults():
    claim, inp, v = _faults_caught("thm-9")
    assert v["n*(N) slopes >= 1/(2(L_y+4))"].bound == pytest.approx(1 / 12)
    assert "paper" in v["n*(N) slopes >= 1/(2(L_y+4))"].detail


def test_thm9_memoriser_hypothesis_excludes_large_labels():
    """Memorisers whose labels break ||y||^2 <= K_y n are not held to C n^3; with none left the
    check fails rather than passing vacuously."""
    claim, inp, _ = _run("thm-9")
    loud = tuple((n, m, 10 * y) for n, m, y in inp.memorisers)
    v = claim.check_named("memoriser ||vec||^2 <= C n^3").run(
        dataclasses.replace(inp, memorisers=loud), Context()
    )
    assert not v.holds
