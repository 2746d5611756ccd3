"""Lemma 40 for the built V: Var(||x||^2 | Vx) = 2 (k - rank V) for every V (orthonormal or
not), so the closed form's exact value on the claim's object is an integer decided by V's rank,
computed in exact rational arithmetic (docs/derivations/certified.md)."""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Callable

import torch
from flint import fmpq, fmpq_mat

from qstr.bounds.gaussian import conditional_sqnorm_variance
from qstr.verify.ball import Certified, Enclosure, exact, precision, verdict

WHAT = "Lemma 40 closed form = 2 (k - rank V)"


def exact_rank(V: torch.Tensor) -> int:
    """The rank of a float64 (r, k) matrix, its entries read as exact rationals (FLINT's fmpq)."""
    if not isinstance(V, torch.Tensor) or V.ndim != 2 or not V.is_floating_point():
        raise ValueError("expected a 2-D floating-point torch.Tensor")
    r, k = V.shape
    if r == 0:
        return 0
    entries = V.detach().cpu().to(torch.float64).flatten().tolist()
    return fmpq_mat(r, k, [fmpq(*Fraction(v).as_integer_ratio()) for v in entries]).rank()


def certified_lemma40(
    V: torch.Tensor, *, variance: Callable[[int, int], float] = conditional_sqnorm_variance
) -> Certified:
    """The closed form ``variance(k, r)`` (Lemma 40's 2 (k - r)) against the exact conditional
    variance for the built V (r, k): given Vx = a, x = m + Pi g with m in V's row space and Pi
    the projection onto ker V, so ||x||^2 = ||m||^2 + ||Pi g||^2 and the variance is
    2 tr(Pi) = 2 (k - rank V). Measured: |variance(k, r) - 2 (k - rank V)| (exact); bound
    1e-12 (k - r)."""
    start = time.perf_counter()
    r, k = V.shape
    rank = exact_rank(V)
    with precision():
        measured = Enclosure.of(abs(exact(variance(k, r)) - 2 * (k - rank)))
    tol = 1e-12 * max(1, k - r)
    bound = Enclosure(tol, tol)
    detail = f"k = {k}, r = {r}: rank V = {rank} (exact), variance {2 * (k - rank)}"
    seconds = time.perf_counter() - start
    return Certified(WHAT, measured, bound, verdict(measured, bound), 1, seconds, detail)
