"""Tests for verify/experiments/analysis.py: the fitted exponent samples ~ N^a."""

import math

import pytest
import torch

from qstr.verify.experiments.analysis import fit_exponent


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
