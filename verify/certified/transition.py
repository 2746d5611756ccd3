"""Prop 26 certified: the transition's outputs are exactly 0 at every slot whose target is not the
position, for every pair of codewords and every token in the box around the r_x-ball, by interval
evaluation of the dense layers in ball arithmetic (docs/derivations/certified.md)."""

from __future__ import annotations

import itertools
import time
from typing import List, Optional, Tuple

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
    precision,
)
from qstr.verify.certified.bisection import relu

WHAT = "Prop 26 transition = 0 exactly off target"


class _Layers:
    """Dense ReLU layers (``MLPWeights``) read exactly; evaluated on a column of balls."""

    def __init__(self, layers):
        self.layers = [
            (arb_matrix(L.W), None if L.b is None else arb_matrix(L.b[:, None])) for L in layers
        ]

    def __call__(self, u: arb_mat) -> List[arb]:
        a = u
        for k, (W, b) in enumerate(self.layers):
            pre = W * a if b is None else W * a + b
            last = k == len(self.layers) - 1
            a = pre if last else arb_mat([[relu(pre[i, 0])] for i in range(pre.nrows())])
        return [a[i, 0] for i in range(a.nrows())]


def _is_zero(v: arb) -> bool:
    return v == 0  # a ball that is the point 0


def certified_transition_zeros(tr, omega: torch.Tensor, *, layers=None) -> Certified:
    """Prop 26's "f(u)_l == 0 exactly when t_l != i" for the transition ``tr`` and its codes
    ``omega`` (N, d_e): for every pair i != t and slot l, u = (h, z) with x anywhere in
    [-r_x, r_x]^d (the r_x-ball's box), pos = omega_i, slot l = omega_t and the other slots
    anywhere in the codebook's box, through the dense layers (``tr.layers`` unless ``layers``)
    in arb. Certified when every such output is the point 0; violated when a corner of the x box
    gives a nonzero output; the layers must not read h (else not certified)."""
    start = time.perf_counter()
    g = getattr(tr, "guarantee", None)
    if g is None:
        raise ValueError("tr must be a Prop 26 transition carrying its guarantee")
    layers = tr.layers if layers is None else layers
    d, q, d_h = tr.d, tr.q, tr.d_h
    if bool(layers[0].W[:, :d_h].ne(0).any()):
        return _result(NOT_CERTIFIED, 0, start, "the first layer reads h")
    codes = omega.detach().cpu().to(torch.float64)
    N = codes.shape[0]
    if codes.shape[1] != tr.d_e:
        raise ValueError("the codes do not fit the transition's layout")
    with precision():
        lows, highs = codes.min(0)[0].tolist(), codes.max(0)[0].tolist()
        box = [hull((exact(lo), exact(hi))) for lo, hi in zip(lows, highs, strict=True)]
        x_box = [hull((exact(-g.r_x), exact(g.r_x)))] * d
        count = 0
        for l in range(q):
            slot = _Slot(tr, layers, l, (x_box, box))
            for i in range(N):
                fixed = slot.at_position(codes[i])
                for t in range(N):
                    if t == i:
                        continue
                    count += 1
                    out = slot.outputs(fixed, codes[t])[l * d : (l + 1) * d]
                    if all(_is_zero(v) for v in out):
                        continue
                    net = _Layers(layers)
                    witness = _corner_witness(tr, net, (codes[i], codes[t], box), l, g.r_x)
                    where = f"pair (i, t) = ({i}, {t}), slot {l}"
                    if witness is not None:
                        text, value = witness
                        found = Enclosure.of(value)
                        return _result(VIOLATED, count, start, f"{where}: {text}", found)
                    return _result(NOT_CERTIFIED, count, start, f"{where}: {out[0]} is not 0")
    return _result(CERTIFIED, count, start, f"N = {N}, q = {q}: every pair i != t, every slot")


class _Slot:
    """The dense layers on the inputs whose target code sits in slot l, folded by what each unit
    reads: the first layer's units that read slot l's columns change with the target t, the others
    only with the position i (the other slots are their box, x its box, h zero); of the second
    layer only the rows that read the former change with t. So a pair (i, t) costs those rows'
    product, and each position one product; every operation is an arb enclosure, as before."""

    def __init__(self, tr, layers, l: int, boxes):
        x_box, box = boxes
        W1, b1 = _float64(layers[0])
        W2, b2 = _float64(layers[1])
        lay, off = tr.layout, tr.d_h
        target = _columns(lay.slot(l), off)
        self.pos_cols = _columns(lay["pos"], off)
        reads = W1[:, target].ne(0).any(1)
        T, C = reads.nonzero().flatten(), (~reads).nonzero().flatten()
        rows = W2[:, T].ne(0).any(1)
        R, O = rows.nonzero().flatten(), (~rows).nonzero().flatten()
        others = [k for k in range(tr.q) if k != l]
        fixed_cols = [_columns(lay["x"], off)] + [_columns(lay.slot(k), off) for k in others]
        fixed_vals = list(x_box) + box * len(others)
        fixed = torch.cat(fixed_cols)
        self.T_base = arb_matrix(W1[T][:, fixed]) * _col(fixed_vals) + arb_matrix(b1[T, None])
        self.T_pos, self.T_target = (
            arb_matrix(W1[T][:, self.pos_cols]),
            arb_matrix(W1[T][:, target]),
        )
        self.C_base = arb_matrix(W1[C][:, fixed]) * _col(fixed_vals) + arb_matrix(b1[C, None])
        self.C_pos = arb_matrix(W1[C][:, self.pos_cols])
        self.W2_RT = arb_matrix(W2[R][:, T])
        self.W2_RC, self.b2_R = arb_matrix(W2[R][:, C]), arb_matrix(b2[R, None])
        self.W2_OC, self.b2_O = arb_matrix(W2[O][:, C]), arb_matrix(b2[O, None])
        W3 = layers[2].W.detach().cpu().to(torch.float64)[:, torch.cat([R, O])]
        rest = [(W3, layers[2].b)] + [(L.W, L.b) for L in layers[3:]]
        self.rest = [
            (arb_matrix(W), None if b is None else arb_matrix(b[:, None])) for W, b in rest
        ]

    def at_position(self, pos: torch.Tensor):
        """What position i fixes: slot-l units' partial sums and the rows that do not read them."""
        p = _col([exact(v) for v in pos.tolist()])
        a_C = _relu(self.C_base + self.C_pos * p)
        return (
            self.T_base + self.T_pos * p,
            self.W2_RC * a_C + self.b2_R,
            _relu(self.W2_OC * a_C + self.b2_O),
        )

    def outputs(self, fixed, target: torch.Tensor) -> List[arb]:
        """The transition's outputs for position i (``fixed``) and the target code t."""
        T_partial, R_partial, a_O = fixed
        a_T = _relu(T_partial + self.T_target * _col([exact(v) for v in target.tolist()]))
        a = _stack(_relu(self.W2_RT * a_T + R_partial), a_O)
        for k, (W, b) in enumerate(self.rest):
            a = W * a if b is None else W * a + b
            if k < len(self.rest) - 1:
                a = _relu(a)
        return [a[i, 0] for i in range(a.nrows())]


def _float64(layer) -> Tuple[torch.Tensor, torch.Tensor]:
    """(W, b) of a dense layer as float64 CPU tensors (the first two layers carry biases)."""
    if layer.b is None:
        raise ValueError("the transition's first two layers carry biases")
    return tuple(t.detach().cpu().to(torch.float64) for t in (layer.W, layer.b))


def _columns(block: slice, off: int) -> torch.Tensor:
    """The columns of u = (h, z) of a block of z's layout."""
    return torch.arange(block.start, block.stop) + off


def _col(values) -> arb_mat:
    """The balls as a column (n by 1, also for n = 0)."""
    values = list(values)
    out = arb_mat(len(values), 1)
    for i, v in enumerate(values):
        out[i, 0] = v
    return out


def _relu(m: arb_mat) -> arb_mat:
    return _col(relu(m[i, 0]) for i in range(m.nrows()))


def _stack(top: arb_mat, bottom: arb_mat) -> arb_mat:
    return _col(
        [top[i, 0] for i in range(top.nrows())] + [bottom[i, 0] for i in range(bottom.nrows())]
    )


def _input(tr, parts, l: int, q: int) -> arb_mat:
    """u = (h = 0, x, pos, slot_0..slot_{q-1}) with slot l the target's code, the others the
    codebook's box."""
    x, pos, target, box = parts
    slots = [[exact(v) for v in target] if k == l else box for k in range(q)]
    col = [arb(0)] * tr.d_h + list(x) + [exact(v) for v in pos] + [v for s in slots for v in s]
    if len(col) != tr.d_h + tr.D_in:
        raise ValueError("the codes do not fit the transition's layout")
    return arb_mat([[v] for v in col])


def _corner_witness(tr, net, codes, l: int, r_x: float) -> Optional[Tuple[str, arb]]:
    """A corner of the x box (other slots at the target's code) whose output is surely nonzero."""
    pos, target, _ = codes
    d = tr.d
    for signs in itertools.product((-1.0, 1.0), repeat=d):
        x = [exact(s * r_x) for s in signs]
        u = _input(tr, (x, pos, target, [exact(v) for v in target]), l, tr.q)
        out = net(u)[l * d : (l + 1) * d]
        nonzero = [abs(v) for v in out if not v.contains(0)]
        if nonzero:
            value = max(nonzero, key=lambda v: float(v.mid()))
            return f"x = {signs} r_x gives |f(u)| = {float(value.mid()):.3g}", value
    return None


def _result(status, count, start, detail, measured: Optional[Enclosure] = None) -> Certified:
    """The largest |f(u)_l| off target: the point 0 when certified, the witness's enclosure when
    violated, unknown (0 to inf) otherwise; the bound is the point 0."""
    zero = Enclosure(0.0, 0.0)
    if measured is None:
        measured = zero if status == CERTIFIED else Enclosure(0.0, float("inf"))
    return Certified(WHAT, measured, zero, status, count, time.perf_counter() - start, detail)
