"""The published experiment code's model variants, as opposed to the paper's description of the
experiments (:mod:`qstr.constructions.experiment_models`): BiasedTransformer (the attention with
biases) and EncodedFFN (an MLP on the flattened token encoding)."""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn as nn

from qstr.constructions.experiment_models import PracticalTransformer
from qstr.constructions.mlp import make_mlp
from qstr.constructions.module_args import seeded
from qstr.constructions.validate import device_of, float_dtype, positive_int, shape

__all__ = ["BiasedTransformer", "EncodedFFN"]


class BiasedTransformer(PracticalTransformer):
    """:class:`PracticalTransformer` whose attention carries biases (``nn.MultiheadAttention``
    with ``bias=True``, as in the published experiment code). Weights are the parent's (same
    ``generator`` -> same weights); the in-projection and out-projection biases start at 0,
    torch's initialisation of them."""

    def __init__(
        self,
        D_e: int,
        q: int,
        width: int = 100,
        out_dim: int = 1,
        *,
        generator=None,
        dtype=None,
        device=None,
    ):
        super().__init__(D_e, q, width, out_dim, generator=generator, dtype=dtype, device=device)
        old = self.mha
        E = self.q * self.D_e
        new = nn.MultiheadAttention(
            embed_dim=E,
            num_heads=self.q,
            kdim=self.D_e,
            vdim=self.D_e,
            bias=True,
            batch_first=True,
            dtype=old.out_proj.weight.dtype,
            device=old.out_proj.weight.device,
        )
        missing, unexpected = new.load_state_dict(old.state_dict(), strict=False)
        if unexpected or set(missing) != {"in_proj_bias", "out_proj.bias"}:
            raise RuntimeError(f"unexpected attention parameters: {missing}, {unexpected}")
        with torch.no_grad():
            new.in_proj_bias.zero_()
            new.out_proj.bias.zero_()
        self.mha = new


class EncodedFFN(nn.Module):
    """Feedforward net of the published experiment code: an MLP on the flattened token
    encoding vec(z_1..z_N) in R^{N D_e} (z from :func:`constructions.encoding.encode`), hidden
    ReLU widths ``hidden`` (all layers with biases) and N outputs. ``forward(Z)`` with Z of
    shape (B, N, D_e) returns (B, N)."""

    def __init__(
        self,
        N: int,
        D_e: int,
        hidden: Sequence[int] = (1000, 1000),
        *,
        generator=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        self.N = positive_int("N", N)
        self.D_e = positive_int("D_e", D_e)
        self.hidden = tuple(positive_int("hidden", h) for h in hidden)
        dtype = torch.get_default_dtype() if dtype is None else float_dtype("dtype", dtype)
        with seeded(generator):
            self.net = make_mlp(self.N * self.D_e, self.hidden, self.N, bias_last=True).to(dtype)
        self.to(device_of("device", device))

    def forward(self, Z: torch.Tensor) -> torch.Tensor:
        shape("Z", Z, (None, self.N, self.D_e))
        return self.net(Z.reshape(Z.shape[0], -1))
