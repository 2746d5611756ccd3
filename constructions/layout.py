"""Named token blocks z_i = (x_i | pos: omega_i | slot0: omega_{t_i1} | ... | slot{q-1}:
omega_{t_iq}) of the encodings (Appendices A.1, B.1): constructions address blocks by name, never
by raw index arithmetic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Tuple

import torch

from qstr.constructions import validate


@dataclass(frozen=True)
class Layout:
    """An ordered tuple of ``(name, size)`` blocks with slice look-up by name."""

    blocks: Tuple[Tuple[str, int], ...]

    def __post_init__(self):
        names = [n for n, _ in self.blocks]
        if len(set(names)) != len(names):
            raise ValueError(f"block names must be distinct, got {names}")
        for n, size in self.blocks:
            validate.positive_int(f"size of block {n!r}", size)

    @property
    def dim(self) -> int:
        return sum(size for _, size in self.blocks)

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(n for n, _ in self.blocks)

    def __getitem__(self, name: str) -> slice:
        start = 0
        for n, size in self.blocks:
            if n == name:
                return slice(start, start + size)
            start += size
        raise ValueError(f"no block named {name!r}; blocks are {', '.join(self.names)}")

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def size(self, name: str) -> int:
        s = self[name]
        return s.stop - s.start

    def slot(self, k: int) -> slice:
        """The block holding omega_{t_ik}, the code of the k-th index (0-based)."""
        return self[slot_name(k)]

    def split(self, z: torch.Tensor) -> Dict[str, torch.Tensor]:
        """Views of the last axis of ``z`` by block name."""
        validate.shape("z", z, (None,) * (z.dim() - 1) + (self.dim,))
        return {n: z[..., self[n]] for n in self.names}

    def join(self, parts: Dict[str, torch.Tensor]) -> torch.Tensor:
        """Concatenate blocks given by name (every block must be present, in any order)."""
        missing = [n for n in self.names if n not in parts]
        if missing:
            raise ValueError(f"join is missing blocks {missing}")
        return torch.cat([parts[n] for n in self.names], dim=-1)


def slot_name(k: int) -> str:
    return f"slot{k}"


def token_layout(d: int, q: int, d_e: int) -> Layout:
    """Layout of z_i = (x_i, omega_i, omega_{t_i1}, ..., omega_{t_iq}): D_e = d + (q + 1) d_e."""
    return _token_layout(
        validate.positive_int("d", d),
        validate.positive_int("q", q),
        validate.positive_int("d_e", d_e),
    )


def _token_layout(d: int, q: int, d_e: int) -> Layout:
    """:func:`token_layout` for sizes already validated (the builders of this package)."""
    blocks: Iterable = [("x", d), ("pos", d_e)] + [(slot_name(k), d_e) for k in range(q)]
    return Layout(tuple(blocks))
