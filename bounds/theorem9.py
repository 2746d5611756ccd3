"""Theorem 9 (seed numbering; conference Thm 7): the ||vec theta||^2 a generalising RNN needs
(Prop 8 and AM-GM), the certified norm of the memoriser, and the crossover n*(N) below which
min-norm ERM prefers the memoriser. docs/derivations/rnn-lower-bounds.md, section 3.
"""

from __future__ import annotations

import math

from qstr.bounds.interpolation import C36_PRIME
from qstr.bounds.prop8 import prop8_log_norm_lower_bound, prop8_norm_lower_bound_paper
from qstr.constructions import validate

__all__ = [
    "generalising_log_norm2",
    "memoriser_norm2_bound",
    "theorem9_crossover",
    "theorem9_log_crossover",
]


def generalising_log_norm2(
    N: int,
    c: float,
    d_h: int,
    *,
    depth: int = 2,
    r_h: float = 1.0,
    form: str = "paper",
    K: float = 2.0,
    gamma: float = 0.5,
) -> float:
    """ln of the ||vec theta||^2 a depth-``depth`` output net needs for risk <= c (Prop 8 + AM-GM).

    ||vec||^2 >= sum_l ||W_l||_F^2 >= depth (prod_l ||W_l||_op)^{2/depth}
              >= depth (UL / r_h)^{2/depth},
    with UL from ``form="paper"`` (:func:`prop8_norm_lower_bound_paper` at its Maurey constant
    C_M = 8, uncertified) or
    ``form="volume"`` (:func:`prop8_log_norm_lower_bound`, rigorous). -inf when vacuous.
    """
    depth = validate.positive_int("depth", depth, minimum=2)
    r_h = validate.positive_float("r_h", r_h)
    if form == "paper":
        v = prop8_norm_lower_bound_paper(N, c, d_h, K=K, gamma=gamma)
        lg = math.log(v) if v > 0 else -math.inf
    elif form == "volume":
        lg = prop8_log_norm_lower_bound(N, c, d_h, K=K, gamma=gamma)
    else:
        raise ValueError(f"form must be 'paper' or 'volume', got {form!r}")
    if lg == -math.inf:
        return -math.inf
    return math.log(depth) + (2.0 / depth) * (lg - math.log(r_h))


def _memoriser_log_coeff(depth: int, K_y: float) -> float:
    return math.log(depth) + math.log(C36_PRIME * K_y) / depth  # C36_PRIME = (144/pi)(5 + pi/72)


def memoriser_norm2_bound(n: int, *, depth: int = 2, K_y: float = 6.0) -> float:
    """Certified ||vec||^2 of Theorem 9's memoriser when ||y||^2 <= K_y n:
    depth ((144/pi)(5 + pi/72) K_y)^{1/depth} n^{(depth + 4)/depth};
    for depth 2 this is C36 sqrt(K_y) n^3 (``qstr.bounds.interpolation``: ``C36_PRIME``,
    ``lemma36_constant``)."""
    n = validate.positive_int("n", n, minimum=2)
    depth = validate.positive_int("depth", depth, minimum=2)
    K_y = validate.positive_float("K_y", K_y)
    return math.exp(_memoriser_log_coeff(depth, K_y) + (depth + 4.0) / depth * math.log(n))


def theorem9_log_crossover(log_requirement: float, *, depth: int = 2, K_y: float = 6.0) -> float:
    """Theorem 9's crossover in logs (docs/derivations/rnn-lower-bounds.md, section 3): ln n*, n*
    the real n with memoriser_norm2_bound(n) = exp(log_requirement): for n < n*
    min-norm ERM prefers the memoriser over any generalising RNN (whose ||vec||^2 >=
    exp(log_requirement)); -inf where the requirement is vacuous. In logs, so that a requirement
    exponential in N (the volume form at d_h = sqrt N) never overflows."""
    depth = validate.positive_int("depth", depth, minimum=2)
    K_y = validate.positive_float("K_y", K_y)
    if log_requirement == -math.inf:
        return -math.inf
    return (log_requirement - _memoriser_log_coeff(depth, K_y)) * depth / (depth + 4.0)


def theorem9_crossover(log_requirement: float, *, depth: int = 2, K_y: float = 6.0) -> float:
    """n* = exp(:func:`theorem9_log_crossover`): 0.0 where the requirement is vacuous, math.inf
    beyond float range."""
    lg = theorem9_log_crossover(log_requirement, depth=depth, K_y=K_y)
    if lg == -math.inf:
        return 0.0
    return math.exp(lg) if lg < 709.0 else math.inf
