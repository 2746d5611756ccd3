import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qstr.constructions.relu import interpolant, sqnorm_net, square_net
from qstr.verify.adversarial import clip_to_ball, worst_case_tokens
from qstr.verify.training import fit_online, position_risk


@settings(max_examples=25, deadline=None)
@given(st.floats(0.5, 8.0), st.integers(2, 60))
def test_square_net_error_is_exactly_h2_over_4(R, knots):
    net, err = square_net(R, knots)
    h = 2 * R / (knots - 1)
    assert err == pytest.approx(h * h / 4)
    # the interpolant is exact at knots and worst at midpoints: sup error attained
    grid = torch.linspace(-R, R, knots, dtype=torch.float64)
    mids = (grid[1:] + grid[:-1]) / 2
    assert torch.allclose(net(grid.reshape(-1, 1, 1)), grid ** 2, atol=1e-9)
    assert torch.allclose(net(mids.reshape(-1, 1, 1)) - mids ** 2, torch.full_like(mids, err), atol=1e-9)
    dense = torch.linspace(-R, R, 20001, dtype=torch.float64)
    assert float((net(dense.reshape(-1, 1, 1)) - dense ** 2).abs().max()) <= err + 1e-9


def test_interpolant_of_abs_is_exact():
    net = interpolant(torch.abs, torch.tensor([-2.0, 0.0, 3.0]))
    z = torch.linspace(-5, 5, 101, dtype=torch.float64)
    assert torch.allclose(net(z.reshape(-1, 1, 1)), z.abs(), atol=1e-12)  # linear extension matches |z|
    with pytest.raises(ValueError, match="strictly increasing"):
        interpolant(torch.abs, torch.tensor([1.0, 0.0]))


@pytest.mark.parametrize("q, d, H", [(3, 1, 2), (2, 4, 1), (2, 3, 2)])
def test_sqnorm_net_certified(q, d, H, gen):
    net, err = sqnorm_net(q, d, H, R=4.0, knots=41)
    x = (torch.rand(4000, H, d, generator=gen, dtype=torch.float64) * 8 - 4)
    want = ((x ** 2).sum(-1) - d).sum(-1) / math.sqrt(q * d)
    got = net(x)
    assert float((got - want).abs().max()) <= err + 1e-9
    assert float((got - want).abs().max()) >= 0.5 * err  # the certificate is not loose by much


def test_clip_and_adversarial_ascent(gen):
    x = torch.randn(3, 5, 2, generator=gen, dtype=torch.float64) * 10
    c = clip_to_ball(x, 2.0)
    assert float(c.norm(dim=-1).max()) <= 2.0 + 1e-12
    u = torch.tensor([1.0, 0.0], dtype=torch.float64)
    best = worst_case_tokens(lambda xx: (xx @ u).abs(), torch.zeros(1, 4, 2, dtype=torch.float64) + 0.01, 2.0, steps=60)
    assert float((best @ u).abs().max()) == pytest.approx(2.0, rel=1e-3)  # the ball's extreme point


def test_fit_online_learns_a_linear_map(gen):
    torch.manual_seed(0)
    w = torch.tensor([[2.0, -1.0]])
    model = torch.nn.Linear(2, 1, bias=False)

    def batch(B, g):
        x = torch.randn(B, 2, generator=g)
        return x, x @ w.T

    res = fit_online(model, batch, steps=300, lr=0.05, generator=gen)
    assert res.samples == 300 * 64
    risk, se = position_risk(model, batch, n=1000, generator=gen)
    assert risk < 1e-4 and se >= 0
    assert torch.allclose(model.weight, w, atol=1e-2)
