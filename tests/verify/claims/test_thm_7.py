"""The claim thm-7 of verify/claims/thm_7.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses
import math

import mpmath
import pytest

from qstr.bounds.recurrent import Theorem7Params, theorem7_bound
from qstr.bounds.transformer import default_code_dim, ffn_sample_size
from qstr.verify.claim import Context
from qstr.verify.claims import all_claims, thm_7


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
    c = all_claims()["thm-7"]
    assert c.ref.seed and c.ref.conference and c.statement and c.faults


def test_thm7_checks_and_faults():
    claim, inp, v = _faults_caught("thm-7")
    assert v["n(N) = the real root"].measured < 1e-13  # float64 vs 40 digits: ~1e-15 measured
    assert claim.checks[0].name == "slope of n(N) <= 9 / ln N"


def test_theorem7_bound_mp_hand_values():
    P = Theorem7Params()
    for N in (2, 16, 1000, 2**20):
        assert thm_7.t7_code_dim(P, N) == default_code_dim(N, P.delta)
    assert thm_7.t7_code_dim(Theorem7Params(d_e=33), 10**6) == 33
    with mpmath.workdps(40):
        v = thm_7.theorem7_bound_mp(10**40, 4096, P)
    assert float(v) == pytest.approx(theorem7_bound(10**40, 4096, P).total, rel=1e-13)
    assert float(v) > P.eps_2nn


def test_thm7_rad_fault_passes_the_slope_test():
    """The factor-2 slip keeps n(N) polylogarithmic: only the comparison with the independent
    evaluation catches it (n(N) about 4x smaller)."""
    claim, inp, _ = _run("thm-7")
    broken = claim.faults[0].apply(inp, Context())
    assert claim.check_named("slope of n(N) <= 9 / ln N").run(broken, Context()).holds
    assert claim.check_named("n(N) = the real root").run(broken, Context()).measured > 0.5


def test_thm7_slope_test_catches_a_linear_requirement():
    """n(N) = N d (the feed-forward requirement) fails the polylog slope test."""
    claim, inp, _ = _run("thm-7")
    linear = dataclasses.replace(inp, sizes={N: ffn_sample_size(N, 4) for N in inp.sizes})
    assert not claim.check_named("slope of n(N) <= 9 / ln N").run(linear, Context()).holds


@pytest.mark.parametrize("slip", ["hoeffding", "tail_exponent", "truncation"])
def test_planted_slip_in_theorem7_bound_fails_the_comparison(slip):
    """Three more slips of the bound, put in the inputs as the record function."""

    def planted(n, N, params):
        b = theorem7_bound(n, N, params)
        dev = math.sqrt(math.log(4.0 / params.delta) / (2.0 * n))
        # hoeffding: 3 tau dev, the Hoeffding term for theta* forgotten
        delta_total = {
            "hoeffding": -b.tau * dev,
            "tail_exponent": b.tail * (N**-0.25 - 1.0),  # N^{-1/2} for N^{-1/4}
            "truncation": b.truncation,
        }[slip]  # 2 (1 + 4/delta) tau e^{-p}
        return dataclasses.replace(b, total=b.total + delta_total)

    claim, inp, _ = _run("thm-7")
    broken = dataclasses.replace(inp, record=planted)
    assert not claim.check_named("bound = 40-digit evaluation").run(broken, Context()).holds
