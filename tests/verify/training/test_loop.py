"""Tests for verify/training/loop.py: online fitting and the position risk."""

import torch

from qstr.verify.training import OnlineFit, fit_online, position_risk


def test_fit_online_learns_a_linear_map(gen):
    torch.manual_seed(0)
    w = torch.tensor([[2.0, -1.0]])
    model = torch.nn.Linear(2, 1, bias=False)

    def batch(B, g):
        x = torch.randn(B, 2, generator=g)
        return x, x @ w.T

    res = fit_online(model, batch, OnlineFit(300, lr=0.05), generator=gen)
    assert res.samples == 300 * 64
    risk, se = position_risk(model, batch, n=1000, generator=gen)
    assert risk < 1e-4 and se >= 0
    assert torch.allclose(model.weight, w, atol=1e-2)
