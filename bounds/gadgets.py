"""Lemmas 22 and 24: the certified sup-errors of the ReLU gadgets, from the gadget's parameters.
The weights are ``qstr.constructions.relu``; derivation: docs/derivations/rnn-transition.md."""

from __future__ import annotations

from qstr.constructions import validate
from qstr.constructions.relu import Gadget, gate_bands, square_knots

__all__ = ["product_error", "gate_error", "gate_leak", "gadget_error"]


def product_error(R: float, knots: int) -> float:
    """Lemma 22: the certified (and attained) sup |P(x, y) - x y| over [-R, R]^2 of
    ``product_gadget(R, knots)``: h^2 / 16, h = 4R / (knots - 1)."""
    _, h = square_knots(
        validate.positive_float("R", R), validate.positive_int("knots", knots, minimum=2)
    )
    return h * h / 16


def gate_error(r_x: float, knots: int, s_max: float = 1.0) -> float:
    """Lemma 24: the certified (and attained) sup |gate - 2 x relu(s - 1/2)| of
    ``gate_gadget(r_x, knots, s_max)`` over |x| <= r_x, s <= s_max: r_x delta,
    delta = (s_max - 1/2) / knots."""
    bands = gate_bands(r_x, knots, s_max)
    return bands.r_x * bands.delta


def gate_leak(excess: float, r_x: float, knots: int, s_max: float = 1.0) -> float:
    """Lemma 24's gate below its threshold: the certified sup |gate(x, s)| over |x| <= r_x,
    s <= 1/2 + ``excess`` (s <= s_max): r_x min(4 excess, 2 excess + delta), 0 when excess <= 0."""
    bands = gate_bands(r_x, knots, s_max)
    e = max(0.0, float(excess))
    return bands.r_x * min(4 * e, 2 * e + bands.delta)


def gadget_error(gadget: Gadget) -> float:
    """The certified sup-error of a gadget of ``qstr.constructions.relu`` over its domain: 0 for
    the exact ones (identity, soft threshold), Lemma 22's for the product, Lemma 24's for the
    gate."""
    if not isinstance(gadget, Gadget):
        raise ValueError(f"gadget must be a constructions.relu.Gadget, got {type(gadget).__name__}")
    p = gadget.params
    if gadget.name in ("identity", "soft-threshold"):
        return 0.0
    if gadget.name == "product":
        return product_error(p["R"], gadget.knots)
    if gadget.name == "gate":
        return gate_error(p["r_x"], gadget.knots, p["s_max"])
    raise ValueError(f"gadget {gadget.name!r} has no certificate here")
