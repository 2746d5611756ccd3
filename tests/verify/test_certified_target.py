"""Prop 26's target error and Cor 27 certified (verify/certified/target.py, cor27.py): the branch
and bound over the r_x box proves sup ||f(u)_l - x||_inf < eps for every position and slot; its
faults are violated at a token inside the ball; a spent budget names the widest box left."""

import functools

import torch
from flint import arb

from qstr.bounds.transition import prop26_transition, prop28_rnn
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.links import make_link
from qstr.verify.ball import CERTIFIED, NOT_CERTIFIED, VIOLATED, precision
from qstr.verify.certified import faults
from qstr.verify.certified.bisection import Budget
from qstr.verify.certified.cor27 import certified_cor27
from qstr.verify.certified.target import _relaxed, certified_target_error

D, Q, RX, EPS = 3, 2, 2.5, 0.1  # the prop-26 claim's sizes
F64 = torch.float64


@functools.lru_cache(maxsize=None)
def _case(N: int):
    book = rs_hadamard_codebook(N, dtype=F64)
    return prop26_transition(book, D, Q, eps=EPS, r_x=RX), book.omega


def _float64_target_error(tr, omega, x: torch.Tensor) -> float:
    """max over positions i, slots l (t_l = i, the other slot omega_{i+1}) and the tokens x of
    ||f(u)_l - x||_inf through the float64 dense layers."""
    worst, N = 0.0, omega.shape[0]
    for i in range(N):
        for l in range(Q):
            slots = [omega[i] if k == l else omega[(i + 1) % N] for k in range(Q)]
            z = torch.cat([x] + [v.expand(len(x), -1) for v in (omega[i], *slots)], 1)
            u = torch.cat([torch.zeros(len(x), tr.d_h, dtype=F64), z], 1)
            out = tr.layers(u)[:, l * D : (l + 1) * D]
            worst = max(worst, float((out - x).abs().max()))
    return worst


def test_target_error_certified_below_eps_and_above_the_float64_errors():
    tr, omega = _case(16)
    r = certified_target_error(tr, omega)
    assert r.status == CERTIFIED and r.detail.startswith(f"{16 * Q} (position, slot)")
    assert r.bound.lower == tr.guarantee.eps and r.measured.upper < tr.guarantee.eps
    g = torch.linspace(-RX, RX, 21, dtype=F64)
    x = torch.cartesian_prod(g, g, g)
    x = x[x.norm(dim=1) <= RX]
    err = _float64_target_error(tr, omega, x)
    assert 0 < err <= r.measured.upper  # the enclosure holds every float64 error measured
    assert r.measured.lower <= err * (1 + 1e-6)  # and its lower end is one of them (centres)


def test_readout_halved_is_violated_inside_the_ball():
    tr, omega = _case(16)
    r = certified_target_error(tr, omega, layers=faults.transition_readout_scaled(tr))
    assert r.status == VIOLATED and r.measured.lower > tr.guarantee.eps
    x = [float(v) for v in r.detail.split("x = (")[1].split(")")[0].split(", ")]
    assert sum(v * v for v in x) <= RX**2


def test_an_output_weight_moved_past_its_slack_is_violated_and_below_it_certified():
    """The slack is eps - err ~ eps, so a weight moved by delta costs delta r_x: 0.05 r_x > eps,
    0.03 r_x < eps."""
    tr, omega = _case(16)
    over = certified_target_error(tr, omega, layers=faults.transition_output_weight_moved(tr))
    assert over.status == VIOLATED
    under = faults.transition_output_weight_moved(tr, 0.03)
    r = certified_target_error(tr, omega, layers=under)
    assert r.status == CERTIFIED and 0.03 * 0.5 * RX < r.measured.upper < tr.guarantee.eps


def test_reads_h_and_a_spent_budget_are_not_certified():
    tr, omega = _case(16)
    r = certified_target_error(tr, omega, layers=faults.transition_reads_h(tr))
    assert r.status == NOT_CERTIFIED and r.detail == "reads h"
    r = certified_target_error(tr, omega, budget=Budget(boxes=5))
    assert r.status == NOT_CERTIFIED and "widest box left" in r.detail and r.boxes <= 7
    assert r.measured.upper == float("inf")


def test_chord_relaxation_encloses_relu():
    with precision():
        for lo, hi in ((-1.0, 3.0), (-2.5, 1e-8), (-1e-8, 2.5)):
            lam, off = _relaxed(arb(lo), arb(hi))
            for v in torch.linspace(lo, hi, 101, dtype=F64).tolist():
                assert (lam * v + off).contains(arb(max(v, 0.0)))
            assert float(off.upper()) <= min(hi, -lo) * (1 + 1e-9)  # a radius has 30 bits


def test_cor27_certified_and_its_fault_violated():
    book = rs_hadamard_codebook(16, dtype=F64)
    link = make_link("linear", 1, D, generator=torch.Generator().manual_seed(0))
    rnn = prop28_rnn(book, D, link.two_layer_net(), eps=EPS, r_x=RX)
    r = certified_cor27(rnn)
    assert r.status == CERTIFIED and r.measured.upper < rnn.guarantee.state_eps
    assert "states inside the r_h ball" in r.detail
    bad = certified_cor27(rnn, layers=faults.transition_readout_scaled(rnn.transition))
    assert bad.status == VIOLATED
