"""Theorem 7's bound enclosed in ball arithmetic, written from docs/derivations/rnn-lower-bounds.md
section 4 (the class of Prop 28, pieces 1-7), and the float64 bound's agreement with it certified
(docs/derivations/certified.md)."""

from __future__ import annotations

import time
from typing import Callable, List, Sequence, Tuple

from flint import arb

from qstr.bounds.theorem7 import Theorem7Params, theorem7_bound
from qstr.verify.ball import (
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
from qstr.verify.certified.theorem4 import code_dim  # the same codebook as Theorem 4


def _at_least_one(v: arb) -> arb:
    """max(1, v) enclosed."""
    if v >= 1:
        return v
    if v <= 1:
        return arb(1)
    return arb(1).union(v)


def layers(n, N: int, P: Theorem7Params) -> Tuple[arb, list, list]:
    """(r_x^2, transition layers, output layers) of Prop 28's class, each layer (fan_in, width,
    bias, R^2), r_x^2 = 3 C_x e d ln(n N)."""
    q, d, de, m_g = P.q, P.d, code_dim(P, N), P.m_g
    mu = exact(P.mu)
    rx2 = 3 * exact(P.C_x) * exp(arb(1)) * d * log(arb(n) * N)
    g2 = (2 + (1 + mu) ** 2) / (1 - mu) ** 2
    qd, De = q * d, d + (q + 1) * de
    trans = [
        (De, 2 * d + 2 * q * de, True, arb(2 * d + 4 * q * de)),
        (2 * d + 2 * q * de, 2 * d + q, True, 4 * d + q * g2),
        (2 * d + q, 2 * qd, True, 2 * qd * (2 + 2 * rx2)),
        (2 * qd, qd, False, arb(2 * qd)),
    ]
    out = [
        (2 * qd + De, 2 * d + 2 * q * de + 2 * qd, True, arb(2 * d + 4 * q * de + 4 * qd)),
        (2 * d + 2 * q * de + 2 * qd, 2 * d + q + 2 * qd, True, 4 * d + q * g2 + 4 * qd),
        (2 * d + q + 2 * qd, 4 * qd, True, 2 * qd * (2 + 2 * rx2) + 4 * qd),
        (4 * qd, m_g, True, 4 * m_g * exact(P.r_w) ** 2),
        (m_g, 1, False, exact(P.r_a) ** 2 / m_g),
    ]
    return rx2, trans, out


def net_constants(radii2: Sequence[arb], biased: Sequence[bool], r_in: arb):
    """(Lambda, ||c||, b) of a net with squared layer radii on inputs of norm <= r_in (Lemma 30:
    c_l = prod_{k > l} R_k sqrt(a_{l-1}^2 + 1), a_l = R_l sqrt(a_{l-1}^2 + 1); b by R_l (b + 1))."""
    R = [sqrt(r2) for r2 in radii2]
    feeds: List[arb] = []
    a = r_in
    for Rl, bias in zip(R, biased, strict=True):
        feeds.append(sqrt(a * a + 1) if bias else a)
        a = Rl * feeds[-1]
    c = [_product(R[l + 1 :]) * feeds[l] for l in range(len(R))]
    b = arb(0)
    for Rl, bias in zip(R, biased, strict=True):
        b = Rl * (b + 1) if bias else Rl * b
    return _product(R), sqrt(sum((x * x for x in c), arb(0))), b


def _product(xs: Sequence[arb]) -> arb:
    out = arb(1)
    for x in xs:
        out *= x
    return out


def theorem7_bound_ball(n, N: int, params: Theorem7Params) -> arb:
    """The Theorem 7 bound at (n, N) enclosed (call inside ``precision()``)."""
    P = params
    n, Nv = arb(n), arb(N)
    q, d = P.q, P.d
    delta, C_x, C_y, s = (exact(v) for v in (P.delta, P.C_x, P.C_y, P.s))
    rx2, trans, out = layers(n, N, P)
    rh2, rz2 = q * rx2, rx2 + q + 1
    n_params = sum(
        (2 if part is trans else 1) * w * (f + (1 if b else 0))
        for part in (trans, out)
        for f, w, b, _ in part
    )
    if P.reads_h:
        n_params += 2 * trans[0][1] * q * d
        S = ((1 + 1 / Nv) ** (Nv - 1) - 1) * Nv
    else:
        S = Nv - 1
    R_theta = sqrt(2 * sum((r2 for *_, r2 in trans), arb(0)) + sum((r2 for *_, r2 in out), arb(0)))
    r_in_h = sqrt(rh2 + rz2) if P.reads_h else sqrt(rz2)
    _, A_h, _ = net_constants([r2 for *_, r2 in trans], [b for _, _, b, _ in trans], r_in_h)
    Lam_y, A_y, b_y = net_constants(
        [r2 for *_, r2 in out], [b for _, _, b, _ in out], sqrt(2 * rh2 + rz2)
    )
    A = sqrt(A_y**2 + (S * Lam_y * A_h) ** 2)
    beta0 = Lam_y * sqrt(2 * rh2 + q + 1) + b_y

    def m_p(p):  # ||loss||_p <= m_p (piece 3)
        return 2 * ((beta0 + Lam_y * sqrt(2 * p * C_x * d)) ** 2 + C_y * (2 * p) ** (2 * s))

    p = _at_least_one(log((1 + 4 / delta) * sqrt(n)))
    tau = exp(arb(1)) * m_p(p)
    log_cov = n_params * log(1 + 4 * R_theta * A * sqrt(n / tau))
    rad = tau / sqrt(n) + tau * sqrt(2 * log_cov / n)
    return (
        exact(P.eps_2nn)
        + m_p(arb(2)) * Nv ** arb(-0.25) * n ** arb(-0.75)
        + 2 * rad
        + 4 * tau * sqrt(log(4 / delta) / (2 * n))
        + (1 + 4 / delta) * tau * exp(-p)
    )


def certified_theorem7_agreement(
    points: Sequence[Tuple[int, int]],
    params: Theorem7Params,
    *,
    rtol: float = 1e-12,
    record: Callable = theorem7_bound,
) -> Certified:
    """The float64 bound ``record(n, N, params).total`` (``theorem7_bound``) at each (n, N)
    within ``rtol`` (relative) of the bound's enclosure: measured = the largest
    |float64 - exact| / exact, enclosed."""
    start = time.perf_counter()
    with precision():
        gaps, widest = [], 0.0
        for n, N in points:
            exact_bound = theorem7_bound_ball(n, N, params)
            widest = max(widest, Enclosure.of(exact_bound).width / float(exact_bound.mid()))
            gaps.append(abs(exact(record(n, N, params).total) - exact_bound) / exact_bound)
        lo, hi = max_ends(gaps)
        measured = Enclosure.between(lo, hi)
    bound = Enclosure(rtol, rtol)
    detail = f"{len(points)} points; the bound's enclosure at most {widest:.2g} relative wide"
    seconds = time.perf_counter() - start
    return Certified(
        "Theorem 7 bound = its enclosure",
        measured,
        bound,
        verdict(measured, bound),
        len(points),
        seconds,
        detail,
    )
