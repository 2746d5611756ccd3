"""Certified computations (ball arithmetic, verify/ball.py) of the paper's statements on the built
objects: each returns a :class:`~qstr.verify.ball.Certified` with its enclosure, the bound's,
the verdict and the cost (docs/derivations/certified.md)."""

from qstr.verify.certified.bisection import Budget
from qstr.verify.certified.cor27 import certified_cor27
from qstr.verify.certified.gadgets import certified_gate, certified_product
from qstr.verify.certified.lemma11 import certified_lemma11
from qstr.verify.certified.lemma40 import certified_lemma40
from qstr.verify.certified.target import certified_target_error
from qstr.verify.certified.theorem4 import certified_theorem4_agreement, theorem4_bound_ball
from qstr.verify.certified.theorem7 import certified_theorem7_agreement, theorem7_bound_ball
from qstr.verify.certified.transition import certified_transition_zeros

__all__ = [
    "Budget",
    "certified_cor27",
    "certified_gate",
    "certified_lemma11",
    "certified_lemma40",
    "certified_product",
    "certified_target_error",
    "certified_theorem4_agreement",
    "certified_theorem7_agreement",
    "certified_transition_zeros",
    "theorem4_bound_ball",
    "theorem7_bound_ball",
]
