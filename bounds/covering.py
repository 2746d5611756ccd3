"""Lemmas 14 and 16 and Prop 17 (Appendix A.1), as reconstructed in docs/derivations/theorem4.md,
section 3: log-covering numbers of the output net, of the attention parameters and of the whole
Transformer class, each a sum of Lemma 41's volume bound over parameter blocks."""

from __future__ import annotations

import math

from qstr.bounds.packing import volume_log_packing_bound
from qstr.constructions import validate

__all__ = [
    "ball_log_covering",
    "output_net_log_covering",
    "score_log_covering",
    "transformer_log_covering",
]


def ball_log_covering(p: int, r: float, eps: float) -> float:
    """Lemma 41 (volume) as a cover: the Euclidean ball of radius ``r`` in R^p has an internal
    eps-cover of at most (1 + 2r/eps)^p points (a maximal eps-packing); returns p ln(1 + 2r/eps)."""
    p = validate.positive_int("p", p)
    r = validate.positive_float("r", r, allow_zero=True)
    eps = validate.positive_float("eps", eps)
    return volume_log_packing_bound(p, eps / r) if r > 0 else 0.0  # r = 0: one centre


def output_net_log_covering(m: int, D: int, r_ma: float, R_mw: float, rho: float, eps: float):
    """Lemma 14 (reconstructed): ln N of {h -> a^T relu(W h + b): ||a|| <= r_ma,
    ||(W, b)||_F <= R_mw} at eps in the sup norm over ||(h, 1)|| <= rho: a covered at
    eps / (2 R_mw rho), (W, b) at eps / (2 r_ma rho) (Lemma 13's first two steps), so
    m (D + 2) ln(1 + 4 r_ma R_mw rho / eps)."""
    m, D = validate.positive_int("m", m), validate.positive_int("D", D)
    R_mw = validate.positive_float("R_mw", R_mw)
    r_ma = validate.positive_float("r_ma", r_ma)
    rho = validate.positive_float("rho", rho)
    eps = validate.positive_float("eps", eps)
    return ball_log_covering(m, r_ma, eps / (2.0 * R_mw * rho)) + ball_log_covering(
        m * (D + 1), R_mw, eps / (2.0 * r_ma * rho)
    )


def score_log_covering(q: int, D_e: int, r_qk: float, r_z: float, eps: float) -> float:
    """Lemma 16, second estimate (reconstructed): ln N of {W^(1..q): ||W^(h)||_F <= r_qk} at eps
    in the scores' distance max_h sup_{||z||, ||z'|| <= r_z} |z^T (W^(h) - W'^(h)) z'|; that
    distance is at most r_z^2 max_h ||W^(h) - W'^(h)||_F, so each head's Frobenius ball covered
    at eps / r_z^2 gives q D_e^2 ln(1 + 2 r_qk r_z^2 / eps)."""
    q, D_e = validate.positive_int("q", q), validate.positive_int("D_e", D_e)
    r_z = validate.positive_float("r_z", r_z)
    return q * ball_log_covering(D_e * D_e, r_qk, validate.positive_float("eps", eps) / r_z**2)


def transformer_log_covering(shape: tuple, radii: tuple, eps: float) -> float:
    """Prop 17 (reconstructed), the sum before it is bounded by P ln(1 + A/eps): ln N of the
    Transformer class at eps, uniformly over tokens ||z_j|| <= r_z, from Lemma 14 at 2 eps / 3
    (the output net reads h in R^{q D_e}, ||(h, 1)|| <= rho) and the q attention matrices covered
    jointly in Frobenius norm at eps / (3 K r_z^3) (Lemma 15's Lipschitz constant, K = r_ma R_mw).
    ``shape`` = (m, q, D_e), ``radii`` = (r_ma, R_mw, r_qk, r_z, rho)."""
    m, q, D_e = shape
    r_ma, R_mw, r_qk, r_z, rho = radii
    K = validate.positive_float("r_ma", r_ma) * validate.positive_float("R_mw", R_mw)
    out = output_net_log_covering(m, q * D_e, r_ma, R_mw, rho, 2.0 * eps / 3.0)
    att_scale = eps / (3.0 * K * validate.positive_float("r_z", r_z) ** 3)
    return out + ball_log_covering(q * D_e * D_e, math.sqrt(q) * r_qk, att_scale)
