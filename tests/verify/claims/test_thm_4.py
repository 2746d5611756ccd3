"""Tests of verify/claims/thm_4.py through the declared claim (Theorem 4): what a fault measures,
and further slips planted in the inputs or in bounds/transformer.py that make its checks fail
(test_registered.py runs every check and every fault)."""

import dataclasses
import math

import pytest
import sympy

import qstr.bounds.transformer as bt
from qstr.verify.ball import NOT_CERTIFIED, Certified, Enclosure
from qstr.verify.certified import faults
from qstr.verify.claims import thm_4

CID = "thm-4"


def test_thm4_ffn_requirement_has_slope_one(declared):
    """The FFN requirement n >= N d has log-log slope 1 throughout: last / first = 1, and sympy
    finds no polylog degree (measured inf)."""
    d = declared(CID)
    ffn = d.broken("FFN requirement n >= N d")
    assert d.verdict("log-log slope halves", ffn).measured == pytest.approx(1.0)
    assert d.verdict("sympy polylog degree <= 5", ffn).measured == math.inf
    assert d.verdict("log-log slope halves").measured <= 0.5


@pytest.mark.parametrize(
    "fault",
    [
        lambda p, N: 2 * p * N ** (1 / p),  # psi without the max(2p, 2 ln N)
        lambda p, N: (
            max(2 * p, 2 * math.log(N)) * N ** (1 / max(p, math.log(N))) * 1.001
        ),  # 0.1% off
    ],
)
def test_thm4_numeric_bound_catches_a_fault_in_psi(monkeypatch, declared, fault):
    """A slip in bounds/transformer.py's psi moves the numeric bound off the sympy expression."""
    d = declared(CID)
    monkeypatch.setattr(bt, "max_moment_factor", fault)
    assert not d.verdict("numeric bound = sympy bound").holds


def test_thm4_numeric_bound_catches_a_scaled_bound(declared):
    d = declared(CID)

    def scaled_bound(n, N, P):
        return bt.theorem4_bound(n, N, P).total * (1 + 1e-6)

    v = d.verdict("numeric bound = sympy bound", dataclasses.replace(d.inputs, bound=scaled_bound))
    assert not v.holds and v.measured == pytest.approx(1e-6, rel=1e-3)


def test_thm4_agreement_reaches_the_rho_branch_of_the_covering_radius(declared):
    """At N = 2 with C_x = 1e-6, alpha = 0 and A = 6 K rho: a bound off by 1e-6 only where alpha = 0
    is caught, so the comparison reaches that branch."""
    d = declared(CID)

    def off_where_alpha_is_zero(n, N, p):
        b = bt.theorem4_bound(n, N, p)
        return b.total * (1 + 1e-6) if b.alpha == 0 else b.total

    broken = dataclasses.replace(d.inputs, bound=off_where_alpha_is_zero)
    assert not d.verdict("numeric bound = sympy bound", broken).holds


def _edited_majorant(inp, edit):
    def majorant(*a, **k):
        t = inp.majorant(*a, **k)
        edit(t)
        return t

    return dataclasses.replace(inp, majorant=majorant)


def test_thm4_majorant_pieces_below_or_off_their_derivation_are_caught(declared):
    """The majorant's L_alpha 1% low, or ln(1 + A) for ln(1 + 2 A), falls below its exact piece; the
    tail 1% wide, ln(2 + alpha), or the concentration 10% wide still dominate but are off their
    derivation."""
    d = declared(CID)

    def dominates(edit):
        return d.verdict("majorant dominates", _edited_majorant(d.inputs, edit)).holds

    def derived(edit):
        return d.verdict("majorant as derived", _edited_majorant(d.inputs, edit)).holds

    def low_alpha(t):
        t["L_alpha"] = 0.99 * t["L_alpha"]

    def half_covering_radius(t):
        t["L_A"] = sympy.log(1 + (sympy.exp(t["L_A"]) - 1) / 2)

    for edit in (low_alpha, half_covering_radius):
        assert not dominates(edit)

    def wide_tail(t):
        t["tail"] = 1.01 * t["tail"]

    def wider_alpha_log(t):
        t["L_alpha"] = sympy.log(1 + sympy.exp(t["L_alpha"]))

    def wider_concentration(t):
        t["concentration"] = 1.1 * t["concentration"]

    for edit in (wide_tail, wider_alpha_log, wider_concentration):
        assert not derived(edit)
    for edit in (wider_alpha_log, wider_concentration):
        assert dominates(edit)


CERTIFIED = "bound = its enclosure (certified)"


def _straddling(points, params, *, rtol, record):
    """A certified computation whose enclosures straddle the tolerance: the fallback decides."""
    gap = Enclosure(0.0, 2 * rtol)
    return Certified("forced", gap, Enclosure(rtol, rtol), NOT_CERTIFIED, len(points), 0.0, "")


def test_thm4_certified_decides_at_every_constants_set(declared):
    """The record's total within 1e-12 of its enclosure at the four constants sets (the rho branch
    too: every max decided in arb), decided by the enclosures; gaps of a few float64 roundings."""
    v = declared(CID).verdict(CERTIFIED)
    assert v.holds and v.certified and v.bound == thm_4.THM4_CERT_RTOL
    labels = {label for label, _ in v.cases}
    assert labels == {"default", "q + 2", "c = 1.5 given", "rho branch"}
    lo, hi = v.enclosure
    assert 0 < lo <= hi < 4e-15 and hi - lo < 1e-30
    assert all(row.certified and row.measured < 4e-15 for _, row in v.cases)


def test_thm4_certified_straddling_falls_back_to_the_sympy_check_on_the_record(
    declared, monkeypatch
):
    """Where the enclosures straddle, the 30-digit sympy comparison of the record's total decides,
    labelled as such: it holds on the honest record and fails on Rad in place of 2 Rad."""
    d = declared(CID)
    monkeypatch.setattr(thm_4, "certified_theorem4_agreement", _straddling)
    v = d.verdict(CERTIFIED)
    assert v.holds and v.certified is False and "the float64 check decides" in v.detail
    assert v.measured < 1e-13 and v.bound == thm_4.THM4_AGREE_RTOL
    slipped = dataclasses.replace(
        d.inputs, record=faults.theorem4_rademacher_once(bt.theorem4_bound)
    )
    assert not d.verdict(CERTIFIED, slipped).holds
