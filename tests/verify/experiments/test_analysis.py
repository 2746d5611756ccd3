"""Tests for verify/experiments/analysis.py: the fitted exponent samples ~ N^a and the paired
gap between two models trained on the same prompts."""

import math

import pytest
import torch

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
