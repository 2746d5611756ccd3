"""The claim lemma-38 of verify/claims/lemma_38.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses

import pytest


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
