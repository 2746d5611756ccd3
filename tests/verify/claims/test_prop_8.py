"""The claim prop-8 of verify/claims/prop_8.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses
import math

import pytest
import torch

from qstr.bounds.recurrent import prop8_width_lower_bound
from qstr.verify.claim import Context
from qstr.verify.claims import all_claims, prop_8


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
    c = all_claims()["prop-8"]
    assert c.ref.seed and c.ref.conference and c.statement and c.faults


def test_prop8_checks_and_faults():
    claim, inp, v = _faults_caught("prop-8")
    assert v["answer separation >= sqrt(2a(N-1)/N)"].bound == pytest.approx(math.sqrt(255 / 256))
    assert "positive from N = 33" in v["width bound positive iff the packing exists"].detail


def test_prop8_answers_of_simple_1str_do_not_vary():
    """The simple-1STR fault's answers: <u, x_t> repeated N times (normalised separation 0)."""
    claim, inp, _ = _run("prop-8")
    broken = claim.faults[0].apply(inp, Context())
    M = inp.x.shape[0]
    want = (inp.x[torch.arange(M), broken.t] @ inp.u)[:, None]
    assert torch.equal(prop_8._answer_vectors(inp.x, inp.u, broken.t), want.expand(M, 256))


def test_prop8_width_bound_substituted():
    """A width bound 1e4 times the rigorous one (0.32 here) exceeds d_h = N d: the check fails."""
    claim, inp, _ = _run("prop-8")

    def wide(*a, **k):
        return 1e4 * prop8_width_lower_bound(*a, **k)

    big = dataclasses.replace(inp, bounds=dataclasses.replace(inp.bounds, width=wide))
    assert not claim.check_named("d_h >= width bound").run(big, Context()).holds


def test_prop8_gru_width_check_runs_only_where_it_trains():
    """The trained-width check and its simple-1STR fault are declared for full and gpu only."""
    claim = all_claims()["prop-8"]
    name = "trained GRU width grows with N"
    assert name not in {c.name for c in claim.checks_in("quick")}
    assert claim.check_named(name).profiles == ("full", "gpu")
    assert [f.name for f in claim.faults if name in f.breaks] == ["simple-1STR width scan"]
