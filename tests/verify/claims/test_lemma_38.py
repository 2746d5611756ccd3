"""The claim lemma-38 of verify/claims/lemma_38.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses

import pytest

from qstr.verify.claims._interpolation import net_norm2


CID = "lemma-38"


def test_lemma38_checks_and_faults(declared):
    head = declared(CID).verdict("||a'||^2 <= 16 ||y||^2 / eps^2")
    assert head.measured == pytest.approx((16 * 128 - 22) / (16 * 128), rel=1e-6)  # alternating


def test_lemma38_allowance_check_sees_a_wrong_allowance(declared):
    """A reported float64 allowance 1% above the derived Higham bound fails its check."""
    d = declared(CID)
    case = d.inputs.cases[-1]
    net = dataclasses.replace(case.net, rounding=1.01 * case.net.rounding)
    cases = (*d.inputs.cases[:-1], dataclasses.replace(case, net=net))
    assert not d.verdict(
        "rounding allowance as derived", dataclasses.replace(d.inputs, cases=cases)
    ).holds


def test_lemma38_bound_pinned(declared):
    """lemma38_bound agrees with its 40-digit evaluation (<= 1e-14); ||y|| for ||y||^2 fails."""
    d = declared(CID)
    assert d.verdict("bound = 40-digit evaluation").measured < 1e-14
    assert not d.verdict("bound = 40-digit evaluation", d.broken("||y|| for ||y||^2")).holds


def test_lemma38_rebalanced_norm_is_the_am_gm_optimum(declared):
    """The balanced net's squared norm is 2 sqrt(A P) of the raw net to 1e-12 on every case, and
    no tau on a grid around the built one does better (the optimum, not a lowering); the
    rebalancing at tau^2 = A / P keeps the raw norm, passes 'lowers the norm' and fails the
    optimum."""
    d = declared(CID)
    for case in (*d.inputs.cases, d.inputs.alternating):
        raw = case.net.raw
        A, P = float(raw.a @ raw.a), float((raw.W**2).sum() + raw.b @ raw.b)
        built = net_norm2(case.net.balanced)
        assert built == pytest.approx(2 * (A * P) ** 0.5, rel=1e-12)
        taus = [case.net.tau * (1 + k / 100) for k in range(-20, 21) if k]
        assert all(A / t**2 + t**2 * P > built for t in taus)
    broken = d.broken("tau = (A / P)^(1/2)")
    assert d.verdict("rebalancing lowers the norm", broken).holds
    assert not d.verdict("rebalanced norm = 2 sqrt(A P), the optimum", broken).holds
