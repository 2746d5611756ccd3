"""Rounding terms of the attention constructions (Lemma 11, the single-head sparse average) and of
their nn.MultiheadAttention export, shared by the claims that run them
(docs/derivations/rounding.md)."""

from __future__ import annotations

import math

from qstr.verify.claim import Verdict
from qstr.verify.rounding import Rounding


def attention_rounding(g) -> Rounding:
    """Rounding of one attention output through its net (guarantee ``g``): N-term softmax sums,
    d_e-term scores scaled by alpha, the net's q d-input sums; each term is at most
    max(2, alpha) max(1, Lip) sqrt(H) r_x."""
    scale = max(2.0, g.alpha) * max(1.0, g.lipschitz) * math.sqrt(g.H) * g.r_x
    return Rounding(
        n=g.N + g.d_e + g.q * g.d + 4,
        scale=scale,
        what="(N + d_e + q d + 4) eps max(2, alpha) max(1, Lip) sqrt(H) r_x",
    )


def export_rounding(model, scale: float) -> Rounding:
    """Rounding of the exported nn.MultiheadAttention's forward pass (``scale``: |y|max + 1)."""
    return Rounding(
        n=2 * (model.W_QK.shape[-1] * model.H + model.m),
        scale=scale,
        what="2 (H D_e + m) eps (|y|max + 1)",
    )


def above_rounding(v: Verdict) -> float:
    """How far a verdict's |measured - bound| exceeds its rounding term: ranks the cases of a gap
    (against 0) or of an attained value (against its target)."""
    return abs(v.measured - v.bound) - v.rounding
