"""Lemmas 23 and 25 (verify/claims/lemma_23_25.py) through their public structure: the layers
rebuilt from the gadgets, the named checks and faults (test_registered.py runs every fault)."""

import pytest
import torch

from qstr.constructions.relu import gate_gadget, product_gadget


def test_lemma23_layers_are_built_from_the_checked_gadgets(declared):
    """The product and gate gadgets inside the layers are the ones lemma-22 and lemma-24 build."""
    for c in declared("lemma-23").inputs.cases:
        tr, g = c.transition, c.gadgets
        want = product_gadget(tr.R, tr.product_knots)
        assert torch.equal(g.product.W1, want.W1) and torch.equal(g.product.W2, want.W2)
        bands = tr.bands
        assert torch.equal(g.gate.b1, gate_gadget(bands.r_x, bands.knots, bands.s_max).b1)
        assert c.layer1[0].shape[0] == 2 * tr.d + tr.q * tr.d_e * 2 * tr.product_knots
        assert c.layer2[0].shape[0] == tr.q * tr.d * 2 * bands.knots


def test_lemma23_measures_the_inner_products_against_delta_1(declared):
    d = declared("lemma-23")
    v = d.verdict("|s_hat - <omega_i, omega_t>| <= delta_1")
    # the rotated code's products are approximate: the error is a sizeable share of d_e h^2/16
    assert v.holds and 0.2 < v.measured / v.bound <= 1
    assert d.verdict("x read exactly").measured == 0.0
    flipped = d.verdict("|s_hat - <omega_i, omega_t>| <= delta_1", d.broken("sign flipped"))
    assert not flipped.holds and flipped.measured > 1.5  # s_hat = -s at the targets (s = 1)
    misread = d.broken("slot 1 wired")
    pairs = zip(misread.cases, d.inputs.cases, strict=True)
    assert all(torch.equal(m.layer1[1], c.layer1[1]) for m, c in pairs)  # W1 moved, b1 kept


def test_lemma25_gate_error_and_zeros(declared):
    d = declared("lemma-25")
    v = d.verdict("|G - 2x relu(s_hat - 1/2)| <= r_x delta")
    assert v.holds and v.measured > 0.25 * v.bound
    zeros = d.verdict("G = 0 where s_hat < 1/2")
    assert zeros.holds and zeros.measured == 0
    halved = d.verdict("|G - 2x relu(s_hat - 1/2)| <= r_x delta", d.broken("without its 2"))
    assert not halved.holds and halved.measured == pytest.approx(1.25, rel=0.1)  # r_x / 2 at s = 1


def test_lemma25_four_layers_are_the_transition_the_rnn_evaluates(declared):
    d = declared("lemma-25")
    assert d.verdict("four layers = the transition's dense layers").measured < 1e-11
    assert not d.verdict(
        "four layers = the transition's dense layers", d.broken("Lemma 22's readout sign flipped")
    ).holds


def test_lemma23_25_faults_leave_the_honest_inputs_alone(declared):
    declared("lemma-23").faults_leave_the_honest_inputs()
    declared("lemma-25").faults_leave_the_honest_inputs()
