"""One linear layer per member of a stack (Appendix E's FFNs, batched), h W^T + b, whose weight
gradient comes out in the weight's own layout (docs/experiments.md, "Weight gradients in the
weights' layout").

einsum("mbi,moi->mbo", h, W) computes h W^T as a batched product and differentiates it as
dW^T = h^T dy: a (M, I, O) tensor handed back as the transposed view of a (M, O, I) gradient,
which the fused optimiser must first copy (a transposing read and write of every weight). Here
dW = dy^T h is ONE batched product written as (M, O, I) directly; the arithmetic is the same.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch.autograd.function import once_differentiable


class _StackedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, W, b):
        ctx.save_for_backward(h, W)
        ctx.has_bias = b is not None
        y = torch.bmm(h, W.transpose(1, 2))
        return y if b is None else y.add_(b[:, None, :])

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        h, W = ctx.saved_tensors
        dh = torch.bmm(dy, W) if ctx.needs_input_grad[0] else None
        dW = torch.bmm(dy.transpose(1, 2), h) if ctx.needs_input_grad[1] else None
        db = dy.sum(1) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return dh, dW, db


def stacked_linear(h: torch.Tensor, W: torch.Tensor, b: Optional[torch.Tensor] = None):
    """h (M, B, I), W (M, O, I), b (M, O) or None -> (M, B, O): member m's h[m] W[m]^T + b[m],
    the value einsum("mbi,moi->mbo", h, W) + b gives, with dL/dW contiguous like W."""
    if h.dim() != 3 or W.dim() != 3 or h.shape[0] != W.shape[0] or h.shape[2] != W.shape[2]:
        raise ValueError(
            f"stacked_linear: h (M, B, I), W (M, O, I); got {tuple(h.shape)}, {tuple(W.shape)}"
        )
    if b is not None and b.shape != W.shape[:2]:
        raise ValueError(f"stacked_linear: b must be (M, O) = {tuple(W.shape[:2])}")
    return _StackedLinear.apply(h, W, b)
