"""Closed-form parameter counts of the experiment models (Appendix E), shared by
tests/constructions/test_experiment_models.py and test_published_models.py."""

from __future__ import annotations

import torch


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def transformer_count(D_e: int, q: int, width: int, attn_bias: bool = False) -> int:
    """q heads of dim D_e (E = q D_e): W_Q (E x E), W_K, W_V (E x D_e), out_proj (E x E), ReLU
    width, scalar readout (+ 3E + E projection biases for the published variant)."""
    E = q * D_e
    return 2 * E * E + 2 * E * D_e + (E + 1) * width + width + 1 + (4 * E if attn_bias else 0)


def birnn_count(D_in: int, H: int) -> int:
    """Bidirectional GRU: per direction 3 gates of H (D_in + H) weights and 2 x 3H biases."""
    return 2 * (3 * H * (D_in + H) + 6 * H) + 2 * H + 1


def mlp_count(widths) -> int:
    return sum((a + 1) * b for a, b in zip(widths, widths[1:], strict=False))
