"""The claim lemma-38 of verify/claims/lemma_38.py through its inputs, checks and faults
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
    c = all_claims()["lemma-38"]
    assert c.ref.seed and c.ref.conference and c.statement and c.faults


def test_lemma38_checks_and_faults():
    claim, inp, v = _faults_caught("lemma-38")
    head = v["||a'||^2 <= 16 ||y||^2 / eps^2"]
    assert head.measured == pytest.approx((16 * 128 - 22) / (16 * 128), rel=1e-6)  # alternating


def test_lemma38_allowance_check_sees_a_wrong_allowance():
    """A reported float64 allowance 1% above the derived Higham bound fails its check."""
    claim, inp, _ = _run("lemma-38")
    case = inp.cases[-1]
    net = dataclasses.replace(case.net, rounding=1.01 * case.net.rounding)
    broken = dataclasses.replace(inp, cases=(*inp.cases[:-1], dataclasses.replace(case, net=net)))
    assert not claim.check_named("rounding allowance as derived").run(broken, Context()).holds
