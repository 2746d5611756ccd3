"""Lemmas 22 and 24 certified (verify/certified/gadgets.py): the gadgets' sup error over the whole
input box by branch and bound, against the bounds of qstr.bounds.gadgets, and their faults."""

from types import SimpleNamespace

import pytest
import torch
from flint import arb

from qstr.bounds.gadgets import gate_error, product_error
from qstr.constructions.relu import gate_gadget, product_gadget
from qstr.verify.ball import CERTIFIED, NOT_CERTIFIED, VIOLATED, Enclosure, precision
from qstr.verify.certified import faults
from qstr.verify.certified.bisection import Budget, bisect_sup_error
from qstr.verify.certified.gadgets import PRODUCT, certified_gate, certified_product

PRODUCTS = ((0.125, 9), (1.0, 17))  # the lemma-22 claim's quick cases (R, knots)
GATES = ((0.5, 8, 1.0), (3.0, 16, 1.05))  # the lemma-24 claim's (r_x, knots, s_max)
RTOL = 1e-12


def _attained_and_certified(r, bound: float):
    """Certified below bound (1 + RTOL), and the sup's lower end attains the bound."""
    assert r.status == CERTIFIED and r.holds and r.boxes > 1
    assert bound * (1 - 1e-15) <= r.bound.lower <= r.bound.upper <= bound * (1 + 2 * RTOL)
    assert bound * (1 - 1e-12) <= r.measured.lower <= r.measured.upper < r.bound.lower
    assert "lower end / bound = 1" in r.line()


@pytest.mark.parametrize("R, knots", PRODUCTS)
def test_product_certified_over_the_whole_box(R, knots):
    _attained_and_certified(certified_product(product_gadget(R, knots)), product_error(R, knots))


@pytest.mark.parametrize("r_x, knots, s_max", GATES)
def test_gate_certified_over_the_whole_box(r_x, knots, s_max):
    r = certified_gate(gate_gadget(r_x, knots, s_max))
    _attained_and_certified(r, gate_error(r_x, knots, s_max))


def test_an_attained_bound_straddles_without_the_rounding_tolerance():
    """h^2/16 is attained by these dyadic weights: strictly below it cannot be certified."""
    r = certified_product(product_gadget(1.0, 17), rtol=0.0)
    assert r.status == NOT_CERTIFIED and not r.holds
    assert r.measured.lower <= r.bound.upper and r.bound.lower <= r.measured.upper


def test_a_bound_below_the_sup_is_violated():
    g = product_gadget(1.0, 17)
    with precision():
        low = arb(0.99 * product_error(1.0, 17))
    r = bisect_sup_error("too small", g, PRODUCT, (-1.0, 1.0, -1.0, 1.0), low)
    assert r.status == VIOLATED and r.measured.lower > r.bound.upper


def test_output_scaled_is_violated():
    slipped = faults.gadget_output_scaled
    assert certified_product(slipped(product_gadget(1.0, 17))).status == VIOLATED
    assert certified_gate(slipped(gate_gadget(3.0, 16, 1.05))).status == VIOLATED


def test_a_knot_moved_by_1e_9_is_violated():
    """Unit 2's kink moved by 1e-9, the way that widens its interval (the other way narrows it
    and the sup stays the bound's)."""
    moved = faults.gadget_bias_shifted
    assert certified_product(moved(product_gadget(1.0, 17), 2, -1e-9)).status == VIOLATED
    assert certified_gate(moved(gate_gadget(3.0, 16, 1.05), 2, 1e-9)).status == VIOLATED


def test_a_spent_budget_is_not_certified_and_names_the_widest_box():
    r = certified_gate(gate_gadget(3.0, 16, 1.05), budget=Budget(boxes=20))
    assert r.status == NOT_CERTIFIED and "widest box left" in r.detail
    assert r.measured.upper >= r.bound.lower  # what is left is not below the bound
    assert r.boxes <= 21


def test_refuses_other_gadgets():
    with pytest.raises(ValueError, match="product gadget"):
        certified_product(gate_gadget(0.5, 8))
    with pytest.raises(ValueError, match="gate gadget"):
        certified_gate(product_gadget(1.0, 9))
    with pytest.raises(ValueError, match="s_min"):
        certified_gate(gate_gadget(0.5, 8), s_min=0.75)


def test_a_kink_through_two_corners_is_searched_along_its_whole_segment():
    """f = 3 min(x, y) (units x + y, x - y, y - x) against x y on [0, 2]^2: the kink x = y joins
    the corners (0, 0) and (2, 2) and meets each edge there; the error is 3x - x^2 along it, so
    the sup is 9/4 at (3/2, 3/2), inside the segment (the corners give at most 2)."""
    g = SimpleNamespace(
        W1=torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0]], dtype=torch.float64),
        b1=torch.zeros(3, dtype=torch.float64),
        W2=torch.tensor([[1.5, -1.5, -1.5]], dtype=torch.float64),
    )
    box = (0.0, 2.0, 0.0, 2.0)
    with precision():
        r = bisect_sup_error("corners", g, PRODUCT, box, arb(2.1))
        assert r.status == VIOLATED and r.measured.lower == 2.25
        r = bisect_sup_error("corners", g, PRODUCT, box, arb(2.25), rtol=1e-12)
    assert r.status == CERTIFIED and r.boxes == 1 and r.measured == Enclosure(2.25, 2.25)
