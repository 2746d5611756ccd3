"""Theorem 4's bound enclosed in arb (verify/certified/theorem4.py): the float64 bound within
1e-12 of the enclosure at the thm-4 claim's agreement points, on each of its branches; an undecided
max is refused, and a slipped constant in the record is violated."""

import dataclasses
import math

import pytest
from flint import arb

from qstr.bounds.transformer import Theorem4Params, theorem4_bound
from qstr.verify.ball import CERTIFIED, VIOLATED, Enclosure, precision
from qstr.verify.certified import faults
from qstr.verify.certified.theorem4 import (
    Undecided,
    certified_theorem4_agreement,
    code_dim,
    larger,
    theorem4_bound_ball,
)
from qstr.verify.claims.thm_4 import THM4_AGREE_POINTS, THM4_RHO_POINTS

DEFAULT = Theorem4Params.default()
WIDE = dataclasses.replace(DEFAULT, q=DEFAULT.q + 2, s=2.0, C_y=2.0, r_a=2.0)
RHO = dataclasses.replace(DEFAULT, C_x=1e-6, c=0.5, C_y=1e-3)  # alpha = 0, A = 6 K rho
CASES = (
    (DEFAULT, THM4_AGREE_POINTS),
    (WIDE, THM4_AGREE_POINTS),
    (dataclasses.replace(DEFAULT, c=1.5), THM4_AGREE_POINTS),
    (RHO, THM4_RHO_POINTS),
)


@pytest.mark.parametrize("params, points", CASES)
def test_float64_bound_certified_within_1e_12(params, points):
    r = certified_theorem4_agreement(points, params)
    assert r.status == CERTIFIED and r.boxes == len(points)
    assert 0 <= r.measured.lower <= r.measured.upper < 1e-14  # measured gaps ~3e-16


def test_rho_points_take_the_alpha_zero_branch():
    with precision():
        for n, N in THM4_RHO_POINTS:
            rec = theorem4_bound(n, N, RHO)
            assert rec.alpha == 0.0
            enc = Enclosure.of(theorem4_bound_ball(n, N, RHO))
            assert enc.lower <= rec.total * (1 + 1e-14) and rec.total <= enc.upper * (1 + 1e-14)


def test_enclosure_is_narrow_and_holds_the_float64_bound():
    for n, N in THM4_AGREE_POINTS:
        rec = theorem4_bound(n, N, WIDE)
        with precision():
            enc = Enclosure.of(theorem4_bound_ball(n, N, WIDE))
        assert enc.width <= 2.3e-16 * enc.upper
        assert abs(rec.total - enc.lower) <= 1e-14 * rec.total


def test_code_dim_is_the_ceiling():
    with precision():
        for N in (16, 1024, 2**20):
            assert code_dim(DEFAULT, N) == DEFAULT.code_dim(N)
            assert code_dim(DEFAULT, N) == math.ceil(8 * math.log(N**2 / DEFAULT.delta))
        assert code_dim(dataclasses.replace(DEFAULT, d_e=7), 16) == 7


def test_a_straddling_max_is_refused_not_picked():
    a, b = arb("1 +/- 0.25"), arb(1.1)
    assert max(a, b) is a  # Python's max keeps the first: a > b and b > a are both False
    with pytest.raises(Undecided):
        larger(a, b)
    assert larger(arb(2), b) == 2 and larger(0, arb(-3)) == 0


@pytest.mark.parametrize("params, points", CASES[:2])
def test_rad_once_is_violated(params, points):
    slipped = faults.theorem4_rademacher_once(theorem4_bound)
    r = certified_theorem4_agreement(points, params, record=slipped)
    assert r.status == VIOLATED and r.measured.lower > 0.1


def test_a_total_off_by_1e_9_is_violated():
    slipped = faults.theorem7_total_scaled(theorem4_bound)
    r = certified_theorem4_agreement(THM4_AGREE_POINTS, DEFAULT, record=slipped)
    assert r.status == VIOLATED and r.measured.lower > 1e-10
