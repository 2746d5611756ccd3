"""bounds/recurrent.py: Prop 8 packing constants, Theorem 9 crossover, Theorem 7 explicit bound."""
import math

import numpy as np
import pytest
import torch

from qstr.bounds.interpolation import C36
from qstr.bounds.recurrent import (
    Theorem7Params,
    chi2_lower_rate,
    euclidean_packing_counterexample,
    generalising_log_norm2,
    lemma12_radius,
    log_packing_volume,
    loglog_slope,
    memoriser_norm2_bound,
    prop28_layers,
    prop28_norm2,
    prop8_log_norm_lower_bound,
    prop8_norm_lower_bound,
    prop8_norm_lower_bound_paper,
    prop8_packing,
    prop8_width_lower_bound,
    theorem7_bound,
    theorem7_sample_size,
    theorem9_crossover,
)


def test_lemma41_volume_and_chernoff_rate():
    assert log_packing_volume(3, 2.0) == pytest.approx(3 * math.log(2))
    assert log_packing_volume(1, 0.5) == pytest.approx(math.log(5))
    assert chi2_lower_rate(0.5) == pytest.approx((0.5 - 1 - math.log(0.5)) / 2)
    assert chi2_lower_rate(0.5) == pytest.approx(0.0965736, abs=1e-6)
    with pytest.raises(ValueError, match="eps"):
        log_packing_volume(3, 0.0)
    with pytest.raises(ValueError, match="a must"):
        chi2_lower_rate(1.0)


def test_chernoff_rate_is_a_valid_tail_bound():
    from scipy import stats
    for k in (5, 50, 500):
        for a in (0.3, 0.5, 0.8):
            assert stats.chi2.cdf(a * k, k) <= math.exp(-k * chi2_lower_rate(a))


def test_prop8_packing_hand_values():
    pk = prop8_packing(64, 0.05)
    E = 63 * chi2_lower_rate(0.5)
    assert pk.M * (pk.M - 1) <= math.exp(E) < (pk.M + 1) * pk.M
    assert pk.M == 21 and pk.M_good == 6  # ceil((1 - 1/2) 21 / 2)
    assert pk.answer_sep == pytest.approx(math.sqrt(63 / 64))
    assert pk.sep == pytest.approx(math.sqrt(63 / 64) - 2 * math.sqrt(0.1))
    assert pk.failure < 1
    assert not pk.vacuous
    assert prop8_packing(16, 0.05).vacuous
    assert prop8_packing(N=64, c=0.05, K=2.0, gamma=0.5) == pk  # every argument by keyword
    big = prop8_packing(2 ** 20, 0.05)
    assert big.log_M_good == pytest.approx(
        (2**20 - 1) * chi2_lower_rate(0.5) / 2 + math.log(0.25), rel=1e-9
    )


def test_prop8_bounds_formulas():
    N, c, UL = 1024, 0.05, 100.0
    pk = prop8_packing(N, c)
    w = prop8_width_lower_bound(N, c, UL)
    assert w == pytest.approx(pk.log_M_good / (2 * math.log1p(2 * math.sqrt(2) * UL / pk.sep)))
    # the width bound grows like N / log(UL)
    assert prop8_width_lower_bound(4 * N, c, UL) > 3.5 * w
    nb = prop8_norm_lower_bound(N, c, 16)
    assert nb == pytest.approx(pk.sep / (2 * math.sqrt(2)) * math.expm1(pk.log_M_good / 32))
    assert math.log(nb) == pytest.approx(prop8_log_norm_lower_bound(N, c, 16))
    # consistency: at UL equal to the norm bound the width bound is exactly d_h
    assert prop8_width_lower_bound(N, c, nb) == pytest.approx(16)
    paper = prop8_norm_lower_bound_paper(N, c, 64)
    assert paper == pytest.approx(
        pk.sep / math.sqrt(2) * math.sqrt(pk.log_M_good / (8 * math.log(257)))
    )
    assert prop8_width_lower_bound(16, c, UL) == 0.0  # vacuous at small N
    assert prop8_norm_lower_bound(2 ** 20, c, 1) == math.inf


def test_prop8_errors():
    with pytest.raises(ValueError, match="c must be"):
        prop8_packing(64, 0.3)
    with pytest.raises(ValueError, match="K must"):
        prop8_packing(64, 0.05, K=1.0)
    with pytest.raises(ValueError, match="gamma"):
        prop8_packing(64, 0.05, gamma=1.5)
    with pytest.raises(ValueError, match="N must"):
        prop8_packing(1, 0.05)
    with pytest.raises(ValueError, match="UL"):
        prop8_width_lower_bound(64, 0.05, -1.0)
    with pytest.raises(ValueError, match="d_h"):
        prop8_norm_lower_bound(64, 0.05, 0)
    with pytest.raises(ValueError, match="form"):
        generalising_log_norm2(256, 0.05, 10, form="maurey")


def test_euclidean_maurey_bound_fails():
    k, log_k, vol, maurey = euclidean_packing_counterexample(
        128, 2000, generator=torch.Generator().manual_seed(0)
    )
    assert log_k <= vol  # the volume bound holds
    assert (
        log_k > maurey
    )  # ln P(1) > ln(2D + 1) / 1^2: the Euclidean Maurey form (constant 1) is violated


def test_theorem9_memoriser_and_crossover():
    for n in (2, 8, 10, 64, 1000):  # C36 sqrt(K_y) n^3 = lemma36_constant(K_y) n^3 at depth 2
        assert memoriser_norm2_bound(n) == pytest.approx(C36 * math.sqrt(6) * n ** 3, rel=1e-12)
    assert memoriser_norm2_bound(10, depth=3, K_y=1) == pytest.approx(
        3 * (144 / math.pi * (5 + math.pi / 72)) ** (1 / 3) * 10 ** (7 / 3))
    # crossover inverts the memoriser bound
    lr = math.log(memoriser_norm2_bound(7))
    assert theorem9_crossover(lr) == pytest.approx(7)
    assert theorem9_crossover(-math.inf) == 0.0
    # requirement: depth (UL / r_h)^{2 / depth}
    N, d_h = 4096, 100
    ul = prop8_norm_lower_bound_paper(N, 0.05, d_h)
    assert math.exp(generalising_log_norm2(N, 0.05, d_h)) == pytest.approx(2 * ul)
    assert math.exp(generalising_log_norm2(N, 0.05, d_h, depth=4, r_h=2.0)) == pytest.approx(
        4 * (ul / 2) ** 0.5
    )


def test_theorem9_crossover_power_law():
    Ns = [2 ** k for k in range(8, 21, 4)]
    s = loglog_slope(lambda N: theorem9_crossover(generalising_log_norm2(N, 0.05, 4 * N)), Ns)
    assert np.all(s > 0.12) and np.all(s < 1 / 6 + 1e-9)
    s_simple = loglog_slope(
        lambda N: theorem9_crossover(math.log(prop28_norm2(N, Theorem7Params(d=4)))), Ns
    )
    assert np.all(s_simple < 0.05)


def test_prop28_layers_shapes_and_radii():
    P = Theorem7Params(q=2, d=3, d_e=16, mu=0.5, m_g=8, r_w=1.5, r_a=2.0)
    trans, out = prop28_layers(100, P, r_x=4.0)
    D_e = 3 + 3 * 16
    assert [l.fan_in for l in trans] == [D_e, 6 + 64, 6 + 2, 12]
    assert [l.width for l in trans] == [6 + 64, 6 + 2, 12, 6]
    assert trans[0].radius == pytest.approx(math.sqrt(6 + 128))
    assert trans[1].radius == pytest.approx(math.sqrt(12 + 2 * (2 + 2.25) / 0.25))
    assert trans[2].radius == pytest.approx(math.sqrt(12 * (2 + 32)))
    assert out[3].radius == pytest.approx(2 * math.sqrt(8) * 1.5)
    assert out[4].radius == pytest.approx(2.0 / math.sqrt(8))
    assert out[0].fan_in == 12 + D_e
    assert trans[0].n_params == (6 + 64) * (D_e + 1) and trans[3].n_params == 6 * 12


def test_theorem7_bound_structure():
    P = Theorem7Params()
    b = theorem7_bound(10 ** 40, 1024, P)
    assert b.total == pytest.approx(b.approximation + b.tail + b.estimation + b.truncation)
    assert b.approximation == P.eps_2nn
    assert b.r_x == pytest.approx(lemma12_radius(P.d, 10 ** 40, 1024))
    assert b.confidence == pytest.approx(1 - P.delta - (1024 * 1e40) ** -0.5)
    # nonincreasing in n on a grid
    totals = [theorem7_bound(10 ** k, 1024, P).total for k in range(30, 46)]
    assert all(b2 <= b1 + 1e-15 for b1, b2 in zip(totals, totals[1:]))


def test_theorem7_sample_size_polylog():
    P = Theorem7Params()
    n = theorem7_sample_size(0.1, 256, P)
    assert theorem7_bound(n, 256, P).total <= 0.1 < theorem7_bound(n - 1, 256, P).total
    Ns = [2 ** k for k in range(4, 21, 4)]
    s = loglog_slope(lambda N: theorem7_sample_size(0.1, N, P), Ns)
    assert np.all(np.diff(s) < 0)
    mids = np.log(np.sqrt(np.array(Ns[:-1], float) * np.array(Ns[1:], float)))
    assert np.all(s <= 9 / mids)


def test_theorem7_errors():
    with pytest.raises(ValueError, match="target"):
        theorem7_sample_size(0.01, 256, Theorem7Params(eps_2nn=0.01))
    with pytest.raises(ValueError, match="mu"):
        Theorem7Params(mu=1.0)
    with pytest.raises(ValueError, match="q must"):
        Theorem7Params(q=0)
    with pytest.raises(ValueError, match="params"):
        theorem7_bound(10, 10, params={"q": 1})
    with pytest.raises(ValueError, match="N must"):
        theorem7_bound(10, 1, Theorem7Params())


def test_packing_vacuous_flag_is_what_the_width_bound_uses():
    """`vacuous` is the one definition: counted packings with M' < 2 or failure >= 1 are vacuous,
    the log path (M_good = -1, too many prompts to count) is not, and the width bound is 0 exactly
    when vacuous."""
    from qstr.bounds.recurrent import prop8_packing, prop8_width_lower_bound
    big = prop8_packing(4096, 0.05)
    assert big.M_good == -1 and not big.vacuous and prop8_width_lower_bound(4096, 0.05, 10.0) > 0
    small = prop8_packing(16, 0.05)
    assert small.vacuous and prop8_width_lower_bound(16, 0.05, 10.0) == 0.0


# (moved from the claim prop-8 of verify/claims/rnn_lower.py: argument handling and branches)


def _accepts_c(N, c, gamma):
    try:
        prop8_packing(N, c, K=2.0, gamma=gamma)
        return True
    except ValueError:
        return False


def test_prop8_packing_accepts_c_up_to_its_boundary():
    """c is accepted up to c_max = a (N - 1) / (2 K N) (s~ > 0), a = 1 - gamma, refused above."""
    for N, gamma in ((50, 0.5), (150, 0.3), (150, 0.5), (150, 0.7), (600, 0.5)):
        c_max = (1 - gamma) * (N - 1) / (2 * 2.0 * N)
        assert _accepts_c(N, c_max * (1 - 1e-9), gamma)
        assert not _accepts_c(N, c_max * (1 + 1e-9), gamma)


def test_prop8_packing_log_branch_past_e60():
    """At N = 623 ((N - 1) I = 60.07 > 60) the packing is in its log branch: M = M' = -1."""
    big = prop8_packing(623, 0.05, K=2.0)
    assert big.M == -1 and big.M_good == -1 and not big.vacuous
    assert prop8_packing(622, 0.05, K=2.0).M > 0


def test_theorem7_params_documented_defaults():
    """Theorem7Params() are the constants docs/derivations/rnn-lower-bounds.md section 4 quotes
    its numbers at (moved from the claim thm-7)."""
    assert Theorem7Params() == Theorem7Params(q=1, d=4, r_a=1.0, r_w=1.0, m_g=16, eps_2nn=0.01,
                                              C_x=1.0, C_y=1.0, s=1.0, mu=0.5, delta=0.05,
                                              d_e=None)
