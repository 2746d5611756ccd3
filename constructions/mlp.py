"""ReLU MLPs as ``nn.Sequential`` (``Linear, ReLU, ..., Linear``) and their weights as a list of
``(W, b or None)`` pairs, one per ``Linear``: :func:`make_mlp` builds one, :func:`set_mlp_weights`
copies weights in, :func:`mlp_weights` reads them out."""
from __future__ import annotations

from typing import Iterable, Sequence

import torch
import torch.nn as nn

from qstr.constructions.validate import finite_tensor, shape

__all__ = ["make_mlp", "set_mlp_weights", "mlp_weights"]


def make_mlp(
    in_dim: int, hidden: Sequence[int], out_dim: int, *, bias_last: bool = False
) -> nn.Sequential:
    """``Linear, ReLU, ..., Linear`` with hidden widths ``hidden``.

    The paper's ReLU nets (Appendix B.1) carry biases on every layer but the last;
    ``bias_last=True`` adds one there too. ``hidden=()`` gives a single linear map.
    """
    dims = [in_dim, *hidden, out_dim]
    layers: list[nn.Module] = []
    for k in range(len(dims) - 1):
        last = k == len(dims) - 2
        layers.append(nn.Linear(dims[k], dims[k + 1], bias=(bias_last or not last)))
        if not last:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _linears(seq: nn.Sequential) -> list[nn.Linear]:
    return [layer for layer in seq if isinstance(layer, nn.Linear)]


def set_mlp_weights(seq: nn.Sequential, weights: Iterable) -> None:
    """Copy hand-built weights into an ``nn.Sequential`` of ``Linear`` / ``ReLU`` layers.

    ``weights`` is a list with one ``(W, b)`` pair per ``Linear`` layer, in order; ``W`` has
    the layer's ``(out_features, in_features)`` shape, ``b`` is ``(out_features,)`` or
    ``None``. ``None`` on a layer that has a bias sets that bias to zero; a bias given for
    a layer without one is an error (the paper's nets have no bias on the last layer).
    Values are converted to the layer's dtype and device. Raises ``ValueError`` on any
    count or shape mismatch, or on non-finite entries.
    """
    linears = _linears(seq)
    weights = list(weights)
    if len(weights) != len(linears):
        raise ValueError(
            f"weights must hold {len(linears)} (W, b) pairs (one per Linear layer), "
            f"got {len(weights)}"
        )
    for k, (pair, lin) in enumerate(zip(weights, linears)):
        try:
            W, b = pair
        except (TypeError, ValueError):
            raise ValueError(f"weights[{k}] must be a pair (W, b or None)") from None
        W = torch.as_tensor(W)
        shape(f"weights[{k}].W", W, tuple(lin.weight.shape))
        finite_tensor(f"weights[{k}].W", W.to(torch.float64))
        if b is not None:
            if lin.bias is None:
                raise ValueError(f"weights[{k}].b must be None: Linear layer {k} has no bias")
            b = torch.as_tensor(b)
            shape(f"weights[{k}].b", b, tuple(lin.bias.shape))
            finite_tensor(f"weights[{k}].b", b.to(torch.float64))
        with torch.no_grad():
            lin.weight.copy_(W.to(dtype=lin.weight.dtype, device=lin.weight.device))
            if lin.bias is not None:
                if b is None:
                    lin.bias.zero_()
                else:
                    lin.bias.copy_(b.to(dtype=lin.bias.dtype, device=lin.bias.device))


def mlp_weights(seq: nn.Sequential) -> list:
    """The ``(W, b or None)`` list of an ``nn.Sequential`` (detached clones), inverse of
    :func:`set_mlp_weights`."""
    return [
        (lin.weight.detach().clone(), None if lin.bias is None else lin.bias.detach().clone())
        for lin in _linears(seq)
    ]
