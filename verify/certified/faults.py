"""Faults of the certified computations: copies of the built objects with a weight perturbed
beyond what the bound tolerates, or a constant slipped (docs/derivations/certified.md)."""

from __future__ import annotations

import copy
from dataclasses import replace

import torch

from qstr.constructions.mlp import MLPWeights


def _model_copy(cons):
    """The construction with its own copy of the module (the original is left as built)."""
    return replace(cons, model=copy.deepcopy(cons.model))


def lemma11_alpha_halved(cons):
    """Lemma 11: head 0's (slot, pos) block of W_QK halved, the guarantee kept: the gap halves
    and the leak grows by about e^{Delta/2}."""
    out = _model_copy(cons)
    lay, (slot,) = out.layout, out.head_slots[0]
    with torch.no_grad():
        out.model.W_QK[0, lay.slot(slot), lay["pos"]] *= 0.5
    return out


def lemma11_guarantee_overstated(cons):
    """Lemma 11: the guarantee records twice the alpha the module has, so its bound is smaller
    than the built module's worst case."""
    g = cons.guarantee
    return replace(cons, guarantee=replace(g, alpha=2 * g.alpha))


def lemma11_weight_off_block(cons, value: float = 1e-3):
    """Lemma 11: one W_QK weight of head 0 outside its (slot, pos) block (x against x): the
    scores then depend on the tokens, and the closed form's premise fails."""
    out = _model_copy(cons)
    x = out.layout["x"]
    with torch.no_grad():
        out.model.W_QK[0, x.start, x.start] = value
    return out


def lemma11_unit_unpaired(cons, delta: float = 1e-9):
    """Lemma 11: the output net's first unit's a perturbed by ``delta``: it has no opposite unit,
    so the net is not certified affine."""
    out = _model_copy(cons)
    with torch.no_grad():
        out.model.a[0] += delta
    return out


def gadget_output_scaled(gadget, factor: float = 1 + 1e-9):
    """Lemmas 22-24: the gadget's output weights W2 times ``factor`` (a slipped constant)."""
    return replace(gadget, W2=gadget.W2 * factor)


def gadget_bias_shifted(gadget, unit: int = 2, shift: float = -1e-9):
    """Lemmas 22-24: one hidden unit's bias moved by ``shift`` (a knot off its place)."""
    b1 = gadget.b1.clone()
    b1[unit] += shift
    return replace(gadget, b1=b1)


def theorem7_total_scaled(record, factor: float = 1 + 1e-9):
    """Theorem 7: the float64 bound's total times ``factor`` (a slipped constant in the record)."""

    def scaled(n, N, params):
        out = record(n, N, params)
        return replace(out, total=out.total * factor)

    return scaled


def transition_gate_shifted(tr, shift: float = 0.5):
    """Prop 26: the dense layers with every gate unit's bias (layer 2) raised by ``shift`` M, so
    the bands start at 1/2 - ``shift``: off-target inner products open the gate."""
    W1, W2, *rest = tr.layers.layers
    b2 = W2.b + shift * tr.guarantee.gate_slope
    return MLPWeights((W1, (W2.W, b2), *rest))


def transition_reads_h(tr, value: float = 1e-9):
    """Prop 26: one first-layer weight on the state h set to ``value``: the premise that the
    transition does not read h fails."""
    W1, *rest = tr.layers.layers
    W = W1.W.clone()
    W[0, 0] = value
    return MLPWeights(((W, W1.b), *rest))


def theorem4_rademacher_once(record):
    """Theorem 4: the float64 bound's total with Rad in place of 2 Rad (the symmetrisation's
    factor 2 slipped), the thm-4 claim's fault."""

    def slipped(n, N, params):
        out = record(n, N, params)
        return replace(out, total=out.total - out.rademacher)

    return slipped


def transition_readout_scaled(tr, factor: float = 0.5):
    """Prop 26: layer 3 (the gate readout G and -G) times ``factor``: at 1/2, Lemma 24's factor 2
    dropped (the prop-26 claim's fault), so the target output is about x / 2."""
    L = tr.layers
    return L.replace_layer(2, W=L[2].W * factor)


def transition_output_weight_moved(tr, delta: float = 0.05):
    """Prop 26: the last layer's first weight moved by ``delta``: the target output's first
    coordinate errs by up to delta r_x (certified below (eps - err) / r_x, violated above)."""
    *rest, (W, b) = tr.layers.layers
    W = W.clone()
    W[0, 0] += delta
    return MLPWeights((*rest, (W, b)))


def lemma40_row_repeated(V, row: int = 1):
    """Lemma 40: V with row ``row`` replaced by row ``row`` - 1 (its rank drops by one, so the
    conditional variance is 2 (k - r + 1), not the closed form's 2 (k - r))."""
    out = V.clone()
    out[row] = out[row - 1]
    return out
