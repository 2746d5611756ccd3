"""The paper's architectures as ``nn.Module`` s, an encoded batch Z (B, N, D_in) to y_hat (B, N) or
(B, N, out_dim): MergedAttention (Appendix A.1), DeepTransitionBiRNN (Appendix B.1), VecFFN
(Theorem 6) and the trainable models of Appendix E (build_practical). Weights come from torch's
global RNG, or with ``generator=`` from a forked RNG seeded from it, on the CPU: the global RNG is
left untouched and every device gets the same weights."""
from __future__ import annotations

import contextlib
import math
from typing import Iterable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from qstr.constructions.validate import (
    FLOAT_DTYPES,
    device_of,
    finite_tensor,
    float_dtype,
    positive_float,
    positive_int,
    shape,
)

__all__ = [
    "MergedAttention",
    "DeepTransitionBiRNN",
    "VecFFN",
    "PracticalTransformer",
    "PracticalRNN",
    "PracticalFFN",
    "build_practical",
    "make_mlp",
    "set_mlp_weights",
    "mlp_weights",
]


# ----------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def _seeded(generator):
    """Run the body with the CPU RNG seeded from ``generator`` (no-op when ``None``).

    With ``None`` the weights come from torch's global RNG (so ``torch.manual_seed`` fixes them);
    with a ``torch.Generator`` one seed is drawn from it and the weights are built from that seed
    in a forked RNG, so the global RNG is left untouched. Weights are always drawn on the CPU and
    then moved to ``device``: the same seed gives the same weights on every device.
    """
    if generator is None:
        yield
        return
    if not isinstance(generator, torch.Generator):
        raise ValueError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}"
        )
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device).item())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _dtype(dtype) -> torch.dtype:
    return torch.get_default_dtype() if dtype is None else float_dtype("dtype", dtype)


def _widths(name: str, widths) -> tuple:
    """A tuple of positive ints (possibly empty)."""
    if isinstance(widths, (int,)) and not isinstance(widths, bool):
        widths = (widths,)
    try:
        widths = tuple(widths)
    except TypeError:
        raise ValueError(f"{name} must be a tuple of integers >= 1, got {widths!r}") from None
    return tuple(positive_int(f"{name}[{k}]", w) for k, w in enumerate(widths))


def _out_dim(value) -> int:
    return positive_int("out_dim", value)


def _check_input(name: str, Z, last: int, dtype: torch.dtype) -> torch.Tensor:
    """Z must be a finite (B, N, last) tensor of the model's dtype, B >= 1, N >= 1."""
    if not isinstance(Z, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(Z).__name__}")
    shape(name, Z, (None, None, last))
    if Z.shape[0] < 1 or Z.shape[1] < 1:
        raise ValueError(
            f"{name} must have batch size >= 1 and length N >= 1, got shape {tuple(Z.shape)}"
        )
    if Z.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be float32 or float64, got {Z.dtype}")
    if Z.dtype != dtype:
        raise ValueError(
            f"{name} has dtype {Z.dtype} but the model is {dtype}; "
            f"convert one of them (model.to({Z.dtype}) or {name}.to({dtype}))"
        )
    finite_tensor(name, Z)
    return Z


def _chunk(chunk, N: int) -> int:
    return N if chunk is None else positive_int("chunk", chunk)


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
        self.out_dim = _out_dim(out_dim)
        dtype = _dtype(dtype)
        device = device_of("device", device)
        with _seeded(generator):
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
        return _check_input("Z", Z, self.D_e, self.W_QK.dtype)

    def _scores(self, Zq: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        # (B, c, D) x (H, D, D) -> (B, H, c, D); then against keys -> (B, H, c, N)
        left = torch.einsum("bid,hde->bhie", Zq, self.W_QK)
        return left @ Z.transpose(-1, -2).unsqueeze(1)

    def attention(self, Z: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
        """Attention weights ``A[b, h, i, j] = softmax_j(z_i^T W_QK[h] z_j)``, shape
        (B, H, N, N)."""
        Z = self._check(Z)
        c = _chunk(chunk, Z.shape[1])
        rows = [
            torch.softmax(self._scores(Z[:, s : s + c], Z), dim=-1) for s in range(0, Z.shape[1], c)
        ]
        return torch.cat(rows, dim=2)

    def heads(self, Z: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
        """Head outputs ``out[b, i, h] = sum_j A[b, h, i, j] z_j``, shape (B, N, H, D_e)."""
        Z = self._check(Z)
        return self._heads(Z, _chunk(chunk, Z.shape[1]))

    def _heads(self, Z: torch.Tensor, c: int) -> torch.Tensor:
        keys = Z.unsqueeze(1)  # (B, 1, N, D)
        outs = []
        for s in range(0, Z.shape[1], c):
            A = torch.softmax(self._scores(Z[:, s:s + c], Z), dim=-1)  # (B, H, c, N)
            outs.append((A @ keys).transpose(1, 2))  # (B, c, H, D)
        return torch.cat(outs, dim=1)

    def forward(self, Z: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
        """``y_hat`` of shape (B, N) (or (B, N, out_dim))."""
        Z = self._check(Z)
        h = self._heads(Z, _chunk(chunk, Z.shape[1])).flatten(2)  # (B, N, H*D_e), head 0 first
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
    :func:`set_mlp_weights`. Default init is torch's ``nn.Linear`` init.

    Reversal symmetry: reversing the sequence and swapping the weights of f_fwd and
    f_bwd swaps the two state streams (and reverses them).
    """

    def __init__(
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
        self.transition_widths = _widths("transition_widths", transition_widths)
        self.output_widths = _widths("output_widths", output_widths)
        try:
            r = float(r_h)
        except (TypeError, ValueError):
            raise ValueError(f"r_h must be a number > 0 or math.inf, got {r_h!r}") from None
        self.r_h = math.inf if r == math.inf else positive_float("r_h", r)
        self.out_dim = _out_dim(out_dim)
        dtype = _dtype(dtype)
        device = device_of("device", device)
        with _seeded(generator):
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
        Z = _check_input("Z", Z, self.D_in, self.param_dtype)
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
        Z = _check_input("Z", Z, self.D_in, self.param_dtype)
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

    def __init__(
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
        self.hidden = _widths("hidden", hidden)
        if t_encoding not in ("onehot", "index"):
            raise ValueError(f"t_encoding must be 'onehot' or 'index', got {t_encoding!r}")
        if task not in ("general", "simple"):
            raise ValueError(f"task must be 'general' or 'simple', got {task!r}")
        self.t_encoding = t_encoding
        self.task = task
        self.out_dim = None if out_dim is None else _out_dim(out_dim)
        n_tuples = self.N * self.q if task == "general" else self.q
        self.t_features = n_tuples * (self.N if t_encoding == "onehot" else 1)
        self.in_features = self.N * self.d + self.t_features
        n_out = self.N * (1 if self.out_dim is None else self.out_dim)
        dtype = _dtype(dtype)
        device = device_of("device", device)
        with _seeded(generator):
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
        x = _check_input("x", x, self.d, dtype)
        B = x.shape[0]
        if x.shape[1] != self.N:
            raise ValueError(f"x must have shape (B, {self.N}, {self.d}), got {tuple(x.shape)}")
        enc = self.encode_t(t, B, dtype).to(x.device)
        return torch.cat([x.reshape(B, self.N * self.d), enc], dim=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        y = self.net(self.inputs(x, t))
        return y if self.out_dim is None else y.reshape(y.shape[0], self.N, self.out_dim)


# ------------------------------------------------------------- practical (Appendix E)


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
        self.out_dim = _out_dim(out_dim)
        dtype = _dtype(dtype)
        device = device_of("device", device)
        E = self.q * self.D_e
        with _seeded(generator):
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
        return _check_input("Z", Z, self.D_e, self.hidden.weight.dtype)

    def projection_weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(Wq, Wk, Wv) of shapes (q D_e, q D_e), (q D_e, D_e), (q D_e, D_e).

        torch keeps them as ``q_proj_weight`` / ``k_proj_weight`` / ``v_proj_weight`` when
        q > 1 (kdim != embed_dim), but stacks them into ``in_proj_weight`` (3 D_e, D_e)
        when q = 1; this returns views of whichever is in use (gradients flow)."""
        mha, E = self.mha, self.q * self.D_e
        if mha.in_proj_weight is not None:
            W = mha.in_proj_weight
            return W[:E], W[E:2 * E], W[2 * E:]
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
        self.out_dim = _out_dim(out_dim)
        dtype = _dtype(dtype)
        device = device_of("device", device)
        with _seeded(generator):
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
        Z = _check_input("Z", Z, self.D_in, self.readout.weight.dtype)
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


# ------------------------------------------------------------------ published-code model variants


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
        with _seeded(generator):
            self.net = make_mlp(self.N * self.D_e, self.hidden, self.N, bias_last=True).to(dtype)
        self.to(device_of("device", device))

    def forward(self, Z: torch.Tensor) -> torch.Tensor:
        shape("Z", Z, (None, self.N, self.D_e))
        return self.net(Z.reshape(Z.shape[0], -1))
