"""Attention weights the paper builds by hand: Lemma 11 and the single sparse-averaging head.

Numbering is the seed text's (arXiv v1); Lemma 11 has the same number in the conference
version. Derivations: ``docs/derivations/lemma11.md`` and
``docs/derivations/sparse-averaging.md``.

Every builder returns a :class:`Construction`: the :class:`~constructions.models.MergedAttention`
module *and* a :class:`Guarantee` recording what it promises (error bound, gap, leak, the
measured coherence mu, r_x, weight norms, assumptions), so a check compares measured
against promised without re-deriving anything.

Weights are written in named blocks of the token layout (:func:`place_block`): "slot h of
the query meets the pos block of the key", never raw index arithmetic.

Contents

* :func:`lemma11` -- H heads, head h retrieves x_{t_{i, slots[h]}}; the Assumption 2 net on top.
* :func:`sparse_average_head` -- ONE head computing the mean (1/q) sum_k x_{t_ik} (distinct
  indices), the remark after Prop 3 (Sanford, Hsu, Telgarsky 2023).
* closed forms :func:`lemma11_leak`, :func:`lemma11_error_bound`, :func:`lemma11_alpha`,
  :func:`lemma12_radius`, :func:`sparse_average_leak`, :func:`sparse_average_error_bound`,
  :func:`sparse_average_alpha`, :func:`sparse_average_mu_needed` (pure functions of floats).
* diagnostics: :func:`target_leaks` (the exact off-target softmax mass of this codebook, per
  target) and :func:`lemma11_adversarial_prompt` (the worst-case tokens for a linear net).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from qstr.constructions import _checks
from qstr.constructions.codes import Codebook, rs_hadamard_codebook
from qstr.constructions.encoding import default_prefactor, transformer_encoding
from qstr.constructions.layout import Layout, slot_name, token_layout
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.models import MergedAttention

__all__ = [
    "Guarantee",
    "Construction",
    "place_block",
    "lemma11",
    "lemma11_leak",
    "lemma11_error_bound",
    "lemma11_alpha",
    "lemma12_radius",
    "sparse_average_head",
    "sparse_average_leak",
    "sparse_average_within",
    "sparse_average_error_bound",
    "sparse_average_alpha",
    "sparse_average_mu_needed",
    "target_leaks",
    "lemma11_adversarial_prompt",
]

KINDS = ("lemma11", "sparse-average")


# ============================================================================ records


@dataclass(frozen=True)
class Guarantee:
    """What a construction promises (all plain numbers).

    ``error_bound``: sup, over prompts whose tokens all satisfy ||x_j|| <= r_x, of
    |y_hat_i - g_net(x_{t_i})| (Lemma 11: against the Assumption 2 net; the end-to-end
    error against the link g adds ``eps_2nn``, see :attr:`end_to_end_bound`). For the
    sparse-averaging head it is the sup of the Euclidean error ||y_hat_i - mean_i||_2.
    ``alpha``: the attention scale; ``gap`` (Delta): the score gap between the target(s)
    and every other key; ``leak`` (delta): the bound on the softmax mass off the target(s);
    ``mu``: the measured coherence carried into the bound; ``c``: the encoding prefactor;
    ``N, q, d, d_e``: sizes (q = index slots of the encoding); ``H``: heads;
    ``lipschitz``: Lipschitz constant of the output net used in the bound
    (``TwoLayerNet.lipschitz`` = ||a|| ||W||_op for Lemma 11; 1 for the exact identity net
    of the averaging head); ``eps_2nn``: sup |g - g_net| on the r_x-ball (user supplied,
    0 for a teacher link); ``weight_norms``: Frobenius norms (``W_QK`` a tuple, one per
    head; ``W``, ``a``, ``b``); ``assumptions``: what the bound relies on, in words.
    """

    error_bound: float
    alpha: float
    gap: float
    leak: float
    mu: float
    r_x: float
    c: float
    N: int
    q: int
    d: int
    d_e: int
    lipschitz: float
    eps_2nn: float
    weight_norms: dict
    assumptions: Tuple[str, ...]
    H: int = 1
    kind: str = "lemma11"

    @property
    def end_to_end_bound(self) -> float:
        """error_bound + eps_2nn: the promised sup |y_hat_i - g(x_{t_i})| on the r_x-ball."""
        return self.error_bound + self.eps_2nn

    def as_dict(self) -> dict:
        """Plain floats / ints / strings / lists only (safe for ``torch.load(weights_only=True)``)."""
        norms = {}
        for k, v in self.weight_norms.items():
            norms[k] = [float(x) for x in v] if isinstance(v, (tuple, list)) else float(v)
        return {
            "error_bound": float(self.error_bound),
            "end_to_end_bound": float(self.end_to_end_bound),
            "alpha": float(self.alpha),
            "gap": float(self.gap),
            "leak": float(self.leak),
            "mu": float(self.mu),
            "r_x": float(self.r_x),
            "c": float(self.c),
            "N": int(self.N),
            "q": int(self.q),
            "d": int(self.d),
            "d_e": int(self.d_e),
            "H": int(self.H),
            "kind": str(self.kind),
            "lipschitz": float(self.lipschitz),
            "eps_2nn": float(self.eps_2nn),
            "weight_norms": norms,
            "assumptions": [str(s) for s in self.assumptions],
        }


@dataclass(frozen=True, eq=False)
class Construction:
    """A hand-built :class:`MergedAttention` with its codebook, layout, prefactor and guarantee.

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
    guarantee: Guarantee
    slots: Tuple[int, ...]
    kind: str = "lemma11"

    # -- sizes
    @property
    def N(self) -> int:
        return self.guarantee.N

    @property
    def d(self) -> int:
        return self.guarantee.d

    @property
    def q(self) -> int:
        return self.guarantee.q

    @property
    def d_e(self) -> int:
        return self.guarantee.d_e

    @property
    def H(self) -> int:
        return self.model.H

    @property
    def alpha(self) -> float:
        return self.guarantee.alpha

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
        _checks.finite_tensor("x", x)
        _checks.shape("x", x, (None, self.N, self.d))
        if x.dtype != p.dtype or x.device != p.device:
            raise ValueError(
                f"x ({x.dtype}, {x.device}) must match the construction ({p.dtype}, {p.device}); convert it explicitly"
            )
        if not isinstance(t, torch.Tensor) or t.dtype != torch.long:
            raise ValueError(f"t must be a torch.long tensor of shape (B, {self.N}, {self.q})")
        _checks.shape("t", t, (x.shape[0], self.N, self.q))
        if t.device != x.device:
            raise ValueError(f"t lives on {t.device} but x on {x.device}")
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= self.N):
            raise ValueError(f"t entries must lie in [0, N) = [0, {self.N})")

    def encode(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Z (B, N, D_e) = (x_i, c omega_i, c omega_{t_i1}, ..., c omega_{t_iq}) (Appendix A.1)."""
        self._check_prompt(x, t)
        return transformer_encoding(x, t, self.omega, c=self.c)

    def predict(self, x: torch.Tensor, t: torch.Tensor, chunk: Optional[int] = None) -> torch.Tensor:
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
                    "(slot x pos blocks = alpha I, zeros elsewhere); use predict() instead of the fast path"
                )
            W = m.W.detach().reshape(m.m, self.H, m.D_e)
            mask = torch.ones(m.D_e, dtype=torch.bool, device=W.device)
            mask[self.layout["x"]] = False
            if bool((W[:, :, mask] != 0).any()):
                raise ValueError(
                    "model.W reads blocks other than x of the head outputs; use predict() instead of the fast path"
                )
            return W[:, :, self.layout["x"]].reshape(m.m, self.H * self.d)

    def fast_heads(self, x: torch.Tensor, t: torch.Tensor, chunk: Optional[int] = None) -> torch.Tensor:
        """x-part of every head output, (B, N, H, d), from the block sparsity (see class docstring).

        Equals ``model.heads(encode(x, t))[..., layout['x']]`` up to rounding. Memory
        O(B H chunk N) for the scores with the math backend (O(N) with SDPA's fused CUDA
        kernels); the N x N matrix and the (N, D_e) encodings are never formed when
        ``chunk`` is given. Runs on x's device.
        """
        self._check_prompt(x, t)
        self._check_block_structure()
        return self._fast_heads(x, t, chunk)

    def _fast_heads(self, x, t, chunk):
        B, N, _ = x.shape
        c = N if chunk is None else _checks.positive_int("chunk", chunk)
        scale = self.alpha * self.c * self.c
        omega = self.omega
        if x.is_cuda and x.dtype in _FUSED_DTYPES:
            return _fused_heads(omega, x, t, self.head_slots, scale, c)
        K = omega.expand(B, self.H, N, omega.shape[-1])
        V = x.unsqueeze(1).expand(B, self.H, N, self.d)
        outs = []
        for s in range(0, N, c):
            Q = _head_queries(omega, t[:, s:s + c], self.head_slots) * scale  # (B, H, c, d_e)
            outs.append(F.scaled_dot_product_attention(Q, K, V, scale=1.0))  # (B, H, c, d)
        return torch.cat(outs, dim=2).transpose(1, 2)  # (B, N, H, d)

    def fast_predict(self, x: torch.Tensor, t: torch.Tensor, chunk: Optional[int] = None) -> torch.Tensor:
        """y_hat from :meth:`fast_heads` and the output net (which reads only the x blocks)."""
        self._check_prompt(x, t)
        Wx = self._check_block_structure()
        m = self.model
        h = self._fast_heads(x, t, chunk).flatten(2)  # (B, N, H d)
        hidden = torch.relu(h @ Wx.T.to(h) + m.b.detach())
        a = m.a.detach()
        return hidden @ a if m.out_dim == 1 else hidden @ a.T


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
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, N, d = x.shape
    H = len(head_slots)
    K = _pad_last(omega).expand(B, H, N, -1).contiguous()
    V = _pad_last(x).unsqueeze(1).expand(B, H, N, -1).contiguous()
    fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
    outs = []
    for s in range(0, N, chunk):
        Q = _pad_last(_head_queries(omega, t[:, s:s + chunk], head_slots) * scale)
        with sdpa_kernel(fused):
            try:
                o = F.scaled_dot_product_attention(Q, K, V, scale=1.0)
            except RuntimeError:  # no fused kernel for values narrower than keys
                V = F.pad(V, (0, K.shape[-1] - V.shape[-1]))
                o = F.scaled_dot_product_attention(Q, K, V, scale=1.0)
        outs.append(o[..., :d])
    return torch.cat(outs, dim=2).transpose(1, 2)  # (B, N, H, d)


# ============================================================================ blocks


def place_block(W: torch.Tensor, layout: Layout, query_block: str, key_block: str, value) -> torch.Tensor:
    """Write ``value`` into W[layout[query_block], layout[key_block]] (in place; returns W).

    W is one head's (D_e, D_e) merged key-query matrix, query on the LEFT: the score is
    z_i^T W z_j, so the rows are the query's blocks and the columns the key's blocks.
    ``value`` is a number s (written as s * I, the rectangular identity eye(rows, cols)
    when the two blocks differ in size) or a tensor of the block's shape.
    """
    if not isinstance(W, torch.Tensor):
        raise ValueError(f"W must be a torch.Tensor, got {type(W).__name__}")
    _checks.shape("W", W, (layout.dim, layout.dim))
    rows, cols = layout[query_block], layout[key_block]  # ValueError for unknown names
    r, k = rows.stop - rows.start, cols.stop - cols.start
    if isinstance(value, torch.Tensor):
        _checks.shape("value", value, (r, k))
        _checks.finite_tensor("value", value)
        block = value.to(dtype=W.dtype, device=W.device)
    else:
        try:
            s = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"value must be a number or a ({r}, {k}) tensor, got {type(value).__name__}") from None
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


# ============================================================================ closed forms


def _logistic(z: float) -> float:
    """1 / (1 + e^{-z}) without overflow."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _real(name: str, value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def _lemma11_mu(mu) -> float:
    mu = _real("mu", mu)
    if not mu < 1:
        raise ValueError(f"mu must be < 1 for the Lemma 11 gap (coherence of the codes), got mu = {mu}")
    if mu < 0:
        raise ValueError(f"mu must be >= 0 (a coherence), got {mu}")
    return mu


def lemma11_leak(N: int, gap: float) -> float:
    """delta = (N-1) e^{-gap} / (1 + (N-1) e^{-gap}): the softmax mass off the target (Lemma 11).

    If the target key scores at least ``gap`` above each of the other N - 1 keys, its
    softmax weight is >= 1 / (1 + (N-1) e^{-gap}), so the rest is at most delta. N = 1: 0.
    """
    N = _checks.positive_int("N", N)
    gap = _real("gap", gap)
    if N == 1:
        return 0.0
    return _logistic(math.log(N - 1) - gap)


def lemma11_error_bound(*, N: int, q: int, mu: float, c: float, alpha: float, r_x: float, lipschitz: float) -> float:
    """lipschitz * sqrt(q) * 2 * delta * r_x with delta = lemma11_leak(N, alpha c^2 (1 - mu)).

    ``q`` is the number of heads whose outputs the net reads (H = q in Lemma 11; H =
    len(slots) for :func:`lemma11` with fewer heads). Bound on |y_hat_i - g_net(x_{t_i})|
    over prompts with ||x_j|| <= r_x for all j (derivation: docs/derivations/lemma11.md).
    """
    N = _checks.positive_int("N", N)
    q = _checks.positive_int("q", q)
    mu = _lemma11_mu(mu)
    c = _checks.positive_float("c", c)
    alpha = _checks.positive_float("alpha", alpha, allow_zero=True)
    r_x = _checks.positive_float("r_x", r_x)
    lipschitz = _checks.positive_float("lipschitz", lipschitz, allow_zero=True)
    leak = lemma11_leak(N, alpha * c * c * (1 - mu))
    return lipschitz * math.sqrt(q) * 2.0 * leak * r_x


def lemma11_alpha(*, N: int, q: int, mu: float, c: float, r_x: float, lipschitz: float, eps: float) -> float:
    """The smallest alpha >= 0 with lemma11_error_bound(...) <= eps (exact inversion).

    With delta* = eps / (2 lipschitz sqrt(q) r_x): leak <= delta* iff
    gap >= ln((N-1)(1-delta*)/delta*), so alpha = that gap / (c^2 (1 - mu)), clamped at 0
    (alpha = 0 already suffices when delta* >= (N-1)/N, i.e. uniform attention is good
    enough, or when lipschitz = 0). Grows like ln N / (c^2 (1 - mu)).
    """
    N = _checks.positive_int("N", N)
    q = _checks.positive_int("q", q)
    mu = _lemma11_mu(mu)
    c = _checks.positive_float("c", c)
    r_x = _checks.positive_float("r_x", r_x)
    lipschitz = _checks.positive_float("lipschitz", lipschitz, allow_zero=True)
    eps = _checks.positive_float("eps", eps)
    if lipschitz == 0 or N == 1:
        return 0.0
    target = eps / (2.0 * lipschitz * math.sqrt(q) * r_x)
    if target >= (N - 1) / N:
        return 0.0
    gap = math.log(N - 1) + math.log1p(-target) - math.log(target)
    alpha = max(0.0, gap / (c * c * (1 - mu)))
    kw = dict(N=N, q=q, mu=mu, c=c, r_x=r_x, lipschitz=lipschitz)
    for _ in range(64):  # guard against the last-ulp rounding of the inversion
        if lemma11_error_bound(alpha=alpha, **kw) <= eps:
            break
        alpha = alpha * (1 + 4e-16) + 1e-300
    return alpha


def lemma12_radius(d: int, n: int, N: int, C_x: float = 1.0) -> float:
    """r_x = sqrt(3 C_x e d log(n N)): Lemma 12's w.h.p. bound on all n N token norms."""
    d = _checks.positive_int("d", d)
    n = _checks.positive_float("n", n)  # a sample count; bounds evaluate it at real n
    N = _checks.positive_int("N", N)
    C_x = _checks.positive_float("C_x", C_x)
    if n * N < 2:
        raise ValueError(f"n * N must be >= 2 for the Lemma 12 radius (log(n N) > 0), got n = {n}, N = {N}")
    return math.sqrt(3.0 * C_x * math.e * d * math.log(n * N))


# ---------------------------------------------------------------- sparse averaging


def _sparse_args(N, q, mu):
    N = _checks.positive_int("N", N)
    q = _checks.positive_int("q", q)
    if q > N:
        raise ValueError(f"q must satisfy 1 <= q <= N = {N} (distinct indices), got q = {q}")
    mu = _real("mu", mu)
    limit = 1.0 / (2 * q - 1)
    if not 0 <= mu < limit:
        raise ValueError(
            f"mu must lie in [0, 1/(2q - 1)) = [0, {limit:.6g}) for the single sparse-averaging head "
            f"(in-set scores >= A(1 - (q-1) mu) must beat out-of-set scores <= A q mu), got mu = {mu:.6g}"
        )
    return N, q, mu


def sparse_average_leak(*, N: int, q: int, mu: float, A: float) -> float:
    """L <= X / (1 + X), X = ((N - q) / q) e^{-A (1 - (2q - 1) mu)}: softmax mass outside the set.

    A = alpha c^2. Keys in the set score >= A (1 - (q-1) mu), keys outside <= A q mu.
    """
    N, q, mu = _sparse_args(N, q, mu)
    A = _checks.positive_float("A", A, allow_zero=True)
    if N == q:
        return 0.0
    return _logistic(math.log((N - q) / q) - A * (1 - (2 * q - 1) * mu))


def sparse_average_within(*, q: int, leak: float, rho: float) -> float:
    """2 max_{0 <= k <= q-1} [(1 - L) k rho / (k rho + q - k) - k / q]_+ (the in-set part of ||pi - w||_1).

    For a within-set softmax whose weights differ by a factor <= rho, and outside mass L.
    """
    q = _checks.positive_int("q", q)
    L = _real("leak", leak)
    rho = _real("rho", rho)
    best = 0.0
    for k in range(1, q):
        best = max(best, (1 - L) * k * rho / (k * rho + q - k) - k / q)
    return 2.0 * best


def _sparse_bound_A(N, q, mu, A):
    """r_x-free bound on ||pi - w||_1 at A = alpha c^2 (arguments already validated)."""
    L = 0.0 if N == q else _logistic(math.log((N - q) / q) - A * (1 - (2 * q - 1) * mu))
    rho = math.exp(min(2 * A * max(q - 2, 0) * mu, 700.0))
    return 2 * L + sparse_average_within(q=q, leak=L, rho=rho)


def sparse_average_error_bound(*, N: int, q: int, mu: float, c: float, alpha: float, r_x: float) -> float:
    """sup ||y_hat_i - (1/q) sum_k x_{t_ik}||_2 <= r_x (2 L + within(L, rho)) (distinct indices).

    A = alpha c^2, L = :func:`sparse_average_leak`, rho = e^{2 A (q - 2) mu} (the spread of
    the in-set scores: the common term <omega_a, omega_b> cancels, so only q - 2 cross terms
    differ), within = :func:`sparse_average_within`. Derivation and tightness discussion:
    docs/derivations/sparse-averaging.md. Needs mu < 1/(2q - 1).
    """
    N, q, mu = _sparse_args(N, q, mu)
    c = _checks.positive_float("c", c)
    alpha = _checks.positive_float("alpha", alpha, allow_zero=True)
    r_x = _checks.positive_float("r_x", r_x)
    return r_x * _sparse_bound_A(N, q, mu, alpha * c * c)


def _sparse_min_A(N, q, mu):
    """(A*, min bound / r_x) over A >= 0; A* = inf when the bound only decreases (q <= 2 or mu = 0)."""
    if N == q:  # no outside keys: L = 0 and the bound only grows with A (rho = 1 at A = 0)
        return 0.0, 0.0
    if q <= 2 or mu == 0:
        return math.inf, 0.0
    grid = np.concatenate([[0.0], np.logspace(-3, 6, 721)])
    vals = np.array([_sparse_bound_A(N, q, mu, A) for A in grid])
    i = int(vals.argmin())
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(lambda A: _sparse_bound_A(N, q, mu, A), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-10 * max(hi, 1.0)})
    A, v = (float(res.x), float(res.fun)) if res.fun <= vals[i] else (float(grid[i]), float(vals[i]))
    return A, v


def sparse_average_mu_needed(*, N: int, q: int, r_x: float, eps: float) -> float:
    """The largest mu (to 1e-6 relative) for which min over alpha of the bound is <= eps.

    For q <= 2 every mu < 1/(2q - 1) works (the bound tends to 0 as alpha grows): returns
    1/(2q - 1) (an open limit). Otherwise bisection (the minimal bound increases with mu).
    Scaling: mu ~ eps / (r_x (q - 2) ln(N r_x / eps)) (docs/derivations/sparse-averaging.md).
    """
    N = _checks.positive_int("N", N)
    q = _checks.positive_int("q", q)
    r_x = _checks.positive_float("r_x", r_x)
    eps = _checks.positive_float("eps", eps)
    limit = 1.0 / (2 * q - 1)
    if q <= 2 or N == q:
        return limit
    lo, hi = 0.0, limit
    while hi - lo > 1e-6 * hi:
        mid = 0.5 * (lo + hi)
        if r_x * _sparse_min_A(N, q, mid)[1] <= eps:
            lo = mid
        else:
            hi = mid
    return lo


def sparse_average_alpha(*, N: int, q: int, mu: float, c: float, r_x: float, eps: Optional[float] = None) -> float:
    """alpha for the single averaging head.

    ``eps=None``: the alpha minimising :func:`sparse_average_error_bound` (1-D: log grid then
    scipy's bounded Brent); needs q >= 3 and mu > 0, otherwise the bound decreases to 0 as
    alpha grows and there is no minimiser (``ValueError``: pass eps). ``eps`` given: the
    smallest alpha with bound <= eps (first crossing on a fine log grid, then bisection);
    ``ValueError`` naming the mu that would be needed when eps is out of reach.
    """
    N, q, mu = _sparse_args(N, q, mu)
    c = _checks.positive_float("c", c)
    r_x = _checks.positive_float("r_x", r_x)
    A_star, best = _sparse_min_A(N, q, mu)
    if eps is None:
        if math.isinf(A_star):
            raise ValueError(
                f"eps must be given for q = {q}, mu = {mu:.6g}, N = {N}: the bound decreases to 0 as alpha "
                f"grows (no minimising alpha)"
            )
        return A_star / (c * c)
    eps = _checks.positive_float("eps", eps)
    f = lambda A: r_x * _sparse_bound_A(N, q, mu, A)  # noqa: E731
    if f(0.0) <= eps:
        return 0.0
    if math.isinf(A_star):
        # bound = 2 r_x L(A) with L decreasing to 0: invert exactly
        target = eps / (2 * r_x)
        A = (math.log((N - q) / q) + math.log1p(-target) - math.log(target)) / (1 - (2 * q - 1) * mu)
        while f(A) > eps:
            A = A * (1 + 4e-16) + 1e-300
        return A / (c * c)
    if r_x * best > eps:
        need = sparse_average_mu_needed(N=N, q=q, r_x=r_x, eps=eps)
        raise ValueError(
            f"eps = {eps:.6g} is out of reach for mu = {mu:.6g} (N = {N}, q = {q}, r_x = {r_x:.6g}): the "
            f"best bound is {r_x * best:.6g}; mu <= {need:.6g} would be needed (a codebook with smaller coherence)"
        )
    grid = np.concatenate([[0.0], np.logspace(-3, math.log10(max(A_star, 1e-3)), 2000), [A_star]])
    grid.sort()
    vals = np.array([f(A) for A in grid])
    j = int(np.argmax(vals <= eps))  # first grid point below eps
    lo, hi = float(grid[max(j - 1, 0)]), float(grid[j])
    for _ in range(200):
        if hi - lo <= 1e-13 * hi:
            break
        mid = 0.5 * (lo + hi)
        if f(mid) <= eps:
            hi = mid
        else:
            lo = mid
    return hi / (c * c)


# ============================================================================ builders


def _as_codebook(codebook, N, dtype, device) -> Codebook:
    if isinstance(codebook, torch.Tensor):
        codebook = Codebook.from_tensor(codebook)
    if not isinstance(codebook, Codebook):
        raise ValueError(f"codebook must be a constructions.codes.Codebook or a tensor, got {type(codebook).__name__}")
    if codebook.N < N:
        raise ValueError(f"codebook has {codebook.N} rows but N = {N} positions need >= {N}")
    return codebook.to(device=device, dtype=dtype)


def _weight_norms(model: MergedAttention) -> dict:
    with torch.no_grad():
        return {
            "W_QK": tuple(float(model.W_QK[h].norm()) for h in range(model.H)),
            "W": float(model.W.norm()),
            "a": float(model.a.norm()),
            "b": float(model.b.norm()),
        }


def _check_net(net, H, d):
    if not isinstance(net, TwoLayerNet):
        raise ValueError(f"net must be a constructions.links.TwoLayerNet, got {type(net).__name__}")
    for nm in ("a", "W", "b"):
        v = getattr(net, nm)
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"net.{nm} must be a torch.Tensor")
        _checks.finite_tensor(f"net.{nm}", v)
    m = net.a.shape[0] if net.a.dim() == 1 else -1
    if net.a.dim() != 1:
        raise ValueError(f"net.a must be a vector (m,), got shape {tuple(net.a.shape)} (scalar-output nets only)")
    _checks.shape("net.W", net.W, (m, H * d))
    _checks.shape("net.b", net.b, (m,))
    return m


def lemma11(
    N: int,
    d: int,
    q: int,
    net: TwoLayerNet,
    *,
    codebook=None,
    eps: Optional[float] = None,
    alpha: Optional[float] = None,
    r_x: float,
    c: Optional[float] = None,
    slots: Optional[Sequence[int]] = None,
    eps_2nn: float = 0.0,
    dtype=torch.float64,
    device=None,
) -> Construction:
    """Lemma 11 (seed and conference numbering): H = q heads approximate the Assumption 2 net.

    **Statement.** Let omega_1..omega_N be unit codes with coherence mu < 1, c > 0 the
    encoding prefactor, and net(z) = a^T relu(W z + b) on z in R^{H d}. With
    W_QK^(h) = alpha * [slot(slots[h]) x pos] (zero elsewhere) and the output net reading
    the x block of each head output, every prompt whose tokens satisfy ||x_j|| <= r_x gets

        |y_hat_i - net(x_{t_i,slots[0]}, ..., x_{t_i,slots[H-1]})| <= Lip(net) sqrt(H) 2 delta r_x,
        delta = (N-1) e^{-Delta} / (1 + (N-1) e^{-Delta}),  Delta = alpha c^2 (1 - mu).

    **Proof sketch (next to the code that realises each step).**

    1. Scores: z_i^T W^(h) z_j = (c omega_{t_ih})^T (alpha I) (c omega_j) = alpha c^2
       <omega_{t_ih}, omega_j>: alpha c^2 for the target j = t_ih, <= alpha c^2 mu for every
       other key. Gap Delta = alpha c^2 (1 - mu).          -> ``_qk_blocks`` / ``place_block``
    2. Softmax: target weight >= 1/(1 + (N-1)e^{-Delta}); the rest is <= delta.
                                                              -> :func:`lemma11_leak`
    3. The x block of head h is sum_j pi_j x_j = x_{t_ih} + sum_{j != t} pi_j (x_j - x_{t_ih}),
       within delta * max_j ||x_j - x_{t_ih}|| <= 2 delta r_x of x_{t_ih}. The H heads
       together: within sqrt(H) 2 delta r_x in Euclidean norm.
    4. The output net places net.W's columns for token k on the x block of head k (zero
       on every other block), b = net.b, a = net.a, so y_hat_i = net(x-blocks) and
       |y_hat_i - net(x_{t_i})| <= ||a|| ||W||_op sqrt(H) 2 delta r_x.  -> :func:`lemma11_error_bound`
    5. alpha from eps inverts 2-4 exactly: alpha = ln((N-1)(1-delta*)/delta*) / (c^2 (1-mu)),
       delta* = eps / (2 Lip sqrt(H) r_x): weights grow like log N.  -> :func:`lemma11_alpha`

    Parameters: ``net`` must read ``len(slots) * d`` inputs (token of slots[0] first);
    exactly one of ``eps`` (alpha = :func:`lemma11_alpha`) and ``alpha`` (bound computed for
    it). ``codebook`` defaults to ``rs_hadamard_codebook(N, mu=0.5)`` (deterministic); the
    bound uses its *measured* mu. ``c`` defaults to sqrt(d/q). ``slots`` defaults to
    range(q); e.g. ``slots=[0, 1]`` with q = 3 builds two heads retrieving tokens 1, 2.
    ``eps_2nn`` (sup |g - net| on the r_x-ball) is only recorded. Tokens, codes and
    weights live on ``device`` in ``dtype``.
    """
    N = _checks.positive_int("N", N)
    d = _checks.positive_int("d", d)
    q = _checks.positive_int("q", q)
    if q > N:
        raise ValueError(f"q must satisfy 1 <= q <= N = {N}, got q = {q}")
    dtype = _checks.float_dtype("dtype", dtype)
    device = _checks.device_of("device", device)
    r_x = _checks.positive_float("r_x", r_x)
    eps_2nn = _checks.positive_float("eps_2nn", eps_2nn, allow_zero=True)
    c = default_prefactor(d, q) if c is None else _checks.positive_float("c", c)
    if slots is None:
        slots = tuple(range(q))
    try:
        slots = tuple(_checks.positive_int("slots", s, minimum=0) for s in slots)
    except TypeError:
        raise ValueError(f"slots must be a sequence of slot indices in [0, q), got {slots!r}") from None
    if not slots or any(s >= q for s in slots):
        raise ValueError(f"slots must be a non-empty sequence of slot indices in [0, q) = [0, {q}), got {list(slots)}")
    H = len(slots)
    m = _check_net(net, H, d)
    if (eps is None) == (alpha is None):
        raise ValueError("give exactly one of eps (alpha is then chosen) and alpha (bound computed for it)")

    if codebook is None:
        codebook = rs_hadamard_codebook(N, mu=0.5, device=device, dtype=dtype)
    codebook = _as_codebook(codebook, N, dtype, device)
    mu = codebook.mu
    if not mu < 1:
        raise ValueError(f"mu must be < 1 for the Lemma 11 gap: the codebook has coherence mu = {mu:.6g}")
    d_e = codebook.d_e
    layout = token_layout(d, q, d_e)
    lip = net.lipschitz
    if not math.isfinite(lip):
        raise ValueError("net has a non-finite Lipschitz constant (NaN weights?)")
    common = dict(N=N, q=H, mu=mu, c=c, r_x=r_x, lipschitz=lip)
    if eps is not None:
        alpha = lemma11_alpha(eps=_checks.positive_float("eps", eps), **common)
    else:
        alpha = _checks.positive_float("alpha", alpha, allow_zero=True)
    bound = lemma11_error_bound(alpha=alpha, **common)
    gap = alpha * c * c * (1 - mu)

    # step 1: W_QK by named blocks; step 4: the output net on the x blocks
    head_slots = tuple((s,) for s in slots)
    W_QK = _qk_blocks(layout, head_slots, alpha, dtype, device)
    W = torch.zeros(m, H * layout.dim, dtype=dtype, device=device)
    netW = net.W.to(dtype=dtype, device=device)
    x_block = layout["x"]
    for h in range(H):
        off = h * layout.dim
        W[:, off + x_block.start: off + x_block.stop] = netW[:, h * d:(h + 1) * d]
    model = MergedAttention(layout.dim, H, m, generator=torch.Generator().manual_seed(0), dtype=dtype, device=device)
    model.set_weights(W_QK=W_QK, W=W, b=net.b, a=net.a)

    guarantee = Guarantee(
        error_bound=bound, alpha=alpha, gap=gap, leak=lemma11_leak(N, gap), mu=mu, r_x=r_x, c=c, N=N, q=q, d=d,
        d_e=d_e, lipschitz=lip, eps_2nn=eps_2nn, weight_norms=_weight_norms(model),
        assumptions=(
            f"Assumption 3 with measured mu={mu:.6g} ({codebook.kind} codebook, d_e={d_e}, {codebook.N} rows)",
            f"||x_j|| <= r_x = {r_x:.6g} for every token of the prompt",
            f"bound against the Assumption 2 net (Lipschitz ||a|| ||W||_op = {lip:.6g}); "
            f"|g - g_net| <= eps_2nn = {eps_2nn:.6g} on the r_x-ball is the user's claim",
            f"heads read slots {list(slots)} of q={q}",
        ),
        H=H, kind="lemma11",
    )
    return Construction(model=model, codebook=codebook, layout=layout, c=c, guarantee=guarantee, slots=slots,
                        kind="lemma11")


def sparse_average_head(
    N: int,
    d: int,
    q: int,
    *,
    codebook,
    r_x: float,
    alpha: Optional[float] = None,
    eps: Optional[float] = None,
    c: Optional[float] = None,
    dtype=torch.float64,
    device=None,
) -> Construction:
    """ONE head computing the q-sparse average (1/q) sum_k x_{t_ik} (remark after Prop 3;
    Sanford, Hsu, Telgarsky 2023), for index tuples with q DISTINCT entries.

    **Weights.** W_QK = alpha * sum_k [slot k x pos], so with A = alpha c^2 the score of key
    j is A <sum_k omega_{t_ik}, omega_j>:

    * j in the set S_i = {t_i1..t_iq}: A (1 + sum_{k: t_ik != j} <omega_{t_ik}, omega_j>)
      >= A (1 - (q-1) mu); two in-set keys differ by at most 2 A (q-2) mu (the term
      <omega_a, omega_b> they share cancels);
    * j outside: <= A q mu.

    Separation needs mu < 1/(2q - 1) (``ValueError`` otherwise). The output net is the exact
    identity on the x block: y = relu(h_x) - relu(-h_x) (width 2d, out_dim = d).

    **Guarantee** (docs/derivations/sparse-averaging.md): pi independent of the tokens, so
    sup_x ||y_hat_i - mean_i|| = r_x ||pi - w||_1 (w uniform on S_i), and
    ||pi - w||_1 <= 2 L + 2 max_{k<q} [(1-L) k rho/(k rho + q - k) - k/q]_+ with
    L <= X/(1+X), X = ((N-q)/q) e^{-A(1 - (2q-1) mu)}, rho = e^{2 A (q-2) mu}.

    alpha: given, or the smallest reaching ``eps``, or (both None; q >= 3) the minimiser
    of the bound (:func:`sparse_average_alpha`). c defaults to sqrt(d/q).
    """
    N = _checks.positive_int("N", N)
    d = _checks.positive_int("d", d)
    q = _checks.positive_int("q", q)
    if q > N:
        raise ValueError(f"q must satisfy 1 <= q <= N = {N} (distinct indices), got q = {q}")
    dtype = _checks.float_dtype("dtype", dtype)
    device = _checks.device_of("device", device)
    r_x = _checks.positive_float("r_x", r_x)
    c = default_prefactor(d, q) if c is None else _checks.positive_float("c", c)
    if alpha is not None and eps is not None:
        raise ValueError("give at most one of eps and alpha")
    if codebook is None:
        raise ValueError("codebook must be given (coherence mu < 1/(2q - 1) needed), e.g. "
                         "rs_hadamard_codebook(N, mu=1/(2q)) ")
    codebook = _as_codebook(codebook, N, dtype, device)
    mu = codebook.mu
    _sparse_args(N, q, mu)  # ValueError when mu >= 1/(2q - 1)
    if alpha is None:
        alpha = sparse_average_alpha(N=N, q=q, mu=mu, c=c, r_x=r_x, eps=eps)
    else:
        alpha = _checks.positive_float("alpha", alpha, allow_zero=True)
    A = alpha * c * c
    bound = sparse_average_error_bound(N=N, q=q, mu=mu, c=c, alpha=alpha, r_x=r_x)
    leak = sparse_average_leak(N=N, q=q, mu=mu, A=A)

    d_e = codebook.d_e
    layout = token_layout(d, q, d_e)
    slots = tuple(range(q))
    W_QK = _qk_blocks(layout, (slots,), alpha, dtype, device)
    eye = torch.eye(d, dtype=dtype, device=device)
    W = torch.zeros(2 * d, layout.dim, dtype=dtype, device=device)
    W[:d, layout["x"]] = eye  # relu(h_x)
    W[d:, layout["x"]] = -eye  # relu(-h_x)
    a = torch.cat([eye, -eye], dim=1)  # (d, 2d): relu(h) - relu(-h) = h
    model = MergedAttention(layout.dim, 1, 2 * d, out_dim=d, generator=torch.Generator().manual_seed(0),
                            dtype=dtype, device=device)
    model.set_weights(W_QK=W_QK, W=W, b=torch.zeros(2 * d, dtype=dtype), a=a)
    guarantee = Guarantee(
        error_bound=bound, alpha=alpha, gap=A * (1 - (2 * q - 1) * mu), leak=leak, mu=mu, r_x=r_x, c=c, N=N, q=q,
        d=d, d_e=d_e, lipschitz=1.0, eps_2nn=0.0, weight_norms=_weight_norms(model),
        assumptions=(
            f"Assumption 3 with measured mu={mu:.6g} < 1/(2q-1) = {1 / (2 * q - 1):.6g} "
            f"({codebook.kind} codebook, d_e={d_e})",
            f"||x_j|| <= r_x = {r_x:.6g} for every token of the prompt",
            "the q indices of each position are distinct",
            "error is the Euclidean norm of y_hat_i - (1/q) sum_k x_{t_ik}; output net is the exact identity",
        ),
        H=1, kind="sparse-average",
    )
    return Construction(model=model, codebook=codebook, layout=layout, c=c, guarantee=guarantee, slots=slots,
                        kind="sparse-average")


# ============================================================================ diagnostics


def target_leaks(construction: Construction, *, chunk: int = 1024) -> torch.Tensor:
    """Exact off-target softmax mass of a Lemma 11 head, per target: (N,) tensor.

    leak[t] = sum_{j != t} e^{A (G_tj - G_tt)} / (1 + sum_{j != t} e^{A (G_tj - G_tt)}),
    A = alpha c^2, G the Gram matrix of the codes. It does not depend on the tokens or the
    head, and max_t leak[t] <= construction.guarantee.leak (the coherence-only bound). For a
    linear net the worst-case error is exactly 2 r_x max_t leak[t] ||sum_h w_h||
    (:func:`lemma11_adversarial_prompt`). O(chunk N) memory.
    """
    if not isinstance(construction, Construction) or construction.kind != "lemma11":
        raise ValueError("construction must be a Lemma 11 Construction (kind='lemma11')")
    chunk = _checks.positive_int("chunk", chunk)
    omega = construction.omega
    A = construction.alpha * construction.c ** 2
    N = omega.shape[0]
    out = []
    for s in range(0, N, chunk):
        G = omega[s:s + chunk] @ omega.T  # (c, N)
        rows = torch.arange(G.shape[0], device=G.device)
        self_ip = G[rows, rows + s].clone()
        E = torch.exp(A * (G - self_ip[:, None]))
        E[rows, rows + s] = 0
        X = E.sum(dim=1)
        out.append(X / (1 + X))
    return torch.cat(out)


def lemma11_adversarial_prompt(construction: Construction, direction: torch.Tensor, *, target: Optional[int] = None,
                               B: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
    """Worst-case tokens for a net that is linear on the r_x-ball, direction v in R^d.

    Every position reads the same target t* in every slot (t_i = (t*, ..., t*)), x_{t*} =
    -r_x v/||v|| and every other token +r_x v/||v||. The softmax weights of Lemma 11 do not
    depend on the tokens, so each head's x block is x_{t*} + 2 r_x leak[t*] v/||v||, and for
    a net that is affine with gradient (w_0, ..., w_{H-1}) on the ball the error is
    2 r_x leak[t*] <sum_h w_h, v/||v||>: maximal for v = sum_h w_h, where it equals
    2 r_x leak[t*] ||sum_h w_h|| (= the Lemma 11 bound when all w_h are equal, all codes
    meet the target at exactly mu, and Lip = ||w||). ``target`` defaults to argmax of
    :func:`target_leaks`. Returns (x, t) of shapes (B, N, d), (B, N, q).
    """
    if not isinstance(construction, Construction) or construction.kind != "lemma11":
        raise ValueError("construction must be a Lemma 11 Construction (kind='lemma11')")
    p = construction.model.W_QK
    N, d, q = construction.N, construction.d, construction.q
    direction = torch.as_tensor(direction).to(dtype=p.dtype, device=p.device)
    _checks.shape("direction", direction, (d,))
    _checks.finite_tensor("direction", direction)
    norm = float(direction.norm())
    if norm == 0:
        raise ValueError("direction must be nonzero")
    B = _checks.positive_int("B", B)
    if target is None:
        target = int(target_leaks(construction).argmax())
    target = _checks.positive_int("target", target, minimum=0)
    if target >= N:
        raise ValueError(f"target must lie in [0, N) = [0, {N}), got {target}")
    v = direction / norm * construction.guarantee.r_x
    x = v.expand(B, N, d).clone()
    x[:, target] = -v
    t = torch.full((B, N, q), target, dtype=torch.long, device=p.device)
    return x, t
