"""Tests for constructions/lipschitz.py: Lemma 42's two-layer nets and their certificates."""
from __future__ import annotations

import math

import pytest
import torch

from qstr.constructions.lipschitz import (
    LipschitzNet,
    ball_grid,
    certify_sup_error,
    fk_coefficients,
    fk_moments,
    lipschitz_net,
    net_lipschitz_bound,
    smoothing_error_bound,
)
from qstr.constructions.links import TwoLayerNet

F64 = torch.float64


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_fk_kernel(n):
    c = fk_coefficients(n)
    assert float(c[0]) == pytest.approx(1.0) and float(c[1]) == pytest.approx(math.cos(math.pi / (n + 2)))
    theta = torch.linspace(-math.pi, math.pi, 2001, dtype=F64)
    kappa = c[0] + 2 * sum(c[m] * torch.cos(m * theta) for m in range(1, n + 1))
    assert float(kappa.min()) >= -1e-12  # nonnegative


@pytest.mark.parametrize("n, k, shift", [(3, 1, 0.3), (4, 2, 0.7), (6, 2, 0.1), (2, 3, 0.5)])
def test_fk_moments_are_exact_on_any_grid(n, k, shift):
    """E sigma^2, E sigma^4 under the discrete weights K(x - y_j)/G^k equal the closed forms (G >= n+3)."""
    c = fk_coefficients(n)
    G = n + 3
    theta = 2 * math.pi * (torch.arange(G, dtype=F64) + shift) / G  # x - y_j for a shifted x
    kappa = c[0] + 2 * sum(c[m] * torch.cos(m * theta) for m in range(1, n + 1))
    w = kappa / G
    s2 = torch.sin(theta / 2) ** 2
    grids = torch.meshgrid(*([torch.arange(G)] * k), indexing="ij")
    weight = torch.ones([G] * k, dtype=F64)
    sig2 = torch.zeros([G] * k, dtype=F64)
    for ax in grids:
        weight = weight * w[ax]
        sig2 = sig2 + s2[ax]
    m2, m4 = fk_moments(n, k)
    assert float(weight.sum()) == pytest.approx(1.0, abs=1e-12)
    assert float((weight * sig2).sum()) == pytest.approx(m2, abs=1e-12)
    assert float((weight * sig2 ** 2).sum()) == pytest.approx(m4, abs=1e-12)


def test_smoothing_bound_decreases_like_one_over_n():
    vals = [smoothing_error_bound(n, 2, 1.0, 1.0) for n in (4, 8, 16, 32, 64)]
    assert all(a > b for a, b in zip(vals, vals[1:]))
    assert vals[-1] * (64 + 2) == pytest.approx(2 * math.sqrt(2), rel=0.05)  # ~ 2 L R sqrt(k) / (n + 2)


def test_one_dimensional_interpolation_bound_is_tight():
    L, R = 2.0, 1.5
    built = lipschitz_net(lambda x: L * torch.sin(x[..., 0]), L=L, R=R, k=1, eps=0.03)
    assert isinstance(built, LipschitzNet) and built.method == "interpolation"
    K = built.degree
    assert built.error_bound == pytest.approx(L * (2 * R / K) / 2) and built.error_bound <= 0.03
    cert = certify_sup_error(lambda x: L * torch.sin(x[..., 0]), built.net, L=L, R=R, k=1, spacing=1e-4)
    assert cert.upper <= built.error_bound
    knots = torch.linspace(-R, R, K + 1, dtype=F64)
    tent = lambda x: L * (x[..., 0, None] - knots).abs().min(dim=-1).values  # noqa: E731
    t_built = lipschitz_net(tent, L=L, R=R, k=1, eps=0.03)
    mid = ((knots[:-1] + knots[1:]) / 2)[:, None]
    err = (tent(mid) - t_built(mid)).abs()
    assert float(err.max()) == pytest.approx(t_built.error_bound, rel=1e-9)  # attained at midpoints


@pytest.mark.parametrize("name, f, L, R", [
    ("cone", lambda x: x.norm(dim=-1), 1.0, 1.0),
    ("product", lambda x: x[..., 0] * x[..., 1], math.sqrt(2), math.sqrt(2)),
])
def test_two_dimensional_construction_is_certified(name, f, L, R):
    built = lipschitz_net(f, L=L, R=R, k=2, degree=6)
    assert built.method == "fourier-ridge" and built.width == built.net.m and built.directions > 0
    assert built.error_bound == pytest.approx(built.smooth_error + built.ridge_error)
    assert built.smooth_error == pytest.approx(smoothing_error_bound(6, 2, L, R))
    assert built.ridge_budget == pytest.approx(0.1 / 0.9 * built.smooth_error, rel=1e-12)  # the default split
    assert built.ridge_error <= built.ridge_budget
    assert len(built.ridges) == built.directions and built.width == sum(K + 1 for _, K in built.ridges) + 1
    assert built.ridge_error == pytest.approx(sum(S * (2 * R / K) ** 2 / 8 for S, K in built.ridges), rel=1e-12)
    cert = certify_sup_error(f, built.net, L=L, R=R, k=2, spacing=0.03)
    assert cert.lower <= cert.upper <= built.error_bound
    assert set(built.weight_norms) == {"a", "W", "b", "r_a", "r_w", "path"}


def test_eps_picks_the_degree():
    built = lipschitz_net(lambda x: x.norm(dim=-1), L=1.0, R=1.0, k=2, eps=0.5)
    assert built.error_bound <= 0.5
    assert built.ridge_budget == pytest.approx(0.5 - built.smooth_error, rel=1e-12)  # the rest of eps
    assert smoothing_error_bound(built.degree - 1, 2, 1.0, 1.0) > 0.9 * 0.5 or built.degree == 1


def test_net_lipschitz_bound_groups_parallel_units():
    # relu(x) - relu(-x) = x: Lipschitz 1 although the path norm is 2
    net = TwoLayerNet(a=torch.tensor([1.0, -1.0], dtype=F64), W=torch.tensor([[1.0], [-1.0]], dtype=F64),
                      b=torch.zeros(2, dtype=F64))
    assert net_lipschitz_bound(net) == pytest.approx(1.0)
    # two orthogonal ridges relu(x1) + 2 relu(x2): bound 1 + 2 (true constant sqrt 5)
    net2 = TwoLayerNet(a=torch.tensor([1.0, 2.0], dtype=F64), W=torch.eye(2, dtype=F64), b=torch.zeros(2, dtype=F64))
    assert net_lipschitz_bound(net2) == pytest.approx(3.0)
    const = TwoLayerNet(a=torch.tensor([5.0], dtype=F64), W=torch.zeros(1, 2, dtype=F64), b=torch.ones(1, dtype=F64))
    assert net_lipschitz_bound(const) == 0.0


def test_ball_grid_covers_the_ball():
    pts, rho = ball_grid(1.0, 2, 0.1)
    assert rho == pytest.approx(0.1 * math.sqrt(2) / 2)
    assert float(pts.norm(dim=1).max()) <= 1.0 + 1e-12
    g = torch.randn(500, 2, dtype=F64, generator=gen(3))
    probe = g / g.norm(dim=1, keepdim=True) * torch.rand(500, 1, dtype=F64, generator=gen(4)).sqrt()  # uniform in the disc
    assert float(torch.cdist(probe, pts).min(dim=1).values.max()) <= rho


def test_certificate_of_an_exact_net_is_the_slack():
    net = TwoLayerNet(a=torch.tensor([1.0, -1.0], dtype=F64), W=torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=F64),
                      b=torch.zeros(2, dtype=F64))
    cert = certify_sup_error(lambda x: x[..., 0], net, L=1.0, R=1.0, k=2, spacing=0.1)
    assert cert.grid_max == pytest.approx(0.0, abs=1e-15)
    assert cert.upper == pytest.approx(2.0 * 0.1 * math.sqrt(2) / 2)


def test_lipschitz_net_bad_arguments():
    f = lambda x: x.norm(dim=-1)  # noqa: E731
    with pytest.raises(ValueError, match="needs eps"):
        lipschitz_net(f, L=1.0, R=1.0, k=1)
    assert lipschitz_net(lambda x: x[..., 0], L=1.0, R=1.0, k=1, degree=4).error_bound == pytest.approx(0.25)
    with pytest.raises(ValueError, match="needs degree"):
        lipschitz_net(f, L=1.0, R=1.0, k=2)
    for grid in (6, 7):  # degree + 3 = 8 is the least grid with exact kernel moments
        with pytest.raises(ValueError, match="grid must be"):
            lipschitz_net(f, L=1.0, R=1.0, k=2, degree=5, grid=grid)
    with pytest.raises(ValueError, match="f must be callable"):
        lipschitz_net(3.0, L=1.0, R=1.0, k=2, degree=2)
    with pytest.raises(ValueError, match="f must map"):
        lipschitz_net(lambda x: x, L=1.0, R=1.0, k=2, degree=2)
    with pytest.raises(ValueError, match="L"):
        lipschitz_net(f, L=-1.0, R=1.0, k=2, degree=2)
    with pytest.raises(ValueError, match="below the smoothing error"):
        lipschitz_net(f, L=1.0, R=1.0, k=2, degree=2, eps=0.01)


def test_angle_inequality_used_by_the_smoothing_bound():
    """|theta| <= 2|sin(theta/2)| + (pi - 2)|sin(theta/2)|^3 on [-pi, pi]: arcsin(s) - s has positive
    odd Taylor coefficients, so (arcsin s - s)/s^3 is increasing and <= pi/2 - 1 (its value at s = 1)."""
    import sympy as sp

    s = sp.symbols("s")
    series = sp.series(sp.asin(s) - s, s, 0, 24).removeO()
    assert all(series.coeff(s, 2 * j + 1) > 0 for j in range(1, 11))
    assert sp.simplify(sp.asin(1) - 1 - (sp.pi / 2 - 1)) == 0
    theta = torch.linspace(-math.pi, math.pi, 20001, dtype=F64)
    sn = torch.sin(theta / 2).abs()
    assert float((theta.abs() - 2 * sn - (math.pi - 2) * sn ** 3).max()) <= 1e-15
