"""Lemma 11 certified: the worst error over every prompt in the r_x-ball, for every target tuple,
enclosed in ball arithmetic from the built module's weights (docs/derivations/certified.md)."""

from __future__ import annotations

import itertools
import time
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from flint import arb

from qstr.verify.ball import (
    Certified,
    Enclosure,
    arb_matrix,
    exact,
    exp,
    matmul,
    precision,
    rows_of,
    softmax_row,
    sqrt,
    sqrt_nonneg,
    verdict,
)

WHAT = "Lemma 11 worst case over every target tuple <= bound"
UNKNOWN = Enclosure(float("-inf"), float("inf"))


def lemma11_bound_ball(guarantee) -> arb:
    """Lemma 11's bound Lip sqrt(H) 2 delta r_x, delta = (N-1) e^{-Delta} / (1 + (N-1) e^{-Delta}),
    Delta = alpha c^2 (1 - mu), enclosed at the guarantee's recorded (float) fields."""
    g = guarantee
    gap = exact(g.alpha) * exact(g.c) ** 2 * (1 - exact(g.mu))
    X = (g.N - 1) * exp(-gap)
    return exact(g.lipschitz) * sqrt(arb(g.H)) * 2 * (X / (1 + X)) * exact(g.r_x)


def _score_blocks(cons) -> Tuple[List, Optional[str]]:
    """Per head h, the (d_e, d_e) block W_QK[h][slot(slots[h]), pos] as a tensor; or a reason the
    scores depend on more than the query's target and the key's position."""
    W, lay = cons.model.W_QK.detach(), cons.layout
    blocks = []
    for h, (slot,) in enumerate(cons.head_slots):
        rows, cols = lay.slot(slot), lay["pos"]
        rest = W[h].clone()
        rest[rows, cols] = 0
        if bool(rest.ne(0).any()):
            return [], f"W_QK[{h}] has weights outside its (slot{slot}, pos) block"
        blocks.append(W[h][rows, cols])
    return blocks, None


def _net_gradient(cons) -> Tuple[Optional[List[List[arb]]], Optional[str]]:
    """The output net's gradient on the heads' x blocks, w_h (d entries each, exact sums), when
    the net is made of units (W_k, b_k, a_k) = -(W_k', b_k', a_k') (relu(s) - relu(-s) = s) and
    reads only the x blocks; else a reason."""
    m = cons.model
    W, b, a = m.W.detach(), m.b.detach(), m.a.detach()
    if a.ndim != 1:
        return None, "the output net has more than one output"
    D_e, x = cons.layout.dim, cons.layout["x"]
    reads = torch.zeros(W.shape[1], dtype=torch.bool)
    for h in range(len(cons.head_slots)):
        reads[h * D_e + x.start : h * D_e + x.stop] = True
    if bool(W[:, ~reads].ne(0).any()):
        return None, "the output net reads more than the heads' x blocks"
    units = torch.cat([W, b[:, None], a[:, None]], dim=1).cpu()
    free, pairs = set(range(len(units))), []
    for i in range(len(units)):
        if i not in free:
            continue
        free.discard(i)
        j = next((j for j in sorted(free) if torch.equal(units[j], -units[i])), None)
        if j is None:
            return None, f"output unit {i} has no opposite unit: the net is not affine"
        free.discard(j)
        pairs.append(i)
    grad = [sum((exact(a[i]) * exact(W[i, k]) for i in pairs), arb(0)) for k in range(W.shape[1])]
    return [grad[h * D_e + x.start : h * D_e + x.stop] for h in range(len(cons.head_slots))], None


def _deficit_rows(cons, blocks) -> List[List[List[arb]]]:
    """D_h[t][j] = softmax_j(c omega_t^T B_h c omega_j) - 1[j = t], per head, enclosed."""
    code = arb_matrix(cons.omega) * exact(cons.c)
    rows = []
    for B in blocks:
        S = rows_of(matmul(matmul(code, arb_matrix(B)), code.transpose()))
        D = [softmax_row(s) for s in S]
        for t in range(len(D)):
            D[t][t] -= 1
        rows.append(D)
    return rows


def _worst_over_tuples(D, Gw: Sequence[Sequence[arb]], r_x: arb):
    """max over tuples (t_1..t_H) of r_x sum_j sqrt(sum_{h,k} Gw[h,k] D_h[t_h][j] D_k[t_k][j]):
    (the lower and upper ends of the max, the tuple with the largest upper end, tuples). The
    prefix (t_1..t_{H-1}) gives Q_j and the linear term L_j; every last index t at once adds
    L_j D[t][j] + Gw[H,H] D[t][j]^2 (numpy arrays of balls)."""
    H, N = len(D), len(D[0])
    last = H - 1
    Dl = np.array(D[last], dtype=object)
    C = Gw[last][last] * Dl * Dl
    best_lo, best_hi, best_t = None, None, None
    for prefix in itertools.product(range(N), repeat=last):
        cols = [np.array(D[h][t], dtype=object) for h, t in enumerate(prefix)]
        Q = sum((Gw[h][k] * cols[h] * cols[k] for h in range(last) for k in range(last)), arb(0))
        L = 2 * sum((Gw[h][last] * cols[h] for h in range(last)), arb(0))
        quad = Q + L * Dl + C  # (N last indices, N keys)
        vals = np.array([x.sqrt() for x in quad.flat], dtype=object).reshape(N, N).sum(axis=1)
        for t, val in enumerate(vals):
            if not val.is_finite():  # a quadratic form's ball reached below 0: cut at 0
                val = sum((sqrt_nonneg(x) for x in quad[t]), arb(0))
            lo, hi = r_x * val.lower(), r_x * val.upper()
            if best_lo is None or lo > best_lo:
                best_lo = lo
            if best_hi is None or hi > best_hi:
                best_hi, best_t = hi, (*prefix, t)
    return best_lo, best_hi, best_t, N**H


def certified_lemma11(cons, *, r_x: Optional[float] = None, rtol: float = 0.0) -> Certified:
    """Lemma 11's worst error over every prompt with ||x_j|| <= r_x, over all N^H target tuples
    (the sup over tokens in closed form, r_x sum_j ||v_j||; docs/derivations/lemma11.md), enclosed
    from the built module's weights read exactly, against the guarantee's bound in arb, widened
    by (1 + ``rtol``) where the bound is attained (star codes)."""
    start = time.perf_counter()
    g = getattr(cons, "guarantee", None)
    if g is None or getattr(cons, "kind", None) != "lemma11":
        raise ValueError("cons must be a Lemma 11 construction carrying its guarantee")
    r_x = g.r_x if r_x is None else r_x
    with precision():
        if not 0 <= rtol < 1:
            raise ValueError(f"rtol must be in [0, 1), got {rtol}")
        bound = Enclosure.of(lemma11_bound_ball(g) * (1 + exact(rtol)))
        blocks, why = _score_blocks(cons)
        grad, why = (None, why) if why else _net_gradient(cons)
        if why:
            return Certified(WHAT, UNKNOWN, bound, "not certified", 0, _since(start), why)
        D = _deficit_rows(cons, blocks)
        Gw = [[sum((u * v for u, v in zip(a, b, strict=True)), arb(0)) for b in grad] for a in grad]
        lo, hi, t, count = _worst_over_tuples(D, Gw, exact(r_x))
        measured = Enclosure.between(lo, hi)
    detail = f"N = {cons.N}, H = {len(blocks)}, largest at targets {t}"
    if rtol:
        detail += f"; the bound tolerated to (1 + {rtol:g})"
    return Certified(WHAT, measured, bound, verdict(measured, bound), count, _since(start), detail)


def _since(start: float) -> float:
    return time.perf_counter() - start
