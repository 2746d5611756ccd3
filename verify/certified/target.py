"""Prop 26's error at the target certified: sup ||f(u)_l - x||_inf <= eps over the r_x-ball, for
every position i and slot l with t_l = i, by a branch and bound over boxes of R^d: the mean-value
form with an interval Jacobian of the dense ReLU layers per box (docs/derivations/certified.md)."""

from __future__ import annotations

import heapq
import math
import itertools
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import torch
from flint import arb, arb_mat

from qstr.verify.ball import (
    CERTIFIED,
    NOT_CERTIFIED,
    VIOLATED,
    Certified,
    Enclosure,
    arb_matrix,
    exact,
    hull,
    max_ends,
    precision,
)
from qstr.verify.certified.bisection import Budget, relu

WHAT = "Prop 26 target error <= eps"
XBox = Tuple[Tuple[arb, arb], ...]  # (lower, upper) exact ends per coordinate of x


def _relaxed(lo: arb, hi: arb) -> Tuple[arb, arb]:
    """relu(v) in lam v + [0, off] for every v in [lo, hi] with lo < 0 < hi: any lam in [0, 1]
    holds (relu(v) - lam v is -lam v on [lo, 0] and (1 - lam) v on [0, hi]); lam = hi / (hi - lo)
    (the chord, read off as an exact float) makes off = max(-lam lo, (1 - lam) hi) smallest."""
    lam = arb(min(1.0, max(0.0, float((hi / (hi - lo)).mid()))))
    off = max_ends([-lam * lo, (1 - lam) * hi])[1]
    return lam, hull((arb(0), off))


class _Affine:
    """Dense ReLU layers on x alone (arb matrices), propagated as affine forms in x - c with
    ball offsets (each ReLU across 0 replaced by its chord relaxation): an enclosure of the
    outputs over a box that keeps their dependency on x."""

    def __init__(self, layers: List[Tuple[arb_mat, Optional[arb_mat]]]):
        self.layers = layers

    def point(self, x: Sequence[arb]) -> arb_mat:
        """The outputs at one point x."""
        a = arb_mat([[v] for v in x])
        for k, (W, b) in enumerate(self.layers):
            a = W * a if b is None else W * a + b
            if k < len(self.layers) - 1:
                a = arb_mat([[relu(a[i, 0])] for i in range(a.nrows())])
        return a

    def over(self, c: Sequence[arb], radius: Sequence[arb]) -> Tuple[arb_mat, arb_mat]:
        """(C, k): every output over the box c +- radius lies in C (x - c) + k."""
        d = len(c)
        C = arb_mat([[arb(1) if i == j else arb(0) for j in range(d)] for i in range(d)])
        k = arb_mat([[v] for v in c])
        for n, (W, b) in enumerate(self.layers):
            C, k = W * C, (W * k if b is None else W * k + b)
            if n == len(self.layers) - 1:
                return C, k
            rows, cols = [], []
            for i in range(k.nrows()):
                v = _range(C, k, i, radius)
                if v >= 0:
                    lam, off = arb(1), arb(0)
                elif v <= 0:
                    lam, off = arb(0), arb(0)
                else:
                    lam, off = _relaxed(v.lower(), v.upper())
                rows.append([lam * C[i, j] for j in range(d)])
                cols.append([lam * k[i, 0] + off])
            C, k = arb_mat(rows), arb_mat(cols)
        return C, k


class _Split:
    """The dense layers (``MLPWeights``, read exactly) with the first layer's units split into
    those that read x and those that do not: for fixed codes the latter are constants, folded
    into the second layer's bias once per case, so a box costs only the units that read x."""

    def __init__(self, layers, x_cols: slice):
        W1 = layers[0].W.detach().cpu().to(torch.float64)
        reads = W1[:, x_cols].ne(0).any(1)
        xr, cr = reads.nonzero().flatten(), (~reads).nonzero().flatten()
        (L1, L2), rest = layers[:2], layers[2:]
        self.first_x = arb_matrix(W1[xr][:, x_cols])
        self.first = [arb_matrix(W1[rows]) for rows in (xr, cr)]  # on u with x = 0
        self.first_b = [_column(L1.b, rows) for rows in (xr, cr)]
        W2 = L2.W.detach().cpu().to(torch.float64)
        self.second = [arb_matrix(W2[:, rows]) for rows in (xr, cr)]
        self.second_b = _column(L2.b, None)
        self.rest = [
            (arb_matrix(L.W), None if L.b is None else arb_matrix(L.b[:, None])) for L in rest
        ]

    def on_x(self, u0: arb_mat) -> _Affine:
        """The net on x alone for the input u0 (x = 0 there, the codes and boxes as given)."""
        base_x = self.first[0] * u0 + self.first_b[0]
        pre_c = self.first[1] * u0 + self.first_b[1]
        const = arb_mat([[relu(pre_c[i, 0])] for i in range(pre_c.nrows())])
        bias2 = self.second[1] * const + self.second_b
        return _Affine([(self.first_x, base_x), (self.second[0], bias2), *self.rest])


def _column(b: Optional[torch.Tensor], rows) -> arb_mat:
    """A bias (or the rows ``rows`` of it) as an exact column; None: no bias, zeros."""
    if b is None:
        raise ValueError("the transition's first two layers carry biases")
    b = b.detach().cpu().to(torch.float64)
    return arb_matrix((b if rows is None else b[rows])[:, None])


def _range(C: arb_mat, k: arb_mat, i: int, radius: Sequence[arb]) -> arb:
    """Row i of C (x - c) + k over |x_j - c_j| <= radius_j."""
    v = k[i, 0]
    for j, r in enumerate(radius):
        v += C[i, j] * arb(0, 1) * r
    return v


@dataclass
class _Case:
    """Position i in slot l: u = (h = 0, x, omega_i, slots) with slot l = omega_i, the others the
    codebook's box; the net on x alone and the error of its output block l against x."""

    net: _Affine
    rows: slice  # output block l
    d: int

    def _block(self, out: arb_mat) -> range:
        return range(*self.rows.indices(out.nrows()))

    def at(self, x: Sequence[arb]) -> List[arb]:
        """The error f(u)_l - x at a point (exact x): its balls, one per coordinate."""
        out = self.net.point(x)
        return [out[r, 0] - x[k] for k, r in enumerate(self._block(out))]

    def over(self, box: XBox) -> List[arb]:
        """An enclosure of f(u)_l - x over the box: the affine form C (x - c) + k of the outputs
        less x = (x - c) + c, ranged over the box."""
        c = [(lo + hi) / 2 for lo, hi in box]  # exact: dyadic ends
        r = [(hi - lo) / 2 for lo, hi in box]
        C, k = self.net.over(c, r)
        enc = []
        for kk, row in enumerate(self._block(k)):
            v = k[row, 0] - c[kk]
            for j in range(self.d):
                v += (C[row, j] - (1 if j == kk else 0)) * arb(0, 1) * r[j]
            enc.append(v)
        return enc


def _abs_max(values: Sequence[arb]) -> Tuple[arb, arb]:
    """Exact ends of max_k |v_k| over the balls: (largest lower end, largest upper end)."""
    return max_ends([abs(v) for v in values])


def _outside_ball(box: XBox, r2: arb) -> bool:
    """True when every point of the box has ||x||^2 > r_x^2 (the box misses the ball)."""
    near = arb(0)
    for lo, hi in box:
        if lo > 0:
            near += lo * lo
        elif hi < 0:
            near += hi * hi
    return near > r2


def _witness(box: XBox, r2: arb) -> Optional[List[arb]]:
    """A point of the box inside the r_x-ball (exact: the centre, else the point nearest 0), or
    None: a violation is only claimed at a token the statement covers."""
    centre = [(lo + hi) / 2 for lo, hi in box]
    nearest = [lo if lo > 0 else hi if hi < 0 else arb(0) for lo, hi in box]
    for p in (centre, nearest):
        if sum((v * v for v in p), arb(0)) <= r2:
            return p
    return None


def _split(box: XBox) -> Tuple[XBox, XBox]:
    """The box halved across its widest side."""
    axis = max(range(len(box)), key=lambda j: float(box[j][1] - box[j][0]))
    lo, hi = box[axis]
    mid = (lo + hi) / 2
    left, right = list(box), list(box)
    left[axis], right[axis] = (lo, mid), (mid, hi)
    return tuple(left), tuple(right)


def _box_str(box: XBox) -> str:
    return " x ".join(f"[{float(lo):.6g}, {float(hi):.6g}]" for lo, hi in box)


def _cases(tr, omega: torch.Tensor, layers) -> List[Tuple[str, _Case]]:
    d, q, d_h = tr.d, tr.q, tr.d_h
    codes = omega.detach().cpu().to(torch.float64)
    lows, highs = codes.min(0)[0].tolist(), codes.max(0)[0].tolist()
    box = [hull((exact(lo), exact(hi))) for lo, hi in zip(lows, highs, strict=True)]
    net = _Split(layers, slice(d_h, d_h + d))
    out = []
    for i in range(codes.shape[0]):
        own = [exact(v) for v in codes[i].tolist()]
        for l in range(q):
            slots = [v for k in range(q) for v in (own if k == l else box)]
            if d_h + d + len(own) + len(slots) != d_h + tr.D_in:
                raise ValueError("the codes do not fit the transition's layout")
            u0 = arb_mat([[v] for v in [arb(0)] * (d_h + d) + own + slots])
            case = _Case(net.on_x(u0), slice(l * d, (l + 1) * d), d)
            out.append((f"position {i}, slot {l}", case))
    return out


def certified_target_error(
    tr, omega: torch.Tensor, *, layers=None, budget: Optional[Budget] = None
) -> Certified:
    """Prop 26's "||f(u)_l - x||_inf <= eps when t_l = i, for every ||x|| <= r_x" for the
    transition ``tr`` (its guarantee's eps and r_x) on its codes ``omega`` (N, d_e), through the
    dense layers (``tr.layers`` unless ``layers``) in arb: per (i, l), a branch and bound over the
    r_x box (boxes that miss the ball dropped) until every box's upper end is below eps; violated
    when a box centre's error is above it; not certified when the budget runs out (the detail
    names the widest box left and its enclosure). ``boxes`` counts the boxes enclosed."""
    g = getattr(tr, "guarantee", None)
    if g is None:
        raise ValueError("tr must be a Prop 26 transition carrying its guarantee")
    layers = tr.layers if layers is None else layers
    if bool(layers[0].W[:, : tr.d_h].ne(0).any()):
        unknown = Enclosure(0.0, float("inf"))
        return Certified(WHAT, unknown, Enclosure(g.eps, g.eps), NOT_CERTIFIED, 0, 0.0, "reads h")
    budget = budget or Budget()
    start = time.perf_counter()
    with precision():
        eps, r2 = exact(g.eps), exact(g.r_x) ** 2
        root = tuple((exact(-g.r_x), exact(g.r_x)) for _ in range(tr.d))
        state = _Search(eps, budget, start)
        for label, case in _cases(tr, omega, layers):
            state.run(label, case, root, r2)
            if state.failed is not None:
                break
        return state.result(g.eps, start)


class _Search:
    """The branch and bound's running state over every case: boxes enclosed, the largest lower
    and upper ends met, and the first failure (violated, or the budget spent)."""

    def __init__(self, eps: arb, budget: Budget, start: float):
        self.eps, self.budget, self.start = eps, budget, start
        self.count, self.cases = 0, 0
        self.lows: List[arb] = [arb(0)]
        self.highs: List[arb] = [arb(0)]
        self.failed: Optional[Tuple[str, str]] = None

    def _spent(self) -> bool:
        elapsed = time.perf_counter() - self.start
        return self.count >= self.budget.boxes or elapsed >= self.budget.seconds

    def run(self, label: str, case: _Case, root: XBox, r2: arb) -> None:
        heap, tick = [], itertools.count()

        def push(box: XBox) -> None:
            self.count += 1
            lo, hi = _abs_max(case.over(box))
            point = _witness(box, r2)
            point_lo = arb(0) if point is None else _abs_max(case.at(point))[0]
            self.lows.append(point_lo)
            heapq.heappush(heap, (-float(hi), next(tick), box, hi, point_lo))

        push(root)
        while heap:
            _, _, box, hi, point_lo = heapq.heappop(heap)
            if hi < self.eps:  # the largest upper end left (up to the float key): check all
                top = max_ends([hi] + [e[3] for e in heap])[1]
                if top < self.eps:
                    self.highs.append(top)
                    self.cases += 1
                    return
            if point_lo > self.eps:
                where = ", ".join(f"{float(v):.6g}" for v in _witness(box, r2))
                self.failed = (VIOLATED, f"{label}: at x = ({where}) in {_box_str(box)}")
                self.lows.append(point_lo)
                return
            if self._spent():
                heapq.heappush(heap, (-float(hi), next(tick), box, hi, point_lo))
                widest = max(heap, key=lambda e: sum(float(b - a) for a, b in e[2]))
                self.highs.extend(e[3] for e in heap)
                self.failed = (
                    NOT_CERTIFIED,
                    f"{label}: budget spent; widest box left {_box_str(widest[2])} with "
                    f"|error| <= {float(widest[3]):.6g}",
                )
                return
            for child in _split(box):
                if not _outside_ball(child, r2):
                    push(child)

    def result(self, eps: float, start: float) -> Certified:
        lo = max_ends(self.lows)[0]
        hi = max_ends(self.highs)[1]
        status, detail = self.failed or (CERTIFIED, f"{self.cases} (position, slot) cases")
        if status == CERTIFIED:
            measured = Enclosure.between(lo, hi)
        else:  # cases left unsearched: the sup is not bounded above
            measured = Enclosure(Enclosure.between(lo, lo).lower, math.inf)
        bound = Enclosure(eps, eps)
        seconds = time.perf_counter() - start
        return Certified(WHAT, measured, bound, status, self.count, seconds, detail)
