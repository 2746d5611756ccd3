"""The claims of verify/claims/rnn_lower.py through their inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import math

import pytest
import torch

import qstr.verify.claims.rnn_lower as rnn_lower  # noqa: F401  (registers the claims)
from qstr.verify.claims import all_claims
from qstr.verify.claim import Context

IDS = ("lemma-37", "lemma-38", "lemma-36", "prop-8", "thm-9", "thm-7")


def test_claims_registered_with_references():
    for cid in IDS:
        c = all_claims()[cid]
        assert c.ref.seed and c.ref.conference and c.statement and c.faults


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
            assert not claim.check(name).run(broken, ctx).holds, (f.name, name)
    return claim, inp, verdicts


# ---------------------------------------------------------------- lemma-37


def test_lemma37_checks_and_faults():
    claim, inp, v = _faults_caught("lemma-37")
    assert claim.checks[0].name == "P(success) >= 1/3" and v["P(success) >= 1/3"].measured > 0.8
    assert v["gap failure <= union bound"].bound == pytest.approx(23 / 144)


def test_lemma37_gaps_as_derived_on_a_hand_example():
    x = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]]], dtype=torch.float64)
    v = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    u = torch.finfo(torch.float64).eps / 2
    gamma = 2 * u / (1 - 2 * u)
    assert rnn_lower.gaps_as_derived(x, v) == [1.0 * (1 - u) - 2 * gamma * 3.0]


def test_clopper_pearson():
    lo, hi = rnn_lower.clopper_pearson(50, 100, 0.95)
    assert 0.41 < lo < 0.5 < hi < 0.59
    assert rnn_lower.clopper_pearson(0, 10)[0] == 0.0
    assert rnn_lower.clopper_pearson(10, 10)[1] == 1.0


def test_lemma38_checks_and_faults():
    claim, inp, v = _faults_caught("lemma-38")
    head = v["||a'||^2 <= 16 ||y||^2 / eps^2"]
    assert head.measured == pytest.approx((16 * 128 - 22) / (16 * 128), rel=1e-6)  # alternating


def test_lemma38_allowance_check_sees_a_wrong_allowance():
    """A reported float64 allowance 1% above the derived Higham bound fails its check."""
    import dataclasses

    claim, inp, _ = _run("lemma-38")
    case = inp.cases[-1]
    net = dataclasses.replace(case.net, rounding=1.01 * case.net.rounding)
    broken = dataclasses.replace(inp, cases=(*inp.cases[:-1], dataclasses.replace(case, net=net)))
    assert not claim.check("rounding allowance as derived").run(broken, Context()).holds


# ---------------------------------------------------------------- lemma-36


def test_lemma36_checks_and_faults():
    claim, inp, v = _faults_caught("lemma-36")
    assert {c.N for c in inp.cases} == {8, 64} and {c.depth for c in inp.cases} == {2, 3}
    assert v["||vec||^2 <= C n^3"].measured / v["||vec||^2 <= C n^3"].bound < 0.1


def test_lemma36_bound_check_sees_a_smaller_constant():
    """The headline compares with the bound function in the inputs: 1e-3 n^3 fails."""
    import dataclasses

    claim, inp, v = _run("lemma-36")
    tiny = dataclasses.replace(inp, bound=lambda n: 1e-3 * n**3)
    assert not claim.check("||vec||^2 <= C n^3").run(tiny, Context()).holds


# ---------------------------------------------------------------- prop-8


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
    assert torch.equal(rnn_lower._answer_vectors(inp.x, inp.u, broken.t), want.expand(M, 256))


def test_prop8_width_bound_substituted():
    """A width bound 1e4 times the rigorous one (0.32 here) exceeds d_h = N d: the check fails."""
    import dataclasses

    from qstr.bounds.recurrent import prop8_width_lower_bound

    claim, inp, _ = _run("prop-8")

    def wide(*a, **k):
        return 1e4 * prop8_width_lower_bound(*a, **k)

    big = dataclasses.replace(inp, bounds=dataclasses.replace(inp.bounds, width=wide))
    assert not claim.check("d_h >= width bound").run(big, Context()).holds


def test_prop8_gru_width_check_runs_only_where_it_trains():
    """The trained-width check and its simple-1STR fault are declared for full and gpu only."""
    claim = all_claims()["prop-8"]
    name = "trained GRU width grows with N"
    assert name not in {c.name for c in claim.checks_in("quick")}
    assert claim.check(name).profiles == ("full", "gpu")
    assert [f.name for f in claim.faults if name in f.breaks] == ["simple-1STR width scan"]


# ---------------------------------------------------------------- thm-9


def test_thm9_checks_and_faults():
    claim, inp, v = _faults_caught("thm-9")
    assert v["n*(N) slopes >= 1/(2(L_y+4))"].bound == pytest.approx(1 / 12)
    assert "paper" in v["n*(N) slopes >= 1/(2(L_y+4))"].detail


def test_thm9_memoriser_hypothesis_excludes_large_labels():
    """Memorisers whose labels break ||y||^2 <= K_y n are not held to C n^3; with none left the
    check fails rather than passing vacuously."""
    import dataclasses

    claim, inp, _ = _run("thm-9")
    loud = tuple((n, m, 10 * y) for n, m, y in inp.memorisers)
    v = claim.check("memoriser ||vec||^2 <= C n^3").run(
        dataclasses.replace(inp, memorisers=loud), Context()
    )
    assert not v.holds


# ---------------------------------------------------------------- thm-7


def test_thm7_checks_and_faults():
    claim, inp, v = _faults_caught("thm-7")
    assert v["n(N) = the real root"].measured < 1e-13  # float64 vs 40 digits: ~1e-15 measured
    assert claim.checks[0].name == "slope of n(N) <= 9 / ln N"


def test_theorem7_bound_mp_hand_values():
    import mpmath

    from qstr.bounds.recurrent import Theorem7Params, theorem7_bound
    from qstr.bounds.transformer import default_code_dim

    P = Theorem7Params()
    for N in (2, 16, 1000, 2**20):
        assert rnn_lower.t7_code_dim(P, N) == default_code_dim(N, P.delta)
    assert rnn_lower.t7_code_dim(Theorem7Params(d_e=33), 10**6) == 33
    with mpmath.workdps(40):
        v = rnn_lower.theorem7_bound_mp(10**40, 4096, P)
    assert float(v) == pytest.approx(theorem7_bound(10**40, 4096, P).total, rel=1e-13)
    assert float(v) > P.eps_2nn


def test_thm7_rad_fault_passes_the_slope_test():
    """The factor-2 slip keeps n(N) polylogarithmic: only the comparison with the independent
    evaluation catches it (n(N) about 4x smaller)."""
    claim, inp, _ = _run("thm-7")
    broken = claim.faults[0].apply(inp, Context())
    assert claim.check("slope of n(N) <= 9 / ln N").run(broken, Context()).holds
    assert claim.check("n(N) = the real root").run(broken, Context()).measured > 0.5


def test_thm7_slope_test_catches_a_linear_requirement():
    """n(N) = N d (the feed-forward requirement) fails the polylog slope test."""
    import dataclasses

    from qstr.bounds.transformer import ffn_sample_size

    claim, inp, _ = _run("thm-7")
    linear = dataclasses.replace(inp, sizes={N: ffn_sample_size(N, 4) for N in inp.sizes})
    assert not claim.check("slope of n(N) <= 9 / ln N").run(linear, Context()).holds


@pytest.mark.parametrize("slip", ["hoeffding", "tail_exponent", "truncation"])
def test_planted_slip_in_theorem7_bound_fails_the_comparison(slip):
    """Three more slips of the bound, put in the inputs as the record function."""
    import dataclasses

    from qstr.bounds.recurrent import theorem7_bound

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
    assert not claim.check("bound = 40-digit evaluation").run(broken, Context()).holds
