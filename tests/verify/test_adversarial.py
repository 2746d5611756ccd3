"""Tests for verify/adversarial.py: projection onto the token ball and the gradient-ascent
search."""

import pytest
import torch

from qstr.verify.adversarial import ball_ascent, clip_to_ball, worst_case_tokens


def test_clip_and_adversarial_ascent(gen):
    x = torch.randn(3, 5, 2, generator=gen, dtype=torch.float64) * 10
    c = clip_to_ball(x, 2.0)
    assert float(c.norm(dim=-1).max()) <= 2.0 + 1e-12
    u = torch.tensor([1.0, 0.0], dtype=torch.float64)
    best = worst_case_tokens(
        lambda xx: (xx @ u).abs(), torch.zeros(1, 4, 2, dtype=torch.float64) + 0.01, 2.0, steps=60
    )
    assert float((best @ u).abs().max()) == pytest.approx(2.0, rel=1e-3)  # the ball's extreme point


def test_ball_ascent_stays_in_the_ball_and_never_loses_its_start():
    """On |<w, x_j>| the ascent reaches the ball's boundary along w (the exact sup r ||w||)."""
    w = torch.tensor([3.0, 4.0], dtype=torch.float64)

    def err(x):
        return (x @ w).abs()

    x0 = torch.tensor([[[0.1, -0.05], [0.0, 0.2]]], dtype=torch.float64)
    x = ball_ascent(err, x0, r=2.0, steps=40)
    assert float(x.norm(dim=-1).max()) <= 2.0 + 1e-12
    assert float(err(x).max()) >= float(err(x0).max())
    assert float(err(x).max()) == pytest.approx(2.0 * 5.0, rel=1e-3)
