"""Token encodings z_i = (x_i, c omega_i, c omega_{t_i1}, ..., c omega_{t_iq}) of the Transformer
(Appendix A.1) and the RNN (Appendix B.1, c = 1), shape (B, N, d + (q + 1) d_e), laid out by
``layout.token_layout``."""

from __future__ import annotations

import math
from typing import Optional

import torch

from qstr.constructions import validate
from qstr.constructions.layout import Layout, slot_name, token_layout


def default_prefactor(d: int, q: int) -> float:
    """c = sqrt(d / q), the Appendix A.1 prefactor of the positional part: it makes the token part
    and the code part about equal in norm (the published experiment code uses c = 1)."""
    return math.sqrt(d / q)


def encode(
    x: torch.Tensor, t: torch.Tensor, omega: torch.Tensor, *, c: float = 1.0
) -> torch.Tensor:
    """z_i = (x_i, c omega_i, c omega_{t_i1}, ..., c omega_{t_iq}) for a batch of prompts.

    x: (B, N, d) floating; t: (B, N, q) long with entries in [0, N); omega: (N', d_e) with
    N' >= N rows (row j is the code of position j), same dtype and device as x.
    """
    return _encoded(x, t, omega, c, _check_inputs(x, t, omega))


def _encoded(x, t, omega, c, dims: tuple) -> torch.Tensor:
    """:func:`encode` of inputs already checked (``dims``: what :func:`_check_inputs` returned)."""
    B, N, d, q, d_e = dims
    c = validate.positive_float("c", c)
    layout = token_layout(d, q, d_e)
    codes = c * omega[:N]
    parts = {"x": x, "pos": codes.expand(B, N, d_e)}
    for k in range(q):
        parts[slot_name(k)] = codes[t[..., k]]
    return layout.join(parts)


def transformer_encoding(
    x: torch.Tensor, t: torch.Tensor, omega: torch.Tensor, *, c: Optional[float] = None
) -> torch.Tensor:
    """Transformer encoding of Appendix A.1 (c = sqrt(d/q) unless given); x, t and omega as
    :func:`encode` takes them (tensors, checked before their shapes give the default c)."""
    dims = _check_inputs(x, t, omega)
    return _encoded(x, t, omega, default_prefactor(dims[2], dims[3]) if c is None else c, dims)


def rnn_encoding(x: torch.Tensor, t: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """RNN encoding of Appendix B.1: the same blocks with no prefactor."""
    return encode(x, t, omega, c=1.0)


def layout_of(z: torch.Tensor, d: int, q: int) -> Layout:
    """The layout of an encoded batch with token dimension d and sparsity q (infers d_e)."""
    rest = z.shape[-1] - d
    if rest <= 0 or rest % (q + 1):
        raise ValueError(f"last axis {z.shape[-1]} is not d + (q + 1) d_e for d = {d}, q = {q}")
    return token_layout(d, q, rest // (q + 1))


def _check_inputs(x, t, omega):
    validate.finite_tensor("x", x)
    validate.shape("x", x, (None, None, None))
    B, N, d = x.shape
    if not isinstance(t, torch.Tensor) or t.dtype != torch.long:
        raise ValueError("t must be a torch.long tensor of shape (B, N, q)")
    validate.shape("t", t, (B, N, None))
    validate.finite_tensor("omega", omega)
    validate.shape("omega", omega, (None, None))
    if omega.shape[0] < N:
        raise ValueError(f"omega has {omega.shape[0]} rows but the prompts have N = {N} positions")
    if omega.dtype != x.dtype or omega.device != x.device:
        raise ValueError(
            f"omega ({omega.dtype}, {omega.device}) must match x ({x.dtype}, {x.device}); "
            "convert it explicitly"
        )
    q = t.shape[-1]
    if q < 1 or (t.numel() and (int(t.min()) < 0 or int(t.max()) >= N)):
        raise ValueError(f"t must have q >= 1 entries in [0, N) = [0, {N})")
    return B, N, d, q, omega.shape[1]
