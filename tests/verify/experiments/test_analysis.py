"""Tests for verify/experiments/analysis.py: the fitted exponent samples ~ N^a (least squares and
censored), local slopes, polylog against power, and the paired gap between two models trained on
the same prompts."""

import math

import numpy as np
import pytest
import torch
from scipy import optimize

from qstr.verify.experiments import analysis
from qstr.verify.experiments.analysis import fit_exponent, paired_gap


def test_fitted_exponent_on_synthetic_data():
    g = torch.Generator().manual_seed(0)
    Ns = [2, 4, 6, 8, 10, 12] * 5
    samples = [50 * n**1.5 * math.exp(0.1 * float(torch.randn(1, generator=g))) for n in Ns]
    fit = fit_exponent(Ns, samples)
    assert fit["a"] == pytest.approx(1.5, abs=0.1)
    assert fit["ci"][0] < 1.5 < fit["ci"][1] and fit["ci"][1] - fit["ci"][0] < 0.3
    assert fit["censored"] == 0 and fit["n"] == 30
    flat = fit_exponent(Ns, [1000.0 * math.exp(0.05 * i % 3) for i in range(30)])
    assert abs(flat["a"]) < 0.2
    cens = fit_exponent([2, 4, 8], [10.0, None, 40.0])
    assert cens["censored"] == 1 and cens["a"] == pytest.approx(1.0)
    assert math.isnan(fit_exponent([2, 2], [5.0, 6.0])["a"])


def _rows(ratio, seeds=12, qs=(1, 2, 3, 4), noise=0.1, censor=()):
    """Transformer and RNN rows per (q, seed) with samples_rnn / samples_tf = ratio(q) times a
    per-seed, per-q noise factor; ``censor``: (q, seed) whose RNN run ended at its cap."""
    g = torch.Generator().manual_seed(1)
    rows = []
    for q in qs:
        for s in range(seeds):
            tf = 50_000 * math.exp(0.3 * float(torch.randn(1, generator=g)))
            e = math.exp(noise * float(torch.randn(1, generator=g)))
            cfg = {"max_steps": 100_000, "batch_size": 64}
            rnn = None if (q, s) in censor else tf * ratio(q) * e
            rows.append(dict(model="transformer", q=q, seed=s, samples=tf, config=cfg))
            rows.append(dict(model="rnn", q=q, seed=s, samples=rnn, config=cfg))
    return rows


def test_paired_gap_sees_a_growing_ratio_and_not_a_flat_one():
    """A ratio growing like e^{0.3 q} is found (slope near 0.3, p small, intervals around the
    truth); a flat ratio with the same noise is not (p far from small)."""
    grow = paired_gap(_rows(lambda q: math.exp(0.3 * q)), "rnn", "transformer")
    assert grow["trend"]["slope_log_ratio"] == pytest.approx(0.3, abs=0.05)
    assert grow["trend"]["p_one_sided"] < 1e-3 and grow["trend"]["seeds"] == 12
    for q in (1, 2, 3, 4):
        lo, hi = grow["per"][str(q)]["ci"]
        assert lo < math.exp(0.3 * q) < hi and grow["per"][str(q)]["pairs"] == 12
    flat = paired_gap(_rows(lambda q: 2.0), "rnn", "transformer")
    assert flat["trend"]["p_one_sided"] > 0.05
    assert flat["per"]["1"]["geo_mean"] == pytest.approx(2.0, rel=0.1)


def test_paired_gap_is_exact_without_noise_and_keeps_censored_runs_at_their_cap():
    exact = paired_gap(_rows(lambda q: 3.0 * q, noise=0.0), "rnn", "transformer")
    for q in (1, 2, 3, 4):
        assert exact["per"][str(q)]["geo_mean"] == pytest.approx(3.0 * q, rel=1e-12)
    cens = paired_gap(_rows(lambda q: 1.5, censor={(2, 0)}), "rnn", "transformer")
    assert cens["per"]["2"]["censored"] == 1 and cens["per"]["2"]["pairs"] == 12
    assert cens["per"]["1"]["censored"] == 0


def test_paired_gap_needs_two_values_and_two_full_seeds_for_a_trend():
    one_q = paired_gap(_rows(lambda q: 2.0, qs=(3,)), "rnn", "transformer")
    assert one_q["trend"] is None and one_q["per"]["3"]["pairs"] == 12
    rows = [r for r in _rows(lambda q: 2.0, seeds=2) if not (r["seed"] == 1 and r["q"] == 4)]
    assert paired_gap(rows, "rnn", "transformer")["trend"] is None  # seed 1 lacks q = 4


def _power_law_runs(a=2.0, sigma=0.15, cap=None, seeds=8):
    """log s = 1 + a log N + sigma eps at N = 4..64, runs above ``cap`` censored (None)."""
    rng = np.random.default_rng(2)
    N = [n for n in (4, 8, 16, 32, 64) for _ in range(seeds)]
    s = [math.exp(1 + a * math.log(n) + sigma * rng.standard_normal()) for n in N]
    return N, [None if cap is not None and v > cap else v for v in s], [cap or math.inf] * len(N)


def test_tobit_gradient_is_the_likelihoods():
    """The censored likelihood's analytic gradient against central differences."""
    rng = np.random.default_rng(0)
    x, y, cens = rng.normal(size=30), rng.normal(size=30), rng.random(30) < 0.3
    captured = {}

    def spy(fun, p0, jac, **kw):
        captured["fun"] = fun
        return optimize.OptimizeResult(x=p0)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(analysis.optimize, "minimize", spy)
        analysis._tobit(x, y, cens)
    p = np.array([0.3, -0.2, math.log(0.7)])
    _, grad = captured["fun"](p)
    for i in range(3):
        e = np.zeros(3)
        e[i] = 1e-6
        numeric = (captured["fun"](p + e)[0] - captured["fun"](p - e)[0]) / 2e-6
        assert grad[i] == pytest.approx(numeric, rel=1e-6, abs=1e-8)


def test_censored_fit_recovers_the_exponent_the_dropped_runs_hide():
    """Half the runs at N = 32 and nearly all at N = 64 censored at the cap: least squares on the
    reached runs is biased low (its interval below the true a = 2), the censored likelihood's
    interval holds it."""
    N, s, caps = _power_law_runs(sigma=0.5, cap=math.exp(1 + 2 * math.log(32)), seeds=40)
    censored = sum(v is None for v in s)
    ols, tobit = fit_exponent(N, s), analysis.fit_censored_exponent(N, s, caps, n_boot=200)
    assert ols["censored"] == censored == tobit["censored"] == 57
    assert ols["ci"][1] < 2.0
    assert tobit["ci"][0] < 2.0 < tobit["ci"][1] and abs(tobit["a"] - 2.0) < 0.05
    assert 0.4 < tobit["sigma"] < 0.6


def test_censored_fit_without_censoring_is_least_squares():
    N, s, caps = _power_law_runs()
    ols, tobit = fit_exponent(N, s), analysis.fit_censored_exponent(N, s, caps)
    assert tobit["a"] == pytest.approx(ols["a"], abs=1e-5)
    assert tobit["log_C"] == pytest.approx(ols["log_C"], abs=1e-4)


def test_local_slopes_on_a_power_law_and_their_bounds():
    N = [2, 2, 4, 4, 8, 8]
    s = [3.0 * n**1.5 for n in N]
    caps = [1e9] * 6
    slopes = analysis.local_slopes(N, s, caps)
    assert [sl["N"] for sl in slopes] == [[2.0, 4.0], [4.0, 8.0]]
    for sl in slopes:
        assert sl["slope"] == pytest.approx(1.5, rel=1e-12) and sl["bound"] is None
        assert sl["ci"] == pytest.approx([1.5, 1.5], rel=1e-12)
    s[5] = None  # one run at N = 8 stopped at its cap: that slope is a lower bound
    caps[5] = 3.0 * 8**1.5
    assert [sl["bound"] for sl in analysis.local_slopes(N, s, caps)] == [None, "lower"]


def test_polylog_against_power():
    """(log N)^3 data favours the polylog (delta AIC > 2, k = 3); N^1 data the power law."""
    N = [2**k for k in range(2, 12)]
    poly = analysis.polylog_vs_power(
        N, [5 * math.log(n) ** 3 * (1 + 0.01 * (-1) ** i) for i, n in enumerate(N)]
    )
    power = analysis.polylog_vs_power(N, [5 * n * (1 + 0.01 * (-1) ** i) for i, n in enumerate(N)])
    assert poly["delta_aic"] > 2 and poly["k"] == pytest.approx(3, abs=0.05)
    assert power["delta_aic"] < -2 and power["a"] == pytest.approx(1, abs=0.01)
    assert math.isnan(analysis.polylog_vs_power([1, 2], [3.0, 4.0])["k"])


def test_trend_power_grows_with_seeds_and_stays_at_the_level_without_an_effect():
    """Power of the paired trend test by resampling the measured seeds: a strong trend is found
    at 5 seeds, a weak one needs more, and a flat ratio is found at about the test's level."""
    strong = analysis.trend_power(_rows(lambda q: math.exp(0.3 * q)), "rnn", "transformer")
    assert strong["power"][5] == 1.0 and strong["seeds_needed"] == 5
    assert strong["from_seeds"] == 12
    weak = analysis.trend_power(_rows(lambda q: math.exp(0.1 * q), noise=0.3), "rnn", "transformer")
    assert weak["power"][5] < 0.6 < 0.9 < weak["power"][30] and weak["seeds_needed"] == 20
    flat = analysis.trend_power(_rows(lambda q: 2.0), "rnn", "transformer")
    assert max(flat["power"].values()) < 0.2 and flat["seeds_needed"] is None


def _replicated(law, seeds=5, sigma=0.05):
    """log samples = log law(N) + sigma eps at N = 25..200 (a range of 8x), ``seeds`` runs each."""
    rng = np.random.default_rng(4)
    N = [n for n in (25, 50, 100, 200) for _ in range(seeds)]
    return N, [math.log(law(n)) + sigma * rng.standard_normal() for n in N]


def test_lack_of_fit_tells_a_power_law_from_a_polylog():
    """N^1.5 data: the line in log N fits (p large); exp((log N)^2 / 2) data: rejected."""
    power = analysis.lack_of_fit(*_replicated(lambda n: n**1.5))
    poly = analysis.lack_of_fit(*_replicated(lambda n: math.exp(math.log(n) ** 2 / 2)))
    assert power["p"] > 0.05 and poly["p"] < 1e-6
    assert power["k"] == 4 and power["n"] == 20
    assert math.isnan(analysis.lack_of_fit([2, 2, 4, 4], [0.0, 0.1, 1.0, 1.1])["p"])


def test_end_ratio_from_per_N_means():
    """Exact data: the ratio of the geometric means at the ends, the interval a point."""
    N = [2, 2, 4, 4, 8, 8]
    got = analysis.end_ratio(N, [math.log(3 * n**2) for n in N])
    assert got["ratio"] == pytest.approx(16.0, rel=1e-12)
    assert got["ci"] == pytest.approx([16.0, 16.0], rel=1e-12)


def test_censored_trend_on_exact_and_censored_values():
    """Exact values increasing in x in every seed: p at the permutations' floor; the same with
    the largest x censored above its value: still; everything censored: p = 1."""
    x = [1, 2, 3, 4]
    y = np.array([[0.0, 1.0, 2.0, 3.0]] * 6) + np.arange(6)[:, None] * 0.01
    exact = analysis.censored_trend(x, y, y, n_perm=2000)
    assert exact["p"] < 0.002
    hi = y.copy()
    hi[:, 3] = np.inf
    assert analysis.censored_trend(x, y, hi, n_perm=2000)["p"] < 0.002
    none = analysis.censored_trend(x, y, np.full_like(y, np.inf), n_perm=2000)
    assert none["p"] == 1.0
