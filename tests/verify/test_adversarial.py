"""Tests for verify/adversarial.py: projection onto the token ball and the gradient-ascent
search."""

import pytest
import torch

from qstr.verify.adversarial import clip_to_ball, worst_case_tokens


def test_clip_and_adversarial_ascent(gen):
    x = torch.randn(3, 5, 2, generator=gen, dtype=torch.float64) * 10
    c = clip_to_ball(x, 2.0)
    assert float(c.norm(dim=-1).max()) <= 2.0 + 1e-12
    u = torch.tensor([1.0, 0.0], dtype=torch.float64)
    best = worst_case_tokens(
        lambda xx: (xx @ u).abs(), torch.zeros(1, 4, 2, dtype=torch.float64) + 0.01, 2.0, steps=60
    )
    assert float((best @ u).abs().max()) == pytest.approx(2.0, rel=1e-3)  # the ball's extreme point
