"""Tests for bounds/lipschitz.py: Lemma 42's parameters picked from eps, its error bounds and the
grid certificate (the weights at given parameters: tests/constructions/test_lipschitz.py)."""

from __future__ import annotations

import itertools
import math

import pytest
import sympy as sp
import torch

from qstr.bounds.lipschitz import (
    LipschitzNet,
    ball_grid,
    certify_sup_error,
    fk_moments,
    lemma42_net,
    net_lipschitz_bound,
    ridge_curvatures,
    ridge_interval_counts,
    smoothing_error_bound,
)
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.lipschitz import fk_coefficients, fourier_ridges

from tests.fixtures import norms_by_hand, seeded

F64 = torch.float64


@pytest.mark.parametrize("n, k, shift", [(3, 1, 0.3), (4, 2, 0.7), (6, 2, 0.1), (2, 3, 0.5)])
def test_fk_moments_are_exact_on_any_grid(n, k, shift):
    """E sigma^2, E sigma^4 under the discrete weights K(x - y_j)/G^k equal the closed forms
    (G >= n+3)."""
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
    assert float((weight * sig2**2).sum()) == pytest.approx(m4, abs=1e-12)


def test_smoothing_bound_decreases_like_one_over_n():
    vals = [smoothing_error_bound(n, 2, 1.0, 1.0) for n in (4, 8, 16, 32, 64)]
    assert all(a > b for a, b in zip(vals, vals[1:], strict=False))
    assert vals[-1] * (64 + 2) == pytest.approx(
        2 * math.sqrt(2), rel=0.05
    )  # ~ 2 L R sqrt(k) / (n + 2)


def test_one_dimensional_interpolation_bound_is_tight():
    L, R = 2.0, 1.5
    built = lemma42_net(lambda x: L * torch.sin(x[..., 0]), L=L, R=R, k=1, eps=0.03)
    assert isinstance(built, LipschitzNet) and built.method == "interpolation"
    K = built.degree
    assert built.error_bound == pytest.approx(L * (2 * R / K) / 2) and built.error_bound <= 0.03
    cert = certify_sup_error(
        lambda x: L * torch.sin(x[..., 0]), built.net, L=L, R=R, k=1, spacing=1e-4
    )
    assert cert.upper <= built.error_bound
    knots = torch.linspace(-R, R, K + 1, dtype=F64)
    tent = lambda x: L * (x[..., 0, None] - knots).abs().min(dim=-1).values  # noqa: E731
    t_built = lemma42_net(tent, L=L, R=R, k=1, eps=0.03)
    mid = ((knots[:-1] + knots[1:]) / 2)[:, None]
    err = (tent(mid) - t_built(mid)).abs()
    assert float(err.max()) == pytest.approx(t_built.error_bound, rel=1e-9)  # attained at midpoints


@pytest.mark.parametrize(
    "name, f, L, R",
    [
        ("cone", lambda x: x.norm(dim=-1), 1.0, 1.0),
        ("product", lambda x: x[..., 0] * x[..., 1], math.sqrt(2), math.sqrt(2)),
    ],
)
def test_two_dimensional_construction_is_certified(name, f, L, R):
    built = lemma42_net(f, L=L, R=R, k=2, degree=6)
    assert built.method == "fourier-ridge" and built.width == built.net.m and built.directions > 0
    assert built.error_bound == pytest.approx(built.smooth_error + built.ridge_error)
    assert built.smooth_error == pytest.approx(smoothing_error_bound(6, 2, L, R))
    assert built.ridge_budget == pytest.approx(
        0.1 / 0.9 * built.smooth_error, rel=1e-12
    )  # the default split
    assert built.ridge_error <= built.ridge_budget
    assert (
        len(built.ridges) == built.directions
        and built.width == sum(K + 1 for _, K in built.ridges) + 1
    )
    assert built.ridge_error == pytest.approx(
        sum(S * (2 * R / K) ** 2 / 8 for S, K in built.ridges), rel=1e-12
    )
    cert = certify_sup_error(f, built.net, L=L, R=R, k=2, spacing=0.03)
    assert cert.lower <= cert.upper <= built.error_bound
    assert set(built.weight_norms) == {"a", "W", "b", "r_a", "r_w", "path"}


def test_eps_picks_the_degree():
    built = lemma42_net(lambda x: x.norm(dim=-1), L=1.0, R=1.0, k=2, eps=0.5)
    assert built.error_bound <= 0.5
    assert built.ridge_budget == pytest.approx(
        0.5 - built.smooth_error, rel=1e-12
    )  # the rest of eps
    assert smoothing_error_bound(built.degree - 1, 2, 1.0, 1.0) > 0.9 * 0.5 or built.degree == 1


def test_ball_grid_covers_the_ball():
    pts, rho = ball_grid(1.0, 2, 0.1)
    assert rho == pytest.approx(0.1 * math.sqrt(2) / 2)
    assert float(pts.norm(dim=1).max()) <= 1.0 + 1e-12
    g = torch.randn(500, 2, dtype=F64, generator=seeded(3))
    probe = (
        g / g.norm(dim=1, keepdim=True) * torch.rand(500, 1, dtype=F64, generator=seeded(4)).sqrt()
    )  # uniform in the disc
    assert float(torch.cdist(probe, pts).min(dim=1).values.max()) <= rho


def test_certificate_of_an_exact_net_is_the_slack():
    net = TwoLayerNet(
        a=torch.tensor([1.0, -1.0], dtype=F64),
        W=torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=F64),
        b=torch.zeros(2, dtype=F64),
    )
    cert = certify_sup_error(lambda x: x[..., 0], net, L=1.0, R=1.0, k=2, spacing=0.1)
    assert cert.grid_max == pytest.approx(0.0, abs=1e-15)
    assert cert.upper == pytest.approx(2.0 * 0.1 * math.sqrt(2) / 2)


def test_lemma42_net_bad_arguments():
    f = lambda x: x.norm(dim=-1)  # noqa: E731
    with pytest.raises(ValueError, match="needs eps"):
        lemma42_net(f, L=1.0, R=1.0, k=1)
    assert lemma42_net(
        lambda x: x[..., 0], L=1.0, R=1.0, k=1, degree=4
    ).error_bound == pytest.approx(0.25)
    with pytest.raises(ValueError, match="needs degree"):
        lemma42_net(f, L=1.0, R=1.0, k=2)
    for grid in (6, 7):  # degree + 3 = 8 is the least grid with exact kernel moments
        with pytest.raises(ValueError, match="grid must be"):
            lemma42_net(f, L=1.0, R=1.0, k=2, degree=5, grid=grid)
    with pytest.raises(ValueError, match="f must be callable"):
        lemma42_net(3.0, L=1.0, R=1.0, k=2, degree=2)
    with pytest.raises(ValueError, match="f must map"):
        lemma42_net(lambda x: x, L=1.0, R=1.0, k=2, degree=2)
    with pytest.raises(ValueError, match="L"):
        lemma42_net(f, L=-1.0, R=1.0, k=2, degree=2)
    with pytest.raises(ValueError, match="below the smoothing error"):
        lemma42_net(f, L=1.0, R=1.0, k=2, degree=2, eps=0.01)


def test_angle_inequality_used_by_the_smoothing_bound():
    """|theta| <= 2|sin(theta/2)| + (pi - 2)|sin(theta/2)|^3 on [-pi, pi]: arcsin(s) - s has
    positive odd Taylor coefficients, so (arcsin s - s)/s^3 is increasing and <= pi/2 - 1 (its value
    at s = 1)."""
    s = sp.symbols("s")
    series = sp.series(sp.asin(s) - s, s, 0, 24).removeO()
    assert all(series.coeff(s, 2 * j + 1) > 0 for j in range(1, 11))
    assert sp.simplify(sp.asin(1) - 1 - (sp.pi / 2 - 1)) == 0
    theta = torch.linspace(-math.pi, math.pi, 20001, dtype=F64)
    sn = torch.sin(theta / 2).abs()
    assert float((theta.abs() - 2 * sn - (math.pi - 2) * sn**3).max()) <= 1e-15


def test_weight_norms_as_recorded():
    """Lemma 42's weight record: ||a||, ||W||_F, ||b||, r_a = ||a|| sqrt(m),
    r_w = ||(W, b)||_F / sqrt(m) and the path norm sum_i |a_i| ||(w_i, b_i)|| of the built net
    (relative 1e-12)."""
    for built in (
        lemma42_net(lambda x: x.norm(dim=-1), L=1.0, R=1.0, k=2, degree=6),
        lemma42_net(lambda x: torch.sin(3 * x[..., 0]), L=3.0, R=1.0, k=1, eps=0.05),
    ):
        want = norms_by_hand(built.net)
        assert set(built.weight_norms) == set(want)
        for key, value in want.items():
            assert built.weight_norms[key] == pytest.approx(value, rel=1e-12, abs=1e-300)


def test_ridges_as_derived():
    """k >= 2 (lemmas-39-41-42.md, steps 5-7): K_v = ceil(2R / h_v),
    h_v = sqrt(8 eps_ridge S_v^(-2/3) / sum_u S_u^(1/3)) (K_v = 1 where S_v = 0), ridge error
    sum_v S_v (2R / K_v)^2 / 8, width
    sum_v (K_v + 1) + 1, one ridge per primitive direction of the frequency cube [-n, n]^k."""
    b = lemma42_net(lambda x: x.norm(dim=-1), L=1.0, R=1.0, k=2, degree=6)
    total = sum(S ** (1 / 3) for S, _ in b.ridges if S > 0)
    want = [
        max(1, math.ceil(2 * b.R / math.sqrt(8 * b.ridge_budget * S ** (-2 / 3) / total)))
        if S > 0
        else 1
        for S, _ in b.ridges
    ]
    assert [K for _, K in b.ridges] == want
    err = sum(S * (2 * b.R / K) ** 2 / 8 for S, K in b.ridges)
    assert b.ridge_error == pytest.approx(err, rel=1e-12)
    assert b.width == sum(K + 1 for _, K in b.ridges) + 1
    cube = itertools.product(range(-b.degree, b.degree + 1), repeat=b.k)
    primitive = sum(1 for ell in cube if any(ell) and math.gcd(*map(abs, ell)) == 1) // 2
    assert len(b.ridges) == b.directions == primitive


def test_interpolation_record_as_derived():
    """k = 1: K intervals of h = 2R / K, error bound L h / 2, all of it interpolation (no
    smoothing), one direction, width m of the net."""
    b = lemma42_net(lambda x: torch.sin(3 * x[..., 0]), L=3.0, R=1.0, k=1, eps=0.05)
    assert b.error_bound == pytest.approx(b.L * (2 * b.R / b.degree) / 2, rel=1e-12)
    assert b.smooth_error == 0.0 and b.ridges == () and b.directions == 1
    assert b.ridge_error == b.ridge_budget == b.error_bound
    assert b.width == b.net.m and b.method == "interpolation"


def test_ridge_budget_split_as_documented():
    """Step 6: eps_ridge = 0.1 / 0.9 eps_smooth for a degree (ridge_fraction 0.1), eps - eps_smooth
    for an eps; error_bound = eps_smooth + ridge error."""
    for kw in (dict(degree=8), dict(eps=0.6)):
        b = lemma42_net(lambda x: x.norm(dim=-1), L=1.0, R=1.0, k=2, **kw)
        budget = 0.1 / 0.9 * b.smooth_error if "degree" in kw else 0.6 - b.smooth_error
        assert b.ridge_budget == pytest.approx(budget, rel=1e-12)
        assert b.error_bound == pytest.approx(b.smooth_error + b.ridge_error, rel=1e-12)


def test_certificate_slack_as_derived():
    """certify_sup_error's slack is (L + Lip(net)) rho, rho = spacing sqrt(k) / 2, over the points
    of ball_grid; upper = grid maximum + slack."""
    f = lambda x: x.norm(dim=-1)  # noqa: E731
    b = lemma42_net(f, L=1.0, R=1.0, k=2, degree=4)
    cert = certify_sup_error(f, b.net, L=1.0, R=1.0, k=2, spacing=0.05)
    pts, rho = ball_grid(1.0, 2, 0.05)
    assert rho == 0.05 * math.sqrt(2) / 2 and cert.points == pts.shape[0]
    assert cert.slack == pytest.approx((1.0 + net_lipschitz_bound(b.net)) * rho, rel=1e-12)
    assert cert.upper == cert.grid_max + cert.slack


def test_ridge_interval_counts_as_derived():
    """Step 6 on given curvatures: K_v = ceil(2R / h_v), h_v = sqrt(8 eps_r S_v^(-2/3) /
    sum_u S_u^(1/3)), one interval where S_v = 0, and the error sum_v S_v (2R / K_v)^2 / 8 within
    eps_r; the record's (S_v, K_v) are ridge_curvatures and these counts."""
    S, eps_r, R = (8.0, 0.0, 1.0, 27.0), 0.01, 1.5
    counts, err = ridge_interval_counts(S, eps_r, R)
    beta = math.sqrt(8 * eps_r / (2.0 + 1.0 + 3.0))
    assert counts == tuple(
        max(1, math.ceil(2 * R / (beta * s ** (-1 / 3)))) if s > 0 else 1 for s in S
    )
    assert counts[1] == 1
    assert err == pytest.approx(
        sum(s * (2 * R / K) ** 2 / 8 for s, K in zip(S, counts, strict=True))
    )
    assert err <= eps_r
    f = lambda x: x.norm(dim=-1)  # noqa: E731
    b = lemma42_net(f, L=1.0, R=1.0, k=2, degree=5)
    ridges = fourier_ridges(f, R=1.0, k=2, degree=5, grid=14)
    curv = ridge_curvatures(ridges)
    assert tuple(s for s, _ in b.ridges) == curv
    assert tuple(K for _, K in b.ridges) == ridge_interval_counts(curv, b.ridge_budget, 1.0)[0]
    r = ridges.ridges[0]
    assert curv[0] == pytest.approx(sum(A * (ridges.w0 * m * r.norm) ** 2 for m, A, _ in r.terms))
