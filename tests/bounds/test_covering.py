"""Tests for bounds/covering.py: Lemmas 14 and 16 and Prop 17's block covers."""

import math

import pytest

from qstr.bounds.covering import (
    ball_log_covering,
    output_net_log_covering,
    score_log_covering,
    transformer_log_covering,
)


def test_ball_cover_is_lemma41_volume_count():
    assert ball_log_covering(3, 1.0, 0.5) == pytest.approx(3 * math.log(5.0), rel=1e-15)
    assert ball_log_covering(4, 0.0, 0.1) == 0.0  # a point needs one centre


def test_output_net_cover_counts_m_times_D_plus_2_parameters():
    """a at eps / (2 R_mw rho) and (W, b) at eps / (2 r_ma rho): m (D + 2) ln(1 + 4 K rho / eps)
    with K = r_ma R_mw, whatever the split of K between the two radii."""
    want = 2 * (3 + 2) * math.log1p(4 * 6.0 * 1.5 / 0.1)
    assert output_net_log_covering(2, 3, 2.0, 3.0, 1.5, 0.1) == pytest.approx(want, rel=1e-14)
    assert output_net_log_covering(2, 3, 6.0, 1.0, 1.5, 0.1) == pytest.approx(want, rel=1e-14)


def test_score_cover_counts_q_heads_of_D_e_squared_entries():
    want = 3 * 4 * math.log1p(2 * 0.5 * 2.0**2 / 0.2)
    assert score_log_covering(3, 2, 0.5, 2.0, 0.2) == pytest.approx(want, rel=1e-14)


def test_transformer_cover_is_the_sum_of_its_blocks():
    """Prop 17's blocks: the output net reading q D_e inputs at 2 eps / 3, the q matrices jointly
    (radius sqrt(q) r_qk, q D_e^2 entries) at eps / (3 K r_z^3)."""
    m, q, D_e, r_ma, R_mw, r_qk, r_z, rho, eps = 4, 2, 3, 0.5, 2.0, 1.5, 1.2, 2.0, 0.05
    got = transformer_log_covering((m, q, D_e), (r_ma, R_mw, r_qk, r_z, rho), eps)
    out = m * (q * D_e + 2) * math.log1p(4 * r_ma * R_mw * rho / (2 * eps / 3))
    att = q * D_e**2 * math.log1p(2 * math.sqrt(q) * r_qk * 3 * r_ma * R_mw * r_z**3 / eps)
    assert got == pytest.approx(out + att, rel=1e-14)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: ball_log_covering(0, 1.0, 0.1), "p"),
        (lambda: ball_log_covering(2, -1.0, 0.1), "r"),
        (lambda: output_net_log_covering(1, 1, 1.0, 1.0, 1.0, 0.0), "eps"),
        (lambda: score_log_covering(1, 2, 1.0, float("nan"), 0.1), "r_z"),
        (lambda: transformer_log_covering((1, 1, 2), (0.0, 1.0, 1.0, 1.0, 1.0), 0.1), "r_ma"),
    ],
)
def test_bad_radii_and_scales_are_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
