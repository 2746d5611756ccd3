"""Lemma 12 (verify/claims/lemma_12.py) through its declared structure."""

import math

import pytest
import torch

CID = "lemma-12"


def test_lemma12_slipped_radii(declared):
    """Without the union bound r_x = sqrt(3 C_x e d) for each law (d = 2); without concentration
    token_radius = sqrt(2)."""
    d = declared(CID)
    v = d.verdict("max ||x_j|| <= r_x", d.broken("r_x without"))
    constants = [1.0] + [drawn.law.C_x for drawn in d.inputs.laws]
    assert [case.bound for _, case in v.cases] == pytest.approx(
        [math.sqrt(6 * math.e * c) for c in constants]
    )
    v = d.verdict("max ||x_j|| <= token_radius", d.broken("token_radius without"))
    assert v.bound == pytest.approx(2**0.5)


def test_lemma12_laws_at_their_exact_constant(declared):
    """Rademacher at C_x: every norm is sqrt(C_x d); the sparse Gaussian's constant from the
    golden-section search bounds the float64 grid's maximum and is within 1e-6 of it, and a
    fraction 1 - p of its tokens are zero."""
    d = declared(CID)
    rad, sparse = (drawn for drawn in d.inputs.laws)
    norms = rad.x.norm(dim=-1)
    assert torch.allclose(norms, torch.full_like(norms, math.sqrt(2 * rad.law.C_x)), rtol=1e-15)
    grid = sparse.law.constant_on_grid() / sparse.law.C_x
    assert 1 - 1e-6 <= grid <= 1 + 1e-12
    zero = float((sparse.x.norm(dim=-1) == 0).double().mean())
    assert abs(zero - (1 - sparse.law.p)) < 0.01


def test_lemma12_sparse_law_pushes_the_ratio(declared):
    """The sparse Gaussian's max / r_x is the check's largest ratio, above the Gaussian's by 1.5x
    and within 0.1 of its prediction sqrt(2 s ln(p n N)) / r_x."""
    d = declared(CID)
    v = d.verdict("max ||x_j|| <= r_x")
    ratios = {label: case.ratio for label, case in v.cases}
    sparse = [label for label in ratios if label.startswith("sparse")][0]
    assert max(ratios.values()) == ratios[sparse] > 1.5 * ratios["Gaussian"]
    law = d.inputs.laws[1].law
    n, N, _ = d.inputs.x.shape
    predicted = math.sqrt(2 * law.s * math.log(law.p * n * N))
    predicted /= math.sqrt(3 * law.C_x * math.e * law.d * math.log(n * N))
    assert abs(ratios[sparse] - predicted) < 0.1


def test_lemma12_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()


def test_lemma12_pins_agree_to_rounding_and_see_a_log_base(declared):
    """r_x and token_radius equal their 40-digit evaluations to float64 rounding; a log2 or log10
    slip, which the token maxima do not see, fails the pins."""
    d = declared(CID)
    for name in ("r_x = 40-digit evaluation", "token_radius = 40-digit evaluation"):
        v = d.verdict(name)
        assert v.holds and v.measured < 1e-14, name
    assert d.verdict("max ||x_j|| <= r_x", d.broken("r_x with log2")).holds
    assert not d.verdict("r_x = 40-digit evaluation", d.broken("r_x with log2")).holds
    assert not d.verdict("token_radius = 40-digit evaluation", d.broken("with log10")).holds
