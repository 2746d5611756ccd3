"""The GRU recurrence h_s = GRU(gi_s, W_hh h_{s-1} + b_hh) over all N positions of many
independent groups, with a hand-written backward through time (docs/experiments.md, "The GRU
step"): one kernel pair per position, and dW_hh as ONE product over all positions and prompts.

Autograd through a loop of N cells keeps a separate gradient of W_hh for every position
(G x H x 3H floats each) and adds them up; here dW_hh^T = sum_s h_{s-1}^T dgh_s is a single
batched product of (G, H, N B) by (G, N B, 3H). Gate order r, z, n, as in torch.nn.GRU.
"""
from __future__ import annotations

from typing import Tuple

import torch
from torch.autograd.function import once_differentiable


def _cell(gi: torch.Tensor, gh: torch.Tensor, h: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """One GRU step from gates ``gi``, ``gh`` ((GB, 3H), biases included): h' = n + z (h - n),
    and the workspace (r, z, n, gh_n, h) its backward reads."""
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (h - n), torch.cat([r, z, n, h_n, h], 1)


def _cell_backward(dh: torch.Tensor, ws: torch.Tensor):
    """(dgi, dgh, dh through the direct path z h) of :func:`_cell` given dL/dh'."""
    r, z, n, h_n, h = ws.chunk(5, 1)
    d_z = dh * (h - n) * z * (1 - z)
    d_n = dh * (1 - z) * (1 - n * n)
    d_r = d_n * h_n * r * (1 - r)
    return torch.cat([d_r, d_z, d_n], 1), torch.cat([d_r, d_z, d_n * r], 1), dh * z


def _cell_fused(gi, gh, h):
    """:func:`_cell` as torch's fused CUDA kernel (the one nn.GRUCell uses), own workspace."""
    return torch.ops.aten._thnn_fused_gru_cell(gi, gh, h)


def _cell_fused_backward(dh, ws):
    dgi, dgh, dhx, _, _ = torch.ops.aten._thnn_fused_gru_cell_backward(dh, ws, False)
    return dgi, dgh, dhx


class _Scan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gi, WhhT, bhh, keep: bool):
        N, GB, H3 = gi.shape
        G, H = WhhT.shape[0], WhhT.shape[1]
        B = GB // G
        cell = _cell_fused if gi.is_cuda else _cell
        hs = gi.new_empty(G, N + 1, B, H)  # hs[:, s] is the state entering position s
        hs[:, 0].zero_()
        h = gi.new_zeros(GB, H)
        ws = []
        for s in range(N):
            gh = torch.baddbmm(bhh, h.view(G, B, H), WhhT).view(GB, H3)
            h, w = cell(gi[s], gh, h)
            if keep:  # the workspaces only a backward reads
                ws.append(w)
            hs[:, s + 1] = h.view(G, B, H)
        ctx.save_for_backward(hs, WhhT, *ws)
        return hs

    @staticmethod
    @once_differentiable
    def backward(ctx, dhs):
        hs, WhhT, *ws = ctx.saved_tensors
        G, N1, B, H = hs.shape
        N = N1 - 1
        back = _cell_fused_backward if dhs.is_cuda else _cell_backward
        Whh = WhhT.transpose(1, 2)
        dgi = dhs.new_empty(N, G * B, 3 * H)
        dgh = dhs.new_empty(G, N, B, 3 * H)  # laid out for the one product below
        dh = dhs.new_zeros(G, B, H)
        for s in reversed(range(N)):
            dh = dh + dhs[:, s + 1]
            dgi_s, dgh_s, dhx = back(dh.reshape(G * B, H), ws[s])
            dgi[s] = dgi_s
            dgh[:, s] = dgh_s.view(G, B, 3 * H)
            dh = torch.baddbmm(dhx.view(G, B, H), dgh[:, s], Whh)
        dWhhT = torch.bmm(hs[:, :N].reshape(G, N * B, H).transpose(1, 2), dgh.view(G, N * B, 3 * H))
        return dgi, dWhhT, dgh.sum(dim=(1, 2)).unsqueeze(1), None


def gru_scan(gi: torch.Tensor, WhhT: torch.Tensor, bhh: torch.Tensor) -> torch.Tensor:
    """States (G, N + 1, B, H) of G independent GRUs from h = 0, hs[:, s + 1] after position s.

    ``gi`` (N, G B, 3H): input gates of every position, bias included, rows grouped by G;
    ``WhhT`` (G, H, 3H): each group's W_hh transposed; ``bhh`` (G, 1, 3H)."""
    if gi.dim() != 3 or WhhT.dim() != 3 or gi.shape[1] % WhhT.shape[0]:
        raise ValueError(f"gru_scan: gi (N, G B, 3H), WhhT (G, H, 3H); got {tuple(gi.shape)}, "
                         f"{tuple(WhhT.shape)}")
    keep = torch.is_grad_enabled() and any(v.requires_grad for v in (gi, WhhT, bhh))
    return _Scan.apply(gi, WhhT, bhh, keep)


def gru_scan_reference(gi: torch.Tensor, WhhT: torch.Tensor, bhh: torch.Tensor) -> torch.Tensor:
    """:func:`gru_scan` as a plain loop of cells differentiated by autograd (the eager reference
    the hand-written backward is checked against, in float64)."""
    N, GB, H3 = gi.shape
    G, H = WhhT.shape[0], WhhT.shape[1]
    h = gi.new_zeros(GB, H)
    outs = [h.view(G, 1, -1, H)]
    for s in range(N):
        gh = torch.baddbmm(bhh, h.view(G, -1, H), WhhT).view(GB, H3)
        h = _cell(gi[s], gh, h)[0]
        outs.append(h.view(G, 1, -1, H))
    return torch.cat(outs, 1)
