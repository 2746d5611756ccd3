"""Tests for constructions/lipschitz.py: the weights of Lemma 42's two-layer nets built from given
knots, kernel degree, grid and interval counts, and what the weights are (norms, Lipschitz bound).
The parameters picked from eps and the certificate: tests/bounds/test_lipschitz.py."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from qstr.bounds.lipschitz import net_lipschitz_bound
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.lipschitz import (
    FourierRidges,
    fk_coefficients,
    fourier_ridges,
    interpolation_net,
    project_ball,
    ridge_net,
    scalar_values,
    weight_norms,
)

from tests.fixtures import norms_by_hand, seeded

F64 = torch.float64


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_fk_kernel(n):
    c = fk_coefficients(n)
    assert float(c[0]) == pytest.approx(1.0) and float(c[1]) == pytest.approx(
        math.cos(math.pi / (n + 2))
    )
    theta = torch.linspace(-math.pi, math.pi, 2001, dtype=F64)
    kappa = c[0] + 2 * sum(c[m] * torch.cos(m * theta) for m in range(1, n + 1))
    assert float(kappa.min()) >= -1e-12  # nonnegative


def test_fk_coefficients_as_derived():
    """c_0 = 1, c_1 = cos(pi / (n + 2)), c_2 the lag-2 autocorrelation of
    a_j = sin((j + 1) pi / (n + 2)) over sum_j a_j^2 = (n + 2) / 2; n = 0 gives c = (1)."""
    assert fk_coefficients(0).tolist() == [1.0]
    for n in (1, 4, 8, 16):
        c = fk_coefficients(n)
        a = [math.sin((j + 1) * math.pi / (n + 2)) for j in range(n + 1)]
        assert c.numel() == n + 1 and abs(float(c[0]) - 1) <= 1e-14
        assert abs(float(c[1]) - math.cos(math.pi / (n + 2))) <= 1e-14
        if n >= 2:
            c2 = sum(a[j] * a[j + 2] for j in range(n - 1)) / ((n + 2) / 2)
            assert abs(float(c[2]) - c2) <= 1e-14


def test_net_lipschitz_bound_groups_parallel_units():
    # relu(x) - relu(-x) = x: Lipschitz 1 although the path norm is 2
    net = TwoLayerNet(
        a=torch.tensor([1.0, -1.0], dtype=F64),
        W=torch.tensor([[1.0], [-1.0]], dtype=F64),
        b=torch.zeros(2, dtype=F64),
    )
    assert net_lipschitz_bound(net) == pytest.approx(1.0)
    # two orthogonal ridges relu(x1) + 2 relu(x2): bound 1 + 2 (true constant sqrt 5)
    net2 = TwoLayerNet(
        a=torch.tensor([1.0, 2.0], dtype=F64),
        W=torch.eye(2, dtype=F64),
        b=torch.zeros(2, dtype=F64),
    )
    assert net_lipschitz_bound(net2) == pytest.approx(3.0)
    const = TwoLayerNet(
        a=torch.tensor([5.0], dtype=F64), W=torch.zeros(1, 2, dtype=F64), b=torch.ones(1, dtype=F64)
    )
    assert net_lipschitz_bound(const) == 0.0


def lipschitz_by_secants(net: TwoLayerNet) -> float:
    """The exact Lipschitz constant of a 1-D net without the unit grouping net_lipschitz_bound uses:
    the net is linear between consecutive breakpoints -b_i / w_i, so its largest |slope| is the
    largest secant over them and the two outer rays (a unit step beyond the ends)."""
    live = net.W[:, 0] != 0
    bp = torch.unique(-(net.b[live] / net.W[live, 0]))
    s = torch.cat([bp[:1] - 1, bp, bp[-1:] + 1]).to(F64)
    s = s[torch.cat([torch.ones(1, dtype=torch.bool), torch.diff(s) > 1e-9])]  # closer: merged
    y = net(s[:, None, None]).reshape(-1)
    return float((torch.diff(y) / torch.diff(s)).abs().max())


def _tent(b) -> TwoLayerNet:
    return TwoLayerNet(
        a=torch.tensor([1.0, -2.0, 1.0], dtype=F64),
        W=torch.ones(3, 1, dtype=F64),
        b=torch.tensor(b, dtype=F64),
    )


def test_net_lipschitz_bound_is_exact_in_one_dimension():
    """net_lipschitz_bound equals the largest secant between breakpoints for 1-D nets: a tent on
    [1, 3] (slope 1), a steeper one on [1, 2], a random 16-unit net and Lemma 42's k = 1 nets
    (interpolants at 61 and 201 knots)."""
    tent = _tent([-1.0, -2.0, -3.0])
    assert lipschitz_by_secants(tent) == 1.0 == net_lipschitz_bound(tent)
    assert lipschitz_by_secants(_tent([-1.0, -1.5, -2.0])) == 1.0
    g = seeded(4280)
    W, b, a = (torch.randn(*shape, generator=g, dtype=F64) for shape in ((16, 1), (16,), (16,)))
    nets = [TwoLayerNet(a=a, W=W, b=b)]
    nets.append(
        interpolation_net(
            lambda x: torch.sin(3 * x[..., 0]), torch.linspace(-1.0, 1.0, 61, dtype=F64)
        )
    )  # lemma-42's K = 60
    nets.append(
        interpolation_net(
            lambda x: (x[..., 0] - 1 / 3).abs() - 0.5, torch.linspace(-2.0, 2.0, 201, dtype=F64)
        )
    )  # and K = 200
    for net in nets:
        assert net_lipschitz_bound(net) == pytest.approx(lipschitz_by_secants(net), rel=1e-9)


def test_net_lipschitz_bound_sums_the_lines_of_weights():
    """k = 2, four lines of weights (two 16 degrees apart, one met with both signs): the bound is
    the sum of the lines' largest slopes, 1 + 1 + 1 + 2."""
    lines = TwoLayerNet(
        a=torch.tensor([1.0, -1.0, 1.0, -2.0, 1.0, 1.0], dtype=F64),
        W=torch.tensor([[0.6, 0.8], [0.8, 0.6], [1, 0], [1, 0], [0, 2], [0, -1]], dtype=F64),
        b=torch.tensor([0.0, 0.0, 0.0, -0.5, 0.1, 0.0], dtype=F64),
    )
    assert net_lipschitz_bound(lines) == pytest.approx(5.0, rel=1e-9)


def test_weight_norms_of_a_net():
    """||a||, ||W||_F, ||b||, r_a = ||a|| sqrt(m), r_w = ||(W, b)||_F / sqrt(m) and the path norm
    sum_i |a_i| ||(w_i, b_i)|| (relative 1e-12)."""
    g = seeded(42)
    net = TwoLayerNet(
        a=torch.randn(7, generator=g, dtype=F64),
        W=torch.randn(7, 3, generator=g, dtype=F64),
        b=torch.randn(7, generator=g, dtype=F64),
    )
    want, got = norms_by_hand(net), weight_norms(net)
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12)


def test_interpolation_net_is_the_interpolant():
    """k = 1: the net equals f at the knots, is linear between them (midpoints: the mean of the
    neighbours) and has width len(knots) + 1, its last unit the constant relu(0 z + 1)."""
    f = lambda x: torch.sin(3 * x[..., 0])  # noqa: E731
    knots = torch.linspace(-1.0, 1.0, 9, dtype=F64)
    net = interpolation_net(f, knots)
    assert net.m == knots.numel() + 1 and float(net.W[-1].abs().max()) == 0.0
    assert float(net.b[-1]) == 1.0
    at = net(knots[:, None, None]).reshape(-1)
    assert torch.allclose(at, f(knots[:, None]), rtol=0, atol=1e-14)
    mid = net(((knots[1:] + knots[:-1]) / 2)[:, None, None]).reshape(-1)
    assert torch.allclose(mid, (at[1:] + at[:-1]) / 2, rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="f must be callable"):
        interpolation_net(3.0, knots)
    with pytest.raises(ValueError, match="f must map"):
        interpolation_net(lambda x: x, knots)


def _smoothing(f, ridges: FourierRidges, x: torch.Tensor) -> torch.Tensor:
    """T(x) = G^-k sum_j F(y_j) K(x - y_j) by the discrete convolution (step 2), F = f of the
    folded, ball-projected grid points."""
    n, k, R, G = ridges.degree, ridges.k, ridges.R, ridges.grid
    P = 4 * R
    y = -2 * R + P * torch.arange(G, dtype=F64) / G
    folded = R - ((y + R).remainder(P) - 2 * R).abs()
    grid = torch.stack(torch.meshgrid(*([folded] * k), indexing="ij"), dim=-1).reshape(-1, k)
    ys = torch.stack(torch.meshgrid(*([y] * k), indexing="ij"), dim=-1).reshape(-1, k)
    F = f(project_ball(grid, R))
    c = fk_coefficients(n)
    theta = 2 * math.pi * (x[:, None, :] - ys[None]) / P  # (M, G^k, k)
    kappa = 1 + 2 * sum(float(c[m]) * torch.cos(m * theta) for m in range(1, n + 1))
    return (kappa.prod(dim=-1) * F).sum(dim=1) / G**k


def _ridge_sum(ridges: FourierRidges, x: torch.Tensor) -> torch.Tensor:
    """constant + sum_v g_v(<v / |v|, x>), g_v(s) = sum_m A cos(w0 m |v| s + phi)."""
    out = torch.full(x.shape[:1], ridges.constant, dtype=F64)
    for r in ridges.ridges:
        s = x @ torch.tensor(r.direction, dtype=F64) / r.norm
        for m, A, phi in r.terms:
            out = out + A * torch.cos(ridges.w0 * m * r.norm * s + phi)
    return out


@pytest.mark.parametrize("k, n, G", [(2, 4, 12), (2, 3, 6), (3, 2, 7)])
def test_fourier_ridges_are_the_smoothing(k, n, G):
    """Steps 2 and 5: the ridges (FFT of the grid values) sum to the discrete FK convolution T at
    random points, one ridge per primitive direction of the frequency cube [-n, n]^k, each with
    primitive direction, first nonzero entry positive."""
    f = lambda x: x.norm(dim=-1) + torch.sin(2 * x[..., 0])  # noqa: E731
    ridges = fourier_ridges(f, R=1.5, k=k, degree=n, grid=G)
    assert (ridges.k, ridges.R, ridges.degree, ridges.grid) == (k, 1.5, n, G)
    assert ridges.w0 == 2 * math.pi / 6.0
    x = 2 * torch.rand(64, k, generator=seeded(7), dtype=F64) - 1
    assert torch.allclose(_ridge_sum(ridges, x), _smoothing(f, ridges, x), rtol=0, atol=1e-12)
    cube = itertools.product(range(-n, n + 1), repeat=k)
    primitive = sum(1 for ell in cube if any(ell) and math.gcd(*map(abs, ell)) == 1) // 2
    assert len(ridges.ridges) == primitive
    for r in ridges.ridges:
        assert math.gcd(*map(abs, r.direction)) == 1
        assert next(e for e in r.direction if e != 0) > 0
        assert r.norm == math.sqrt(sum(e * e for e in r.direction))
        assert all(m >= 1 and A >= 0 for m, A, _ in r.terms)


def test_ridge_net_interpolates_each_ridge():
    """Step 7: width sum_v (K_v + 1) + 1 at the given counts, the constant unit last, and more
    intervals per ridge bring the net to the ridge sum (within 1e-3 at 64 intervals)."""
    f = lambda x: x[..., 0] * x[..., 1]  # noqa: E731
    ridges = fourier_ridges(f, R=1.0, k=2, degree=3, grid=10)
    x = project_ball(2 * torch.rand(256, 2, generator=seeded(8), dtype=F64) - 1, 1.0)
    want = _ridge_sum(ridges, x)
    gaps = []
    for K in (2, 8, 64):
        counts = tuple([K] * len(ridges.ridges))
        net = ridge_net(ridges, counts)
        assert net.m == sum(c + 1 for c in counts) + 1
        assert float(net.W[-1].abs().max()) == 0.0 and float(net.b[-1]) == 1.0
        gaps.append(float((net(x[:, None, :]).reshape(-1) - want).abs().max()))
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-3
    with pytest.raises(ValueError, match="one interval count per ridge"):
        ridge_net(ridges, (1,))
    with pytest.raises(ValueError, match="K"):
        ridge_net(ridges, tuple([0] * len(ridges.ridges)))


def test_scalar_values_and_project_ball():
    """f's values as float64 of shape (...), refused otherwise; the projection onto the ball keeps
    its points and scales the others to the sphere."""
    x = torch.tensor([[0.3, 0.4], [3.0, 4.0]], dtype=torch.float32)
    assert scalar_values(lambda z: z.sum(-1), x).dtype == F64
    with pytest.raises(ValueError, match="g must map"):
        scalar_values(lambda z: z, x, "g")
    with pytest.raises(ValueError, match="finite"):
        scalar_values(lambda z: z.sum(-1) / 0, x)
    p = project_ball(x.double(), 1.0)
    assert torch.allclose(p, torch.tensor([[0.3, 0.4], [0.6, 0.8]], dtype=F64), atol=1e-15)
