"""The recurrence of Appendix E's bidirectional GRU over all N positions of G independent groups
(members x directions) with a hand-written backward through time (docs/experiments.md, "The
GRU step").

Per position s: gi_s = z_s W_ih^T + b_ih and gh_s = h_{s-1} W_hh^T + b_hh (one batched product
each over the groups, the input gates never stored for all positions), then one cell
h_s = n + z (h_{s-1} - n), gate order r, z, n as in torch.nn.GRU. The backward runs the cell
backward per position and takes the weight gradients from all positions at once:
dW_hh^T = sum_s h_{s-1}^T dgh_s and dW_ih^T = sum_s z_s^T dgi_s are ONE batched product each,
of (G, ., N B) by (G, N B, 3H). Autograd through the loop kept one W_hh gradient per position.

Memory traffic (benchmarks/gpu_notes.md, "The GRU step"): the biases are broadcast into a
contiguous (G, B, 3H) block once per forward, so each product's bias copy is a straight copy;
the states and the per-position gate gradients are collected and stacked once, not copied one by
one into strided slices.
"""

from __future__ import annotations

from typing import Tuple

import torch
from torch.autograd.function import once_differentiable


def _cell(gi: torch.Tensor, gh: torch.Tensor, h: torch.Tensor) -> Tuple[torch.Tensor, tuple]:
    """One GRU step from gates ``gi``, ``gh`` ((GB, 3H), biases included): h' = n + z (h - n),
    and the workspace (r, z, n, gh, h) its backward reads: the tensors themselves, never copied."""
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (h - n), (r, z, n, gh, h)


def _cell_backward(dh: torch.Tensor, ws: tuple):
    """The backward of :func:`_cell` given dL/dh' (G, B, H): dL/dh through the direct path z h,
    and dL/dgi, dL/dgh (G, B, 3H)."""
    G, B, H = dh.shape
    r, z, n, gh, h = (t.view(G, B, -1) for t in ws)
    h_n = gh[..., 2 * H :]
    dgi = dh.new_empty(G, B, 3 * H)
    d_r, d_z, d_n = dgi[..., :H], dgi[..., H : 2 * H], dgi[..., 2 * H :]
    torch.mul(dh * (h - n) * z, 1 - z, out=d_z)
    torch.mul(dh * (1 - z), 1 - n * n, out=d_n)
    torch.mul(d_n * h_n * r, 1 - r, out=d_r)
    dgh = torch.cat((dgi[..., : 2 * H], d_n * r), dim=-1)
    return dh * z, dgi, dgh


def _cell_fused(gi, gh, h):
    """:func:`_cell` as torch's fused CUDA kernel (the one nn.GRUCell uses), own workspace."""
    return torch.ops.aten._thnn_fused_gru_cell(gi, gh, h)


def _cell_fused_backward(dh, ws):
    G, B, H = dh.shape
    dgi, dgh, dhx, _, _ = torch.ops.aten._thnn_fused_gru_cell_backward(
        dh.reshape(G * B, H), ws, False
    )
    return dhx.view(G, B, H), dgi.view(G, B, 3 * H), dgh.view(G, B, 3 * H)


_CELLS = {False: (_cell, _cell_backward), True: (_cell_fused, _cell_fused_backward)}  # by is_cuda


class _Scan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, WihT, bih, WhhT, bhh, keep: bool):
        N, G, B, _ = z.shape
        H = WhhT.shape[1]
        cell, ctx.back = _CELLS[z.is_cuda]
        h = z.new_zeros(G * B, H)
        states = [h.view(G, B, H)]  # states[s] is the state entering position s
        bih, bhh = (b.expand(G, B, 3 * H).contiguous() for b in (bih, bhh))
        ws = []
        for s in range(N):
            gi = torch.baddbmm(bih, z[s], WihT).view(G * B, 3 * H)
            if s:
                gh = torch.baddbmm(bhh, h.view(G, B, H), WhhT).view(G * B, 3 * H)
            else:  # h = 0: the product is exactly b_hh
                gh = bhh.view(G * B, 3 * H)
            h, w = cell(gi, gh, h)
            if keep:  # the workspaces only a backward reads (CPU: 5 tensors, CUDA: one)
                ws.extend(w if isinstance(w, tuple) else (w,))
            states.append(h.view(G, B, H))
        hs = torch.stack(states, 1)  # (G, N + 1, B, H): one stacking copy, not one per position
        ctx.per = len(ws) // N if ws else 0  # workspace tensors per position
        ctx.save_for_backward(z, WihT, hs, WhhT, *ws)
        return hs

    @staticmethod
    @once_differentiable
    def backward(ctx, dhs):
        z, WihT, hs, WhhT, *ws = ctx.saved_tensors
        G, N1, B, H = hs.shape
        N, D = N1 - 1, z.shape[-1]
        Whh = WhhT.transpose(1, 2)
        dgi, dgh = [None] * N, [None] * N
        dh = dhs.new_zeros(G, B, H)
        for s in reversed(range(N)):
            dh = dh + dhs[:, s + 1]
            w = ws[s] if ctx.per == 1 else tuple(ws[ctx.per * s : ctx.per * (s + 1)])
            dhx, dgi[s], dgh[s] = ctx.back(dh, w)
            if s:  # the state before position 0 is the constant 0: no gradient to carry
                dh = torch.baddbmm(dhx, dgh[s], Whh)
        # laid out (G, N B, 3H) for the products over all positions: one stacking copy each
        dgi, dgh = (torch.stack(g, 1).view(G, N * B, 3 * H) for g in (dgi, dgh))
        zg = z.transpose(0, 1).reshape(G, N * B, D)  # (G, N B, D): one copy of the small input
        # dW = dg^T x, written in the layout of W (G, 3H, .) and handed back as the view W^T:
        # the callers' W_ih, W_hh are (3H, .) blocks, so their gradients need no transposing copy
        dWihT = torch.bmm(dgi.transpose(1, 2), zg).transpose(1, 2)
        dWhhT = torch.bmm(dgh.transpose(1, 2), hs[:, :N].reshape(G, N * B, H)).transpose(1, 2)
        dz = None  # the encoded tokens are data in training: their gradient only when asked
        if ctx.needs_input_grad[0]:
            dz = torch.bmm(dgi, WihT.transpose(1, 2)).view(G, N, B, D).transpose(0, 1)
        db = (dgi.sum(dim=1, keepdim=True), dgh.sum(dim=1, keepdim=True))
        return dz, dWihT, db[0], dWhhT, db[1], None


def gru_scan(z, WihT, bih, WhhT, bhh) -> torch.Tensor:
    """States (G, N + 1, B, H) of G independent GRUs (Appendix E's RNN, one per member and
    direction) from h = 0, hs[:, s + 1] after position s.

    ``z`` (N, G, B, D): each group's inputs by position; ``WihT`` (G, D, 3H), ``WhhT`` (G, H, 3H):
    each group's W_ih and W_hh transposed; ``bih``, ``bhh`` (G, 1, 3H)."""
    if z.dim() != 4 or WihT.shape[:2] != (z.shape[1], z.shape[3]) or WhhT.dim() != 3:
        raise ValueError(
            f"gru_scan: z (N, G, B, D), WihT (G, D, 3H), WhhT (G, H, 3H); got "
            f"{tuple(z.shape)}, {tuple(WihT.shape)}, {tuple(WhhT.shape)}"
        )
    inputs = (z, WihT, bih, WhhT, bhh)
    keep = torch.is_grad_enabled() and any(v.requires_grad for v in inputs)
    return _Scan.apply(*inputs, keep)
