"""Attention weights the paper builds by hand: Lemma 11's q heads and the single sparse-averaging
head (remark after Prop 3), written in named blocks of the token layout. The bounds that choose
alpha and the guarantees live in ``qstr.bounds.attention``. Derivations:
docs/derivations/lemma11.md, docs/derivations/sparse-averaging.md.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from qstr.constructions import validate
from qstr.constructions.codes import Codebook, rs_hadamard_codebook
from qstr.constructions.encoding import default_prefactor, transformer_encoding
from qstr.constructions.layout import Layout, _token_layout, slot_name
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.moved import module_getattr, moved
from qstr.constructions.paper_models import MergedAttention

__all__ = [
    "Construction",
    "place_block",
    "lemma11_weights",
    "sparse_average_weights",
    "separation_limit",  # noqa: F822 - deprecated alias (__getattr__): bounds.sparse_averaging
    "target_leaks",  # noqa: F822 - deprecated alias (__getattr__): qstr.bounds.lemma11_leaks
    "lemma11_adversarial_prompt",
]

KINDS = ("lemma11", "sparse-average")

# ============================================================================ the construction


@dataclass(frozen=True, eq=False)
class Construction:
    """A hand-built :class:`MergedAttention` with its codebook, layout, prefactor and scale alpha.

    ``guarantee`` is what a bound promises for these weights (a ``qstr.bounds.attention.Guarantee``,
    attached by ``qstr.bounds.attention.lemma11`` / ``sparse_average_head``), or None.

    ``slots[h]`` is the query slot head h reads (Lemma 11); for the sparse-averaging head
    (``kind="sparse-average"``) the single head reads all of ``slots`` at once
    (:attr:`head_slots`).

    * :meth:`encode` -- Z = transformer encoding of (x, t) with this codebook and c.
    * :meth:`predict` -- the module on Z (reference path; O(N D_e) encodings, chunked scores).
    * :meth:`fast_heads` / :meth:`fast_predict` -- the same numbers from the block sparsity:
      the score of query i and key j in head h is alpha c^2 <sum_{k in head} omega_{t_ik}, omega_j>,
      so Q = alpha c^2 sum_k omega_{t_ik} (d_e dims), K = omega_j, V = x_j (the output net
      reads only the x block of each head). Uses ``F.scaled_dot_product_attention`` per
      query chunk: no (N, D_e) encodings and, with ``chunk``, no N x N matrix.
    """

    model: MergedAttention
    codebook: Codebook
    layout: Layout
    c: float
    alpha: float
    N: int
    d: int
    q: int
    slots: Tuple[int, ...]
    kind: str = "lemma11"
    guarantee: Optional[Any] = None

    # -- sizes
    @property
    def d_e(self) -> int:
        return self.codebook.d_e

    @property
    def mu(self) -> float:
        """The measured coherence of the codebook (Assumption 3)."""
        return self.codebook.mu

    @property
    def H(self) -> int:
        return self.model.H

    # -- derived constructions
    def with_alpha(self, alpha: float) -> "Construction":
        """The same construction at scale ``alpha`` (a new module; no guarantee attached)."""
        alpha = validate.positive_float("alpha", alpha, allow_zero=True)
        model = copy.deepcopy(self.model)
        with torch.no_grad():
            p = model.W_QK
            p.copy_(_qk_blocks(self.layout, self.head_slots, alpha, p.dtype, p.device))
        return dataclasses.replace(self, model=model, alpha=alpha, guarantee=None)

    def with_guarantee(self, guarantee) -> "Construction":
        """The same weights with ``guarantee`` attached (what a bound promises for them)."""
        return dataclasses.replace(self, guarantee=guarantee)

    @property
    def omega(self) -> torch.Tensor:
        """The N codes actually used (first N rows of the codebook)."""
        return self.codebook.omega[: self.N]

    @property
    def head_slots(self) -> Tuple[Tuple[int, ...], ...]:
        """For each head, the query slots whose codes its query sums."""
        if self.kind == "lemma11":
            return tuple((s,) for s in self.slots)
        return (tuple(self.slots),)

    # -- evaluation
    def _check_prompt(self, x, t):
        p = self.model.W_QK
        validate.finite_tensor("x", x)
        validate.shape("x", x, (None, self.N, self.d))
        if x.dtype != p.dtype or x.device != p.device:
            raise ValueError(
                f"x ({x.dtype}, {x.device}) must match the construction ({p.dtype}, {p.device}); "
                "convert it explicitly"
            )
        if not isinstance(t, torch.Tensor) or t.dtype != torch.long:
            raise ValueError(f"t must be a torch.long tensor of shape (B, {self.N}, {self.q})")
        validate.shape("t", t, (x.shape[0], self.N, self.q))
        if t.device != x.device:
            raise ValueError(f"t lives on {t.device} but x on {x.device}")
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= self.N):
            raise ValueError(f"t entries must lie in [0, N) = [0, {self.N})")

    def encode(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Z (B, N, D_e) = (x_i, c omega_i, c omega_{t_i1}, ..., c omega_{t_iq}) (Appendix A.1)."""
        self._check_prompt(x, t)
        return transformer_encoding(x, t, self.omega, c=self.c)

    def predict(
        self, x: torch.Tensor, t: torch.Tensor, chunk: Optional[int] = None
    ) -> torch.Tensor:
        """y_hat (B, N) (or (B, N, out_dim)) through the full module on the encoding."""
        return self.model(self.encode(x, t), chunk=chunk)

    def expected_W_QK(self) -> torch.Tensor:
        """The W_QK this construction wrote (rebuilt from alpha, layout and head_slots)."""
        p = self.model.W_QK
        return _qk_blocks(self.layout, self.head_slots, self.alpha, p.dtype, p.device)

    def _check_block_structure(self) -> torch.Tensor:
        """The fast path is valid only for the construction's own weights; return W's x columns."""
        m = self.model
        with torch.no_grad():
            if not torch.equal(m.W_QK, self.expected_W_QK()):
                raise ValueError(
                    "model.W_QK no longer has the block structure of this construction "
                    "(slot x pos blocks = alpha I, zeros elsewhere); "
                    "use predict() instead of the fast path"
                )
            W = m.W.detach().reshape(m.m, self.H, m.D_e)
            mask = torch.ones(m.D_e, dtype=torch.bool, device=W.device)
            mask[self.layout["x"]] = False
            if bool((W[:, :, mask] != 0).any()):
                raise ValueError(
                    "model.W reads blocks other than x of the head outputs; "
                    "use predict() instead of the fast path"
                )
            return W[:, :, self.layout["x"]].reshape(m.m, self.H * self.d)

    def fast_heads(
        self, x: torch.Tensor, t: torch.Tensor, chunk: Optional[int] = None, backend: str = "auto"
    ) -> torch.Tensor:
        """x-part of every head output, (B, N, H, d), from the block sparsity (see class docstring).

        Equals ``model.heads(encode(x, t))[..., layout['x']]`` up to rounding. Memory
        O(B H chunk N) for the scores with the math backend (O(N) with SDPA's fused
        kernels); the N x N matrix and the (N, D_e) encodings are never formed when
        ``chunk`` is given. Runs on x's device. ``backend``: "fused" (SDPA's flash, efficient
        or cuDNN kernels; torch has a flash kernel on CPU too), "math" (chunked scores), or
        "auto" (fused on CUDA for float32/16/bf16, math otherwise).
        """
        self._check_prompt(x, t)
        self._check_block_structure()
        return self._fast_heads(x, t, chunk, validate.one_of("backend", backend, BACKENDS))

    def _fast_heads(self, x, t, chunk, backend):
        B, N, _ = x.shape
        c = N if chunk is None else validate.positive_int("chunk", chunk)
        scale = self.alpha * self.c * self.c
        omega = self.omega
        if backend == "fused" and x.is_cuda and x.dtype not in _FUSED_DTYPES:
            raise ValueError(
                f"backend='fused' on CUDA takes float32, float16 or bfloat16, got "
                f"{x.dtype} (CUDA has no fused attention kernel for it); use 'math'"
            )
        if backend == "fused" or (backend == "auto" and x.is_cuda and x.dtype in _FUSED_DTYPES):
            return _fused_heads(omega, x, t, self.head_slots, scale, c)
        K = omega.expand(B, self.H, N, omega.shape[-1])
        V = x.unsqueeze(1).expand(B, self.H, N, self.d)
        outs = []
        for s in range(0, N, c):
            Q = _head_queries(omega, t[:, s : s + c], self.head_slots) * scale  # (B, H, c, d_e)
            outs.append(F.scaled_dot_product_attention(Q, K, V, scale=1.0))  # (B, H, c, d)
        return torch.cat(outs, dim=2).transpose(1, 2)  # (B, N, H, d)

    def fast_predict(
        self, x: torch.Tensor, t: torch.Tensor, chunk: Optional[int] = None, backend: str = "auto"
    ) -> torch.Tensor:
        """y_hat from :meth:`fast_heads` and the output net (which reads only the x blocks)."""
        self._check_prompt(x, t)
        Wx = self._check_block_structure()
        m = self.model
        h = self._fast_heads(x, t, chunk, validate.one_of("backend", backend, BACKENDS)).flatten(
            2
        )  # (B, N, H d)
        hidden = torch.relu(h @ Wx.T.to(h) + m.b.detach())
        a = m.a.detach()
        return hidden @ a if m.out_dim == 1 else hidden @ a.T


BACKENDS = ("auto", "fused", "math")
_FUSED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _head_queries(omega: torch.Tensor, t: torch.Tensor, head_slots) -> torch.Tensor:
    """(B, H, n, d_e): head h's query at position i is sum_{k in head h} omega_{t_ik} (Lemma 11)."""
    return torch.stack([omega[t[..., list(hs)]].sum(dim=-2) for hs in head_slots], dim=1)


def _pad_last(v: torch.Tensor, multiple: int = 8) -> torch.Tensor:
    """Zero columns up to a multiple of 8: fused kernels want aligned head dims (dot products
    and the real output columns are unchanged)."""
    return F.pad(v, (0, -v.shape[-1] % multiple))


def _fused_heads(omega, x, t, head_slots, scale: float, chunk: int) -> torch.Tensor:
    """:meth:`Construction.fast_heads` on CUDA's fused attention kernels (O(N) memory, so by
    default all N queries in one call). The values are the d columns of x, padded to 8; when no
    fused kernel takes values narrower than the keys, they are padded to the key width."""
    # torch.nn.attention (sdpa_kernel) is torch >= 2.3, pyproject.toml's lower bound
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415 - fused kernels only

    B, N, d = x.shape
    H = len(head_slots)
    K = _pad_last(omega).expand(B, H, N, -1).contiguous()
    V = _pad_last(x).unsqueeze(1).expand(B, H, N, -1).contiguous()
    fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
    outs = []
    for s in range(0, N, chunk):
        Q = _pad_last(_head_queries(omega, t[:, s : s + chunk], head_slots) * scale)
        with sdpa_kernel(fused):
            try:
                with (
                    warnings.catch_warnings()
                ):  # torch warns before it refuses; the fallback below is the answer
                    warnings.simplefilter("ignore", UserWarning)
                    o = F.scaled_dot_product_attention(Q, K, V, scale=1.0)
            except RuntimeError:  # no fused kernel for values narrower than keys
                V = F.pad(V, (0, K.shape[-1] - V.shape[-1]))
                o = F.scaled_dot_product_attention(Q, K, V, scale=1.0)
        outs.append(o[..., :d])
    return torch.cat(outs, dim=2).transpose(1, 2)  # (B, N, H, d)


# ============================================================================ blocks


def place_block(
    W: torch.Tensor, layout: Layout, query_block: str, key_block: str, value
) -> torch.Tensor:
    """Write ``value`` into W[layout[query_block], layout[key_block]] (in place; returns W).

    W is one head's (D_e, D_e) merged key-query matrix, query on the LEFT: the score is
    z_i^T W z_j, so the rows are the query's blocks and the columns the key's blocks.
    ``value`` is a number s (written as s * I, the rectangular identity eye(rows, cols)
    when the two blocks differ in size) or a tensor of the block's shape.
    """
    if not isinstance(W, torch.Tensor):
        raise ValueError(f"W must be a torch.Tensor, got {type(W).__name__}")
    validate.shape("W", W, (layout.dim, layout.dim))
    rows, cols = layout[query_block], layout[key_block]  # ValueError for unknown names
    r, k = rows.stop - rows.start, cols.stop - cols.start
    if isinstance(value, torch.Tensor):
        validate.shape("value", value, (r, k))
        validate.finite_tensor("value", value)
        block = value.to(dtype=W.dtype, device=W.device)
    else:
        try:
            s = float(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"value must be a number or a ({r}, {k}) tensor, got {type(value).__name__}"
            ) from None
        if not math.isfinite(s):
            raise ValueError(f"value must be finite, got {s}")
        block = s * torch.eye(r, k, dtype=W.dtype, device=W.device)
    W[rows, cols] = block
    return W


def _qk_blocks(layout: Layout, head_slots, alpha: float, dtype, device) -> torch.Tensor:
    """(H, D_e, D_e): head h has alpha I in every [slot k x pos] block, k in head_slots[h]."""
    W = torch.zeros(len(head_slots), layout.dim, layout.dim, dtype=dtype, device=device)
    for h, ks in enumerate(head_slots):
        for k in ks:
            place_block(W[h], layout, slot_name(k), "pos", alpha)
    return W


# ============================================================================ builders


def _as_codebook(codebook, N, dtype, device) -> Codebook:
    if isinstance(codebook, torch.Tensor):
        codebook = Codebook.from_tensor(codebook)
    if not isinstance(codebook, Codebook):
        raise ValueError(
            "codebook must be a constructions.codes.Codebook or a tensor, "
            f"got {type(codebook).__name__}"
        )
    if codebook.N < N:
        raise ValueError(f"codebook has {codebook.N} rows but N = {N} positions need >= {N}")
    return codebook.to(device=device, dtype=dtype)


def _check_net(net, H, d):
    if not isinstance(net, TwoLayerNet):
        raise ValueError(f"net must be a constructions.links.TwoLayerNet, got {type(net).__name__}")
    for nm in ("a", "W", "b"):
        v = getattr(net, nm)
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"net.{nm} must be a torch.Tensor")
        validate.finite_tensor(f"net.{nm}", v)
    m = net.a.shape[0] if net.a.dim() == 1 else -1
    if net.a.dim() != 1:
        raise ValueError(
            f"net.a must be a vector (m,), got shape {tuple(net.a.shape)} (scalar-output nets only)"
        )
    validate.shape("net.W", net.W, (m, H * d))
    validate.shape("net.b", net.b, (m,))
    return m


def lemma11_weights(  # noqa: PLR0913 - the paper's symbols (Lemma 11)
    N: int,
    d: int,
    q: int,
    net: TwoLayerNet,
    *,
    alpha: float,
    codebook=None,
    c: Optional[float] = None,
    slots: Optional[Sequence[int]] = None,
    dtype=torch.float64,
    device=None,
) -> Construction:
    """Lemma 11's weights at scale ``alpha``: head h's W_QK is alpha I on [slot(slots[h]) x pos],
    and the output net ``net`` reads the x block of each head (docs/derivations/lemma11.md).

    ``net`` (an Assumption 2 net) must read ``len(slots) * d`` inputs, token of slots[0] first.
    ``codebook`` defaults to ``rs_hadamard_codebook(N, mu=0.5)``; ``c`` to sqrt(d/q); ``slots``
    to range(q) (``slots=[0, 1]`` with q = 3 builds two heads retrieving tokens 1, 2). The
    error bound and the alpha that reaches a given eps: ``qstr.bounds.attention.lemma11``.
    """
    N = validate.positive_int("N", N)
    d = validate.positive_int("d", d)
    q = validate.positive_int("q", q)
    if q > N:
        raise ValueError(f"q must satisfy 1 <= q <= N = {N}, got q = {q}")
    dtype = validate.float_dtype("dtype", dtype)
    device = validate.device_of("device", device)
    alpha = validate.positive_float("alpha", alpha, allow_zero=True)
    c = default_prefactor(d, q) if c is None else validate.positive_float("c", c)
    slots = _slots(slots, q)
    H = len(slots)
    m = _check_net(net, H, d)
    if codebook is None:
        codebook = rs_hadamard_codebook(N, mu=0.5, device=device, dtype=dtype)
    codebook = _as_codebook(codebook, N, dtype, device)
    if not codebook.mu < 1:
        raise ValueError(
            "mu must be < 1 for the Lemma 11 gap: "
            f"the codebook has coherence mu = {codebook.mu:.6g}"
        )
    layout = _token_layout(d, q, codebook.d_e)
    D = layout.dim
    validate.fits_in_memory(
        f"Lemma 11's weights (W_QK: {H} x {D} x {D}, W: {m} x {H * D})",
        lemma11_nbytes(D, H, m, dtype),
        device,
    )

    head_slots = tuple((s,) for s in slots)
    W_QK = _qk_blocks(
        layout, head_slots, alpha, dtype, device
    )  # score alpha c^2 <omega_{t_ih}, omega_j>
    W = torch.zeros(m, H * layout.dim, dtype=dtype, device=device)
    netW = net.W.to(dtype=dtype, device=device)
    x_block = layout["x"]
    for h in range(H):  # the net's columns for token h on the x block of head h, zero elsewhere
        off = h * layout.dim
        W[:, off + x_block.start : off + x_block.stop] = netW[:, h * d : (h + 1) * d]
    model = MergedAttention(
        layout.dim, H, m, generator=torch.Generator().manual_seed(0), dtype=dtype, device=device
    )
    model.set_weights(W_QK=W_QK, W=W, b=net.b, a=net.a)
    return Construction(
        model=model,
        codebook=codebook,
        layout=layout,
        c=c,
        alpha=alpha,
        N=N,
        d=d,
        q=q,
        slots=slots,
        kind="lemma11",
    )


def lemma11_nbytes(D: int, H: int, m: int, dtype=torch.float64) -> int:
    """Bytes :func:`lemma11_weights` allocates for tokens of width D, H heads and a net of width m:
    W_QK (H, D, D) built, then copied into the module (whose own initialisation fills it first),
    and W (m, H D) twice."""
    return (3 * H * D * D + 2 * m * H * D) * torch.empty((), dtype=dtype).element_size()


def _slots(slots, q: int) -> Tuple[int, ...]:
    if slots is None:
        return tuple(range(q))
    try:
        slots = tuple(validate.positive_int("slots", s, minimum=0) for s in slots)
    except TypeError:
        raise ValueError(
            f"slots must be a sequence of slot indices in [0, q), got {slots!r}"
        ) from None
    if not slots or any(s >= q for s in slots):
        raise ValueError(
            f"slots must be a non-empty sequence of slot indices in [0, q) = [0, {q}), "
            f"got {list(slots)}"
        )
    return slots


def sparse_average_weights(
    N: int,
    d: int,
    q: int,
    *,
    codebook,
    alpha: float,
    c: Optional[float] = None,
    dtype=torch.float64,
    device=None,
) -> Construction:
    """ONE head computing (1/q) sum_k x_{t_ik} (remark after Prop 3; distinct indices) at scale
    alpha: W_QK = alpha sum_k [slot k x pos], output net the exact identity on the x block
    (docs/derivations/sparse-averaging.md). It separates the set only for codebook coherence
    mu < 1/(2q - 1) (``qstr.bounds.sparse_averaging.separation_limit``), which
    ``qstr.bounds.sparse_averaging.sparse_average_head`` requires; these weights are built at any
    mu.
    """
    N = validate.positive_int("N", N)
    d = validate.positive_int("d", d)
    q = validate.positive_int("q", q)
    if q > N:
        raise ValueError(f"q must satisfy 1 <= q <= N = {N} (distinct indices), got q = {q}")
    dtype = validate.float_dtype("dtype", dtype)
    device = validate.device_of("device", device)
    alpha = validate.positive_float("alpha", alpha, allow_zero=True)
    c = default_prefactor(d, q) if c is None else validate.positive_float("c", c)
    if codebook is None:
        raise ValueError(
            "codebook must be given (coherence mu < 1/(2q - 1) needed), e.g. "
            "rs_hadamard_codebook(N, mu=1/(2q))"
        )
    codebook = _as_codebook(codebook, N, dtype, device)
    layout = _token_layout(d, q, codebook.d_e)
    slots = tuple(range(q))
    W_QK = _qk_blocks(layout, (slots,), alpha, dtype, device)
    eye = torch.eye(d, dtype=dtype, device=device)
    W = torch.zeros(2 * d, layout.dim, dtype=dtype, device=device)
    W[:d, layout["x"]] = eye  # relu(h_x)
    W[d:, layout["x"]] = -eye  # relu(-h_x)
    a = torch.cat([eye, -eye], dim=1)  # (d, 2d): relu(h) - relu(-h) = h
    model = MergedAttention(
        layout.dim,
        1,
        2 * d,
        out_dim=d,
        generator=torch.Generator().manual_seed(0),
        dtype=dtype,
        device=device,
    )
    model.set_weights(W_QK=W_QK, W=W, b=torch.zeros(2 * d, dtype=dtype), a=a)
    return Construction(
        model=model,
        codebook=codebook,
        layout=layout,
        c=c,
        alpha=alpha,
        N=N,
        d=d,
        q=q,
        slots=slots,
        kind="sparse-average",
    )


# ============================================================================ diagnostics


def lemma11_adversarial_prompt(
    construction: Construction,
    direction: torch.Tensor,
    *,
    target: Optional[int] = None,
    B: int = 1,
    r_x: Optional[float] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The worst tokens for a net that is linear on the r_x-ball among prompts whose slots all
    read one target, direction v in R^d (the worst over every prompt, distinct targets per slot
    included: ``qstr.verify.adversarial.lemma11_worst_case``).

    Every position reads the same target t* in every slot (t_i = (t*, ..., t*)), x_{t*} =
    -r_x v/||v|| and every other token +r_x v/||v||. The softmax weights of Lemma 11 do not
    depend on the tokens, so each head's x block is x_{t*} + 2 r_x leak[t*] v/||v||, and for
    a net that is affine with gradient (w_0, ..., w_{H-1}) on the ball the error is
    2 r_x leak[t*] <sum_h w_h, v/||v||>: maximal for v = sum_h w_h, where it equals
    2 r_x leak[t*] ||sum_h w_h|| (= the Lemma 11 bound when all w_h are equal, all codes
    meet the target at exactly mu, and Lip = ||w||; at q = 1 it is the supremum over every
    prompt, at q >= 2 a lower bound on it). ``target`` is t*: the worst is
    ``qstr.bounds.lemma11_leaks.worst_target(construction)``, the argmax of the exact leak
    (without ``target`` it is computed there, with a DeprecationWarning); ``r_x`` defaults to the
    attached guarantee's. Returns (x, t) of shapes (B, N, d), (B, N, q).
    """
    if not isinstance(construction, Construction) or construction.kind != "lemma11":
        raise ValueError("construction must be a Lemma 11 Construction (kind='lemma11')")
    p = construction.model.W_QK
    N, d, q = construction.N, construction.d, construction.q
    direction = torch.as_tensor(direction).to(dtype=p.dtype, device=p.device)
    validate.shape("direction", direction, (d,))
    validate.finite_tensor("direction", direction)
    norm = float(direction.norm())
    if norm == 0:
        raise ValueError("direction must be nonzero")
    B = validate.positive_int("B", B)
    if target is None:
        pick = "pass target=worst_target(construction)"
        where = "qstr.bounds.lemma11_leaks"
        target = moved("the default target", "worst_target", where, pick)(construction)
    target = validate.positive_int("target", target, minimum=0)
    if target >= N:
        raise ValueError(f"target must lie in [0, N) = [0, {N}), got {target}")
    if r_x is None:
        if construction.guarantee is None:
            raise ValueError("r_x must be given: the construction carries no guarantee")
        r_x = construction.guarantee.r_x
    v = direction / norm * validate.positive_float("r_x", r_x)
    x = v.expand(B, N, d).clone()
    x[:, target] = -v
    t = torch.full((B, N, q), target, dtype=torch.long, device=p.device)
    return x, t


# Names that moved to qstr.bounds (issue 56): the old import path still works, with a
# DeprecationWarning, and loads qstr.bounds only when the name is asked for.
_MOVED_TO_BOUNDS = {
    "separation_limit": "qstr.bounds.sparse_averaging",  # the head's refusal threshold
    "target_leaks": "qstr.bounds.lemma11_leaks",  # picks the adversarial target
}
__getattr__ = module_getattr(__name__, _MOVED_TO_BOUNDS)
