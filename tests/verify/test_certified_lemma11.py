"""Lemma 11 certified (verify/certified/lemma11.py): every target tuple at N = 16, enclosed from
the built module's weights, and its faults."""

import functools
import math

import pytest
import torch

from qstr.bounds.attention import lemma11, lemma12_radius
from qstr.constructions.codes import star_codebook
from qstr.constructions.links import TwoLayerNet, make_link
from qstr.verify.adversarial import lemma11_worst_case
from qstr.verify.ball import CERTIFIED, NOT_CERTIFIED, VIOLATED
from qstr.verify.certified import faults
from qstr.verify.certified.lemma11 import certified_lemma11

D, Q, EPS = 10, 2, 0.05  # the lemma-11 claim's linear link


@functools.lru_cache(maxsize=None)
def _case(N: int):
    link = make_link("linear", Q, D, generator=torch.Generator().manual_seed(0))
    net = link.two_layer_net()
    cons = lemma11(N, D, Q, net, eps=EPS, r_x=lemma12_radius(D, n=10_000, N=N))
    return cons, net


@functools.lru_cache(maxsize=None)
def _certified(N: int):
    return certified_lemma11(_case(N)[0])


@pytest.mark.parametrize("N", [16, 64])
def test_certified_and_encloses_the_float64_search(N):
    cons, net = _case(N)
    r = _certified(N)
    assert r.status == CERTIFIED and r.holds and r.boxes == N**Q
    worst = lemma11_worst_case(cons, net)  # the float64 exhaustive search
    assert worst.exact
    assert r.measured.lower - 1e-12 * worst.value <= worst.value <= r.measured.upper + 1e-12
    assert r.measured.width <= 1e-15 * r.measured.upper
    g = cons.guarantee  # the bound's enclosure holds the float64 bound
    assert r.bound.lower - 1e-13 * g.error_bound <= g.error_bound <= r.bound.upper + 1e-13
    assert r.measured.upper < r.bound.lower < EPS * (1 + 1e-12)
    assert "certified" in r.line() and f"{N**Q} boxes" in r.line()


def test_alpha_halved_is_violated():
    cons, _ = _case(16)
    r = certified_lemma11(faults.lemma11_alpha_halved(cons))
    assert r.status == VIOLATED and not r.holds
    assert r.measured.lower > 2 * r.bound.upper  # the leak grows by about e^{Delta/2}


def test_overstated_guarantee_is_violated():
    r = certified_lemma11(faults.lemma11_guarantee_overstated(_case(16)[0]))
    assert r.status == VIOLATED and r.measured.lower > r.bound.upper


@pytest.mark.parametrize(
    "fault, why",
    [
        (faults.lemma11_weight_off_block, "outside its (slot0, pos) block"),
        (faults.lemma11_unit_unpaired, "no opposite unit"),
    ],
)
def test_a_failed_premise_is_not_certified(fault, why):
    cons, _ = _case(16)
    r = certified_lemma11(fault(cons))
    assert r.status == NOT_CERTIFIED and not r.holds and why in r.detail
    assert r.measured.width == float("inf")


def test_faults_leave_the_built_module_as_it_was():
    cons, _ = _case(16)
    before = cons.model.W_QK.clone()
    faults.lemma11_alpha_halved(cons)
    faults.lemma11_weight_off_block(cons)
    assert torch.equal(cons.model.W_QK, before)
    assert _certified(16).holds


def test_refuses_what_is_not_a_lemma11_construction():
    with pytest.raises(ValueError, match="Lemma 11 construction"):
        certified_lemma11(object())


def test_star_codes_attain_the_bound_so_only_the_rounding_tolerance_certifies():
    """Star codes, w = (u, u)/sqrt 2 (the lemma-11 claim's star case): the bound is attained, so
    the enclosure straddles it; widened by 1e-12 it is certified, and the lower end is the bound."""
    u = torch.full((D,), 0.5, dtype=torch.float64)
    w = torch.cat([u, u]) / math.sqrt(2)  # <w, z> as relu(<w, z>) - relu(-<w, z>)
    one = torch.ones(1, dtype=torch.float64)
    net = TwoLayerNet(a=torch.cat([one, -one]), W=torch.stack([w, -w]), b=torch.zeros(2).to(w))
    cons = lemma11(16, D, Q, net, eps=EPS, r_x=2.0, codebook=star_codebook(16, mu=0.5))
    strict = certified_lemma11(cons)
    assert strict.status == NOT_CERTIFIED and "targets (0, 0)" in strict.detail
    assert (
        strict.measured.lower <= strict.bound.upper and strict.bound.lower <= strict.measured.upper
    )
    loose = certified_lemma11(cons, rtol=1e-12)
    assert loose.status == CERTIFIED and "(1 + 1e-12)" in loose.detail
    assert loose.measured.lower >= cons.guarantee.error_bound * (1 - 1e-12)
    with pytest.raises(ValueError, match="rtol"):
        certified_lemma11(cons, rtol=-1.0)
