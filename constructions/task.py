"""The qSTR data model (Definition 2) and its variants (simple-qSTR; the few-heads prompts of
Props 3 and 21), sampled in batches, with the Assumption 1 moment check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from qstr.constructions import validate
from qstr.constructions.links import Link

VARIANTS = ("general", "simple")
INDEX_RULES = ("uniform", "distinct", "few-heads")
TOKEN_RULES = ("gaussian", "half-zero")


@dataclass(frozen=True, eq=False)
class Prompts:
    """A batch of qSTR prompts: ``x`` (B, N, d), ``t`` (B, N, q) long, ``y`` (B, N) or
    (B, N, out_dim)."""

    x: torch.Tensor
    t: torch.Tensor
    y: torch.Tensor

    @property
    def B(self) -> int:
        return self.x.shape[0]

    @property
    def N(self) -> int:
        return self.x.shape[1]

    def selected(self) -> torch.Tensor:
        """The tokens each position reads, x_{t_i1..t_iq}: shape (B, N, q, d)."""
        return gather_tokens(self.x, self.t)


def gather_tokens(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """x_{t_ik} for every prompt b, position i and slot k: (B, N, d), (B, N, q) -> (B, N, q, d)."""
    batch = torch.arange(x.shape[0], device=x.device)[:, None, None]
    return x[batch, t]


@dataclass(frozen=True, eq=False)
class QSTR:
    """A qSTR task (Definition 2): length ``N``, token dimension ``d`` and link ``g``.

    A prompt has tokens x_1..x_N in R^d and one index tuple t_i in [N]^q per output position;
    its labels are y_i = g(x_{t_i1}, ..., x_{t_iq}). ``q`` is the link's sparsity. ``sample``
    draws batches of prompts with an explicit ``torch.Generator`` on the generator's device.

    * ``variant="general"`` (qSTR): the t_i are drawn independently per position;
      ``"simple"`` (simple-qSTR): one t per prompt, t_i = t for every i.
    * ``indices="uniform"`` draws t_i uniformly from [N]^q; ``"distinct"`` uniformly among
      tuples with q distinct entries; ``"few-heads"`` is the index rule of Prop 3 / Prop 21:
      t_i = (1, ..., q) at the positions i >= N/2 and uniform elsewhere.
    * ``tokens="gaussian"``: x_j ~ N(0, I_d); ``"half-zero"``: x_j ~ N(0, I_d) for j < N/2 and
      x_j = 0 for j >= N/2 (the few-heads lower bounds, Prop 3 and Prop 21).

    Indices are 0-based in code: position i in the paper is ``i - 1`` here, and "j < N/2"
    means ``j < N // 2``.
    """

    N: int
    d: int
    link: Link
    variant: str = "general"
    indices: str = "uniform"
    tokens: str = "gaussian"

    def __post_init__(self):
        N = validate.positive_int("N", self.N)
        d = validate.positive_int("d", self.d)
        if not isinstance(self.link, Link):
            raise ValueError(
                f"link must be a constructions.links.Link, got {type(self.link).__name__}"
            )
        if self.link.d != d:
            raise ValueError(f"link.d = {self.link.d} must equal d = {d}")
        _one_of("variant", self.variant, VARIANTS)
        _one_of("indices", self.indices, INDEX_RULES)
        _one_of("tokens", self.tokens, TOKEN_RULES)
        if self.q > N:
            raise ValueError(f"q must satisfy 1 <= q <= N = {N}, got q = {self.q}")
        if self.indices == "few-heads" and 2 * self.q > N:
            raise ValueError(
                f"indices='few-heads' needs q <= N/2 (tokens 1..q nonzero), "
                f"got q = {self.q}, N = {N}"
            )
        if self.indices == "few-heads" and self.variant == "simple":
            raise ValueError("indices='few-heads' fixes t per position; use variant='general'")

    @property
    def q(self) -> int:
        return self.link.q

    def sample(
        self, B: int, *, generator: torch.Generator, device=None, dtype=torch.float32
    ) -> Prompts:
        """Draw ``B`` prompts: x (B, N, d), t (B, N, q), y = g(x_t) (B, N[, out_dim])."""
        B = validate.positive_int("B", B)
        device = validate.device_of(
            "device", device if device is not None else getattr(generator, "device", None)
        )
        validate.generator_on("generator", generator, device)
        dtype = validate.float_dtype("dtype", dtype)
        self._fits(B, device, dtype)
        x = self.sample_tokens(B, generator=generator, device=device, dtype=dtype)
        t = self.sample_indices(B, generator=generator, device=device)
        return Prompts(x=x, t=t, y=self.link(gather_tokens(x, t)))

    def sample_bytes(self, B: int, dtype=torch.float32) -> int:
        """Bytes :meth:`sample` (Definition 2's sampler) allocates for B prompts: x (d floats per
        position), the gathered tokens and the link's product (q d floats per position each), the
        labels (out_dim floats, or 1) and t (q longs)."""
        return self._bytes(validate.positive_int("B", B), validate.float_dtype("dtype", dtype))

    def _bytes(self, B: int, dtype) -> int:
        item = torch.empty((), dtype=dtype).element_size()
        per_position = item * (self.d * (1 + 2 * self.q) + (self.link.out_dim or 1)) + 8 * self.q
        return B * self.N * per_position

    def _fits(self, B: int, device, dtype) -> None:
        """Refuse before allocating (:meth:`sample_bytes`; B and dtype already validated by
        :meth:`sample`)."""
        validate.fits_in_memory(
            f"sampling B = {B} prompts of N = {self.N} tokens in d = {self.d} (q = {self.q}, "
            f"{str(dtype).replace('torch.', '')})",
            self._bytes(B, dtype),
            device,
        )

    def sample_tokens(self, B, *, generator, device, dtype) -> torch.Tensor:
        x = torch.randn(B, self.N, self.d, generator=generator, device=device, dtype=dtype)
        if self.tokens == "half-zero":
            x[:, self.N // 2 :] = 0
        return x

    def sample_indices(self, B, *, generator, device) -> torch.Tensor:
        N, q = self.N, self.q
        if self.variant == "simple":
            t = _draw_tuples((B, 1), N, q, self.indices == "distinct", generator, device)
            return t.expand(B, N, q)
        t = _draw_tuples((B, N), N, q, self.indices == "distinct", generator, device)
        if self.indices == "few-heads":
            t[:, N // 2 :] = torch.arange(q, device=device)
        return t

    def label(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Labels of given prompts: y_i = g(x_{t_i}), with shape checks."""
        validate.finite_tensor("x", x)
        validate.shape("x", x, (None, self.N, self.d))
        validate.shape("t", t, (x.shape[0], self.N, self.q))
        if t.dtype != torch.long or t.min() < 0 or t.max() >= self.N:
            raise ValueError(f"t must be a long tensor with entries in [0, N) = [0, {self.N})")
        return self.link(gather_tokens(x, t))


def _one_of(name: str, value, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


def _draw_tuples(lead: tuple, N: int, q: int, distinct: bool, generator, device) -> torch.Tensor:
    """Uniform tuples in [N]^q, or uniform among tuples of q distinct entries (by rejection)."""
    t = torch.randint(N, lead + (q,), generator=generator, device=device)
    if not distinct or q == 1:
        return t
    flat = t.view(-1, q)
    while True:
        s = flat.sort(dim=1).values
        bad = (s[:, 1:] == s[:, :-1]).any(dim=1).nonzero().flatten()
        if bad.numel() == 0:
            return t
        flat[bad] = torch.randint(N, (bad.numel(), q), generator=generator, device=device)


@dataclass(frozen=True)
class MomentReport:
    """Empirical Assumption 1 constants: the smallest C_x, C_y consistent with sampled moments.

    Assumption 1: E[||x_i||^r]^(1/r) <= sqrt(C_x d r) and E[|y_i|^r]^(1/r) <= sqrt(C_y) r^s.
    ``C_x = max_r E[||x||^r]^(2/r) / (d r)`` and ``C_y = max_r E[|y|^r]^(2/r) / r^(2 s)`` over the
    orders tried; ``per_order`` lists (r, x-ratio, y-ratio) so a user sees the trend in r.
    """

    C_x: float
    C_y: float
    s: float
    orders: tuple
    per_order: tuple
    samples: int

    def holds(self, C_x: float, C_y: float) -> bool:
        return self.C_x <= C_x and self.C_y <= C_y


def moment_check(
    task: QSTR,
    *,
    B: int,
    generator: torch.Generator,
    orders=(1, 2, 4, 8),
    s: float = 1.0,
    device=None,
) -> MomentReport:
    """Estimate the Assumption 1 constants of ``task`` from ``B`` prompts (float64), at the moment
    ``orders`` r (default 1, 2, 4, 8) and label exponent ``s`` (default 1)."""
    s = validate.positive_float("s", s)
    orders = tuple(validate.positive_float("orders", r) for r in orders)
    p = task.sample(B, generator=generator, device=device, dtype=torch.float64)
    xnorm = p.x.norm(dim=-1).flatten()
    ynorm = (p.y.norm(dim=-1) if p.y.dim() == 3 else p.y.abs()).flatten()
    rows = []
    for r in orders:
        mx = float(xnorm.pow(r).mean().pow(2 / r)) / (task.d * r)
        my = float(ynorm.pow(r).mean().pow(2 / r)) / r ** (2 * s)
        rows.append((r, mx, my))
    return MomentReport(
        C_x=max(m for _, m, _ in rows),
        C_y=max(m for _, _, m in rows),
        s=s,
        orders=orders,
        per_order=tuple(rows),
        samples=int(xnorm.numel()),
    )
