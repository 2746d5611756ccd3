"""The exact coherence mu = max_{i != j} |<omega_i, omega_j>| of positional codes (Assumption 3),
in O(chunk_rows * N) memory: integer Gram blocks for sign codes, float64 otherwise.
Derivation: docs/derivations/codebooks.md (its opening: the coherence and its pair)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import torch

from qstr.constructions.validate import finite_tensor, positive_float, positive_int

__all__ = ["UNIT_NORM_TOL", "CoherenceReport", "coherence", "coherence_report"]

UNIT_NORM_TOL = 1e-6  # | ||omega_i|| - 1 | of a unit row (Codebook.from_tensor; sign codes' scale)
_BLOCK_ELEMENTS = 1 << 24  # entries of one Gram block: O(chunk_rows * N) memory


@dataclass(frozen=True)
class CoherenceReport:
    """Exact coherence of a codebook and how many pairs break
    ``|<omega_i, omega_j>| <= threshold``."""

    mu: float
    pair: tuple | None  # (i, j), i < j, attaining mu; None when N = 1
    n_violations: int  # unordered pairs with |<omega_i, omega_j>| > threshold
    n_pairs: int  # N (N - 1) / 2
    threshold: float

    @property
    def ok(self) -> bool:
        return self.n_violations == 0

    def __str__(self) -> str:
        verdict = "satisfies" if self.ok else "violates"
        return (
            f"{verdict} |<omega_i, omega_j>| <= {self.threshold}: {self.n_violations} of "
            f"{self.n_pairs} pairs exceed it; mu = {self.mu:.6g} at pair {self.pair}"
        )


def coherence(omega: torch.Tensor, *, chunk_rows: int | None = None) -> float:
    """Exact mu = max_{i != j} |<omega_i, omega_j>| (0.0 for N = 1), in O(chunk_rows * N) memory.

    Serves Assumption 3: every construction uses mu in place of the constant 1/2.
    If all entries share one magnitude s (Rademacher, RS-Hadamard), the Gram matrix of the
    sign matrix is integer valued and computed exactly (float32 for d_e < 2^24, else
    float64), then multiplied by s^2 as a rational number; rows equal to +-s with
    d_e s^2 = 1 up to 1e-6 are read as +-1/sqrt(d_e), so mu = max|S| / d_e exactly.
    Otherwise the inner products are computed in float64 (exact up to float64 rounding,
    whose last ulp may depend on ``chunk_rows``). Runs on omega's device; on CUDA the
    sign path stays exact under TF32 too (+-1 inputs are representable, sums in float32).
    """
    return _scan("omega", omega, chunk_rows, threshold=None)[0]


def coherence_report(
    omega: torch.Tensor, threshold: float = 0.5, *, chunk_rows: int | None = None
) -> CoherenceReport:
    """Coherence, the pair attaining it, and the number of pairs above ``threshold``
    (Assumption 3)."""
    threshold = positive_float("threshold", threshold, allow_zero=True)
    mu, pair, n_violations = _scan("omega", omega, chunk_rows, threshold)
    N = int(omega.shape[0])
    return CoherenceReport(mu, pair, n_violations, N * (N - 1) // 2, threshold)


def _matrix(name: str, omega) -> torch.Tensor:
    if isinstance(omega, torch.Tensor) and omega.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{name} must be on the CPU or a CUDA device, got {omega.device}")
    finite_tensor(name, omega)
    if omega.dim() != 2 or omega.shape[0] < 1 or omega.shape[1] < 1:
        raise ValueError(
            f"{name} must be a 2-D tensor (N, d_e) with N, d_e >= 1, got shape {tuple(omega.shape)}"
        )
    if omega.is_complex() or omega.dtype == torch.bool:
        raise ValueError(f"{name} must be a real tensor, got dtype {omega.dtype}")
    return omega


def _sign_form(omega: torch.Tensor):
    """(signs, unit) with omega = signs * s and <omega_i, omega_j> = (signs signs^T)_ij * unit,
    or None."""
    mags = omega.abs()
    s = mags.max()
    if not bool(s > 0) or not bool((mags == s).all()):
        return None
    d_e = omega.shape[1]
    s = Fraction(float(s))
    unit = Fraction(1, d_e) if abs(float(d_e * s * s) - 1) <= UNIT_NORM_TOL else s * s
    exact_dtype = torch.float32 if d_e < 2**24 else torch.float64
    return torch.sign(omega).to(exact_dtype), unit


def _scan(name, omega, chunk_rows, threshold):
    """Blockwise upper-triangle scan of the Gram matrix: (mu, pair, #pairs above threshold)."""
    _matrix(name, omega)
    N = int(omega.shape[0])
    chunk = (
        max(1, _BLOCK_ELEMENTS // N)
        if chunk_rows is None
        else positive_int("chunk_rows", chunk_rows)
    )
    chunk = min(chunk, N)
    if N == 1:
        return 0.0, None, 0
    sign_form = _sign_form(omega.detach())
    if sign_form is None:
        rows, unit = omega.detach().to(torch.float64), None
        cut = threshold
    else:
        rows, unit = sign_form
        cut = None if threshold is None else math.floor(Fraction(threshold) / unit)
    best, pair, count = -1.0, None, 0
    for a in range(0, N, chunk):
        b = min(a + chunk, N)
        block = (rows[a:b] @ rows[a:].T).abs_()  # columns a..N-1
        w = b - a
        block[:, :w].masked_fill_(
            torch.ones(w, w, dtype=torch.bool, device=block.device).tril(), -1
        )
        flat = int(block.argmax())
        value = float(block.view(-1)[flat])
        if value > best:
            best, pair = value, (a + flat // block.shape[1], a + flat % block.shape[1])
        if cut is not None:
            count += int((block > cut).sum())
    mu = best if unit is None else float(Fraction(int(best)) * unit)
    return mu, pair, count
