"""The paper's architectures as ``nn.Module`` s, an encoded batch Z (B, N, D_in) to y_hat (B, N) or
(B, N, out_dim): MergedAttention (Appendix A.1), DeepTransitionBiRNN (Appendix B.1, Section 5.1)
and VecFFN (Section 4, Theorem 6). Weights come from torch's global RNG, or with ``generator=`` from
a forked RNG seeded from it, on the CPU: the global RNG is left untouched and every device gets the
same weights (:func:`qstr.constructions.module_args.seeded`)."""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from qstr.constructions.mlp import make_mlp
from qstr.constructions.module_args import (
    check_input,
    chunk_rows,
    model_dtype,
    output_dim,
    seeded,
    width_tuple,
)
from qstr.constructions.validate import (
    device_of,
    finite_tensor,
    positive_float,
    positive_int,
    shape,
)

__all__ = ["MergedAttention", "DeepTransitionBiRNN", "VecFFN"]


# ------------------------------------------------------------------ Transformer (A.1)


class MergedAttention(nn.Module):
    """One-layer Transformer with merged key-query matrices (Appendix A.1).

    Implements the architecture of the seed paper's Appendix A.1, the class used by
    Lemma 11 (construction with H = q heads), Theorem 4 / Theorem 10 (upper bound), and
    Prop 3 / Prop 21 (few heads fail):

        s^h_ij   = z_i^T W_QK[h] z_j                         (query i on the LEFT)
        A^h_ij   = softmax_j(s^h_ij)                          (over keys j = 1..N)
        head_h_i = sum_j A^h_ij z_j                           (W_V absorbed)
        h_i      = (head_0_i, ..., head_{H-1}_i) in R^{H D_e} (head 0 first)
        y_hat_i  = a^T relu(W h_i + b)

    Parameters ``W_QK`` (H, D_e, D_e), ``W`` (m, H D_e), ``b`` (m,), ``a`` (m,) -- or
    ``a`` (out_dim, m) when ``out_dim > 1``, and then ``y_hat`` is (B, N, out_dim).

    Initialisation (small random): ``W_QK ~ N(0, (0.1/D_e)^2)`` entrywise, so scores of
    unit-variance tokens are O(0.1); ``W ~ N(0, 1/(H D_e))``; ``b = 0``;
    ``a ~ N(0, 1/m)``. Deterministic given ``torch.manual_seed`` or ``generator``.

    ``chunk`` (in :meth:`heads`, :meth:`attention`, :meth:`forward`) processes the queries
    ``chunk`` rows at a time: the same numbers, O(B H chunk N) memory for the scores.
    """

    def __init__(
        self, D_e: int, H: int, m: int, out_dim: int = 1, *, generator=None, dtype=None, device=None
    ):
        super().__init__()
        self.D_e = positive_int("D_e", D_e)
        self.H = positive_int("H", H)
        self.m = positive_int("m", m)
        self.out_dim = output_dim(out_dim)
        dtype = model_dtype(dtype)
        device = device_of("device", device)
        with seeded(generator):
            W_QK = torch.randn(self.H, self.D_e, self.D_e, dtype=dtype) * (0.1 / self.D_e)
            W = torch.randn(self.m, self.H * self.D_e, dtype=dtype) / math.sqrt(self.H * self.D_e)
            a_shape = (self.m,) if self.out_dim == 1 else (self.out_dim, self.m)
            a = torch.randn(*a_shape, dtype=dtype) / math.sqrt(self.m)
        self.W_QK = nn.Parameter(W_QK.to(device))
        self.W = nn.Parameter(W.to(device))
        self.b = nn.Parameter(torch.zeros(self.m, dtype=dtype, device=device))
        self.a = nn.Parameter(a.to(device))

    def set_weights(self, *, W_QK=None, W=None, b=None, a=None) -> "MergedAttention":
        """Copy given weights in (shape-checked, converted to the model's dtype/device);
        arguments left ``None`` are kept. Returns ``self``."""
        for name, value in (("W_QK", W_QK), ("W", W), ("b", b), ("a", a)):
            if value is None:
                continue
            param = getattr(self, name)
            value = torch.as_tensor(value)
            shape(name, value, tuple(param.shape))
            finite_tensor(name, value.to(torch.float64))
            with torch.no_grad():
                param.copy_(value.to(dtype=param.dtype, device=param.device))
        return self

    def _check(self, Z) -> torch.Tensor:
        return check_input("Z", Z, self.D_e, self.W_QK.dtype)

    def _scores(self, Zq: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        # (B, c, D) x (H, D, D) -> (B, H, c, D); then against keys -> (B, H, c, N)
        left = torch.einsum("bid,hde->bhie", Zq, self.W_QK)
        return left @ Z.transpose(-1, -2).unsqueeze(1)

    def scores(self, Z: torch.Tensor) -> torch.Tensor:
        """Scores ``s[b, h, i, j] = z_i^T W_QK[h] z_j`` before the softmax, shape (B, H, N, N)."""
        Z = self._check(Z)
        return self._scores(Z, Z)

    def attention(self, Z: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
        """Attention weights ``A[b, h, i, j] = softmax_j(z_i^T W_QK[h] z_j)``, shape
        (B, H, N, N)."""
        Z = self._check(Z)
        c = chunk_rows(chunk, Z.shape[1])
        rows = [
            torch.softmax(self._scores(Z[:, s : s + c], Z), dim=-1) for s in range(0, Z.shape[1], c)
        ]
        return torch.cat(rows, dim=2)

    def heads(self, Z: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
        """Head outputs ``out[b, i, h] = sum_j A[b, h, i, j] z_j``, shape (B, N, H, D_e)."""
        Z = self._check(Z)
        return self._heads(Z, chunk_rows(chunk, Z.shape[1]))

    def _heads(self, Z: torch.Tensor, c: int) -> torch.Tensor:
        keys = Z.unsqueeze(1)  # (B, 1, N, D)
        outs = []
        for s in range(0, Z.shape[1], c):
            A = torch.softmax(self._scores(Z[:, s : s + c], Z), dim=-1)  # (B, H, c, N)
            outs.append((A @ keys).transpose(1, 2))  # (B, c, H, D)
        return torch.cat(outs, dim=1)

    def forward(self, Z: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
        """``y_hat`` of shape (B, N) (or (B, N, out_dim))."""
        Z = self._check(Z)
        h = self._heads(Z, chunk_rows(chunk, Z.shape[1])).flatten(2)  # (B, N, H*D_e), head 0 first
        hidden = torch.relu(h @ self.W.T + self.b)
        return hidden @ self.a if self.out_dim == 1 else hidden @ self.a.T


# ------------------------------------------------------------------------- RNN (B.1)


class DeepTransitionBiRNN(nn.Module):
    """Bidirectional RNN with deep transitions and projected states (Section 5.1, Appendix B.1).

    The recurrent class of Prop 26 / Cor 27 / Prop 28, Theorem 7 and Prop 8 (Prop 35).

    **Index convention.** Positions are 1..N in the paper (0..N-1 in tensors, so paper
    position i is tensor index i-1):

        h_fwd_1 = 0,   h_fwd_{i+1} = P(h_fwd_i + f_fwd(h_fwd_i, z_i))     i = 1..N-1
        h_bwd_N = 0,   h_bwd_{i-1} = P(h_bwd_i + f_bwd(h_bwd_i, z_i))     i = N..2
        y_hat_i = f_y(h_fwd_i, h_bwd_i, z_i)

    so h_fwd_i is the state BEFORE reading z_i: it summarises z_1..z_{i-1}, and
    h_fwd_1 = 0. Symmetrically h_bwd_i summarises z_{i+1}..z_N and h_bwd_N = 0. The token
    z_i itself reaches y_hat_i only through the direct input of f_y. In tensors:
    ``h_fwd[:, 0] == 0`` and ``h_bwd[:, -1] == 0``.

    P(h) = min(1, r_h / ||h||) h is the Euclidean projection onto the r_h-ball
    (``r_h = math.inf``: no projection).

    f_fwd, f_bwd: ReLU MLPs on the concatenation ``(h, z)`` (h first), hidden widths
    ``transition_widths`` (L_h = len + 1 linear layers; biases on all but the last),
    output d_h. f_y: ReLU MLP on ``(h_fwd, h_bwd, z)``, hidden widths ``output_widths``,
    biases on all but the last layer, output ``out_dim``. They are the ``nn.Sequential``
    attributes ``f_fwd``, ``f_bwd``, ``f_y``; load hand-built weights with
    ``qstr.constructions.mlp.MLPWeights.load_into``. Default init is torch's ``nn.Linear``
    init.

    Reversal symmetry: reversing the sequence and swapping the weights of f_fwd and
    f_bwd swaps the two state streams (and reverses them).
    """

    def __init__(  # noqa: PLR0913 - the paper's symbols (Prop 26)
        self,
        D_in: int,
        d_h: int,
        *,
        transition_widths: Sequence[int],
        output_widths: Sequence[int],
        r_h: float,
        out_dim: int = 1,
        generator=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        self.D_in = positive_int("D_in", D_in)
        self.d_h = positive_int("d_h", d_h)
        self.transition_widths = width_tuple("transition_widths", transition_widths)
        self.output_widths = width_tuple("output_widths", output_widths)
        try:
            r = float(r_h)
        except (TypeError, ValueError):
            raise ValueError(f"r_h must be a number > 0 or math.inf, got {r_h!r}") from None
        self.r_h = math.inf if r == math.inf else positive_float("r_h", r)
        self.out_dim = output_dim(out_dim)
        dtype = model_dtype(dtype)
        device = device_of("device", device)
        with seeded(generator):
            self.f_fwd = make_mlp(self.d_h + self.D_in, self.transition_widths, self.d_h).to(dtype)
            self.f_bwd = make_mlp(self.d_h + self.D_in, self.transition_widths, self.d_h).to(dtype)
            self.f_y = make_mlp(2 * self.d_h + self.D_in, self.output_widths, self.out_dim).to(
                dtype
            )
        self.to(device)

    @property
    def param_dtype(self) -> torch.dtype:
        return self.f_y[0].weight.dtype

    def project(self, h: torch.Tensor) -> torch.Tensor:
        """P(h) = min(1, r_h / ||h||) h along the last axis (identity when r_h = inf)."""
        if self.r_h == math.inf:
            return h
        norm = torch.linalg.vector_norm(h, dim=-1, keepdim=True)
        scale = torch.clamp(self.r_h / norm, max=1.0)  # norm 0 -> inf -> 1
        return h * scale

    def states(self, Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(h_fwd, h_bwd), each (B, N, d_h), by the literal recurrence (loop over positions)."""
        Z = check_input("Z", Z, self.D_in, self.param_dtype)
        return self._states(Z)

    def _states(self, Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, N, _ = Z.shape
        zero = Z.new_zeros(B, self.d_h)
        fwd = [zero]
        for i in range(N - 1):  # h_fwd[i+1] from h_fwd[i] and z[i]
            h = fwd[-1]
            fwd.append(self.project(h + self.f_fwd(torch.cat([h, Z[:, i]], dim=-1))))
        bwd = [zero]
        for i in range(N - 1, 0, -1):  # h_bwd[i-1] from h_bwd[i] and z[i]
            h = bwd[-1]
            bwd.append(self.project(h + self.f_bwd(torch.cat([h, Z[:, i]], dim=-1))))
        return torch.stack(fwd, dim=1), torch.stack(bwd[::-1], dim=1)

    def forward(self, Z: torch.Tensor) -> torch.Tensor:
        """``y_hat_i = f_y(h_fwd_i, h_bwd_i, z_i)``: (B, N) (or (B, N, out_dim))."""
        Z = check_input("Z", Z, self.D_in, self.param_dtype)
        h_fwd, h_bwd = self._states(Z)
        y = self.f_y(torch.cat([h_fwd, h_bwd, Z], dim=-1))
        return y.squeeze(-1) if self.out_dim == 1 else y


# ----------------------------------------------------------------------- FFN (Sec. 4)


class VecFFN(nn.Module):
    """Feedforward network whose first layer reads vec(x) (Section 4, Theorem 6).

    Theorem 6 restricts only the first layer: a matrix acting on
    vec(x) = (x_1, ..., x_N) in R^{N d}; the index tuples t may enter in any encoding.
    Here the network input is

        u = concat(vec(x), enc(t))        vec(x)[j*d + k] = x[j, k]

    and ``first_layer`` is one ``nn.Linear`` over all of u; its columns acting on vec(x)
    are :meth:`first_layer_x_weight` (the columns that Theorem 6 forces into
    span(vec x^(1), ..., vec x^(n))). The rest is ReLU layers of widths ``hidden`` and a
    last layer with N outputs (N * out_dim when ``out_dim`` is given): all positions at
    once. All linear layers have biases.

    ``task="general"`` (qSTR): t is (B, N, q), one tuple per output position, and
    enc(t) = vec(onehot(t)) in R^{N q N}; a (B, q) simple-qSTR t is also accepted and
    broadcast to every position. ``task="simple"`` (simple-qSTR): t must be (B, q) and
    enc(t) = vec(onehot(t)) in R^{q N}.
    ``t_encoding="onehot"`` (one-hot over [N], 0-based) or ``"index"`` (the raw index
    scaled to t / N, one number per entry). Entries must lie in [0, N).

    ``forward(x, t)`` with x (B, N, d) returns (B, N) (or (B, N, out_dim)).
    """

    def __init__(  # noqa: PLR0913 - the paper's symbols (Theorem 6)
        self,
        N: int,
        d: int,
        q: int,
        hidden: Sequence[int] = (1000,),
        *,
        t_encoding: str = "onehot",
        task: str = "general",
        out_dim: int | None = None,
        generator=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        self.N = positive_int("N", N)
        self.d = positive_int("d", d)
        self.q = positive_int("q", q)
        self.hidden = width_tuple("hidden", hidden)
        if t_encoding not in ("onehot", "index"):
            raise ValueError(f"t_encoding must be 'onehot' or 'index', got {t_encoding!r}")
        if task not in ("general", "simple"):
            raise ValueError(f"task must be 'general' or 'simple', got {task!r}")
        self.t_encoding = t_encoding
        self.task = task
        self.out_dim = None if out_dim is None else output_dim(out_dim)
        n_tuples = self.N * self.q if task == "general" else self.q
        self.t_features = n_tuples * (self.N if t_encoding == "onehot" else 1)
        self.in_features = self.N * self.d + self.t_features
        n_out = self.N * (1 if self.out_dim is None else self.out_dim)
        dtype = model_dtype(dtype)
        device = device_of("device", device)
        with seeded(generator):
            self.net = make_mlp(self.in_features, self.hidden, n_out, bias_last=True).to(dtype)
        self.to(device)

    @property
    def first_layer(self) -> nn.Linear:
        """The ``nn.Linear`` over the whole input concat(vec(x), enc(t))."""
        return self.net[0]

    def first_layer_x_weight(self) -> torch.Tensor:
        """Columns of the first layer acting on vec(x): shape (m, N*d), a view (no copy)."""
        return self.first_layer.weight[:, : self.N * self.d]

    def encode_t(self, t: torch.Tensor, B: int, dtype: torch.dtype) -> torch.Tensor:
        """enc(t) of shape (B, t_features), after validating t."""
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"t must be a torch.Tensor of integers, got {type(t).__name__}")
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise ValueError(f"t must hold integer indices (torch.long), got {t.dtype}")
        if self.task == "simple":
            shape("t", t, (B, self.q))
        elif t.dim() == 2:
            shape("t", t, (B, self.q))
            t = t.unsqueeze(1).expand(B, self.N, self.q)
        else:
            shape("t", t, (B, self.N, self.q))
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= self.N):
            raise ValueError(
                f"t entries must lie in [0, N) = [0, {self.N}), "
                f"got range [{int(t.min())}, {int(t.max())}]"
            )
        if self.t_encoding == "onehot":
            enc = F.one_hot(t.long(), self.N).to(dtype)
        else:
            enc = t.to(dtype) / self.N
        return enc.reshape(B, -1)

    def inputs(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The network input concat(vec(x), enc(t)), shape (B, in_features)."""
        dtype = self.first_layer.weight.dtype
        x = check_input("x", x, self.d, dtype)
        B = x.shape[0]
        if x.shape[1] != self.N:
            raise ValueError(f"x must have shape (B, {self.N}, {self.d}), got {tuple(x.shape)}")
        enc = self.encode_t(t, B, dtype).to(x.device)
        return torch.cat([x.reshape(B, self.N * self.d), enc], dim=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        y = self.net(self.inputs(x, t))
        return y if self.out_dim is None else y.reshape(y.shape[0], self.N, self.out_dim)
