"""Prop 26 certified (verify/certified/transition.py): the transition's outputs are exactly 0 off
target for every codeword pair and every token in the r_x box, and its faults."""

import functools

import pytest
import torch

from qstr.bounds.transition import prop26_transition
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.mlp import MLPWeights
from qstr.verify.ball import CERTIFIED, NOT_CERTIFIED, VIOLATED, Enclosure, exact, precision
from qstr.verify.certified import faults
from qstr.verify.certified.transition import _input, _Layers, _Slot, certified_transition_zeros
from tests.fixtures import rotated, seeded

D, Q, RX, EPS = 3, 2, 2.5, 0.1  # the prop-26 claim's sizes


@functools.lru_cache(maxsize=None)
def _case(N: int):
    book = rs_hadamard_codebook(N, dtype=torch.float64)
    return prop26_transition(book, D, Q, eps=EPS, r_x=RX), book.omega


def test_zeros_certified_for_every_pair_and_slot():
    tr, omega = _case(16)
    r = certified_transition_zeros(tr, omega)
    assert r.status == CERTIFIED and r.boxes == 16 * 15 * Q
    assert r.measured == Enclosure(0.0, 0.0)


def test_the_float64_layers_agree_at_a_corner():
    """The dense float64 layers give 0 too at an off-target pair with x at a corner of the box."""
    tr, omega = _case(16)
    x = torch.full((D,), RX, dtype=torch.float64)
    u = torch.cat([torch.zeros(tr.d_h, dtype=torch.float64), x, omega[0], omega[5], omega[7]])
    assert torch.equal(tr.layers(u[None])[0], torch.zeros(tr.d_h, dtype=torch.float64))


def test_gate_opened_below_the_off_target_products_is_violated():
    tr, omega = _case(16)
    r = certified_transition_zeros(tr, omega, layers=faults.transition_gate_shifted(tr))
    assert r.status == VIOLATED and r.measured.lower > 0.1 and "gives |f(u)|" in r.detail


def test_a_shift_within_the_margin_still_certifies():
    """Bands from 1/2 - 0.2 = 0.3 stay above the codes' mu = 1/4 and the gate stays shut."""
    tr, omega = _case(16)
    r = certified_transition_zeros(tr, omega, layers=faults.transition_gate_shifted(tr, 0.2))
    assert r.status == CERTIFIED


def test_a_transition_reading_h_is_not_certified():
    tr, omega = _case(16)
    r = certified_transition_zeros(tr, omega, layers=faults.transition_reads_h(tr))
    assert r.status == NOT_CERTIFIED and "reads h" in r.detail


def test_refuses_a_transition_without_its_guarantee():
    with pytest.raises(ValueError, match="guarantee"):
        certified_transition_zeros(object(), torch.zeros(2, 2))


@functools.lru_cache(maxsize=None)
def _rotated_case():
    """The transition on a rotated RS-Hadamard code of N = 16 (mu = 1/2, approximate products:
    1926 first-layer units)."""
    book = rotated(rs_hadamard_codebook(16, dtype=torch.float64))
    return prop26_transition(book, D, Q, eps=EPS, r_x=RX), book


def test_zeros_certified_on_a_rotated_code_with_approximate_products():
    """Off-target zeros hold exactly on a code whose products are only approximate; the folded
    evaluation takes about 1 s."""
    tr, book = _rotated_case()
    assert not tr.exact_products
    r = certified_transition_zeros(tr, book.omega)
    assert r.status == CERTIFIED and r.boxes == 16 * 15 * Q


def _scrambled(tr, seed: int) -> MLPWeights:
    """The transition's layers with 2% of the first two layers' weights off the h columns moved
    by up to 1e-3: units that read a slot they did not, rows that read units they did not, so
    what the fold groups is read off the weights, not the construction's structure."""
    g = seeded(seed)
    (W1, b1), (W2, b2), third, fourth = tr.layers

    def moved(W):
        mask = torch.rand(W.shape, generator=g, dtype=torch.float64) < 0.02
        return W + 1e-3 * mask * torch.rand(W.shape, generator=g, dtype=torch.float64)

    W1 = moved(W1)
    W1[:, : tr.d_h] = 0
    return MLPWeights(((W1, b1), (moved(W2), b2), tuple(third), tuple(fourth)))


@pytest.mark.parametrize(
    "layers_of", [lambda tr: tr.layers, faults.transition_gate_shifted, _scrambled]
)
def test_the_folded_layers_are_the_dense_layers_at_points_of_the_box(layers_of):
    """At a point (x a corner of its box, the other slot another code) the folded evaluation's
    balls overlap the unfolded evaluation's and hold the float64 dense layers' output, on the
    honest layers, on a shifted gate (outputs not zero) and on layers where every unit reads
    every slot."""
    tr, book = _rotated_case()
    layers = layers_of(tr) if layers_of is not _scrambled else _scrambled(tr, 3)
    om, g = book.omega, seeded(5)
    with precision():
        net = _Layers(layers)
        for l in range(Q):
            x = [exact(RX * s) for s in (1.0, -1.0, 1.0)]
            for _ in range(2):
                i, t, k = torch.randperm(16, generator=g)[:3].tolist()
                slot = _Slot(tr, layers, l, (x, [exact(v) for v in om[k].tolist()]))
                folded = slot.outputs(slot.at_position(om[i]), om[t])
                u = _input(tr, (x, om[i], om[t], [exact(v) for v in om[k].tolist()]), l, Q)
                point = [float(u[j, 0].mid()) for j in range(u.nrows())]
                dense = layers(torch.tensor([point], dtype=torch.float64))[0]
                for a, b, f in zip(folded, net(u), dense.tolist(), strict=True):
                    assert a.overlaps(b) and abs(float(a.mid()) - f) <= 1e-9 * (1 + abs(f))
