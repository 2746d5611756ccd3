"""Lemmas 36-38's weights and Theorem 9's memorising RNN, built from given parameters (gap eps,
direction, depth): hand-computed values, exactness, norms, errors (the slot-memory RNN it competes
with: tests/constructions/test_slot_memory.py). Their guarantees:
tests/bounds/test_interpolation.py."""

import math

import pytest
import torch

from qstr.constructions.codes import build_codebook
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.interpolation import (
    UNIT_ROUNDOFF,
    Lemma36Net,
    MemoriserLayout,
    certified_gap,
    evaluate_net,
    interpolate_points,
    interpolate_sorted,
    lemma37_events,
    memorised_points,
    memorising_rnn,
    parameter_norm2,
    rounding_allowance,
    separating_direction,
)

from tests.fixtures import general_prompts, t64

f64 = torch.float64


def eps_of(n):
    """A gap threshold (Lemma 37's eps_n, written out: the builders take it as a parameter)."""
    return math.sqrt(math.pi) / (3 * n * n)


# ------------------------------------------------------------------ Lemma 38


def test_lemma38_hand_example():
    # z = (0, 1, 3), y = (2, -1, 3), eps = 1: knots c = (-1, 0, 1)
    # slopes s0 = 2, s1 = -3, s2 = 2 -> a = (2, -5, 5)
    net = interpolate_sorted(t64(0, 1, 3), t64(2, -1, 3), 1.0)
    assert torch.allclose(net.raw.a, t64(2, -5, 5))
    assert torch.allclose(net.raw.b, t64(1, 0, -1))
    assert torch.allclose(net.raw.W[:, 0], t64(1, 1, 1))
    assert net.a_norm2 == pytest.approx(54.0)
    assert net.wb_norm2 == pytest.approx(5.0)
    assert net.y_norm2 == pytest.approx(14.0)
    assert net.tau == pytest.approx((54 / 5) ** 0.25)
    assert net.norm2_balanced == pytest.approx(2 * math.sqrt(54 * 5))
    assert net.max_error <= 1e-12
    # rebalancing does not change the function
    z = torch.linspace(-3, 5, 101, dtype=f64)[:, None]
    assert torch.allclose(evaluate_net(net.raw, z), evaluate_net(net.balanced, z), atol=1e-12)


@pytest.mark.parametrize("n", [2, 5, 64, 300])
def test_lemma38_exact(n):
    g = torch.Generator().manual_seed(n)
    eps = 0.01
    z = (
        torch.arange(n, dtype=f64) * 2 * eps + torch.rand(n, generator=g, dtype=f64) * eps / 2
    )  # gaps >= 1.5 eps
    y = torch.randn(n, generator=g, dtype=f64)
    net = interpolate_sorted(z, y, eps)
    assert net.max_error <= 1e-9
    assert net.norm2_balanced <= net.norm2_raw + 1e-9


@pytest.mark.parametrize("n, eps", [(8, 0.05), (128, 0.05), (200, 0.1)])
def test_lemma38_alternating_labels_norm(n, eps):
    z = torch.arange(n, dtype=f64) * eps
    y = torch.tensor([(-1.0) ** k for k in range(n)], dtype=f64)
    net = interpolate_sorted(z, y, eps * (1 - 1e-9))
    # ||a||^2 = (16 n - 22) / eps^2 exactly (docs/derivations/interpolation.md, tightness)
    assert net.a_norm2 == pytest.approx((16 * n - 22) / eps**2, rel=1e-6)


def test_lemma38_errors():
    with pytest.raises(ValueError, match="strictly increasing"):
        interpolate_sorted(t64(0, 0, 1), t64(1, 2, 3), 0.1)
    with pytest.raises(ValueError, match="gap"):
        interpolate_sorted(t64(0, 0.05, 1), t64(1, 2, 3), 0.1)
    with pytest.raises(ValueError, match="eps"):
        interpolate_sorted(t64(0, 1), t64(1, 2), 0.0)
    with pytest.raises(ValueError, match="float64"):
        interpolate_sorted(torch.tensor([0.0, 1.0]), t64(1, 2), 0.1)
    with pytest.raises(ValueError, match="y must have shape"):
        interpolate_sorted(t64(0, 1), t64(1, 2, 3), 0.1)
    with pytest.raises(ValueError, match="n >= 2"):
        interpolate_sorted(t64(0), t64(1), 0.1)
    with pytest.raises(ValueError, match="NaN"):
        interpolate_sorted(t64(0, float("nan")), t64(1, 2), 0.1)


# ------------------------------------------------------------------ Lemma 37


def test_certified_gap_below_float_gap():
    x = t64(0.0, 1.0, 3.0)[:, None]
    v = t64(1.0)
    gap, z = certified_gap(x, v)
    assert torch.equal(z, t64(0, 1, 3))
    assert 1.0 - 1e-12 < gap < 1.0


def test_separating_direction_meets_threshold():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(40, 6, generator=g, dtype=f64)
    sd = separating_direction(x, generator=g, threshold=eps_of(40), norm_factor=2.0)
    assert sd.gap >= eps_of(40) == sd.threshold
    assert sd.z_norm2 <= 2 * 40
    assert abs(float(sd.v.norm()) - 1) < 1e-12
    assert sd.tries >= 1
    s = torch.sort(x @ sd.v).values
    assert float((s[1:] - s[:-1]).min()) >= sd.gap


def test_separating_direction_errors():
    g = torch.Generator().manual_seed(0)
    kw = dict(generator=g, threshold=0.01, norm_factor=2.0)
    x = torch.zeros(3, 2, dtype=f64)  # coincident points: no direction separates them
    with pytest.raises(ValueError, match="max_tries"):
        separating_direction(x, max_tries=5, **kw)
    with pytest.raises(ValueError, match="float64"):
        separating_direction(torch.zeros(3, 2), **kw)
    for shape in ((1, 2), (3, 0)):  # one point; points of dimension 0
        with pytest.raises(ValueError, match="n >= 2 points of dimension D >= 1"):
            separating_direction(torch.zeros(*shape, dtype=f64), **kw)
    with pytest.raises(ValueError, match="generator"):
        separating_direction(
            torch.randn(3, 2, dtype=f64), generator=None, threshold=0.01, norm_factor=2.0
        )
    with pytest.raises(ValueError, match="threshold"):
        separating_direction(
            torch.randn(3, 2, dtype=f64), generator=g, threshold=-1.0, norm_factor=2.0
        )
    with pytest.raises(ValueError, match="norm_factor"):
        separating_direction(
            torch.randn(3, 2, dtype=f64), generator=g, threshold=0.01, norm_factor=0.0
        )


def test_lemma37_events_record_the_given_events():
    """The counts are for the threshold and norm factor given, which the record keeps."""
    ev = lemma37_events(
        24,
        10,
        trials=64,
        generator=torch.Generator().manual_seed(0),
        threshold=0.01,
        norm_factor=1.5,
    )
    assert ev.threshold == 0.01 and ev.norm_factor == 1.5 and ev.trials == 64
    assert ev.joint_ok <= min(ev.gap_ok, ev.norm_ok)


# ------------------------------------------------------------------ Lemma 36


def _direction(x, g):
    return separating_direction(x, generator=g, threshold=eps_of(x.shape[0]), norm_factor=2.0)


def test_lemma36_net_exact():
    g = torch.Generator().manual_seed(5)
    for n in (2, 10, 50):
        x = torch.randn(n, 4, generator=g, dtype=f64)
        y = torch.randn(n, generator=g, dtype=f64)
        sd = _direction(x, g)
        net = interpolate_points(x, y, sd)
        assert net.direction is sd and net.lemma38.eps == sd.threshold
        assert net.max_error <= 1e-9
        assert float((evaluate_net(net.net, x) - y).abs().max()) <= 1e-9
        assert net.net.W.shape == (n, 4)
        # W has rank one: every row is tau v
        assert torch.allclose(net.net.W, net.net.W[:1].expand(n, 4))
        W, b, a = net.net.W, net.net.b, net.net.a
        assert net.norm2 == pytest.approx(float(a @ a + (W**2).sum() + b @ b), rel=1e-12)


def test_interpolate_points_errors():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, generator=g, dtype=f64)
    sd = _direction(x, g)
    with pytest.raises(ValueError, match="direction must be"):
        interpolate_points(x, torch.randn(5, dtype=f64), None)
    with pytest.raises(ValueError, match="direction.z"):
        interpolate_points(x[:4], torch.randn(4, dtype=f64), sd)
    with pytest.raises(ValueError, match="y must"):
        interpolate_points(x, torch.randn(4, dtype=f64), sd)


# ------------------------------------------------------------------ Theorem 9's memoriser


def _lemma36(x, y, position, g):
    pts, labels = memorised_points(x, y, position)
    return interpolate_points(pts, labels, _direction(pts, g))


@pytest.mark.parametrize("depth", [2, 3])
def test_memorising_rnn_point_wise(depth):
    g = torch.Generator().manual_seed(11)
    n, N, d = 12, 16, 3
    x, t, y, _ = general_prompts(n, N, d, g)
    omega = build_codebook(N, kind="rs-hadamard", dtype=f64).omega
    Z = rnn_encoding(x, t, omega)
    l36 = _lemma36(x, y, 7, g)
    model = memorising_rnn(l36, D_in=Z.shape[-1], layout=MemoriserLayout(depth=depth))
    with torch.no_grad():
        out = model(Z)
        h_f, h_b = model.states(Z)
    assert float((out[:, 7] - y[:, 7]).abs().max()) <= 1e-9
    assert float(h_f.abs().max()) == 0.0 and float(h_b.abs().max()) == 0.0  # U = 0: states unused
    linears = [m for m in model.f_y if isinstance(m, torch.nn.Linear)]
    assert len(linears) == depth and all(m.out_features == n for m in linears[:-1])
    # the depth rebalancing: every output layer has the same squared norm (AM-GM's equality)
    with torch.no_grad():
        sq = [
            float(m.weight.pow(2).sum() + (0 if m.bias is None else m.bias.pow(2).sum()))
            for m in linears
        ]
    assert max(sq) - min(sq) <= 1e-9 * max(sq)
    if depth == 2:  # the Lemma 36 net itself, on the x-block: ||vec||^2 = its norm^2
        assert parameter_norm2(model) == pytest.approx(l36.norm2, rel=1e-12)


def test_memorised_points():
    g = torch.Generator().manual_seed(1)
    x, _, y, _ = general_prompts(4, 5, 2, g)
    pts, labels = memorised_points(x, y, 3)
    assert torch.equal(pts, x[:, 3]) and torch.equal(labels, y[:, 3])
    pts, labels = memorised_points(x, y, "all")
    assert pts.shape == (20, 2) and torch.equal(labels, y.reshape(20))


def test_memorising_rnn_errors():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 5, 2, dtype=f64, generator=g)  # not the global stream: order-independent
    y = torch.randn(4, 5, dtype=f64, generator=g)
    with pytest.raises(ValueError, match="position"):
        memorised_points(x, y, 5)
    with pytest.raises(ValueError, match="position"):
        memorised_points(x, y, "last")
    with pytest.raises(ValueError, match="y must"):
        memorised_points(x, y[:, :3], 0)
    with pytest.raises(ValueError, match="float64"):
        memorised_points(x.float(), y, 0)
    with pytest.raises(ValueError, match="at least 2"):
        memorised_points(x[:1], y[:1], 0)
    l36 = _lemma36(x, y, 0, g)
    assert isinstance(l36, Lemma36Net)
    with pytest.raises(ValueError, match="D_in"):
        memorising_rnn(l36, D_in=1)
    with pytest.raises(ValueError, match="depth"):
        memorising_rnn(l36, D_in=2, layout=MemoriserLayout(depth=1))
    with pytest.raises(ValueError, match="lemma36"):
        memorising_rnn(None, D_in=2)


# ------------------------------------------------------------------ Lemma 37: records
# (moved from the claim lemma-37 of verify/claims/lemma_37.py: facts about the software)


def test_unit_roundoff_is_half_the_float64_epsilon():
    """The certified gaps' allowance rests on u = 2^-53 = finfo(float64).eps / 2 (Higham 3.1)."""
    assert UNIT_ROUNDOFF == torch.finfo(f64).eps / 2 == 2.0**-53


def test_separating_direction_record_fields():
    """The record's gap is certified_gap(x, v) bit for bit, z = x v, z_norm2 = ||z||^2, the norm
    factor as asked; with norm_factor 1 what is returned has ||z||^2 <= n and says so."""
    g = torch.Generator().manual_seed(370)
    x = torch.randn(24, 10, generator=g, dtype=f64)
    thr = eps_of(24)
    sd = separating_direction(x, generator=g, threshold=thr, norm_factor=2.0, max_tries=50)
    assert sd.gap == certified_gap(x, sd.v)[0] >= thr
    assert sd.norm_factor == 2.0 and sd.z_norm2 == float(sd.z @ sd.z) <= 48
    assert float((sd.z - x @ sd.v).abs().max()) <= 1e-12 * float(x.abs().max())
    for _ in range(4):
        tight = separating_direction(x, generator=g, threshold=thr, norm_factor=1.0, max_tries=200)
        assert tight.z_norm2 <= 24 and tight.norm_factor == 1.0


def test_separating_direction_tries_are_draws_consumed():
    """max_tries counts draws: the same draws with max_tries = tries find the same v, and the
    generator is then where the sample and ``tries`` unit-vector draws (D normals each) leave it."""
    seed = 370
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(24, 10, generator=g, dtype=f64)
    kw = dict(threshold=20 * eps_of(24), norm_factor=2.0)  # a few tries
    sd = separating_direction(x, generator=g, max_tries=1000, **kw)
    g, fresh = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    torch.randn(x.shape, generator=g, dtype=f64)
    again = separating_direction(x, generator=g, max_tries=sd.tries, **kw)
    assert again.tries == sd.tries and torch.equal(again.v, sd.v)
    torch.randn(x.shape, generator=fresh, dtype=f64)
    for _ in range(sd.tries):
        torch.randn(10, generator=fresh, dtype=f64)
    assert torch.equal(
        torch.randn(4, generator=g, dtype=f64), torch.randn(4, generator=fresh, dtype=f64)
    )
    if sd.tries > 1:  # one draw fewer than it took: refused, after exactly tries - 1 draws
        g, fresh = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        torch.randn(x.shape, generator=g, dtype=f64)
        with pytest.raises(ValueError, match="max_tries"):
            separating_direction(x, generator=g, max_tries=sd.tries - 1, **kw)
        torch.randn(x.shape, generator=fresh, dtype=f64)
        for _ in range(sd.tries - 1):
            torch.randn(10, generator=fresh, dtype=f64)
        assert torch.equal(
            torch.randn(4, generator=g, dtype=f64), torch.randn(4, generator=fresh, dtype=f64)
        )


# ------------------------------------------------------------- Lemma 38: records and edge cases
# (moved from the claim lemma-38 of verify/claims/lemma_38.py)


def test_lemma38_zero_labels_give_the_zero_function():
    """All-zero labels: the interpolant is the zero function (error exactly 0, no norm gain)."""
    z = torch.arange(4, dtype=f64) * 0.05
    net = interpolate_sorted(z, torch.zeros(4, dtype=f64), 0.05 * (1 - 1e-9))
    assert net.max_error == 0.0 and net.norm2_balanced <= net.norm2_raw


def test_lemma38_record_error_is_the_measured_error():
    """max_error is max |evaluate_net(balanced, z) - y|; rounding is rounding_allowance at z."""
    g = torch.Generator().manual_seed(38)
    gaps = 0.05 + torch.rand(31, generator=g, dtype=f64)
    z = torch.cat([torch.zeros(1, dtype=f64), gaps.cumsum(0)])
    y = torch.randn(32, generator=g, dtype=f64)
    net = interpolate_sorted(z, y, 0.05)
    assert net.max_error == float((evaluate_net(net.balanced, z[:, None]) - y).abs().max())
    assert net.rounding == rounding_allowance(net.balanced, z[:, None])
