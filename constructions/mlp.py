"""ReLU MLPs: their weights as one type, :class:`MLPWeights` (one :class:`Dense` ``(W, b or
None)`` per linear layer, ``W_L relu(... relu(W_1 u + b_1) ...)``), and as ``nn.Sequential``
(``Linear, ReLU, ..., Linear``), with one conversion each way: :meth:`MLPWeights.to_sequential`
/ :meth:`MLPWeights.load_into` and :meth:`MLPWeights.from_sequential`. :func:`make_mlp` builds
an untrained ``nn.Sequential`` of given widths (the paper's models, Appendix B.1).

The Prop 26 transition (constructions/transition.py), the Prop 28 output net
(constructions/recurrent.py), the ReLU gadgets (constructions/relu.py), the interpolating RNNs
(constructions/interpolation.py) and the two-layer nets (``TwoLayerNet.as_mlp``,
constructions/links.py; the Lemma 42 nets) share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, NamedTuple, Optional, Sequence

import torch
import torch.nn as nn

from qstr.constructions import validate
from qstr.constructions.validate import finite_tensor, shape

__all__ = ["Dense", "MLPWeights", "make_mlp"]


class Dense(NamedTuple):
    """One linear layer u -> W u + b: ``W`` (out, in), ``b`` (out,) or None (no bias)."""

    W: torch.Tensor
    b: Optional[torch.Tensor] = None


@dataclass(frozen=True, eq=False)
class MLPWeights:
    """The weights of a ReLU MLP u -> W_L relu(... relu(W_1 u + b_1) ...): ``layers`` holds one
    :class:`Dense` per linear layer (pairs ``(W, b or None)`` are accepted; array-likes become
    tensors, tensors are kept as they are). The paper's nets have no bias on the last layer.

    Shapes chain: W_{k+1} has as many columns as W_k rows. Values are not copied.
    """

    layers: tuple

    def __post_init__(self):
        layers = []
        for k, pair in enumerate(self.layers):
            try:
                W, b = pair
            except (TypeError, ValueError):
                raise ValueError(f"layers[{k}] must be a pair (W, b or None)") from None
            W = torch.as_tensor(W)
            if W.dim() != 2:
                raise ValueError(f"layers[{k}].W must be 2-D, got shape {tuple(W.shape)}")
            if k and W.shape[1] != layers[-1].W.shape[0]:
                raise ValueError(
                    f"layers[{k}].W must have {layers[-1].W.shape[0]} columns (the rows of "
                    f"layers[{k - 1}].W), got shape {tuple(W.shape)}"
                )
            if b is not None:
                b = torch.as_tensor(b)
                shape(f"layers[{k}].b", b, (W.shape[0],))
            layers.append(Dense(W, b))
        if not layers:
            raise ValueError("an MLP needs at least one layer")
        object.__setattr__(self, "layers", tuple(layers))

    # -------------------------------------------------------------- the layers
    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, k):
        return self.layers[k]

    def __iter__(self):
        return iter(self.layers)

    @property
    def in_dim(self) -> int:
        return int(self.layers[0].W.shape[1])

    @property
    def out_dim(self) -> int:
        return int(self.layers[-1].W.shape[0])

    @property
    def widths(self) -> tuple:
        """The hidden widths (rows of every layer but the last)."""
        return tuple(int(L.W.shape[0]) for L in self.layers[:-1])

    @property
    def bias_last(self) -> bool:
        return self.layers[-1].b is not None

    def replace_layer(self, k: int, W=None, b=None, *, drop_bias: bool = False) -> "MLPWeights":
        """The same MLP with layer k's W and/or b replaced (``drop_bias``: b set to None)."""
        old = self.layers[k]
        new = Dense(old.W if W is None else W, None if drop_bias else (old.b if b is None else b))
        return MLPWeights(self.layers[:k] + (new,) + self.layers[k + 1 :])

    # -------------------------------------------------------------- evaluation
    def __call__(self, u: torch.Tensor, *, chunk: Optional[int] = None) -> torch.Tensor:
        """The MLP on u of shape (..., in_dim), in the dtype and on the device of u, chunked over
        rows (``chunk`` rows at a time; all at once by default); returns (..., out_dim)."""
        lead = u.shape[:-1]
        flat = u.reshape(-1, u.shape[-1])
        n = flat.shape[0]
        chunk = n if chunk is None else validate.positive_int("chunk", chunk)
        Ws = [
            (
                L.W.to(dtype=u.dtype, device=u.device),
                None if L.b is None else L.b.to(dtype=u.dtype, device=u.device),
            )
            for L in self.layers
        ]
        outs = []
        for s in range(0, max(n, 1), max(chunk, 1)):
            h = flat[s : s + chunk]
            for i, (W, b) in enumerate(Ws):
                h = h @ W.T
                if b is not None:
                    h = h + b
                if i < len(Ws) - 1:
                    h = torch.relu(h)
            outs.append(h)
        out = torch.cat(outs)  # the loop runs at least once (an empty batch gives one empty chunk)
        return out.reshape(*lead, out.shape[-1])

    # -------------------------------------------------------------- nn.Sequential
    def to_sequential(self, *, dtype=None, device=None) -> nn.Sequential:
        """An ``nn.Sequential`` (``Linear, ReLU, ..., Linear``; :func:`make_mlp`, a bias on the
        last layer only if this MLP has one) holding these weights in ``dtype`` (default: W_1's)
        on ``device``."""
        seq = make_mlp(self.in_dim, self.widths, self.out_dim, bias_last=self.bias_last)
        seq = seq.to(dtype=self.layers[0].W.dtype if dtype is None else dtype, device=device)
        self.load_into(seq)
        return seq

    def load_into(self, seq: nn.Sequential) -> None:
        """Copy these weights into an ``nn.Sequential`` of ``Linear`` / ``ReLU`` layers (one
        :class:`Dense` per ``Linear``, in order).

        A layer without b on a ``Linear`` with a bias sets that bias to zero; a bias given for a
        ``Linear`` without one is an error. Values are converted to the layer's dtype and device.
        Raises ``ValueError`` on any count or shape mismatch, or on non-finite entries.
        """
        linears = _linears(seq)
        if len(self.layers) != len(linears):
            raise ValueError(
                f"weights must hold {len(linears)} (W, b) pairs (one per Linear layer), "
                f"got {len(self.layers)}"
            )
        for k, ((W, b), lin) in enumerate(zip(self.layers, linears, strict=True)):
            shape(f"weights[{k}].W", W, tuple(lin.weight.shape))
            finite_tensor(f"weights[{k}].W", W.to(torch.float64))
            if b is not None:
                if lin.bias is None:
                    raise ValueError(f"weights[{k}].b must be None: Linear layer {k} has no bias")
                shape(f"weights[{k}].b", b, tuple(lin.bias.shape))
                finite_tensor(f"weights[{k}].b", b.to(torch.float64))
            with torch.no_grad():
                lin.weight.copy_(W.to(dtype=lin.weight.dtype, device=lin.weight.device))
                if lin.bias is not None:
                    if b is None:
                        lin.bias.zero_()
                    else:
                        lin.bias.copy_(b.to(dtype=lin.bias.dtype, device=lin.bias.device))

    @classmethod
    def from_sequential(cls, seq: nn.Sequential) -> "MLPWeights":
        """The weights of an ``nn.Sequential``'s ``Linear`` layers (detached clones), inverse of
        :meth:`load_into`."""
        return cls(
            tuple(
                (
                    lin.weight.detach().clone(),
                    None if lin.bias is None else lin.bias.detach().clone(),
                )
                for lin in _linears(seq)
            )
        )

    # -------------------------------------------------------------- state dicts
    def as_dicts(self) -> list:
        """The layers as ``[{"W", "b"}, ..., {"W"}]`` dicts (``"b"`` only where there is a bias):
        the layout of the files ``qstr.constructions.recurrent.rnn_state`` writes."""
        return [{"W": L.W} if L.b is None else {"W": L.W, "b": L.b} for L in self.layers]

    @classmethod
    def from_dicts(cls, layers: Iterable[dict]) -> "MLPWeights":
        """Inverse of :meth:`as_dicts`."""
        try:
            return cls(tuple((L["W"], L.get("b")) for L in layers))
        except (KeyError, TypeError, AttributeError):
            raise ValueError('layers must be dicts {"W", "b"} ("b" optional)') from None


def make_mlp(
    in_dim: int, hidden: Sequence[int], out_dim: int, *, bias_last: bool = False
) -> nn.Sequential:
    """``Linear, ReLU, ..., Linear`` with hidden widths ``hidden`` (torch's default init).

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
