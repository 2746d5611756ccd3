"""Lemmas 22 and 24 certified: the product and gate gadgets' sup error over their whole input box
by branch and bound in ball arithmetic, from the gadgets' weights read exactly
(docs/derivations/certified.md)."""

from __future__ import annotations

from typing import Optional

from flint import arb

from qstr.verify.ball import Certified, exact, hull, precision
from qstr.verify.certified.bisection import Box, Budget, Target, bisect_sup_error, relu

PRODUCT = Target(value=lambda x, y: x * y, gradient=lambda b: (hull(b[2:]), hull(b[:2])))


def _gate_gradient(b: Box):
    """Over the box: d/dx 2 x relu(s - 1/2) = 2 relu(s - 1/2), d/ds = 2 x 1[s > 1/2]."""
    s = hull(b[2:])
    step = arb(1) if s >= 0.5 else arb(0) if s <= 0.5 else hull((arb(0), arb(1)))
    return 2 * relu(s - arb(0.5)), 2 * hull(b[:2]) * step


GATE = Target(
    value=lambda x, s: 2 * x * relu(s - arb(0.5)),
    gradient=_gate_gradient,
    kinks=((arb(0), arb(1), arb(-0.5)),),
)


def product_bound(R: float, knots: int) -> arb:
    """Lemma 22's bound h^2 / 16, h = 4 R / (knots - 1), enclosed."""
    h = 4 * exact(R) / (knots - 1)
    return h * h / 16


def gate_bound(r_x: float, knots: int, s_max: float) -> arb:
    """Lemma 24's bound r_x delta, delta = (s_max - 1/2) / knots, enclosed."""
    return exact(r_x) * (exact(s_max) - arb(0.5)) / knots


def certified_product(gadget, *, rtol: float = 1e-12, budget: Optional[Budget] = None) -> Certified:
    """Lemma 22: sup over [-R, R]^2 of |P(x, y) - x y| <= h^2 / 16 (1 + rtol) for
    ``product_gadget(R, knots)``'s weights (the bound is attained: rtol is the weights'
    rounding)."""
    if getattr(gadget, "name", None) != "product":
        raise ValueError("gadget must be a product gadget (constructions.relu.product_gadget)")
    R = float(gadget.params["R"])
    what = f"Lemma 22 product gadget R={R:g} knots={gadget.knots}: sup error <= h^2/16"
    with precision():
        bound = product_bound(R, gadget.knots)
        box = (-R, R, -R, R)
        return bisect_sup_error(what, gadget, PRODUCT, box, bound, rtol=rtol, budget=budget)


def certified_gate(
    gadget, *, s_min: float = -1.5, rtol: float = 1e-12, budget: Optional[Budget] = None
) -> Certified:
    """Lemma 24: sup over |x| <= r_x, s_min <= s <= s_max of |G(x, s) - 2 x relu(s - 1/2)|
    <= r_x delta (1 + rtol) for ``gate_gadget(r_x, knots, s_max)``'s weights."""
    if getattr(gadget, "name", None) != "gate":
        raise ValueError("gadget must be a gate gadget (constructions.relu.gate_gadget)")
    r_x, s_max = float(gadget.params["r_x"]), float(gadget.params["s_max"])
    if not s_min < 0.5:
        raise ValueError(f"s_min must be below 1/2, got {s_min}")
    what = f"Lemma 24 gate gadget r_x={r_x:g} s<={s_max:g} knots={gadget.knots}: sup <= r_x delta"
    with precision():
        bound = gate_bound(r_x, gadget.knots, s_max)
        box = (-r_x, r_x, s_min, s_max)
        return bisect_sup_error(what, gadget, GATE, box, bound, rtol=rtol, budget=budget)
