"""Training prompts for the experiments (Appendix E): fresh online prompts or passes over a
fixed set."""

from __future__ import annotations

from typing import Optional

import torch

from qstr.constructions import validate
from qstr.constructions.task import QSTR


class OnlineStream:
    """Fresh prompts of ``task`` drawn with ``generator``: the online protocol (Appendix E).

    Prompts are generated ``chunk`` at a time (one ``task.sample(chunk)`` call) and handed out
    in order, so the sequence of prompts a consumer sees does not depend on how many it asks
    for at once: training a member alone (64 per step) and inside a stack (prefetching many
    steps) sees the same prompts. ``consumed`` counts prompts handed out.
    """

    def __init__(
        self, task: QSTR, generator: torch.Generator, *, dtype=torch.float32, chunk: int = 2048
    ):
        self.task = task
        self.generator = generator
        self.device = generator.device
        self.dtype = dtype
        self.chunk = validate.positive_int("chunk", chunk)
        self._buf: Optional[tuple] = None
        self._pos = 0
        self.consumed = 0

    def draw(self, n: int) -> tuple:
        """The next ``n`` prompts as ``(x, t, y)``: (n, N, d), (n, N, q), (n, N)."""
        n = validate.positive_int("n", n)
        parts = []
        while n > 0:
            if self._buf is None or self._pos >= self._buf[0].shape[0]:
                p = self.task.sample(
                    self.chunk, generator=self.generator, device=self.device, dtype=self.dtype
                )
                self._buf, self._pos = (p.x, p.t, p.y), 0
            k = min(n, self._buf[0].shape[0] - self._pos)
            parts.append(tuple(v[self._pos : self._pos + k] for v in self._buf))
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

    def __init__(
        self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor, generator: torch.Generator
    ):
        self.x, self.t, self.y = x, t, y
        self.n = x.shape[0]
        self.generator = generator
        self._perm: Optional[torch.Tensor] = None
        self._pos = 0
        self.consumed = 0

    def draw(self, n: int) -> tuple:
        n = validate.positive_int("n", n)
        idx = []
        while n > 0:
            if self._perm is None or self._pos >= self.n:
                self._perm = torch.randperm(
                    self.n, generator=self.generator, device=self.generator.device
                )
                self._pos = 0
            k = min(n, self.n - self._pos)
            idx.append(self._perm[self._pos : self._pos + k])
            self._pos += k
            n -= k
        i = torch.cat(idx).to(self.x.device)
        self.consumed += i.numel()
        return self.x[i], self.t[i], self.y[i]
