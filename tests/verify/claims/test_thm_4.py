"""Tests of verify/claims/thm_4.py through the declared claim (Theorem 4): each check holds on the
honest inputs, each fault (and a few further slips planted in the inputs) makes its checks fail."""

import dataclasses
import math

import pytest
import sympy

import qstr.bounds.transformer as bt
from qstr.verify.claim import Context
from qstr.verify.claims import all_claims


@pytest.fixture(scope="module")
def thm4_claim():
    claim, ctx = all_claims()["thm-4"], Context()
    return claim, claim.inputs(ctx), ctx


def test_thm4_every_check_holds_and_the_faults_break_theirs(thm4_claim):
    claim, inp, ctx = thm4_claim
    for check in claim.checks:
        assert check.run(inp, ctx).holds, check.name
    for fault in claim.faults:
        broken = fault.apply(inp, ctx)
        for name in fault.breaks:
            assert not claim.check_named(name).run(broken, ctx).holds, (fault.name, name)


def test_thm4_ffn_requirement_has_slope_one(thm4_claim):
    """The FFN requirement n >= N d has log-log slope 1 throughout: last / first = 1, and sympy
    finds no polylog degree (measured inf)."""
    claim, inp, ctx = thm4_claim
    ffn = claim.fault_named("FFN requirement n >= N d").apply(inp, ctx)
    assert claim.check_named("log-log slope halves").run(ffn, ctx).measured == pytest.approx(1.0)
    assert claim.check_named("sympy polylog degree <= 5").run(ffn, ctx).measured == math.inf
    assert claim.check_named("log-log slope halves").run(inp, ctx).measured <= 0.5


@pytest.mark.parametrize(
    "fault",
    [
        lambda p, N: 2 * p * N ** (1 / p),  # psi without the max(2p, 2 ln N)
        lambda p, N: (
            max(2 * p, 2 * math.log(N)) * N ** (1 / max(p, math.log(N))) * 1.001
        ),  # 0.1% off
    ],
)
def test_thm4_numeric_bound_catches_a_fault_in_psi(monkeypatch, thm4_claim, fault):
    """A slip in bounds/transformer.py's psi moves the numeric bound off the sympy expression."""
    claim, inp, ctx = thm4_claim
    monkeypatch.setattr(bt, "_psi", fault)
    assert not claim.check_named("numeric bound = sympy bound").run(inp, ctx).holds


def test_thm4_numeric_bound_catches_a_scaled_bound(thm4_claim):
    claim, inp, ctx = thm4_claim

    def scaled_bound(n, N, P):
        return bt.theorem4_bound(n, N, P).total * (1 + 1e-6)

    scaled = dataclasses.replace(inp, bound=scaled_bound)
    v = claim.check_named("numeric bound = sympy bound").run(scaled, ctx)
    assert not v.holds and v.measured == pytest.approx(1e-6, rel=1e-3)


def test_thm4_agreement_reaches_the_rho_branch_of_the_covering_radius(thm4_claim):
    """At N = 2 with C_x = 1e-6, alpha = 0 and A = 6 K rho: a bound off by 1e-6 only where alpha = 0
    is caught, so the comparison reaches that branch."""
    claim, inp, ctx = thm4_claim

    def off_where_alpha_is_zero(n, N, p):
        b = bt.theorem4_bound(n, N, p)
        return b.total * (1 + 1e-6) if b.alpha == 0 else b.total

    broken = dataclasses.replace(inp, bound=off_where_alpha_is_zero)
    assert not claim.check_named("numeric bound = sympy bound").run(broken, ctx).holds


def _edited_majorant(inp, edit):
    def majorant(*a, **k):
        t = inp.majorant(*a, **k)
        edit(t)
        return t

    return dataclasses.replace(inp, majorant=majorant)


def test_thm4_majorant_pieces_below_or_off_their_derivation_are_caught(thm4_claim):
    """The majorant's L_alpha 1% low, or ln(1 + A) for ln(1 + 2 A), falls below its exact piece; the
    tail 1% wide, ln(2 + alpha), or the concentration 10% wide still dominate but are off their
    derivation."""
    claim, inp, ctx = thm4_claim
    dominates, derived = (
        claim.check_named("majorant dominates"),
        claim.check_named("majorant as derived"),
    )

    def low_alpha(t):
        t["L_alpha"] = 0.99 * t["L_alpha"]

    def half_covering_radius(t):
        t["L_A"] = sympy.log(1 + (sympy.exp(t["L_A"]) - 1) / 2)

    for edit in (low_alpha, half_covering_radius):
        assert not dominates.run(_edited_majorant(inp, edit), ctx).holds

    def wide_tail(t):
        t["tail"] = 1.01 * t["tail"]

    def wider_alpha_log(t):
        t["L_alpha"] = sympy.log(1 + sympy.exp(t["L_alpha"]))

    def wider_concentration(t):
        t["concentration"] = 1.1 * t["concentration"]

    for edit in (wide_tail, wider_alpha_log, wider_concentration):
        assert not derived.run(_edited_majorant(inp, edit), ctx).holds
    for edit in (wider_alpha_log, wider_concentration):
        assert dominates.run(_edited_majorant(inp, edit), ctx).holds
