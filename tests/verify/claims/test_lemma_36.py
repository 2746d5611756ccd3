"""The claim lemma-36 of verify/claims/lemma_36.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses

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
    c = all_claims()["lemma-36"]
    assert c.ref.seed and c.ref.conference and c.statement and c.faults


def test_lemma36_checks_and_faults():
    claim, inp, v = _faults_caught("lemma-36")
    assert {c.N for c in inp.cases} == {8, 64} and {c.depth for c in inp.cases} == {2, 3}
    assert v["||vec||^2 <= C n^3"].measured / v["||vec||^2 <= C n^3"].bound < 0.1


def test_lemma36_bound_check_sees_a_smaller_constant():
    """The headline compares with the bound function in the inputs: 1e-3 n^3 fails."""
    claim, inp, v = _run("lemma-36")
    tiny = dataclasses.replace(inp, bound=lambda n: 1e-3 * n**3)
    assert not claim.check_named("||vec||^2 <= C n^3").run(tiny, Context()).holds
