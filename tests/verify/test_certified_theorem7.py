"""Theorem 7's bound enclosed in arb (verify/certified/theorem7.py): the float64 bound within
1e-12 of the enclosure at the thm-7 claim's agreement points, and a slipped record fails."""

import math

import pytest

from qstr.bounds.theorem7 import Theorem7Params, theorem7_bound
from qstr.verify.ball import CERTIFIED, VIOLATED, Enclosure, precision
from qstr.verify.certified import faults
from qstr.verify.certified.theorem7 import (
    certified_theorem7_agreement,
    code_dim,
    theorem7_bound_ball,
)

POINTS = ((10**6, 16), (10**20, 256), (10**38, 4096), (10**41, 2**20), (10**60, 2**30))
VARIANT = Theorem7Params(
    q=3, d=2, r_a=2.0, r_w=0.5, m_g=8, eps_2nn=0.02, C_x=1.5, C_y=2.0, s=0.5, mu=0.25, delta=0.1
)
PARAMS = (Theorem7Params(), VARIANT, Theorem7Params(reads_h=True))


@pytest.mark.parametrize("params", PARAMS)
def test_float64_bound_certified_within_1e_12(params):
    r = certified_theorem7_agreement(POINTS, params)
    assert r.status == CERTIFIED and r.boxes == len(POINTS)
    assert 0 <= r.measured.lower <= r.measured.upper < 1e-14  # measured gaps ~1e-15


def test_enclosure_is_narrow_and_holds_the_float64_bound():
    for n, N in POINTS:
        rec = theorem7_bound(n, N, VARIANT)
        with precision():
            enc = Enclosure.of(theorem7_bound_ball(n, N, VARIANT))
        assert enc.width <= 2.3e-16 * enc.upper  # the floats either side: 128 bits inside
        assert abs(rec.total - enc.lower) <= 1e-14 * rec.total


def test_code_dim_is_the_ceiling():
    for N in (16, 256, 2**20, 2**30):
        assert code_dim(VARIANT, N) == theorem7_bound(10**6, N, VARIANT).d_e
        assert code_dim(VARIANT, N) == math.ceil(8 * math.log(N**2 / VARIANT.delta))
    assert code_dim(Theorem7Params(d_e=7), 16) == 7


def test_a_slipped_record_is_violated():
    slipped = faults.theorem7_total_scaled(theorem7_bound)
    r = certified_theorem7_agreement(POINTS, VARIANT, record=slipped)
    assert r.status == VIOLATED and r.measured.lower > 1e-10
