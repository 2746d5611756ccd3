"""The trainable models of the experiments (Appendix E, Figure 1): PracticalTransformer
(``nn.MultiheadAttention``), PracticalRNN (bidirectional ``nn.GRU`` / ``nn.RNN`` / ``nn.LSTM``),
PracticalFFN (a depth-3 :class:`~qstr.constructions.paper_models.VecFFN`), and build_practical with
Appendix E's defaults. Weights as in :mod:`qstr.constructions.module_args` (``generator=``)."""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn as nn

from qstr.constructions.module_args import check_input, model_dtype, output_dim, seeded
from qstr.constructions.paper_models import VecFFN
from qstr.constructions.validate import device_of, positive_int

__all__ = ["PracticalTransformer", "PracticalRNN", "PracticalFFN", "build_practical"]


class PracticalTransformer(nn.Module):
    """Trainable Transformer of the experiments (Appendix E, Figure 1).

    q heads, each seeing the whole token: ``nn.MultiheadAttention(embed_dim=q*D_e,
    num_heads=q, kdim=D_e, vdim=D_e, bias=False, batch_first=True)`` (head_dim = D_e).
    The query input is Z tiled q times, ``Zq = Z.repeat(1, 1, q)`` (B, N, q D_e); keys and
    values are Z. Then

        y_hat = readout(relu(hidden(mha_out)))  = a^T relu(W mha_out + b) + c

    with ``hidden = nn.Linear(q D_e, width)`` and ``readout = nn.Linear(width, out_dim)``.

    **Relation to the merged parametrisation of Appendix A.1.** With
    ``Wq = mha.q_proj_weight`` (q D_e, q D_e), ``Wk = mha.k_proj_weight`` (q D_e, D_e),
    ``Wv = mha.v_proj_weight`` (q D_e, D_e) -- for q = 1 torch stacks the three into
    ``mha.in_proj_weight`` instead; :meth:`projection_weights` returns them either way --
    and rows ``h*D_e:(h+1)*D_e`` belonging to head h:

        query of head h:  Wq[h rows] Zq_i = (sum_t Wq[h rows, t*D_e:(t+1)*D_e]) z_i = Q_h z_i
        key of head h:    K_h z_j with K_h = Wk[h rows]                       (D_e, D_e)
        logit_h(i, j) = <Q_h z_i, K_h z_j> / sqrt(D_e) = z_i^T A_h z_j,
        A_h = Q_h^T K_h / sqrt(D_e)                                   -> :meth:`merged_qk`

    so A_h is the paper's W_QK^(h) (query on the left). The value of head h is
    V_h z_j with V_h = Wv[h rows], and ``mha.out_proj`` (no bias) maps the concatenated
    head values; the paper absorbs V_h, out_proj and W into one matrix acting on the
    concatenated sum_j A^h_ij z_j, i.e. W_paper = W @ out_proj.weight @ blockdiag(V_h).
    """

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
        super().__init__()
        self.D_e = positive_int("D_e", D_e)
        self.q = positive_int("q", q)
        self.width = positive_int("width", width)
        self.out_dim = output_dim(out_dim)
        dtype = model_dtype(dtype)
        device = device_of("device", device)
        E = self.q * self.D_e
        with seeded(generator):
            self.mha = nn.MultiheadAttention(
                embed_dim=E,
                num_heads=self.q,
                kdim=self.D_e,
                vdim=self.D_e,
                bias=False,
                batch_first=True,
                dtype=dtype,
            )
            self.hidden = nn.Linear(E, self.width, dtype=dtype)
            self.readout = nn.Linear(self.width, self.out_dim, dtype=dtype)
        self.to(device)

    def _check(self, Z) -> torch.Tensor:
        return check_input("Z", Z, self.D_e, self.hidden.weight.dtype)

    def projection_weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(Wq, Wk, Wv) of shapes (q D_e, q D_e), (q D_e, D_e), (q D_e, D_e).

        torch keeps them as ``q_proj_weight`` / ``k_proj_weight`` / ``v_proj_weight`` when
        q > 1 (kdim != embed_dim), but stacks them into ``in_proj_weight`` (3 D_e, D_e)
        when q = 1; this returns views of whichever is in use (gradients flow)."""
        mha, E = self.mha, self.q * self.D_e
        if mha.in_proj_weight is not None:
            W = mha.in_proj_weight
            return W[:E], W[E : 2 * E], W[2 * E :]
        return mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight

    def merged_qk(self) -> torch.Tensor:
        """A (q, D_e, D_e) with logit_h(i, j) = z_i^T A[h] z_j (1/sqrt(D_e) included).

        A[h] = Q_h^T K_h / sqrt(D_e), where Q_h is the sum over the q column tiles of the
        rows of Wq that belong to head h, and K_h those rows of Wk (class docstring)."""
        D, q = self.D_e, self.q
        Wq, Wk, _ = self.projection_weights()
        Q = Wq.reshape(q, D, q, D).sum(dim=2)  # [head, row, tile, col] -> tiles summed
        K = Wk.reshape(q, D, D)
        return Q.transpose(1, 2) @ K / math.sqrt(D)

    def attention(self, Z: torch.Tensor) -> torch.Tensor:
        """Per-head attention weights from the MHA module itself, shape (B, q, N, N)."""
        Z = self._check(Z)
        _, w = self.mha(Z.repeat(1, 1, self.q), Z, Z, need_weights=True, average_attn_weights=False)
        return w

    def forward(self, Z: torch.Tensor) -> torch.Tensor:
        Z = self._check(Z)
        out, _ = self.mha(Z.repeat(1, 1, self.q), Z, Z, need_weights=False)
        y = self.readout(torch.relu(self.hidden(out)))
        return y.squeeze(-1) if self.out_dim == 1 else y


class PracticalRNN(nn.Module):
    """Trainable bidirectional RNN of the experiments (Appendix E, Figure 1).

    ``nn.GRU`` / ``nn.RNN`` (tanh) / ``nn.LSTM`` (``cell`` in {"gru", "rnn", "lstm"}),
    bidirectional, batch_first, hidden size ``hidden`` per direction, ``num_layers`` layers,
    and a linear readout from the concatenated (forward, backward) output at each
    position: y_hat (B, N) (or (B, N, out_dim)). Note torch's convention differs from
    :class:`DeepTransitionBiRNN`: here both directions have already read z_i at position i.
    """

    CELLS = {"gru": nn.GRU, "rnn": nn.RNN, "lstm": nn.LSTM}

    def __init__(
        self,
        D_in: int,
        hidden: int,
        *,
        cell: str = "gru",
        out_dim: int = 1,
        num_layers: int = 1,
        generator=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        self.D_in = positive_int("D_in", D_in)
        self.hidden_size = positive_int("hidden", hidden)
        self.num_layers = positive_int("num_layers", num_layers)
        if cell not in self.CELLS:
            raise ValueError(f"cell must be one of 'gru', 'rnn', 'lstm', got {cell!r}")
        self.cell = cell
        self.out_dim = output_dim(out_dim)
        dtype = model_dtype(dtype)
        device = device_of("device", device)
        with seeded(generator):
            self.rnn = self.CELLS[cell](
                self.D_in,
                self.hidden_size,
                num_layers=self.num_layers,
                batch_first=True,
                bidirectional=True,
                dtype=dtype,
            )
            self.readout = nn.Linear(2 * self.hidden_size, self.out_dim, dtype=dtype)
        self.to(device)

    def forward(self, Z: torch.Tensor) -> torch.Tensor:
        Z = check_input("Z", Z, self.D_in, self.readout.weight.dtype)
        out, _ = self.rnn(Z)  # (B, N, 2*hidden): forward then backward
        y = self.readout(out)
        return y.squeeze(-1) if self.out_dim == 1 else y


class PracticalFFN(VecFFN):
    """Trainable FFN of the experiments (Appendix E, Figure 1): a :class:`VecFFN` with two
    hidden ReLU layers (depth 3) by default, on concat(vec(x), onehot(t)) -> N outputs."""

    def __init__(self, N: int, d: int, q: int, hidden: Sequence[int] = (1000, 1000), **kw):
        super().__init__(N, d, q, hidden, **kw)


def build_practical(kind: str, *, N: int, d: int, q: int, d_e: int, **kw) -> nn.Module:
    """The experiment models with the defaults of Appendix E.

    * ``"transformer"``: :class:`PracticalTransformer` on the encoding of width
      D_e = d + (q+1) d_e, q heads, ``width=100``.
    * ``"rnn"``: :class:`PracticalRNN` on the RNN encoding (same width D_e), GRU,
      ``hidden=500*q``.
    * ``"ffn"``: :class:`PracticalFFN` (depth 3, hidden (1000, 1000), N outputs).

    Extra keywords go to the constructor (``width``, ``hidden``, ``cell``, ``task``,
    ``generator``, ``dtype``, ``device``, ...), overriding the defaults.
    """
    N = positive_int("N", N)
    d = positive_int("d", d)
    q = positive_int("q", q)
    d_e = positive_int("d_e", d_e)
    D_e = d + (q + 1) * d_e
    if kind == "transformer":
        kw.setdefault("width", 100)
        return PracticalTransformer(D_e, q, **kw)
    if kind == "rnn":
        kw.setdefault("hidden", 500 * q)
        kw.setdefault("cell", "gru")
        hidden = kw.pop("hidden")
        return PracticalRNN(D_e, hidden, **kw)
    if kind == "ffn":
        kw.setdefault("hidden", (1000, 1000))
        return PracticalFFN(N, d, q, **kw)
    raise ValueError(f"kind must be 'transformer', 'rnn' or 'ffn', got {kind!r}")
