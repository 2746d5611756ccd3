"""The claim lemma-37 of verify/claims/lemma_37.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import pytest
import torch

from qstr.verify.claims import lemma_37

CID = "lemma-37"


def test_lemma37_checks_and_faults(declared):
    d = declared(CID)
    assert d.claim.checks[0].name == "P(success) >= 1/3"
    assert d.verdict("P(success) >= 1/3").measured > 0.8
    assert d.verdict("gap failure <= union bound").bound == pytest.approx(23 / 144)


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


def test_lemma37_pins_and_the_adversarial_sample(declared):
    """eps_n and the union bound agree with their 40-digit evaluation (<= 1e-14); the collinear
    sample's direction has its gap within eps_n / 0.95 and ||z||^2 within 0.9 of 2n."""
    d = declared(CID)
    assert d.verdict("eps_n, union bound, norm factor = 40-digit evaluation").measured < 1e-14
    broken = d.broken("union bound with the N(0, 1) density")
    assert not d.verdict("eps_n, union bound, norm factor = 40-digit evaluation", broken).holds
    assert d.verdict("constructive gap >= eps_n").ratio > 0.95
    assert d.verdict("constructive ||z||^2 <= 2n").ratio > 0.85
