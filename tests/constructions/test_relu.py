"""Certified ReLU gadgets (constructions/relu.py): identity, soft threshold, Lemma 22 products,
Lemma 24 gate, interpolants, the square and squared-norm nets. Certificates: exact at knots,
attained at midpoints, never exceeded on dense grids."""

import math

import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qstr.bounds.gadgets import gadget_error, gate_leak, product_error
from qstr.constructions.relu import (
    gate_bands,
    gate_gadget,
    gate_target,
    identity_gadget,
    interpolant,
    product_gadget,
    soft_threshold,
    soft_threshold_gadget,
    sqnorm_net,
    square_interp,
    square_net,
    square_units,
)

F64 = torch.float64
TOL = 1e-12
FAST = settings(max_examples=20, deadline=None)


def grid2(lo, hi, n=401):
    return torch.cartesian_prod(
        torch.linspace(lo[0], hi[0], n, dtype=F64), torch.linspace(lo[1], hi[1], n, dtype=F64)
    )


# ------------------------------------------------------------------ exact gadgets


def test_identity_is_exact_everywhere(gen):
    g = identity_gadget(3)
    z = torch.randn(1000, 3, generator=gen, dtype=F64) * 1e3
    assert torch.equal(g(z), z)
    assert (
        gadget_error(g) == 0.0
        and g.width == 6
        and g.layers[0].W.shape == (6, 3)
        and g.layers[1].b is None
    )


def test_soft_threshold_gadget(gen):
    b = 0.3
    g = soft_threshold_gadget(b, 2)
    z = torch.randn(5000, 2, generator=gen, dtype=F64)
    out = g(z)
    assert torch.allclose(out, soft_threshold(z, b), atol=1e-15)
    assert bool((out[z.abs() <= b] == 0).all())  # exactly zero inside [-b, b]
    assert float((out - z).abs().max()) <= b + 1e-15  # moves by at most b
    big = z.abs() > b
    assert torch.allclose((z - out)[big].abs(), torch.full_like(z[big], b))
    with pytest.raises(ValueError, match="b must be"):
        soft_threshold_gadget(-0.1)


# ---------------------------------------------------------------- Lemma 22 products


def test_square_interp_matches_units_including_extension():
    for R, K in ((1.0, 9), (0.25, 4), (2.0, 2)):
        w, beta, coef = square_units(R, K)
        z = torch.linspace(-5 * R, 5 * R, 2001, dtype=F64)
        units = torch.relu(z[:, None] * w + beta) @ coef
        assert torch.allclose(units, square_interp(z, R, K), atol=1e-12)


@FAST
@given(st.floats(0.05, 3.0), st.integers(2, 40))
def test_product_certificate_exact_and_attained(R, K):
    g = product_gadget(R, K)
    h = 4 * R / (K - 1)
    assert gadget_error(g) == pytest.approx(h * h / 16) and gadget_error(g) == product_error(R, K)
    assert g.width == 2 * K
    knots = -2 * R + h * torch.arange(K, dtype=F64)
    # exact when x + y and x - y are both knots
    a, b = torch.cartesian_prod(knots, knots).T
    pts = torch.stack([(a + b) / 2, (a - b) / 2], 1)
    pts = pts[(pts.abs() <= R * (1 + 1e-12)).all(1)]
    if pts.numel():
        assert float((g(pts) - g.target(pts)).abs().max()) <= 1e-12 * max(1, R * R)
    # attained: x + y a midpoint, x - y a knot
    mid = knots[:-1] + h / 2
    a, b = torch.cartesian_prod(mid, knots).T
    pts = torch.stack([(a + b) / 2, (a - b) / 2], 1)
    pts = pts[(pts.abs() <= R * (1 + 1e-12)).all(1)]
    assert float((g(pts) - g.target(pts)).abs().max()) == pytest.approx(gadget_error(g), rel=1e-9)
    # never exceeded on a dense grid
    assert g.sup_error(grid2((-R, -R), (R, R), 201)) <= gadget_error(g) * (1 + 1e-9) + TOL


def test_product_half_knots_exceeds_full_certificate():
    full, half = product_gadget(1.0, 33), product_gadget(1.0, 16)
    assert half.sup_error(grid2((-1, -1), (1, 1), 601)) > 3 * gadget_error(full)


def test_product_norms_and_errors():
    g = product_gadget(0.5, 5)
    n = g.norms
    assert set(n) == {"W1_fro", "b1_norm", "W2_fro", "max_abs", "lipschitz_bound"}
    assert n["W1_fro"] == pytest.approx(math.sqrt(2 * 2 * 5))  # every row (+-1, +-1)
    with pytest.raises(ValueError, match="knots"):
        product_gadget(1.0, 1)
    with pytest.raises(ValueError, match="R"):
        product_gadget(0.0, 5)
    with pytest.raises(ValueError, match="last axis"):
        g(torch.zeros(3, 3, dtype=F64))
    with pytest.raises(ValueError, match="NaN"):
        g(torch.full((1, 2), float("nan"), dtype=F64))


# -------------------------------------------------------------------- Lemma 24 gate


@FAST
@given(st.floats(0.1, 10.0), st.integers(1, 30), st.floats(0.6, 1.5))
def test_gate_certificate(r_x, K, s_max):
    g = gate_gadget(r_x, K, s_max)
    delta = (s_max - 0.5) / K
    assert gadget_error(g) == pytest.approx(r_x * delta) and g.width == 2 * K
    # exactly 0 for s < 1/2 (at s = 1/2 itself up to rounding of M s + beta: the transition's
    # margin)
    lo = grid2((-r_x, -3.0), (r_x, 0.5 - 1e-9), 101)
    assert bool((g(lo) == 0).all())
    half = torch.stack(
        [torch.linspace(-r_x, r_x, 11, dtype=F64), torch.full((11,), 0.5, dtype=F64)], 1
    )
    assert float(g(half).abs().max()) <= 1e-13 * g.params["M"] * r_x
    # exact at the band edges (the knots), attained at band midpoints with x = +-r_x
    edges = 0.5 + delta * torch.arange(K + 1, dtype=F64)
    xs = torch.linspace(-r_x, r_x, 21, dtype=F64)
    pts = torch.cartesian_prod(xs, edges)
    assert float((g(pts) - g.target(pts)).abs().max()) <= 1e-10 * r_x * max(1.0, g.params["M"])
    mids = torch.cartesian_prod(torch.tensor([-r_x, r_x], dtype=F64), edges[:-1] + delta / 2)
    assert float((g(mids) - g.target(mids)).abs().min()) == pytest.approx(gadget_error(g), rel=1e-7)
    assert (
        g.sup_error(grid2((-r_x, -1.0), (r_x, s_max), 201)) <= gadget_error(g) * (1 + 1e-9) + 1e-12
    )


def test_gate_closed_form_units_and_leak_bound(gen):
    bands = gate_bands(2.0, 12, 1.1)
    g = gate_gadget(2.0, 12, 1.1)
    x = (torch.rand(20000, generator=gen, dtype=F64) * 4 - 2)[:, None]
    s = torch.rand(20000, generator=gen, dtype=F64) * 2.6 - 1.5
    a, b, c = bands.evaluate(x, s), bands.evaluate_units(x, s), g(torch.cat([x, s[:, None]], 1))
    assert torch.allclose(a, b, atol=1e-11) and torch.allclose(b, c, atol=1e-11)
    for excess in (0.0, 1e-4, 0.3 * bands.delta, bands.delta, 0.4):
        pts = grid2((-2.0, 0.5 - 0.2), (2.0, 0.5 + excess), 301)
        assert g(pts).abs().max() <= gate_leak(excess, 2.0, 12, 1.1) + 1e-12
    assert gate_leak(-1.0, 2.0, 12, 1.1) == 0.0
    # the 4 e branch is attained: x = r_x, s = 1/2 + e with e < delta / 2
    e = 0.1 * bands.delta
    assert float(g(torch.tensor([[2.0, 0.5 + e]], dtype=F64))) == pytest.approx(
        gate_leak(e, 2.0, 12, 1.1), rel=1e-6
    )
    assert torch.equal(gate_target(torch.tensor([3.0]), torch.tensor([1.0])), torch.tensor([3.0]))


def test_gate_half_knots_exceed_and_errors():
    full, half = gate_gadget(3.0, 16, 1.05), gate_gadget(3.0, 8, 1.05)
    assert half.sup_error(grid2((-3, -1), (3, 1.05), 801)) > 1.9 * gadget_error(full)
    with pytest.raises(ValueError, match="s_max"):
        gate_gadget(1.0, 4, 0.5)
    with pytest.raises(ValueError, match="r_x"):
        gate_gadget(-1.0, 4)
    with pytest.raises(ValueError, match="knots"):
        gate_gadget(1.0, 0)


def test_derivation_identities_with_sympy():
    """The algebra behind the certificates (docs/derivations/rnn-transition.md), symbolically."""
    z, k, h, x, y, c, K = sp.symbols("z k h x y c K", real=True)
    chord = k**2 + (2 * k + h) * (z - k)  # interpolant of z^2 on [k, k + h]
    e = sp.expand(chord - z**2)
    assert (
        sp.simplify(e - (z - k) * (k + h - z)) == 0
    )  # e(z) = (z - k)(k + h - z) >= 0 on the segment
    zmax = sp.solve(sp.diff(e, z), z)[0]
    assert sp.simplify(zmax - (k + h / 2)) == 0 and sp.simplify(e.subs(z, zmax) - h**2 / 4) == 0
    assert sp.expand(((x + y) ** 2 - (x - y) ** 2) / 4 - x * y) == 0  # polarisation
    # sum_{j<n} (y - c j) = n y - c n (n - 1) / 2 (the closed form of the gate's ramp sum)
    n, j = sp.symbols("n j", integer=True, nonnegative=True)
    assert sp.simplify(sp.summation(y - c * j, (j, 0, n - 1)) - (n * y - c * n * (n - 1) / 2)) == 0
    # band pair at the band midpoint (u = 1/2, c = 0) with x = r: theta = 1,
    # error 2 delta r (1 - 1/2) = r delta
    r, delta = sp.symbols("r delta", positive=True)
    assert sp.simplify(2 * delta * r * (1 - sp.Rational(1, 2)) - r * delta) == 0


@settings(max_examples=25, deadline=None)
@given(st.floats(0.5, 8.0), st.integers(2, 60))
def test_square_net_error_is_exactly_h2_over_4(R, knots):
    net, err = square_net(R, knots)
    h = 2 * R / (knots - 1)
    assert err == pytest.approx(h * h / 4)
    # the interpolant is exact at knots and worst at midpoints: sup error attained
    grid = torch.linspace(-R, R, knots, dtype=torch.float64)
    mids = (grid[1:] + grid[:-1]) / 2
    assert torch.allclose(net(grid.reshape(-1, 1, 1)), grid**2, atol=1e-9)
    assert torch.allclose(
        net(mids.reshape(-1, 1, 1)) - mids**2, torch.full_like(mids, err), atol=1e-9
    )
    dense = torch.linspace(-R, R, 20001, dtype=torch.float64)
    assert float((net(dense.reshape(-1, 1, 1)) - dense**2).abs().max()) <= err + 1e-9


def test_interpolant_of_abs_is_exact():
    net = interpolant(torch.abs, torch.tensor([-2.0, 0.0, 3.0]))
    z = torch.linspace(-5, 5, 101, dtype=torch.float64)
    assert torch.allclose(
        net(z.reshape(-1, 1, 1)), z.abs(), atol=1e-12
    )  # linear extension matches |z|
    with pytest.raises(ValueError, match="strictly increasing"):
        interpolant(torch.abs, torch.tensor([1.0, 0.0]))


@pytest.mark.parametrize("q, d, H", [(3, 1, 2), (2, 4, 1), (2, 3, 2)])
def test_sqnorm_net_certified(q, d, H, gen):
    net, err = sqnorm_net(q, d, H, R=4.0, knots=41)
    x = torch.rand(4000, H, d, generator=gen, dtype=torch.float64) * 8 - 4
    want = ((x**2).sum(-1) - d).sum(-1) / math.sqrt(q * d)
    got = net(x)
    assert float((got - want).abs().max()) <= err + 1e-9
    assert float((got - want).abs().max()) >= 0.5 * err  # the certificate is not loose by much


# ---------------------- software facts of the gadgets (from verify/claims/lemma_22.py, lemma_24.py)


def _op(M):
    return float(torch.linalg.svdvals(M.double())[0])


ALL_GADGETS = (
    identity_gadget(3),
    soft_threshold_gadget(0.25, 3),
    product_gadget(1.0, 17),
    gate_gadget(3.0, 16, 1.05),
)


def test_gadget_shapes_are_n_in_to_n_out(gen):
    """Every gadget of Prop 26's transition maps (B, n_in) to (B, n_out) through ``width`` units."""
    u = 3 * torch.randn(512, 3, generator=gen, dtype=F64)
    for g in ALL_GADGETS:
        assert tuple(g(u[:, : g.n_in]).shape) == (512, g.n_out)
        assert g.W2.shape[1] == g.width == g.W1.shape[0]


def test_gadget_norms_record_is_the_norms_of_its_layers():
    """``Gadget.norms``: Frobenius norms, bias norm, largest |weight| and ||W2||_op ||W1||_op
    (relative 1e-12)."""
    for g in ALL_GADGETS:
        want = {
            "W1_fro": float(g.W1.double().norm()),
            "b1_norm": float(g.b1.double().norm()),
            "W2_fro": float(g.W2.double().norm()),
            "max_abs": max(float(M.abs().max()) for M in (g.W1, g.b1, g.W2)),
            "lipschitz_bound": _op(g.W2) * _op(g.W1),
        }
        assert set(g.norms) == set(want)
        for k, v in want.items():
            assert g.norms[k] == pytest.approx(v, rel=1e-12, abs=1e-300), (g.name, k)


def test_exact_gadgets_declare_and_measure_error_zero(gen):
    """Identity and soft threshold: relu(z - b) - relu(-z - b) is ST_b(z) in floats too
    (declared 0, measured 0)."""
    u = 3 * torch.randn(512, 3, generator=gen, dtype=F64)
    for g in (identity_gadget(3), soft_threshold_gadget(0.25, 3)):
        assert gadget_error(g) == 0.0 and g.sup_error(u) == 0.0


def test_gadget_defaults_as_documented():
    """Documented defaults: one coordinate (n = 1) for identity and soft threshold, s_max = 1
    for the gate."""
    assert identity_gadget().n_in == 1 == soft_threshold_gadget(0.25).n_in
    assert gate_bands(3.0, 16).s_max == 1.0
    assert gate_gadget(3.0, 16).params == gate_gadget(3.0, 16, 1.0).params


def test_square_interp_closed_form_equals_its_units_on_six_R():
    """The transition's closed form of the interpolant S equals its ReLU units on [-6R, 6R]
    (relative to 1 + z^2, 1e-13)."""
    R, knots = 1.0, 17
    z = torch.linspace(-6 * R, 6 * R, 2401, dtype=F64)
    w, beta, coef = square_units(R, knots)
    units = (coef * torch.relu(z[:, None] * w + beta)).sum(1)
    assert float(((square_interp(z, R, knots) - units).abs() / (1 + z * z)).max()) <= 1e-13


@pytest.mark.parametrize("r_x, K, s_max", [(3.0, 16, 1.05), (0.5, 8, 1.0)])
def test_gate_dense_equals_closed_form_and_unit_sum_at_band_points(r_x, K, s_max):
    """Lemma 24's dense gadget, ``GateBands.evaluate`` (the transition's closed form) and
    ``evaluate_units`` agree at band midpoints and edges with x = +-r_x, +-r_x/2 (rel 1e-12)."""
    delta = (s_max - 0.5) / K
    s = torch.cat(
        [
            0.5 + delta * (torch.arange(K, dtype=F64) + 0.5),
            0.5 + delta * torch.arange(K + 1, dtype=F64),
        ]
    )
    pts = torch.cartesian_prod(torch.tensor([-r_x, r_x, 0.5 * r_x, -0.5 * r_x], dtype=F64), s)
    g, bands = gate_gadget(r_x, K, s_max), gate_bands(r_x, K, s_max)
    dense = g(pts)
    scale = max(1.0, float(dense.abs().max()))
    for closed in (
        bands.evaluate(pts[:, :1], pts[:, 1]),
        bands.evaluate_units(pts[:, :1], pts[:, 1]),
    ):
        assert float((closed - dense).abs().max()) <= 1e-12 * scale
