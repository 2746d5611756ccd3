"""Prop 26 certified (verify/certified/transition.py): the transition's outputs are exactly 0 off
target for every codeword pair and every token in the r_x box, and its faults."""

import functools

import pytest
import torch

from qstr.bounds.transition import prop26_transition
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.verify.ball import CERTIFIED, NOT_CERTIFIED, VIOLATED, Enclosure
from qstr.verify.certified import faults
from qstr.verify.certified.transition import certified_transition_zeros

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
