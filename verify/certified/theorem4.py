"""Theorem 4's bound enclosed in ball arithmetic, written from docs/derivations/theorem4.md
section 9, every max decided in arb or refused, and the float64 bound's agreement with it
certified (docs/derivations/certified.md)."""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence, Tuple

from flint import arb

from qstr.bounds.transformer import Theorem4Params, theorem4_bound
from qstr.verify.ball import (
    NOT_CERTIFIED,
    Certified,
    Enclosure,
    exact,
    exp,
    log,
    max_ends,
    precision,
    sqrt,
    verdict,
)


class Undecided(ValueError):
    """A comparison of two balls that overlap: the branch it picks is not proved."""


def larger(a, b) -> arb:
    """max(a, b) when arb decides which is larger; Undecided when the balls straddle (Python's
    ``max`` would silently take the first, since an undecided arb comparison is False)."""
    a, b = arb(a), arb(b)
    if a >= b:
        return a
    if b >= a:
        return b
    raise Undecided(f"max({a}, {b}) is not decided")


def code_dim(params, N: int) -> int:
    """d_e = ceil(8 ln(N^2 / delta)) of Theorems 4 and 7's codebook, decided in arb (Undecided if
    the ball holds an integer), or ``params.d_e`` (a ``Theorem4Params`` or ``Theorem7Params``)."""
    if params.d_e is not None:
        return params.d_e
    with precision():
        v = 8 * log(arb(N) ** 2 / exact(params.delta))
        k = math.ceil(float(v.mid()))
        if not (arb(k - 1) < v and v <= arb(k)):
            raise Undecided(f"ceil(8 ln(N^2/delta)) is not decided at N = {N}: {v}")
        return k


def moment_factor(p: arb, lnN: arb) -> arb:
    """Lemma 20's psi(p) = r N^{2/r}, r = max(2p, 2 ln N) (theorem4.md, (1b))."""
    r = larger(2 * p, 2 * lnN)
    return r * exp(2 * lnN / r)


def theorem4_bound_ball(n, N: int, params: Theorem4Params) -> arb:
    """The Theorem 4 bound at (n, N) enclosed (theorem4.md section 9; call inside
    ``precision()``); Undecided where a max or d_e's ceiling is not decided."""
    P = params
    q, d, m_g = P.q, P.d, P.m_g
    nv, lnN = arb(n), log(arb(N))
    delta, C_x, C_y, s, mu, eps = (exact(v) for v in (P.delta, P.C_x, P.C_y, P.s, P.mu, P.eps_2nn))
    K = exact(P.r_a) * exact(P.r_w)
    c2 = arb(d) / q if P.c is None else exact(P.c) ** 2
    e = exp(arb(1))
    r_x = sqrt(3 * C_x * e * d * log(nv * N))
    r_z = sqrt(r_x**2 + c2 * (q + 1))
    d_e = code_dim(P, N)
    D_e = d + (q + 1) * d_e
    alpha = larger(0, log((N - 1) * 2 * K * sqrt(arb(q)) * r_x / sqrt(eps))) / (c2 * (1 - mu))
    r_qk = alpha * sqrt(arb(d_e))
    A = 6 * K * larger(sqrt(q * r_z**2 + 1), sqrt(arb(q)) * r_qk * r_z**3)
    n_params = m_g * (q * D_e + 2) + q * D_e**2
    p = larger(1, log(2 * (1 + 3 / delta) * sqrt(nv)))
    codes = 4 * K**2 * (q * c2 * (q + 1) + 1)
    tau = e * larger(
        4 * C_y * (2 * p) ** (2 * s), 4 * K**2 * q * C_x * d * moment_factor(p, lnN) + codes
    )
    covering = n_params * log(1 + 2 * A * sqrt(nv / tau))
    estimation = (tau / sqrt(nv)) * (
        8 + 12 * sqrt(covering) + 3 * sqrt(log(6 / delta) / 2) + sqrt(log(3 / delta) / 2)
    )
    truncation = 2 * tau * exp(-p) * (1 + 3 / delta)
    second = 2 * (K**2 * (q * C_x * d * moment_factor(arb(2), lnN) + q * c2 * (q + 1) + 1))
    tail = (second + 2 * C_y * arb(16) ** s) * nv ** arb(-0.75) * exp(-lnN / 4)
    return 4 * eps + tail + estimation + truncation


def certified_theorem4_agreement(
    points: Sequence[Tuple[int, int]],
    params: Theorem4Params,
    *,
    rtol: float = 1e-12,
    record: Callable = theorem4_bound,
) -> Certified:
    """The float64 bound ``record(n, N, params).total`` (``theorem4_bound``) at each (n, N)
    within ``rtol`` (relative) of the bound's enclosure: measured = the largest
    |float64 - exact| / exact, enclosed; not certified where a max of the bound is undecided."""
    start = time.perf_counter()
    what = "Theorem 4 bound = its enclosure"
    with precision():
        gaps, widest = [], 0.0
        try:
            for n, N in points:
                exact_bound = theorem4_bound_ball(n, N, params)
                widest = max(widest, Enclosure.of(exact_bound).width / float(exact_bound.mid()))
                gaps.append(abs(exact(record(n, N, params).total) - exact_bound) / exact_bound)
        except Undecided as why:
            unknown = Enclosure(-math.inf, math.inf)
            seconds = time.perf_counter() - start
            detail = f"at (n, N) = ({n}, {N}): {why}"
            return Certified(
                what, unknown, Enclosure(rtol, rtol), NOT_CERTIFIED, 0, seconds, detail
            )
        lo, hi = max_ends(gaps)
        measured = Enclosure.between(lo, hi)
    bound = Enclosure(rtol, rtol)
    detail = f"{len(points)} points; the bound's enclosure at most {widest:.2g} relative wide"
    seconds = time.perf_counter() - start
    return Certified(what, measured, bound, verdict(measured, bound), len(points), seconds, detail)
