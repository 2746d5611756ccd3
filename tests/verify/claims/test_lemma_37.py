"""The claim lemma-37 of verify/claims/lemma_37.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import pytest
import torch

from qstr.verify.claim import Context
from qstr.verify.claims import all_claims, lemma_37


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
    c = all_claims()["lemma-37"]
    assert c.ref.seed and c.ref.conference and c.statement and c.faults


def test_lemma37_checks_and_faults():
    claim, inp, v = _faults_caught("lemma-37")
    assert claim.checks[0].name == "P(success) >= 1/3" and v["P(success) >= 1/3"].measured > 0.8
    assert v["gap failure <= union bound"].bound == pytest.approx(23 / 144)


def test_lemma37_gaps_as_derived_on_a_hand_example():
    x = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]]], dtype=torch.float64)
    v = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    u = torch.finfo(torch.float64).eps / 2
    gamma = 2 * u / (1 - 2 * u)
    assert lemma_37.gaps_as_derived(x, v) == [1.0 * (1 - u) - 2 * gamma * 3.0]


def test_clopper_pearson():
    lo, hi = lemma_37.clopper_pearson(50, 100, 0.95)
    assert 0.41 < lo < 0.5 < hi < 0.59
    assert lemma_37.clopper_pearson(0, 10)[0] == 0.0
    assert lemma_37.clopper_pearson(10, 10)[1] == 1.0
