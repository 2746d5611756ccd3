"""The floating-point rounding term n * eps(dtype) * scale added to every bound a claim checks on
computed numbers (float32 on a GPU, float64 on the CPU) and stated in its detail. Derivation:
docs/derivations/rounding.md."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Tuple

import torch


def dtype_name(dtype) -> str:
    """'float64' for torch.float64 (and for the string itself)."""
    return str(dtype).replace("torch.", "")


@dataclass(frozen=True)
class Rounding:
    """The rounding term ``n * eps(dtype) * scale`` of a measured quantity
    (docs/derivations/rounding.md).

    ``what`` names n and scale in the detail line, e.g. "(N + D) eps |y|max". Terms of a
    quantity computed in stages add up: ``a + b`` (the stages' terms listed in the detail);
    ``a.times(L, "L")`` carries a term through an L-Lipschitz map."""

    n: int
    scale: float
    dtype: torch.dtype = torch.float64
    what: str = "n eps |.|max"
    rest: Tuple["Rounding", ...] = ()

    @property
    def eps(self) -> float:
        return float(torch.finfo(self.dtype).eps)

    @property
    def term(self) -> float:
        return self.n * self.eps * abs(float(self.scale)) + sum(r.term for r in self.rest)

    def within(self, measured: float, bound: float) -> bool:
        """measured <= bound + term."""
        return measured <= bound + self.term

    def __add__(self, other: "Rounding") -> "Rounding":
        return replace(self, rest=self.rest + (other,))

    def times(self, factor: float, name: str) -> "Rounding":
        """The term carried through a ``factor``-Lipschitz map (every part scaled)."""
        return replace(
            self,
            scale=self.scale * factor,
            what=f"{name} {self.what}",
            rest=tuple(r.times(factor, name) for r in self.rest),
        )

    def _parts(self) -> str:
        own = f"{self.what} = {self.n} x {self.eps:.2g} x {abs(float(self.scale)):.3g}"
        return " + ".join([own] + [r._parts() for r in self.rest])

    def __str__(self) -> str:
        parts, dtype = self._parts(), dtype_name(self.dtype)
        return f"rounding term {parts} = {self.term:.2g} ({dtype}) added to the bound"


def largest(terms) -> Optional[Rounding]:
    """The term with the largest value (for a detail line covering several cases)."""
    terms = [t for t in terms if t is not None]
    return max(terms, key=lambda t: t.term) if terms else None


def two_layer(
    W1: torch.Tensor,
    b1: torch.Tensor,
    W2: torch.Tensor,
    u: torch.Tensor,
    dtype=torch.float64,
    what: str = "(n_in + width + 2) eps max |W2|(|W1||u| + |b1|)",
) -> Rounding:
    """Rounding of u -> W2 relu(W1 u + b1) on the rows of ``u``: n = n_in + width + 2 and
    scale = max over rows and outputs of |W2| (|W1| |u| + |b1|), the Higham sum of magnitudes."""
    A1, B1, A2 = (t.to(dtype=torch.float64, device=u.device).abs() for t in (W1, b1, W2))
    scale = float(((u.to(torch.float64).abs().reshape(-1, A1.shape[1]) @ A1.T + B1) @ A2.T).max())
    return Rounding(n=A1.shape[1] + A1.shape[0] + 2, scale=scale, dtype=dtype, what=what)
