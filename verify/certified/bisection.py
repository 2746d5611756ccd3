"""Branch and bound over boxes of R^2 for the sup error of a one-hidden-layer ReLU gadget against
a target that is bilinear between its kinks (Lemmas 22-24; docs/derivations/certified.md)."""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from flint import arb

from qstr.verify.ball import (
    CERTIFIED,
    NOT_CERTIFIED,
    VIOLATED,
    Certified,
    Enclosure,
    arb_matrix,
    arb_vector,
    hull,
    max_ends,
    precision,
)

Box = Tuple[arb, arb, arb, arb]  # x0, x1, y0, y1 (exact end points)
Line = Tuple[arb, arb, arb]  # a x + b y + c = 0


@dataclass(frozen=True)
class Target:
    """A gadget's target: its value at a point, an enclosure of its gradient over a box, and the
    lines where it has a kink (between them it is bilinear, so the error is harmonic)."""

    value: Callable[[arb, arb], arb]
    gradient: Callable[[Box], Tuple[arb, arb]]
    kinks: Tuple[Line, ...] = ()


@dataclass(frozen=True)
class Budget:
    """What the bisection may spend before it reports the widest box it could not certify."""

    boxes: int = 200_000
    seconds: float = 120.0


def relu(v: arb) -> arb:
    """The enclosure of max(v, 0) for a ball v."""
    if v >= 0:
        return v
    if v <= 0:
        return arb(0)
    return hull((arb(0), v.upper()))


class _Net:
    """u -> W2 relu(W1 u + b1) (one output, two inputs) with its weights read exactly."""

    def __init__(self, gadget):
        if gadget.W1.shape[1] != 2 or gadget.W2.shape[0] != 1:
            raise ValueError("the bisection takes gadgets with two inputs and one output")
        W1 = arb_matrix(gadget.W1)
        self.units = [(W1[k, 0], W1[k, 1], b) for k, b in enumerate(arb_vector(gadget.b1))]
        self.a = arb_vector(gadget.W2[0])
        self.slopes = [(a * w0, a * w1) for a, (w0, w1, _) in zip(self.a, self.units, strict=True)]

    def pre(self, x: arb, y: arb) -> List[arb]:
        return [w0 * x + w1 * y + b for w0, w1, b in self.units]

    def __call__(self, x: arb, y: arb) -> arb:
        return sum((a * relu(p) for a, p in zip(self.a, self.pre(x, y), strict=True)), arb(0))


def _corners(box: Box):
    x0, x1, y0, y1 = box
    return ((x0, y0), (x1, y0), (x1, y1), (x0, y1))


def _straddles(values: Sequence[arb]) -> bool:
    """A line's values at the four corners have both signs (or cannot be told from 0 there)."""
    return not (all(v >= 0 for v in values) or all(v <= 0 for v in values))


def _same_line(p: Line, q: Line) -> bool:
    (a, b, c), (d, e, f) = p, q
    return a * e - b * d == 0 and a * f - c * d == 0 and b * f - c * e == 0


def _crossings(line: Line, box: Box) -> List[Tuple[arb, arb]]:
    """The points where ``line`` meets the box's edges."""
    a, b, c = line
    pts, cs = [], _corners(box)
    for (x0, y0), (x1, y1) in zip(cs, cs[1:] + cs[:1], strict=True):
        g0, g1 = a * x0 + b * y0 + c, a * x1 + b * y1 + c
        if not (g0 * g1 > 0) and not (g0 == g1):  # a sign change (or a zero) on this edge
            s = g0 / (g0 - g1)
            pts.append((x0 + s * (x1 - x0), y0 + s * (y1 - y0)))
    return pts


class _Problem:
    """The gadget, its target, the bound and the tolerated bound; evaluates one box."""

    def __init__(self, gadget, target: Target, bound: arb, rtol: float):
        self.net, self.target = _Net(gadget), target
        self.bound, self.limit, self.rtol = bound, bound * (1 + arb(rtol)), rtol

    def error(self, x: arb, y: arb) -> arb:
        return self.net(x, y) - self.target.value(x, y)

    def lines(self, box: Box) -> List[Line]:
        """The distinct kink lines (units and target) crossing the box's interior."""
        out: List[Line] = []
        cand = [u for u in self.net.units] + list(self.target.kinks)
        for line in cand:
            a, b, c = line
            if _straddles([a * x + b * y + c for x, y in _corners(box)]):
                if not any(_same_line(line, m) for m in out):
                    out.append(line)
        return out

    def evaluate(self, box: Box) -> Tuple[arb, arb, bool, int]:
        """(lower, upper, exact, split axis): lower is attained in the box; upper bounds |error|
        on it; exact when at most one kink crosses it (the error is harmonic on each side, so
        its extremes lie at the corners, where the kink meets the edges, or at the vertex of the
        quadratic it is along the kink)."""
        lines = self.lines(box)
        cross = _crossings(lines[0], box) if len(lines) == 1 else []
        if not lines or len(cross) >= 2:
            return self._exact(box, cross)
        return self._mean_value(box)

    def _exact(self, box: Box, cross: List[Tuple[arb, arb]]):
        pts = list(_corners(box)) + cross
        # every pair of meeting points (a kink through a corner meets two edges there), so the
        # pair at the segment's two ends is among them
        extra = [self._along(p, q) for p, q in itertools.combinations(cross, 2)]
        attained = [abs(self.error(x, y)) for x, y in pts] + [v for v, at in extra if at]
        return max_ends(attained)[0], max_ends(attained + [v for v, _ in extra])[1], True, 0

    def _along(self, p: Tuple[arb, arb], q: Tuple[arb, arb]) -> Tuple[arb, bool]:
        """An enclosure of |error| at the extremum of its quadratic along the segment p q, and
        whether a point of the segment attains it (the vertex lies inside for sure)."""
        e0, e1 = self.error(*p), self.error(*q)
        em = self.error((p[0] + q[0]) / 2, (p[1] + q[1]) / 2)
        a, b = 2 * e0 - 4 * em + 2 * e1, -3 * e0 + 4 * em - e1
        if a != 0:
            tau = -b / (2 * a)
            if tau > 1 or tau < 0:
                return abs(e0), True
            return abs(e0 - b * b / (4 * a)), bool(tau > 0 and tau < 1)
        # q(tau) = (1 - tau) e0 + tau e1 + a (tau^2 - tau): |q| <= max(|e0|, |e1|) + |a| / 4
        return max_ends([abs(e0), abs(e1)])[1] + arb(a.abs_upper()) / 4, False

    def _mean_value(self, box: Box):
        """|error| <= |error(centre)| + sum_i |d_i error| r_i over the box, with the gradient of
        the gadget enclosed unit by unit (a unit whose sign changes in the box contributes
        [0, 1] times its slope) and the target's gradient enclosure."""
        x0, x1, y0, y1 = box
        cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
        unit = hull((arb(0), arb(1)))
        gx, gy = arb(0), arb(0)
        corner_pre = [self.net.pre(x, y) for x, y in _corners(box)]
        for k, (sx, sy) in enumerate(self.net.slopes):
            vals = [p[k] for p in corner_pre]
            if all(v <= 0 for v in vals):
                continue
            ind = arb(1) if all(v >= 0 for v in vals) else unit
            gx, gy = gx + ind * sx, gy + ind * sy
        tx, ty = self.target.gradient(box)
        mx, my = (gx - tx).abs_upper(), (gy - ty).abs_upper()
        centre = abs(self.error(cx, cy))
        upper = centre + arb(mx) * rx + arb(my) * ry
        return centre.lower(), upper.upper(), False, 0 if mx * rx >= my * ry else 1


def _split(box: Box, axis: int) -> Tuple[Box, Box]:
    x0, x1, y0, y1 = box
    if axis == 0:
        m = (x0 + x1) / 2
        return (x0, m, y0, y1), (m, x1, y0, y1)
    m = (y0 + y1) / 2
    return (x0, x1, y0, m), (x0, x1, m, y1)


def _box_str(box: Box) -> str:
    x0, x1, y0, y1 = (float(v) for v in box)
    return f"[{x0:.17g}, {x1:.17g}] x [{y0:.17g}, {y1:.17g}]"


def bisect_sup_error(  # noqa: PLR0913 - the gadget, its target and domain, the bound, rtol, budget
    what: str,
    gadget,
    target: Target,
    box: Tuple[float, float, float, float],
    bound: arb,
    *,
    rtol: float = 1e-12,
    budget: Optional[Budget] = None,
) -> Certified:
    """sup over ``box`` of |gadget(u) - target(u)| <= bound (1 + rtol), by branch and bound: a box
    is exact when at most one kink crosses it, else bounded by the mean-value form and split on
    the axis that contributes more; boxes are taken largest upper end first. Certified when every
    leaf's upper end is below the tolerated bound; violated when a point's error is above it;
    else not certified, with the widest box left and its enclosure."""
    with precision():
        return _bisect(what, gadget, target, box, bound, rtol, budget or Budget())


def _bisect(what, gadget, target, box, bound, rtol, budget) -> Certified:  # noqa: PLR0913
    """bisect_sup_error at arb's working precision (the same arguments)."""
    start = time.perf_counter()
    prob = _Problem(gadget, target, bound, rtol)
    limit = Enclosure.of(prob.limit)
    root: Box = tuple(arb(float(v)) for v in box)  # type: ignore[assignment]
    heap, count, tick = [], 0, itertools.count()
    best_lo, best_hi, failed = arb(0), arb(0), None

    def push(b: Box):
        nonlocal count, best_lo, best_hi, failed
        count += 1
        lo, hi, exact, axis = prob.evaluate(b)
        best_lo = lo if lo > best_lo else best_lo
        if hi < prob.limit:
            best_hi = hi if hi > best_hi else best_hi
        elif lo > prob.limit:
            failed = (VIOLATED, b, lo, hi)
        elif exact:
            failed = failed or (NOT_CERTIFIED, b, lo, hi)
            best_hi = hi if hi > best_hi else best_hi
        else:
            heapq.heappush(heap, (-float(hi), next(tick), b, hi, axis))

    push(root)
    while heap and (failed is None or failed[0] != VIOLATED):
        if count >= budget.boxes or time.perf_counter() - start > budget.seconds:
            break
        _, _, b, _, axis = heapq.heappop(heap)
        for child in _split(b, axis):
            push(child)
    return _result(what, prob, limit, (best_lo, best_hi, failed, heap, count), start)


def _result(what, prob, limit, state, start) -> Certified:
    best_lo, best_hi, failed, heap, count = state
    seconds = time.perf_counter() - start
    ratio = (
        f"the bound {float(prob.bound):.17g} tolerated to (1 + {prob.rtol:g}); "
        f"lower end / bound = {float(best_lo / prob.bound):.15g}"
    )
    if failed and failed[0] == VIOLATED:
        _, b, lo, hi = failed
        measured = Enclosure.between(lo, hi if hi > best_hi else best_hi)
        return Certified(what, measured, limit, VIOLATED, count, seconds, f"at {_box_str(b)}")
    if heap or failed:
        b, hi = (failed[1], failed[3]) if failed else (None, None)
        if heap:
            widest = max(heap, key=lambda e: float(e[2][1] - e[2][0] + e[2][3] - e[2][2]))
            b, hi = widest[2], widest[3]
        measured = Enclosure.between(best_lo, max_ends([best_hi, hi] + [e[3] for e in heap])[1])
        detail = f"widest box left {_box_str(b)} with |error| <= {float(hi):.6g}; {ratio}"
        return Certified(what, measured, limit, NOT_CERTIFIED, count, seconds, detail)
    measured = Enclosure.between(best_lo, best_hi)
    return Certified(what, measured, limit, CERTIFIED, count, seconds, ratio)
