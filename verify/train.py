"""Training helpers: online training on fresh qSTR batches (Appendix E protocol).

* ``fit_online`` / ``position_risk``: the small, single-model loop the claims use (optimized
  few-head models for Props 3 / 21).
* ``train_stack``: batched training of many independent models at once (seeds x N values x q
  values of one architecture family, Figures 1-3), each exactly as it would train alone:
  per-member AdamW (``StackedAdamW``), per-member stopping at a test-MSE threshold, prompts
  from per-member streams (``OnlineStream``, ``EpochStream``). ``Member`` describes one model
  with its task instance; ``MemberResult`` is its outcome.
* ``fit_until_threshold``: the same protocol for one ``nn.Module`` with ``torch.optim.AdamW``,
  the reference ``train_stack`` is tested against.
* ``BiasedTransformer``, ``EncodedFFN``: the published experiment code's model variants.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
from torch import nn

from constructions import _checks


@dataclass(frozen=True)
class FitResult:
    steps: int
    final_loss: float
    samples: int


def fit_online(
    model: nn.Module,
    batch: Callable[[int, torch.Generator], tuple],
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    generator: torch.Generator,
    positions: Optional[slice] = None,
    project: Optional[Callable[[nn.Module], None]] = None,
) -> FitResult:
    """AdamW on fresh batches: ``batch(B, generator) -> (inputs, y)`` and ``model(inputs) -> y_hat``.

    ``positions`` restricts the squared loss to those output positions; ``project`` is called
    after every step (e.g. to keep W_QK in a restricted class by zeroing blocks).
    """
    steps = _checks.positive_int("steps", steps)
    batch_size = _checks.positive_int("batch_size", batch_size)
    lr = _checks.positive_float("lr", lr)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    pos = positions or slice(None)
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        inputs, y = batch(batch_size, generator)
        loss = ((model(inputs)[:, pos] - y[:, pos]) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if project is not None:
            with torch.no_grad():
                project(model)
    return FitResult(steps=steps, final_loss=float(loss.detach()), samples=steps * batch_size)


@torch.no_grad()
def position_risk(model: nn.Module, batch: Callable[[int, torch.Generator], tuple], *, n: int,
                  generator: torch.Generator, positions: Optional[slice] = None, chunk: int = 512):
    """Mean and standard error of (y_hat_i - y_i)^2 over ``n`` fresh prompts and the given positions.

    The standard error treats prompts as the independent units (positions in one prompt share x).
    """
    pos = positions or slice(None)
    per_prompt = []
    for start in range(0, n, chunk):
        inputs, y = batch(min(chunk, n - start), generator)
        per_prompt.append(((model(inputs)[:, pos] - y[:, pos]) ** 2).mean(dim=1))
    losses = torch.cat(per_prompt).double()
    return float(losses.mean()), float(losses.std() / losses.numel() ** 0.5)


# =============================================================================================
# Batched training: many independent models (seeds x N values x q values) in one program.
#
# The models of the experiments (constructions.models.PracticalTransformer / PracticalRNN /
# PracticalFFN, and the published-code variants below) are read into *canonical blocks*:
# every weight is reshaped so that each of its axes is a logical axis (head, head row, tile,
# token coordinate, position, hidden unit, ...).  Members of one family then differ only in
# the lengths of those axes (N, q, d_e, widths), so their blocks are zero-padded at the END
# of every axis and stacked along a new leading member axis M.  The padded forward passes
# below are written so that
#
#   * padded coordinates of the input are zero, padded weights are zero,
#   * every padded weight receives an exactly zero gradient, and AdamW keeps an exactly zero
#     parameter with exactly zero gradient at zero (decay of 0 is 0, m = v = 0, 0/(0+eps)=0),
#   * the loss is the SUM over members of each member's own mean squared error,
#
# hence the gradient, the optimizer state and the trajectory of member m are those of member m
# trained alone (tests/test_train_batched.py checks this against torch.optim.AdamW on the
# nn.Module to 1e-6 in float64).  Padded query positions are excluded from the loss, padded key
# positions are masked out of the softmax, the backward RNN direction runs on each member's own
# reversed sequence, and tiles / heads / slots beyond a member's q are masked or zero.
# =============================================================================================

import contextlib
import math
import time
from typing import Any, Dict, List, Sequence, Tuple

import torch.nn.functional as F

from constructions.models import PracticalFFN, PracticalRNN, PracticalTransformer, make_mlp
from constructions.task import QSTR


# ------------------------------------------------------------------ published-code model variants


def _seeded_init(generator):
    """Fork the CPU RNG seeded from ``generator`` (weights are drawn on the CPU)."""
    if generator is None:
        return contextlib.nullcontext()
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device).item())
    ctx = torch.random.fork_rng(devices=[])

    class _Ctx:
        def __enter__(self_inner):
            ctx.__enter__()
            torch.manual_seed(seed)

        def __exit__(self_inner, *exc):
            return ctx.__exit__(*exc)

    return _Ctx()


class BiasedTransformer(PracticalTransformer):
    """:class:`PracticalTransformer` whose attention carries biases (``nn.MultiheadAttention``
    with ``bias=True``, as in the published experiment code). Weights are the parent's (same
    ``generator`` -> same weights); the in-projection and out-projection biases start at 0,
    torch's initialisation of them."""

    def __init__(self, D_e: int, q: int, width: int = 100, out_dim: int = 1, *, generator=None, dtype=None, device=None):
        super().__init__(D_e, q, width, out_dim, generator=generator, dtype=dtype, device=device)
        old = self.mha
        E = self.q * self.D_e
        new = nn.MultiheadAttention(embed_dim=E, num_heads=self.q, kdim=self.D_e, vdim=self.D_e, bias=True,
                                    batch_first=True, dtype=old.out_proj.weight.dtype,
                                    device=old.out_proj.weight.device)
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

    def __init__(self, N: int, D_e: int, hidden: Sequence[int] = (1000, 1000), *, generator=None, dtype=None, device=None):
        super().__init__()
        self.N = _checks.positive_int("N", N)
        self.D_e = _checks.positive_int("D_e", D_e)
        self.hidden = tuple(_checks.positive_int("hidden", h) for h in hidden)
        dtype = torch.get_default_dtype() if dtype is None else _checks.float_dtype("dtype", dtype)
        with _seeded_init(generator):
            self.net = make_mlp(self.N * self.D_e, self.hidden, self.N, bias_last=True).to(dtype)
        self.to(_checks.device_of("device", device))

    def forward(self, Z: torch.Tensor) -> torch.Tensor:
        _checks.shape("Z", Z, (None, self.N, self.D_e))
        return self.net(Z.reshape(Z.shape[0], -1))


# ----------------------------------------------------------------------------------- streams


class OnlineStream:
    """Fresh prompts of ``task`` drawn with ``generator``: the online protocol (Appendix E).

    Prompts are generated ``chunk`` at a time (one ``task.sample(chunk)`` call) and handed out
    in order, so the sequence of prompts a consumer sees does not depend on how many it asks
    for at once: training a member alone (64 per step) and inside a stack (prefetching many
    steps) sees the same prompts. ``consumed`` counts prompts handed out.
    """

    def __init__(self, task: QSTR, generator: torch.Generator, *, dtype=torch.float32, chunk: int = 2048):
        self.task = task
        self.generator = generator
        self.device = generator.device
        self.dtype = dtype
        self.chunk = _checks.positive_int("chunk", chunk)
        self._buf: Optional[tuple] = None
        self._pos = 0
        self.consumed = 0

    def draw(self, n: int) -> tuple:
        """The next ``n`` prompts as ``(x, t, y)``: (n, N, d), (n, N, q), (n, N)."""
        n = _checks.positive_int("n", n)
        parts = []
        while n > 0:
            if self._buf is None or self._pos >= self._buf[0].shape[0]:
                p = self.task.sample(self.chunk, generator=self.generator, device=self.device, dtype=self.dtype)
                self._buf, self._pos = (p.x, p.t, p.y), 0
            k = min(n, self._buf[0].shape[0] - self._pos)
            parts.append(tuple(v[self._pos:self._pos + k] for v in self._buf))
            self._pos += k
            n -= k
        self.consumed += sum(p[0].shape[0] for p in parts)
        if len(parts) == 1:
            return parts[0]
        return tuple(torch.cat([p[i] for p in parts]) for i in range(3))


class EpochStream:
    """A fixed training set ``(x, t, y)`` handed out in passes, each pass in a fresh random
    order drawn with ``generator`` (sampling without replacement within a pass; a batch may
    straddle two passes). ``consumed`` counts prompts handed out (with repetitions)."""

    def __init__(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor, generator: torch.Generator):
        self.x, self.t, self.y = x, t, y
        self.n = x.shape[0]
        self.generator = generator
        self._perm: Optional[torch.Tensor] = None
        self._pos = 0
        self.consumed = 0

    def draw(self, n: int) -> tuple:
        n = _checks.positive_int("n", n)
        idx = []
        while n > 0:
            if self._perm is None or self._pos >= self.n:
                self._perm = torch.randperm(self.n, generator=self.generator, device=self.generator.device)
                self._pos = 0
            k = min(n, self.n - self._pos)
            idx.append(self._perm[self._pos:self._pos + k])
            self._pos += k
            n -= k
        i = torch.cat(idx).to(self.x.device)
        self.consumed += i.numel()
        return self.x[i], self.t[i], self.y[i]


# ----------------------------------------------------------------------------------- members


@dataclass
class Member:
    """One model to train, with its task instance and its stopping rule.

    * ``model``: the initial network (its weights are read once; its class fixes the family):
      :class:`PracticalTransformer` (or :class:`BiasedTransformer`) on the Transformer encoding
      with prefactor ``c``; :class:`PracticalRNN` (GRU, one layer) on the RNN encoding (c = 1);
      :class:`PracticalFFN` (one-hot t) on (x, t); :class:`EncodedFFN` on the encoding.
    * ``omega``: (N, d_e) positional codes (for the encoding models; ``None`` for PracticalFFN).
    * ``stream``: training prompts (:class:`OnlineStream` or :class:`EpochStream`).
    * ``test``: ``(x, t, y)`` test prompts; test MSE = mean over prompts and positions.
    * ``threshold``: stop at the first check with test MSE < threshold (``None``: never).
    * ``tag``: anything; returned in the :class:`MemberResult`.
    """

    model: nn.Module
    stream: Any
    test: tuple
    omega: Optional[torch.Tensor] = None
    c: float = 1.0
    threshold: Optional[float] = None
    lr: float = 1e-3
    weight_decay: float = 0.1
    tag: Any = None
    info: dict = field(default_factory=dict)  # free-form facts to record (e.g. the codebook's coherence)

    @property
    def N(self) -> int:
        return int(self.test[0].shape[1])

    @property
    def d(self) -> int:
        return int(self.test[0].shape[2])

    @property
    def q(self) -> int:
        return int(self.test[1].shape[2])

    def inputs(self, x: torch.Tensor, t: torch.Tensor):
        """What ``self.model`` takes: the encoding z (B, N, D_e), or (x, t) for PracticalFFN."""
        from constructions.encoding import encode

        if isinstance(self.model, PracticalFFN):
            return (x, t[:, 0, :]) if self.model.task == "simple" else (x, t)
        return (encode(x, t, self.omega.to(device=x.device, dtype=x.dtype), c=self.c),)


@dataclass
class MemberResult:
    """Outcome of one member: ``samples`` = steps * batch at the first check with test MSE
    below the threshold (``None`` if never reached within ``max_steps``)."""

    tag: Any
    steps: int
    samples: Optional[int]
    reached: bool
    test_mse: float
    curve: List[Tuple[int, float]]
    train_loss: float
    consumed: int
    seconds: float
    model: Optional[nn.Module] = None


# ------------------------------------------------------------------------------ AdamW, stacked


class StackedAdamW:
    """AdamW (torch.optim.AdamW's update, amsgrad off) on stacked tensors (M, ...) with
    per-member learning rate and weight decay; each member's moments are its own slice, so the
    update is the one each member would get alone. All members share the step count (they
    start together; finished members are removed from the stack, see :meth:`select`)."""

    def __init__(self, params: Dict[str, torch.Tensor], lr: torch.Tensor, weight_decay: torch.Tensor,
                 betas=(0.9, 0.999), eps: float = 1e-8):
        self.params = params
        self.lr, self.wd = lr, weight_decay
        self.b1, self.b2 = betas
        self.eps = eps
        self.m = {k: torch.zeros_like(v) for k, v in params.items()}
        self.v = {k: torch.zeros_like(v) for k, v in params.items()}
        self.step_count = 0
        # torch's fused AdamW kernel (same update, one pass over memory) when every member has
        # the same lr and weight decay; the explicit per-member update otherwise.
        self.fused = (hasattr(torch, "_fused_adamw_") and bool((lr == lr[0]).all()) and bool((weight_decay == weight_decay[0]).all()))
        # host copies of the shared lr / weight decay and device step counters, so that a step
        # never waits for the device (no .item(), no host-to-device copy)
        self._lr0, self._wd0 = float(lr[0]), float(weight_decay[0])
        self._steps = [torch.zeros((), dtype=torch.float32, device=v.device) for v in params.values()]

    @torch.no_grad()
    def step(self, grads: Dict[str, torch.Tensor]) -> None:
        """One update. Reads the step count from device tensors only (no host value enters the
        arithmetic), so a CUDA graph that captured a step replays the right update every time."""
        self.step_count += 1
        torch._foreach_add_(self._steps, 1.0)
        if self.fused:
            try:
                return self._fused_step(grads)
            except (RuntimeError, NotImplementedError):  # dtype / device without a fused kernel
                self.fused = False
        step = self._steps[0].double()
        bc1 = 1 - self.b1 ** step
        bc2_sqrt = (1 - self.b2 ** step).sqrt()
        for k, p in self.params.items():
            g = grads[k]
            shape = (-1,) + (1,) * (p.dim() - 1)
            lr = self.lr.view(shape)
            bc1, bc2_sqrt = bc1.to(p.dtype), bc2_sqrt.to(p.dtype)
            p.mul_(1 - lr * self.wd.view(shape))
            self.m[k].lerp_(g, 1 - self.b1)
            self.v[k].mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            denom = (self.v[k].sqrt() / bc2_sqrt).add_(self.eps)
            p.sub_(self.m[k] / denom * (lr / bc1))

    def _fused_step(self, grads: Dict[str, torch.Tensor]) -> None:
        keys = list(self.params)
        # the kernel reads the step count from self._steps (torch.optim increments it before the call)
        torch._fused_adamw_(
            [self.params[k] for k in keys], [grads[k].contiguous() for k in keys], [self.m[k] for k in keys],
            [self.v[k] for k in keys], [], self._steps, lr=self._lr0, beta1=self.b1, beta2=self.b2,
            weight_decay=self._wd0, eps=self.eps, amsgrad=False, maximize=False)

    def select(self, keep: torch.Tensor) -> None:
        for d in (self.params, self.m, self.v):
            for k in list(d):
                d[k] = d[k].index_select(0, keep)
        self.lr = self.lr.index_select(0, keep)
        self.wd = self.wd.index_select(0, keep)


# ----------------------------------------------------------------------------- padding helpers


def _place(t: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """``t`` written into the leading corner of a zero tensor of ``shape`` (prefix padding)."""
    out = torch.zeros(tuple(shape), dtype=t.dtype, device=t.device)
    out[tuple(slice(0, s) for s in t.shape)] = t
    return out


def _stack_padded(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    shape = [max(t.shape[i] for t in tensors) for i in range(tensors[0].dim())]
    return torch.stack([_place(t, shape) for t in tensors])


def _pad_prompts(x, t, y, N: int, q: int):
    """Pad one member's prompts to (., N, d), (., N, q) (index 0), (., N)."""
    n, Nm, d = x.shape
    if Nm < N:
        x = torch.cat([x, x.new_zeros(n, N - Nm, d)], 1)
        y = torch.cat([y, y.new_zeros(n, N - Nm)], 1)
        t = torch.cat([t, t.new_zeros(n, N - Nm, t.shape[2])], 1)
    if t.shape[2] < q:
        t = torch.cat([t, t.new_zeros(n, N, q - t.shape[2])], 2)
    return x, t, y


# --------------------------------------------------------------------------------- families


class _Family:
    """A stack of members of one architecture family: canonical blocks <-> modules, padded
    forward. Subclasses define ``canonical``, ``load``, ``member_meta`` and ``forward``."""

    name = "family"

    def __init__(self, members: Sequence[Member]):
        self.d = members[0].d
        self.Nmax = max(m.N for m in members)
        self.qmax = max(m.q for m in members)

    # per-member, unpadded
    def canonical(self, model: nn.Module) -> Dict[str, torch.Tensor]:
        raise NotImplementedError

    def load(self, model: nn.Module, blocks: Dict[str, torch.Tensor]) -> nn.Module:
        raise NotImplementedError

    def member_meta(self, member: Member) -> Dict[str, torch.Tensor]:
        return {}

    def forward(self, P: Dict[str, torch.Tensor], meta: Dict[str, torch.Tensor], x, t) -> torch.Tensor:
        raise NotImplementedError

    def elements_per_prompt(self, P) -> int:
        """Rough count of activation elements per prompt and member in a forward pass."""
        raise NotImplementedError

    # shared: the token encoding of Appendix A.1 / B.1 on padded prompts
    def encoding_tables(self, member: Member, Dmax: int) -> Dict[str, torch.Tensor]:
        """pos (Nmax, Dmax) = c omega_i in the pos block; slot (qmax, Nmax, Dmax) = c omega_j in
        slot k's block; zero for padded positions, slots and coordinates."""
        from constructions.layout import token_layout

        om = member.omega
        N, d_e = om.shape
        q, d, c = member.q, member.d, member.c
        lay = token_layout(d, q, d_e)
        pos = om.new_zeros(self.Nmax, Dmax)
        pos[:N, lay["pos"]] = c * om
        slot = om.new_zeros(self.qmax, self.Nmax, Dmax)
        for k in range(q):
            slot[k, :N, lay.slot(k)] = c * om
        return {"pos_table": pos, "slot_table": slot}

    def encode(self, meta, x, t, Dmax: int) -> torch.Tensor:
        """Padded encodings (M, B, Nmax, Dmax) of padded prompts x (M, B, Nmax, d), t (M, B, Nmax, qmax)."""
        M, B, N, _ = x.shape
        z = F.pad(x, (0, Dmax - self.d)) + meta["pos_table"][:, None]
        slots = meta["slot_table"]  # (M, qmax, N, Dmax)
        flat = slots.reshape(M * self.qmax * N, Dmax)
        base = (torch.arange(M, device=x.device) * (self.qmax * N)).view(M, 1, 1)
        for k in range(self.qmax):
            z = z + flat[base + k * N + t[..., k]]
        return z * meta["pos_mask"][:, None, :, None]

    # stacking
    def stack(self, members: Sequence[Member]):
        blocks = [self.canonical(m.model) for m in members]
        P = {k: _stack_padded([b[k].detach() for b in blocks]).contiguous() for k in blocks[0]}
        metas = [self.member_meta(m) for m in members]
        meta = {k: torch.stack([mm[k] for mm in metas]) for k in metas[0]} if metas[0] else {}
        device = P[next(iter(P))].device
        Ns = torch.tensor([m.N for m in members], device=device)
        meta["N"] = Ns
        meta["pos_mask"] = (torch.arange(self.Nmax, device=device)[None] < Ns[:, None]).to(P[next(iter(P))].dtype)
        return P, meta

    def unstack(self, P: Dict[str, torch.Tensor], i: int, member: Member) -> nn.Module:
        """Member ``i``'s trained weights loaded into a deep copy of its model."""
        import copy

        ref = self.canonical(member.model)
        blocks = {k: P[k][i][tuple(slice(0, s) for s in ref[k].shape)] for k in ref}
        return self.load(copy.deepcopy(member.model), blocks)


class TransformerFamily(_Family):
    """q-head attention, heads seeing the whole token (PracticalTransformer, optionally with biases).

    Blocks: Wq (H, D, H, D) [head, head row, query tile, token coord], Wk / Wv (H, D, D),
    Wo (H, D, H, D) [out head, out row, in head, in coord], biases (H, D), W1 (width, H, D),
    b1 (width,), W2 (out, width), b2 (out,). D = D_e (head_dim = D_e), H = q.
    """

    name = "transformer"

    def __init__(self, members):
        super().__init__(members)
        self.bias = members[0].model.mha.in_proj_bias is not None
        self.Dmax = max(m.model.D_e for m in members)

    def canonical(self, model):
        H, D = model.q, model.D_e
        Wq, Wk, Wv = model.projection_weights()
        b = {
            "Wq": Wq.reshape(H, D, H, D), "Wk": Wk.reshape(H, D, D), "Wv": Wv.reshape(H, D, D),
            "Wo": model.mha.out_proj.weight.reshape(H, D, H, D),
            "W1": model.hidden.weight.reshape(model.width, H, D), "b1": model.hidden.bias,
            "W2": model.readout.weight, "b2": model.readout.bias,
        }
        if self.bias:
            bq, bk, bv = model.mha.in_proj_bias.reshape(3, H, D)
            b.update(bq=bq, bk=bk, bv=bv, bo=model.mha.out_proj.bias.reshape(H, D))
        return b

    @torch.no_grad()
    def load(self, model, blocks):
        H, D = model.q, model.D_e
        E = H * D
        mha = model.mha
        if mha.in_proj_weight is not None:
            mha.in_proj_weight[:E] = blocks["Wq"].reshape(E, E)
            mha.in_proj_weight[E:2 * E] = blocks["Wk"].reshape(E, D)
            mha.in_proj_weight[2 * E:] = blocks["Wv"].reshape(E, D)
        else:
            mha.q_proj_weight.copy_(blocks["Wq"].reshape(E, E))
            mha.k_proj_weight.copy_(blocks["Wk"].reshape(E, D))
            mha.v_proj_weight.copy_(blocks["Wv"].reshape(E, D))
        mha.out_proj.weight.copy_(blocks["Wo"].reshape(E, E))
        if self.bias:
            mha.in_proj_bias.copy_(torch.cat([blocks["bq"], blocks["bk"], blocks["bv"]]).reshape(-1))
            mha.out_proj.bias.copy_(blocks["bo"].reshape(-1))
        model.hidden.weight.copy_(blocks["W1"].reshape(model.width, E))
        model.hidden.bias.copy_(blocks["b1"])
        model.readout.weight.copy_(blocks["W2"])
        model.readout.bias.copy_(blocks["b2"])
        return model

    def member_meta(self, member):
        meta = self.encoding_tables(member, self.Dmax)
        om = member.omega
        meta["tile_mask"] = (torch.arange(self.qmax, device=om.device) < member.q).to(om.dtype)
        meta["scale"] = om.new_tensor(1 / math.sqrt(member.model.D_e))
        return meta

    def elements_per_prompt(self, P):
        H, width = P["Wk"].shape[1], P["W1"].shape[1]
        return self.Nmax * (6 * H * self.Dmax + 2 * H * self.Nmax + 2 * width)

    def forward(self, P, meta, x, t):
        z = self.encode(meta, x, t, self.Dmax)  # (M, B, N, D)
        Wq = torch.einsum("mhrtc,mt->mhrc", P["Wq"], meta["tile_mask"])
        Q = torch.einsum("mbnc,mhrc->mbhnr", z, Wq)
        K = torch.einsum("mbnc,mhrc->mbhnr", z, P["Wk"])
        V = torch.einsum("mbnc,mhrc->mbhnr", z, P["Wv"])
        if self.bias:
            Q = Q + P["bq"][:, None, :, None, :]
            K = K + P["bk"][:, None, :, None, :]
            V = V + P["bv"][:, None, :, None, :]
        S = (Q @ K.transpose(-1, -2)) * meta["scale"].view(-1, 1, 1, 1, 1)
        keep = meta["pos_mask"][:, None, None, None, :] > 0
        S = S.masked_fill(~keep, float("-inf"))
        O = torch.softmax(S, dim=-1) @ V  # (M, B, H, N, D)
        out = torch.einsum("mbhnc,mohc->mbno", O, P["Wo"].flatten(1, 2))
        if self.bias:
            out = out + P["bo"].flatten(1)[:, None, None, :]
        M, B, N = out.shape[:3]
        W1 = P["W1"].flatten(2)  # (M, width, H*D)  -- (head, coord) order matches Wo's out axis
        hid = torch.relu(torch.einsum("mbno,mwo->mbnw", out, W1) + P["b1"][:, None, None, :])
        y = torch.einsum("mbnw,mkw->mbnk", hid, P["W2"]) + P["b2"][:, None, None, :]
        return y[..., 0]


class GRUFamily(_Family):
    """Bidirectional one-layer GRU with a linear readout (PracticalRNN, cell 'gru').

    Blocks: Wih (2, 3, Hd, D) [direction, gate r/z/n, unit, token coord], Whh (2, 3, Hd, Hd),
    bih / bhh (2, 3, Hd), Wr (out, 2, Hd), br (out,). The backward direction runs forward over
    each member's own reversed sequence (so padding never enters a real position's state).
    """

    name = "rnn"

    def __init__(self, members):
        super().__init__(members)
        self.Dmax = max(m.model.D_in for m in members)
        for m in members:
            if m.model.cell != "gru" or m.model.num_layers != 1:
                raise ValueError("batched RNN training supports PracticalRNN(cell='gru', num_layers=1)")

    def canonical(self, model):
        r, H = model.rnn, model.hidden_size

        def both(name, shape):
            return torch.stack([getattr(r, name).reshape(shape), getattr(r, name + "_reverse").reshape(shape)])

        return {
            "Wih": both("weight_ih_l0", (3, H, model.D_in)), "Whh": both("weight_hh_l0", (3, H, H)),
            "bih": both("bias_ih_l0", (3, H)), "bhh": both("bias_hh_l0", (3, H)),
            "Wr": model.readout.weight.reshape(model.out_dim, 2, H), "br": model.readout.bias,
        }

    @torch.no_grad()
    def load(self, model, blocks):
        r, H = model.rnn, model.hidden_size
        for k, name in (("Wih", "weight_ih_l0"), ("Whh", "weight_hh_l0"), ("bih", "bias_ih_l0"), ("bhh", "bias_hh_l0")):
            getattr(r, name).copy_(blocks[k][0].reshape(getattr(r, name).shape))
            getattr(r, name + "_reverse").copy_(blocks[k][1].reshape(getattr(r, name).shape))
        model.readout.weight.copy_(blocks["Wr"].reshape(model.out_dim, 2 * H))
        model.readout.bias.copy_(blocks["br"])
        return model

    def member_meta(self, member):
        meta = self.encoding_tables(member, self.Dmax)
        N = member.N
        rev = torch.arange(self.Nmax, device=member.omega.device)
        rev[:N] = N - 1 - rev[:N]
        meta["rev"] = rev
        return meta

    def elements_per_prompt(self, P):
        return self.Nmax * (2 * self.Dmax + 16 * P["Whh"].shape[-1])

    def forward(self, P, meta, x, t):
        z = self.encode(meta, x, t, self.Dmax)  # (M, B, N, D)
        M, B, N, D = z.shape
        rev = meta["rev"][:, None, :, None].expand(M, B, N, D)
        zz = torch.stack([z, z.gather(2, rev)], 1)  # (M, 2, B, N, D)
        Hd = P["Whh"].shape[-1]
        # input gates of every step, (N, M*2*B, 3*Hd): step s is one contiguous row block
        gi = torch.einsum("mebnc,megjc->nmebgj", zz, P["Wih"]) + P["bih"][None, :, :, None]
        gis = gi.reshape(N, M * 2 * B, 3 * Hd).unbind(0)
        WhhT = P["Whh"].reshape(M * 2, 3 * Hd, Hd).transpose(1, 2)  # (M*2, Hd, 3Hd)
        bhh = P["bhh"].reshape(M * 2, 1, 3 * Hd)
        cell = _gru_cell_fused if z.is_cuda else _gru_cell
        h = z.new_zeros(M * 2 * B, Hd)
        outs = []
        for s in range(N):
            gh = torch.baddbmm(bhh, h.view(M * 2, B, Hd), WhhT).view(M * 2 * B, 3 * Hd)
            h = cell(gis[s], gh, h)
            outs.append(h)
        Hs = torch.stack(outs, 1).view(M, 2, B, N, Hd)
        revh = meta["rev"][:, None, :, None].expand(M, B, N, Hd)
        hf, hb = Hs[:, 0], Hs[:, 1].gather(2, revh)
        y = (torch.einsum("mbnj,mkj->mbnk", hf, P["Wr"][:, :, 0]) + torch.einsum("mbnj,mkj->mbnk", hb, P["Wr"][:, :, 1])
             + P["br"][:, None, None, :])
        return y[..., 0]


def _gru_cell(gi: torch.Tensor, gh: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """One GRU step from input gates ``gi`` and hidden gates ``gh`` (both (B, 3H), biases
    included; gate order r, z, n as in torch.nn.GRU): h' = (1 - z) n + z h."""
    gi_r, gi_u, gi_n = gi.chunk(3, 1)
    gh_r, gh_u, gh_n = gh.chunk(3, 1)
    r = torch.sigmoid(gi_r + gh_r)
    u = torch.sigmoid(gi_u + gh_u)
    n = torch.tanh(gi_n + r * gh_n)
    return n + u * (h - n)


def _gru_cell_fused(gi: torch.Tensor, gh: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """:func:`_gru_cell` as torch's fused CUDA kernel (the one nn.GRUCell uses): one kernel
    forward and one backward instead of about ten."""
    return torch.ops.aten._thnn_fused_gru_cell(gi, gh, h)[0]


class FFNFamily(_Family):
    """Feedforward nets on all positions at once (PracticalFFN with one-hot t, or EncodedFFN).

    Blocks: first layer split by logical input axes -- PracticalFFN: Wx (h1, N, d) on vec(x) and
    Wt (h1, N, q, N) [position, slot, value] on onehot(t) (general) or (h1, q, N) (simple);
    EncodedFFN: Wz (h1, N, D_e) on vec(z). Then W{k} (out, in), b{k}; the last layer's rows
    are the N positions.
    """

    name = "ffn"

    def __init__(self, members):
        super().__init__(members)
        m0 = members[0].model
        self.mode = "encoded" if isinstance(m0, EncodedFFN) else m0.task
        if self.mode != "encoded" and any(m.model.t_encoding != "onehot" for m in members):
            raise ValueError("batched FFN training supports t_encoding='onehot'")
        if any((isinstance(m.model, EncodedFFN) and "encoded" or m.model.task) != self.mode for m in members):
            raise ValueError("all FFN members of one stack must share their input mode")
        self.Dmax = max(m.model.D_e for m in members) if self.mode == "encoded" else None
        self.depth = len(m0.hidden) + 1

    def canonical(self, model):
        lins = [l for l in model.net if isinstance(l, nn.Linear)]
        W0 = lins[0].weight
        h1 = W0.shape[0]
        if self.mode == "encoded":
            b = {"Wz": W0.reshape(h1, model.N, model.D_e)}
        else:
            N, d, q = model.N, model.d, model.q
            tshape = (h1, N, q, N) if self.mode == "general" else (h1, q, N)
            b = {"Wx": W0[:, :N * d].reshape(h1, N, d), "Wt": W0[:, N * d:].reshape(tshape)}
        b["b1"] = lins[0].bias
        for k, lin in enumerate(lins[1:], 2):
            b[f"W{k}"], b[f"b{k}"] = lin.weight, lin.bias
        return b

    @torch.no_grad()
    def load(self, model, blocks):
        lins = [l for l in model.net if isinstance(l, nn.Linear)]
        h1 = lins[0].weight.shape[0]
        if self.mode == "encoded":
            lins[0].weight.copy_(blocks["Wz"].reshape(h1, -1))
        else:
            lins[0].weight.copy_(torch.cat([blocks["Wx"].reshape(h1, -1), blocks["Wt"].reshape(h1, -1)], 1))
        lins[0].bias.copy_(blocks["b1"])
        for k, lin in enumerate(lins[1:], 2):
            lin.weight.copy_(blocks[f"W{k}"])
            lin.bias.copy_(blocks[f"b{k}"])
        return model

    def member_meta(self, member):
        if self.mode == "encoded":
            return self.encoding_tables(member, self.Dmax)
        dev = member.test[0].device
        dt = member.test[0].dtype
        return {"slot_mask": (torch.arange(self.qmax, device=dev) < member.q).to(dt)}

    def elements_per_prompt(self, P):
        first = P["Wz"] if self.mode == "encoded" else P["Wt"]
        feats = first[0, 0].numel() + self.Nmax * self.d
        return feats + 2 * sum(P[f"b{k}"].shape[1] for k in range(1, self.depth + 1))

    def forward(self, P, meta, x, t):
        M, B, N, d = x.shape
        if self.mode == "encoded":
            z = self.encode(meta, x, t, self.Dmax)
            h = torch.einsum("mbf,mhf->mbh", z.reshape(M, B, -1), P["Wz"].flatten(2))
        else:
            h = torch.einsum("mbf,mhf->mbh", x.reshape(M, B, -1), P["Wx"].flatten(2))
            if self.mode == "general":
                oh = _one_hot(t, N, x.dtype) * meta["slot_mask"][:, None, None, :, None]
                oh = oh * meta["pos_mask"][:, None, :, None, None]
            else:
                oh = _one_hot(t[:, :, 0, :], N, x.dtype) * meta["slot_mask"][:, None, :, None]
            h = h + torch.einsum("mbf,mhf->mbh", oh.reshape(M, B, -1), P["Wt"].flatten(2))
        h = h + P["b1"][:, None, :]
        for k in range(2, self.depth + 1):
            h = torch.einsum("mbi,moi->mbo", torch.relu(h), P[f"W{k}"]) + P[f"b{k}"][:, None, :]
        return h  # (M, B, Nmax): padded output rows are zero and never enter the loss


def _one_hot(t: torch.Tensor, N: int, dtype) -> torch.Tensor:
    """F.one_hot(t, N) as ``dtype`` without its host-side range check (capturable in a CUDA graph)."""
    return (t[..., None] == torch.arange(N, device=t.device)).to(dtype)


def family_of(member: Member) -> type:
    m = member.model
    if isinstance(m, PracticalTransformer):
        return TransformerFamily
    if isinstance(m, PracticalRNN):
        return GRUFamily
    if isinstance(m, (PracticalFFN, EncodedFFN)):
        return FFNFamily
    raise ValueError(f"no batched family for {type(m).__name__}")


def stack_key(member: Member) -> tuple:
    """Members with equal keys can share one stack."""
    m = member.model
    fam = family_of(member)
    if fam is TransformerFamily:
        extra = (m.mha.in_proj_bias is not None, m.width)
    elif fam is GRUFamily:
        extra = ()
    else:
        extra = ("encoded" if isinstance(m, EncodedFFN) else m.task, len(m.hidden))
    return (fam.__name__, type(member.stream).__name__, member.d) + extra


# ------------------------------------------------------------------------------ training loop


def _log_curve(curve: List[Tuple[int, float]], keep: int = 60) -> List[Tuple[int, float]]:
    """At most ``keep`` points of a learning curve, log-spaced in the check index, last kept."""
    if len(curve) <= keep:
        return list(curve)
    idx = sorted({int(round(v)) for v in torch.logspace(0, math.log10(len(curve)), keep).tolist()})
    return [curve[i - 1] for i in idx if 1 <= i <= len(curve)] + ([curve[-1]] if idx[-1] != len(curve) else [])


@contextlib.contextmanager
def _tf32(enabled: bool):
    """Let float32 matrix products use TF32 tensor cores while the block runs (restored after)."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = bool(enabled) or before[0]
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def _train_step(fam: _Family, opt: StackedAdamW, meta, x, t, y, batch_size: int) -> torch.Tensor:
    """One AdamW step of every member on its own mean squared error; returns the (M,) losses."""
    P = opt.params
    yh = fam.forward(P, meta, x, t)
    per = ((yh - y) ** 2 * meta["pos_mask"][:, None, :]).sum(dim=(1, 2)) / (batch_size * meta["N"].to(yh.dtype))
    names = list(P)
    grads = torch.autograd.grad(per.sum(), [P[k] for k in names])
    opt.step(dict(zip(names, grads)))
    return per.detach()


def _record(fam, opt, meta, x, t, y, batch_size: int):
    """Take this step eagerly on a side stream (the warm-up recording needs: lazy library set-up
    must not happen during capture), then record it for the next steps: ``(graph, losses)``.
    If recording fails, the step has still been taken exactly once (a capture runs nothing) and
    the stack goes on without graphs: ``(None, losses)``, with a warning."""
    import warnings

    side = torch.cuda.Stream(device=x.device)
    side.wait_stream(torch.cuda.current_stream(x.device))
    with torch.cuda.stream(side):
        per = _train_step(fam, opt, meta, x, t, y, batch_size)
    torch.cuda.current_stream(x.device).wait_stream(side)
    try:
        return _GraphedStep(fam, opt, meta, x, t, y, batch_size), per
    except RuntimeError as exc:  # torch.AcceleratorError is one
        warnings.warn(f"recording the training step as a CUDA graph failed ({exc}); this stack goes on "
                      "without graphs", RuntimeWarning)
        return None, per


class _GraphedStep:
    """:func:`_train_step` recorded once as a CUDA graph and replayed on copies of each batch.

    A step of a stack launches hundreds of small kernels (the GRU alone several per position
    and direction); replaying them as one graph removes the host's launch cost, which
    dominated on a GPU. The graph holds the stack's tensors, so it is recorded again whenever
    the stack changes (a member finishes); the memory of the graph it replaces is returned to
    the device first (one pool shared by the recordings tripped an allocator assertion in
    torch 2.11, and pools left behind fragmented the memory until a later stack ran out)."""

    def __init__(self, fam, opt, meta, x, t, y, batch_size: int):
        torch.cuda.synchronize(x.device)  # nothing pending while recording
        torch.cuda.empty_cache()  # the replaced graph's pool
        self.inputs = (x.clone(), t.clone(), y.clone())
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.per = _train_step(fam, opt, meta, *self.inputs, batch_size)

    def __call__(self, x, t, y) -> torch.Tensor:
        for static, v in zip(self.inputs, (x, t, y)):
            static.copy_(v)
        self.graph.replay()
        return self.per


def train_stack(
    members: Sequence[Member],
    *,
    batch_size: int = 64,
    check_every: int = 10,
    max_steps: int = 15625,
    prefetch: int = 16,
    eval_elements: Optional[int] = None,
    epoch_steps: Optional[int] = None,
    epoch_loss_threshold: Optional[float] = None,
    return_models: bool = False,
    on_finish: Optional[Callable[[MemberResult], None]] = None,
    on_step: Optional[Callable[[int, int], None]] = None,
    graphs: Optional[bool] = None,
    tf32: bool = False,
) -> List[MemberResult]:
    """Train ``members`` (one family, see :func:`stack_key`) together, each exactly as alone.

    Protocol (SPEC section 7): every step each active member takes the next ``batch_size``
    prompts of its own stream and makes one AdamW step on its own mean squared error. Every
    ``check_every`` steps the active members' test MSE is computed on their own test sets; a
    member whose test MSE is below its ``threshold`` stops there (it is removed from the stack:
    no more updates, no more prompts) with ``samples = steps * batch_size``. Members still
    active after ``max_steps`` steps stop with ``samples = None``. With ``epoch_steps`` and
    ``epoch_loss_threshold`` a member also stops when its mean training loss over the last
    ``epoch_steps`` steps (an epoch) is below that value (the fixed-training-set protocol of
    Figure 2); ``samples`` is then the prompts consumed.

    ``prefetch``: steps of prompts drawn per refill (the prompt sequence does not depend on it).
    ``eval_elements``: rough cap on activation elements per test chunk (default: 2^26 on the
    CPU; on CUDA a quarter of the free memory).
    ``on_finish(result)`` is called as each member finishes (in stopping order); ``on_step(step,
    active)`` after every step. ``graphs``: replay each step as a CUDA graph (default: on CUDA;
    the same arithmetic, without the per-kernel launch cost). ``tf32``: float32 matrix products
    on the tensor cores with 10-bit mantissas (CUDA; faster, not bit-comparable with the CPU).
    Returns results in the order of ``members``.
    """
    members = list(members)
    if not members:
        return []
    keys = {stack_key(m) for m in members}
    if len(keys) != 1:
        raise ValueError(f"members do not share one stack family: {sorted(keys)}")
    batch_size = _checks.positive_int("batch_size", batch_size)
    check_every = _checks.positive_int("check_every", check_every)
    max_steps = _checks.positive_int("max_steps", max_steps)
    prefetch = _checks.positive_int("prefetch", prefetch)
    fam = family_of(members[0])(members)
    P, meta = fam.stack(members)
    if eval_elements is None:
        eval_elements = 2**26
        dev0 = next(iter(P.values())).device
        if dev0.type == "cuda":
            free, _ = torch.cuda.mem_get_info(dev0)
            eval_elements = max(eval_elements, min(2**31, free // (4 * next(iter(P.values())).element_size())))
    for v in P.values():
        v.requires_grad_(True)
    dev = next(iter(P.values())).device
    dtype = next(iter(P.values())).dtype
    opt = StackedAdamW(P, torch.tensor([m.lr for m in members], device=dev, dtype=dtype),
                       torch.tensor([m.weight_decay for m in members], device=dev, dtype=dtype))
    Nmax, qmax = fam.Nmax, fam.qmax
    test = [torch.stack(v) for v in zip(*[_pad_prompts(*m.test, Nmax, qmax) for m in members])]
    n_test = torch.tensor([m.test[0].shape[0] for m in members], device=dev)
    if len(set(n_test.tolist())) != 1:
        raise ValueError("members of one stack must have test sets of equal size")
    thr = torch.tensor([m.threshold if m.threshold is not None else -math.inf for m in members], device=dev, dtype=dtype)
    active = list(range(len(members)))  # indices into members, aligned with the stack rows
    results: List[Optional[MemberResult]] = [None] * len(members)
    curves: List[List[Tuple[int, float]]] = [[] for _ in members]
    last_mse = [math.nan] * len(members)
    last_loss = [math.nan] * len(members)
    epoch_loss = torch.zeros(len(members), device=dev, dtype=torch.float64)
    buf = None
    buf_pos = 0
    t0 = time.perf_counter()

    def refill():
        parts = [_pad_prompts(*members[i].stream.draw(prefetch * batch_size), Nmax, qmax) for i in active]
        return [torch.stack(v) for v in zip(*parts)]

    def finish(rows: List[int], step: int, reached: bool):
        nonlocal P, meta, test, thr, buf, epoch_loss, n_test, graph
        if not rows:
            return
        graph = None  # the stack changes: record the step again
        for r in rows:
            i = active[r]
            model = fam.unstack(P, r, members[i]) if return_models else None
            res = MemberResult(
                tag=members[i].tag, steps=step, samples=step * batch_size if reached else None, reached=reached,
                test_mse=last_mse[i], curve=_log_curve(curves[i]), train_loss=last_loss[i],
                consumed=step * batch_size, seconds=time.perf_counter() - t0, model=model,
            )
            results[i] = res
            if on_finish is not None:
                on_finish(res)
        keep_rows = [r for r in range(len(active)) if r not in set(rows)]
        if not keep_rows:
            active.clear()
            return
        keep = torch.tensor(keep_rows, device=dev)
        opt.select(keep)
        P = opt.params
        for v in P.values():
            v.requires_grad_(True)
        meta = {k: v.index_select(0, keep) for k, v in meta.items()}
        test = [v.index_select(0, keep) for v in test]
        thr = thr.index_select(0, keep)
        epoch_loss = epoch_loss.index_select(0, keep)
        n_test = n_test.index_select(0, keep)
        if buf is not None:
            buf = [v.index_select(0, keep) for v in buf]
        active[:] = [active[r] for r in keep_rows]

    @torch.no_grad()
    def test_mse() -> torch.Tensor:
        M = len(active)
        per_prompt = fam.elements_per_prompt(P)
        chunk = max(1, min(int(n_test[0]), eval_elements // max(1, M * per_prompt)))
        sse = torch.zeros(M, device=dev, dtype=torch.float64)
        x, t, y = test
        for s in range(0, x.shape[1], chunk):
            yh = fam.forward(P, meta, x[:, s:s + chunk], t[:, s:s + chunk])
            err = (yh - y[:, s:s + chunk]) ** 2 * meta["pos_mask"][:, None, :]
            sse += err.sum(dim=(1, 2)).double()
        return sse / (n_test.double() * meta["N"].double())

    use_graphs = dev.type == "cuda" if graphs is None else bool(graphs)
    if use_graphs and dev.type != "cuda":
        raise ValueError(f"graphs=True needs a CUDA stack, got device {dev}")
    graph: Optional[_GraphedStep] = None
    with _tf32(tf32 and dev.type == "cuda"):
        step = 0
        while active and step < max_steps:
            if buf is None or buf_pos >= prefetch:
                buf, buf_pos = refill(), 0
            sl = slice(buf_pos * batch_size, (buf_pos + 1) * batch_size)
            x, t, y = (v[:, sl] for v in buf)
            buf_pos += 1
            if not use_graphs:
                per = _train_step(fam, opt, meta, x, t, y, batch_size)
            elif graph is None:  # a new or changed stack: this step runs eagerly, the next ones replay
                graph, per = _record(fam, opt, meta, x, t, y, batch_size)
                use_graphs = graph is not None
            else:
                per = graph(x, t, y)
            step += 1
            per_d = per.detach().double()
            loss_list = per_d.tolist() if (step % check_every == 0 or step == max_steps) else None
            epoch_loss += per_d
            done: List[int] = []
            if step % check_every == 0:
                mse = test_mse()
                for r, (i, v) in enumerate(zip(active, mse.tolist())):
                    last_mse[i] = v
                    curves[i].append((step, v))
                    last_loss[i] = loss_list[r]
                below = (mse < thr.double()).nonzero().flatten().tolist()
                done = below
            if epoch_steps and epoch_loss_threshold is not None and step % epoch_steps == 0:
                ep = (epoch_loss / epoch_steps).tolist()
                epoch_loss.zero_()
                for r, i in enumerate(active):
                    last_loss[i] = ep[r]
                done = sorted(set(done) | {r for r, v in enumerate(ep) if v < epoch_loss_threshold})
            elif epoch_steps and step % epoch_steps == 0:
                epoch_loss.zero_()
            if done:
                if step % check_every != 0:  # stopping off a check: measure the test MSE now
                    mse = test_mse()
                    for r, (i, v) in enumerate(zip(active, mse.tolist())):
                        last_mse[i] = v
                finish(done, step, reached=True)
            if on_step is not None:
                on_step(step, len(active))
        if active:
            if step % check_every != 0 or not curves[active[0]]:
                mse = test_mse()
                per_last = per.detach().double().tolist()
                for r, (i, v) in enumerate(zip(active, mse.tolist())):
                    last_mse[i] = v
                    last_loss[i] = per_last[r]
            finish(list(range(len(active))), step, reached=False)
    return results  # type: ignore[return-value]


def fit_until_threshold(
    member: Member,
    *,
    batch_size: int = 64,
    check_every: int = 10,
    max_steps: int = 15625,
    chunk: int = 1000,
) -> MemberResult:
    """The protocol of :func:`train_stack` for ONE member, on its ``nn.Module`` with
    ``torch.optim.AdamW``: the reference the batched trainer must reproduce. The member's
    model is trained in place."""
    model = member.model
    opt = torch.optim.AdamW(model.parameters(), lr=member.lr, weight_decay=member.weight_decay)
    tx, tt, ty = member.test
    curve: List[Tuple[int, float]] = []
    t0 = time.perf_counter()
    mse = math.nan
    loss = torch.tensor(math.nan)

    @torch.no_grad()
    def evaluate() -> float:
        sse = 0.0
        for s in range(0, tx.shape[0], chunk):
            yh = model(*member.inputs(tx[s:s + chunk], tt[s:s + chunk]))
            sse += float(((yh - ty[s:s + chunk]) ** 2).sum())
        return sse / ty.numel()

    for step in range(1, max_steps + 1):
        x, t, y = member.stream.draw(batch_size)
        loss = ((model(*member.inputs(x, t)) - y) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % check_every == 0:
            mse = evaluate()
            curve.append((step, mse))
            if member.threshold is not None and mse < member.threshold:
                return MemberResult(member.tag, step, step * batch_size, True, mse, _log_curve(curve),
                                    float(loss.detach()), step * batch_size, time.perf_counter() - t0, model)
    if max_steps % check_every != 0 or not curve:
        mse = evaluate()
    return MemberResult(member.tag, max_steps, None, False, mse, _log_curve(curve), float(loss.detach()),
                        max_steps * batch_size, time.perf_counter() - t0, model)
