"""Unit tests for verify/claims/transformer.py: the numeric Theorem 4 bound agrees with the sympy
expression, and a planted fault in psi is caught by that comparison."""
import dataclasses
import math

import pytest
import sympy
import torch

import qstr.bounds.transformer as bt
from qstr.bounds.symbolic import leading_sample_size_expr
from qstr.bounds.transformer import Theorem4Params
from qstr.verify.claims.transformer import THM4_AGREE_RTOL, thm4_agreement


def test_thm4_numeric_and_sympy_bounds_agree():
    assert thm4_agreement(Theorem4Params.default()) <= THM4_AGREE_RTOL


@pytest.mark.parametrize("fault", [
    lambda p, N: 2 * p * N ** (1 / p),              # psi without the max(2p, 2 ln N)
    lambda p, N: max(2 * p, 2 * math.log(N)) * N ** (1 / max(p, math.log(N))) * 1.001,  # 0.1% off
])
def test_thm4_agreement_catches_a_fault_in_psi(monkeypatch, fault):
    monkeypatch.setattr(bt, "_psi", fault)
    assert thm4_agreement(Theorem4Params.default()) > THM4_AGREE_RTOL


def test_thm4_agreement_catches_a_scaled_bound():
    gap = thm4_agreement(Theorem4Params.default(), bound=lambda n, N, P: bt.theorem4_bound(n, N, P).total * (1 + 1e-6))
    assert gap == pytest.approx(1e-6, rel=1e-3)


def test_thm4_slope_test_reports_value_and_limit():
    """value = last slope / first slope, limit 1/2: a polylog requirement holds with value <= limit, the
    FFN falsifier (n >= N d, slope 1 throughout) fails with value 1."""
    from qstr.verify.claims.transformer import _slopes_claim, _thm4_falsifier

    polylog = _slopes_claim(lambda N: math.log(N) ** 3, "ln^3 N", "test", True)
    ffn = _thm4_falsifier(None)
    for out in (polylog, ffn):
        assert isinstance(out.value, float) and isinstance(out.limit, float)
        assert math.isfinite(out.value) and math.isfinite(out.limit)
        assert (out.value <= out.limit) == out.holds
    assert polylog.holds and not ffn.holds and ffn.value == pytest.approx(1.0)


def test_majorant_check_catches_a_majorant_piece_below_its_exact_counterpart(monkeypatch):
    """Theorem 4's certificate: the honest majorant dominates (ratio >= 1, tightest at the L_alpha piece); that
    piece 1% low, the covering logarithm ln(1 + A) for ln(1 + 2 A), or the tail piece 1% off its derivation, is
    caught (tau, with a slack of ~2.5x, is not)."""
    import qstr.verify.claims.transformer as T
    from qstr.bounds.transformer import Theorem4Params
    P = dataclasses.replace(Theorem4Params.default(), q=4)
    ratio, gap = T.majorant_check(P)
    assert ratio >= 1 and gap <= T.THM4_AGREE_RTOL
    orig = T.majorant_terms

    def low_alpha(*a, **k):
        t = orig(*a, **k)
        t["L_alpha"] = 0.99 * t["L_alpha"]
        return t

    monkeypatch.setattr(T, "majorant_terms", low_alpha)
    assert T.majorant_check(P)[0] < 1

    def wide_tail(*a, **k):
        t = orig(*a, **k)
        t["tail"] = 1.01 * t["tail"]
        return t

    monkeypatch.setattr(T, "majorant_terms", wide_tail)
    assert T.majorant_check(P)[1] > T.THM4_AGREE_RTOL

    def half_covering_radius(*a, **k):  # ln(1 + A) for ln(1 + 2 A): the mutant bounds/symbolic.py:142
        t = orig(*a, **k)
        t["L_A"] = sympy.log(1 + (sympy.exp(t["L_A"]) - 1) / 2)
        return t

    monkeypatch.setattr(T, "majorant_terms", half_covering_radius)
    assert T.majorant_check(P)[0] < 0.98

    def wider_alpha_log(*a, **k):  # ln(2 + alpha): still a majorant, caught only against the derivation
        t = orig(*a, **k)
        t["L_alpha"] = sympy.log(1 + sympy.exp(t["L_alpha"]))
        return t

    monkeypatch.setattr(T, "majorant_terms", wider_alpha_log)
    ratio, gap = T.majorant_check(P)
    assert ratio >= 1 and gap > 1e-3

    def wider_concentration(*a, **k):  # ln(6/delta) - 2 for ln(6/delta) / 2: larger, caught against its formula
        t = orig(*a, **k)
        t["concentration"] = 1.1 * t["concentration"]
        return t

    monkeypatch.setattr(T, "majorant_terms", wider_concentration)
    ratio, gap = T.majorant_check(P)
    assert ratio >= 1 and gap > 0.05


def test_thm4_agreement_reaches_the_rho_branch_of_the_covering_radius():
    """At N = 2 with C_x = 1e-6, alpha = 0 and A = 6 K rho (the branch a slip in rho would change): a bound off by
    1e-6 only where alpha = 0 is caught, so the comparison reaches that branch."""
    P = Theorem4Params.default()
    tiny = dataclasses.replace(P, C_x=1e-6, c=0.5)
    b = bt.theorem4_bound(1, 2, tiny)
    assert b.alpha == 0.0 and math.sqrt(P.q) * b.r_qk * b.r_z ** 3 < math.sqrt(P.q * b.r_z ** 2 + 1)

    def off_where_alpha_is_zero(n, N, p):
        b = bt.theorem4_bound(n, N, p)
        return b.total * (1 + 1e-6) if b.alpha == 0 else b.total

    assert thm4_agreement(P, bound=off_where_alpha_is_zero) > THM4_AGREE_RTOL


# ---------------------------------------------------------------- the public entry points the claims now run

def test_leading_form_and_search_catch_slips(monkeypatch):
    import qstr.verify.claims.transformer as T

    P = Theorem4Params.default()
    assert T.leading_as_derived(P) and T.prefactor_given(P)
    monkeypatch.setattr(T, "leading_sample_size_expr", lambda p, t: 2 * leading_sample_size_expr(p, t))
    assert not T.leading_as_derived(P)
    ok, k = T.search_least(P)
    assert ok
    monkeypatch.setattr(T, "sample_size_from_expr", lambda t, N, p: k + 1)  # one past the least n
    assert not T.search_least(P)[0]


# ---------------------------------------------------------------- lemma-11 through its declared checks

@pytest.fixture(scope="module")
def lemma11_claim():
    from qstr.verify.claim import Context
    from qstr.verify.claims import all_claims

    claim, ctx = all_claims()["lemma-11"], Context()
    return claim, claim.inputs(ctx), ctx


def test_lemma11_every_check_holds_and_the_star_code_attains_the_bound(lemma11_claim):
    """Every check holds on the honest inputs; the star code measures error / bound = 1."""
    claim, inp, ctx = lemma11_claim
    for check in claim.checks:
        assert check.run(inp, ctx).holds, check.name
    assert claim.check("star code attains the bound").run(inp, ctx).measured == pytest.approx(1, abs=1e-9)


def test_lemma11_faults_break_their_checks(lemma11_claim):
    """Each fault makes each check it names fail, and leaves the honest inputs as they were."""
    claim, inp, ctx = lemma11_claim
    for fault in claim.faults:
        broken = fault.apply(inp, ctx)
        assert broken is not inp
        for name in fault.breaks:
            assert not claim.check(name).run(broken, ctx).holds, (fault.name, name)
    assert claim.check("error <= bound").run(inp, ctx).holds


def test_lemma11_a_bound_above_the_eps_asked_is_caught(lemma11_claim):
    """A bound 4x larger (a construction for 4 eps) fails 'bound <= eps'."""
    claim, inp, ctx = lemma11_claim
    wide = dataclasses.replace(inp, error_bound=lambda **kw: 4 * inp.error_bound(**kw))
    assert not claim.check("bound <= eps").run(wide, ctx).holds


def test_lemma11_a_loose_bound_is_caught_by_the_star_code(lemma11_claim):
    """A bound 25% too large: the star code measures error / bound = 0.8, and fails."""
    claim, inp, ctx = lemma11_claim
    loose = dataclasses.replace(inp, error_bound=lambda **kw: 1.25 * inp.error_bound(**kw))
    v = claim.check("star code attains the bound").run(loose, ctx)
    assert not v.holds and v.measured == pytest.approx(0.8, rel=1e-9)


def test_lemma11_scores_10_percent_low_are_read_from_the_built_module(lemma11_claim):
    """W_QK 10% low in the module users get: the fast path (from alpha, c, codes) does not see it,
    the module and its export do: 'module = fast path' fails, 'exported = module' holds."""
    claim, inp, ctx = lemma11_claim

    def low(case):
        module = case.cons.with_alpha(case.cons.alpha)
        with torch.no_grad():
            module.model.W_QK.mul_(0.9)
        return dataclasses.replace(case, module=module)

    broken = dataclasses.replace(inp, cases=tuple(low(c) if c.exported else c for c in inp.cases))
    assert not claim.check("module = fast path").run(broken, ctx).holds
    assert not claim.check("worst prompt = exact worst case").run(broken, ctx).holds
    assert claim.check("exported = module").run(broken, ctx).holds


# ---------------------------------------------------------------- sparse-average-single-head

@pytest.fixture(scope="module")
def sparse_claim():
    from qstr.verify.claim import Context
    from qstr.verify.claims import all_claims

    claim, ctx = all_claims()["sparse-average-single-head"], Context()
    return claim, claim.inputs(ctx), ctx


def test_sparse_average_worst_case_is_exact_over_every_set(sparse_claim):
    """q = 3: the exact sup runs over all C(64, 3) = 41,664 sets, the built module attains it, and
    it is between 0.3 and 1 of the bound; every check holds."""
    claim, inp, ctx = sparse_claim
    q3 = next(c for c in inp.cases if c.q == 3)
    assert q3.n_sets == math.comb(64, 3)
    assert q3.measured["module"] == pytest.approx(q3.exact, rel=1e-12)
    v = claim.check("exact sup <= bound").run(inp, ctx)
    assert v.holds and 0.3 < v.measured / v.bound < 1
    for check in claim.checks:
        assert check.run(inp, ctx).holds, check.name


def test_sparse_average_faults_break_their_checks(sparse_claim):
    """The leak-only bound falls below the exact sup; a query one slot short misses it."""
    claim, inp, ctx = sparse_claim
    for fault in claim.faults:
        broken = fault.apply(inp, ctx)
        for name in fault.breaks:
            assert not claim.check(name).run(broken, ctx).holds, (fault.name, name)
    assert claim.check("worst prompt = exact sup").run(inp, ctx).holds


def test_sparse_average_a_bound_without_the_within_term_is_caught(sparse_claim):
    """sparse_average_within set to 0 in the bound: the bound drops below the q = 3 exact sup."""
    import qstr.bounds.attention as ba

    claim, inp, ctx = sparse_claim

    def no_within(*, N, q, mu, c, alpha, r_x):
        return 2 * r_x * ba.sparse_average_leak(N=N, q=q, mu=mu, A=alpha * c ** 2)

    assert not claim.check("exact sup <= bound").run(dataclasses.replace(inp, error_bound=no_within), ctx).holds


# ---------------------------------------------------------------- prop-21 and prop-3

@pytest.mark.parametrize("cid", ["prop-21", "prop-3"])
def test_few_heads_checks_hold_and_q_heads_beat_the_floor(cid):
    """Every check holds on quick (the trained models are full-profile only); the H = q model held
    to the H = q - 1 floor fails both explicit checks."""
    from qstr.verify.claim import Context
    from qstr.verify.claims import all_claims

    claim, ctx = all_claims()[cid], Context()
    inp = claim.inputs(ctx)
    for check in claim.checks:
        assert check.run(inp, ctx).holds, check.name
    assert claim.check("trained risk >= floor").run(inp, ctx).measured == "not run"
    (fault,) = claim.faults
    broken = fault.apply(inp, ctx)
    assert broken.explicit.estimate.heads == inp.H + 1 and inp.explicit.estimate.heads == inp.H
    for name in fault.breaks:
        assert not claim.check(name).run(broken, ctx).holds


def test_few_heads_an_unclipped_floor_is_a_different_function():
    """A floor function substituted in the inputs is the one the checks read: a floor 10% above
    the closed form makes the explicit model beat it."""
    from qstr.verify.claim import Context
    from qstr.verify.claims import all_claims

    claim, ctx = all_claims()["prop-21"], Context()
    inp = claim.inputs(ctx)
    high = dataclasses.replace(inp, floor=lambda q, H, d, r: 1.1 * 2 * (q - H) / q + 0.1)
    assert not claim.check("explicit risk >= floor").run(high, ctx).holds

