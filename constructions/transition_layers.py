"""Lemmas 23 and 25 (Appendix C.1): the Prop 26 transition's layers assembled from the gadget
objects themselves, as Equations C.3-C.9 place them (Lemma 22's product, Lemma 24's gate, the
identity and soft-threshold pairs). docs/derivations/rnn-transition.md, section 4a.

The transition's own dense layers (``Transition.layers``) share Lemma 24's s-units across the d
coordinates of a slot; these layers keep one gate gadget per (slot, coordinate), the lemma's
form. Both compute the same function; the prop-26 claim holds them equal.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from qstr.constructions import validate
from qstr.constructions.mlp import MLPWeights
from qstr.constructions.relu import (
    Gadget,
    gate_gadget,
    identity_gadget,
    product_gadget,
    soft_threshold_gadget,
)

F64 = torch.float64


@dataclass(frozen=True)
class TransitionGadgets:
    """The four gadgets a Prop 26 transition is made of: ``identity`` (x -> x on R^d),
    ``product`` ((a, b) -> a b, Lemma 22), ``gate`` ((x, s) -> 2 x relu(s - 1/2), Lemma 24) and
    ``rectifier`` (the soft threshold ST_b on R^{q d}, layers 3-4)."""

    identity: Gadget
    product: Gadget
    gate: Gadget
    rectifier: Gadget


def transition_gadgets(transition) -> TransitionGadgets:
    """Lemmas 23 and 25's gadgets of a Prop 26 :class:`~qstr.constructions.transition.Transition`,
    rebuilt by the same
    builders the lemma-22 and lemma-24 claims check, from its R, knots, bands and threshold."""
    bands = transition.bands
    return TransitionGadgets(
        identity_gadget(transition.d),
        product_gadget(transition.R, transition.product_knots),
        gate_gadget(bands.r_x, bands.knots, bands.s_max),
        soft_threshold_gadget(transition.threshold, transition.d_h),
    )


def _blocks(offset: int, count: int, size: int) -> torch.Tensor:
    """Row indices (count, size) of ``count`` consecutive blocks of ``size`` rows after
    ``offset``."""
    return offset + torch.arange(count * size).view(count, size)


def lemma23_layer(transition, gadgets: TransitionGadgets):
    """Lemma 23 (Equations C.3-C.7): layer 1 on u = (h, z) and its linear readout A.

    Units: the identity gadget on x (C.4-C.5), then for each slot l and code coordinate j the
    product gadget on (omega_ij, omega_{t_l j}) (C.6, its first-layer columns split between the
    pos and slot-l blocks). Returns (W1, b1, A) with A (d + q, w1): A relu(W1 u + b1) =
    (x, s_hat_1, ..., s_hat_q), s_hat_l = sum_j P(omega_ij, omega_{t_l j}) (C.7).
    """
    ident, prod = gadgets.identity, gadgets.product
    d, q, d_e, lay, off = (
        transition.d,
        transition.q,
        transition.d_e,
        transition.layout,
        transition.d_h,
    )
    P = prod.width
    w1 = ident.width + q * d_e * P
    validate.fits_in_memory("Lemma 23's layer 1", 8 * w1 * (off + lay.dim + d + q), "cpu")
    W1 = torch.zeros(w1, off + lay.dim, dtype=F64)
    b1 = torch.zeros(w1, dtype=F64)
    A = torch.zeros(d + q, w1, dtype=F64)
    xcols = off + lay["x"].start + torch.arange(d)
    W1[: ident.width, xcols] = ident.W1.to(F64)
    b1[: ident.width] = ident.b1.to(F64)
    A[:d, : ident.width] = ident.W2.to(F64)
    for l in range(q):
        rows = _blocks(ident.width + l * d_e * P, d_e, P)  # (d_e, P): coordinate j's units
        j = torch.arange(d_e)[:, None]
        W1[rows, off + lay["pos"].start + j] = prod.W1[:, 0].to(F64)
        W1[rows, off + lay.slot(l).start + j] = prod.W1[:, 1].to(F64)
        b1[rows] = prod.b1.to(F64)
        A[d + l, rows.flatten()] = prod.W2[0].to(F64).repeat(d_e)
    return W1, b1, A


def lemma25_layer(transition, gadgets: TransitionGadgets, A: torch.Tensor):
    """Lemma 25 (Equations C.8-C.9): layer 2 on Lemma 23's units and the gate readout G.

    For each slot l and coordinate c, the gate gadget on (x_c, s_hat_l) = (A_c, A_{d+l}) applied
    to the layer-1 units (C.8: its first layer composed with Lemma 23's readout); G (q d, w2)
    stacks the gadgets' second layers (C.9). Returns (W2, b2, G)."""
    gate, d, q = gadgets.gate, transition.d, transition.q
    K = gate.width
    w2 = q * d * K
    validate.fits_in_memory("Lemma 25's layer 2", 8 * w2 * (A.shape[1] + d * q), "cpu")
    W2 = torch.zeros(w2, A.shape[1], dtype=F64)
    G = torch.zeros(q * d, w2, dtype=F64)
    gx, gs = gate.W1[:, 0:1].to(F64), gate.W1[:, 1:2].to(F64)
    for l in range(q):
        for c in range(d):
            rows = slice((l * d + c) * K, (l * d + c + 1) * K)
            W2[rows] = gx * A[c] + gs * A[d + l]
            G[l * d + c, rows] = gate.W2[0].to(F64)
    b2 = gate.b1.to(F64).repeat(q * d)
    return W2, b2, G


def gadget_layers(transition, gadgets: TransitionGadgets, *, rectify: bool = True) -> MLPWeights:
    """The transition from its gadgets: Lemma 23's layer, Lemma 25's layer, then the rectifier
    (layers 3-4: ST_b on G). ``rectify=False``: ``(L1, L2, (G, None))``, the gate before the
    threshold."""
    W1, b1, A = lemma23_layer(transition, gadgets)
    W2, b2, G = lemma25_layer(transition, gadgets, A)
    if not rectify:
        return MLPWeights(((W1, b1), (W2, b2), (G, None)))
    st = gadgets.rectifier
    return MLPWeights(
        ((W1, b1), (W2, b2), (st.W1.to(F64) @ G, st.b1.to(F64)), (st.W2.to(F64), None))
    )
