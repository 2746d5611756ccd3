"""Cor 27 certified from Prop 26's two certificates on the RNN's own transition: the states are
exactly 0 before (after) the target and equal to the target output after (before) it, so the
state error is the target error and the projection onto the r_h ball never acts
(docs/derivations/certified.md)."""

from __future__ import annotations

import time
from typing import Optional

from flint import arb

from qstr.verify.ball import (
    CERTIFIED,
    NOT_CERTIFIED,
    VIOLATED,
    Certified,
    exact,
    precision,
    sqrt,
)
from qstr.verify.certified.bisection import Budget
from qstr.verify.certified.target import certified_target_error
from qstr.verify.certified.transition import certified_transition_zeros

WHAT = "Cor 27 state error <= eps, projection inactive"


def certified_cor27(rnn, *, layers=None, budget: Optional[Budget] = None) -> Certified:
    """Cor 27 for the Prop 28 RNN ``rnn`` (its transition, codes omega and r_h): Prop 26's zeros
    off target and its target error (``certified_transition_zeros``,
    ``certified_target_error``) on ``rnn.transition`` (dense ``layers`` unless given), and
    sqrt(q) (r_x + sqrt(d) err) < r_h in arb for the certified error's upper end err. Measured:
    the target error's enclosure; bound: the transition's eps (the RNN's state_eps)."""
    start = time.perf_counter()
    tr, omega = rnn.transition, rnn.omega
    zeros = certified_transition_zeros(tr, omega, layers=layers)
    target = certified_target_error(tr, omega, layers=layers, budget=budget)
    parts = (zeros, target)
    if any(p.status == VIOLATED for p in parts):
        status = VIOLATED
    elif all(p.holds for p in parts):
        status = CERTIFIED
    else:
        status = NOT_CERTIFIED
    detail = f"zeros: {zeros.status} ({zeros.boxes} pair-slots); target: {target.status}"
    if status == CERTIFIED:
        with precision():
            g = tr.guarantee
            reach = sqrt(arb(tr.q)) * (
                exact(g.r_x) + sqrt(arb(tr.d)) * exact(target.measured.upper)
            )
            if not reach < exact(rnn.r_h):
                status = NOT_CERTIFIED
                detail += f"; the states may reach r_h = {rnn.r_h}: {reach}"
            else:
                detail += f"; states inside the r_h ball: norm <= {float(reach.upper()):.9g}"
    if target.status != CERTIFIED and target.detail:
        detail += f" ({target.detail})"
    boxes = zeros.boxes + target.boxes
    seconds = time.perf_counter() - start
    return Certified(WHAT, target.measured, target.bound, status, boxes, seconds, detail)
