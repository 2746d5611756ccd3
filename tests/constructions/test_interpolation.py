"""Lemmas 36-38 (interpolation) and the two RNNs of Theorem 9: hand-computed values, exactness,
norms, errors."""

import math

import pytest
import torch

from qstr.constructions.codes import build_codebook
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.interpolation import (
    C36,
    C38_A,
    certified_gap,
    evaluate_net,
    gap_threshold,
    interpolate_points,
    interpolate_sorted,
    lemma36_constant,
    lemma37_events,
    memorising_rnn,
    parameter_norm2,
    separating_direction,
    slot_memory_rnn,
)

f64 = torch.float64


def t64(*v):
    return torch.tensor(v, dtype=f64)


# ------------------------------------------------------------------ constants


def test_constants_hand_computed():
    assert gap_threshold(2) == pytest.approx(math.sqrt(math.pi) / 12)
    assert gap_threshold(10) == pytest.approx(math.sqrt(math.pi) / 300)
    assert C38_A == 16.0
    # C36 = 2 sqrt((144/pi)(5 + pi/72))
    assert C36 == pytest.approx(2 * math.sqrt(144 / math.pi * (5 + math.pi / 72)))
    assert C36 == pytest.approx(30.4094, abs=1e-4)
    assert lemma36_constant(6.0) == pytest.approx(C36 * math.sqrt(6))
    # union bound at eps_n: C(n,2) eps_n / sqrt(pi) = (n - 1) / (6 n)
    ev = lemma37_events(7, 3, trials=10, generator=torch.Generator().manual_seed(0))
    assert ev.gap_failure_bound == pytest.approx(6 / 42)


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
    assert net.a_bound == pytest.approx(16 * 14)
    assert net.tau == pytest.approx((54 / 5) ** 0.25)
    assert net.norm2_balanced == pytest.approx(2 * math.sqrt(54 * 5))
    assert net.max_error <= 1e-12
    # rebalancing does not change the function
    z = torch.linspace(-3, 5, 101, dtype=f64)[:, None]
    assert torch.allclose(evaluate_net(net.raw, z), evaluate_net(net.balanced, z), atol=1e-12)


@pytest.mark.parametrize("n", [2, 5, 64, 300])
def test_lemma38_exact_and_bound(n):
    g = torch.Generator().manual_seed(n)
    eps = 0.01
    z = (
        torch.arange(n, dtype=f64) * 2 * eps + torch.rand(n, generator=g, dtype=f64) * eps / 2
    )  # gaps >= 1.5 eps
    y = torch.randn(n, generator=g, dtype=f64)
    net = interpolate_sorted(z, y, eps)
    assert net.max_error <= 1e-9
    assert net.a_norm2 <= net.a_bound
    assert net.norm2_balanced <= net.norm2_raw + 1e-9


@pytest.mark.parametrize("n, eps", [(8, 0.05), (128, 0.05), (200, 0.1)])
def test_lemma38_bound_is_tight_for_alternating_labels(n, eps):
    z = torch.arange(n, dtype=f64) * eps
    y = torch.tensor([(-1.0) ** k for k in range(n)], dtype=f64)
    net = interpolate_sorted(z, y, eps * (1 - 1e-9))
    # ||a||^2 = (16 n - 22) / eps^2 exactly: (16 n - 22) / (16 n) of the bound C38_A n / eps^2
    assert net.a_norm2 == pytest.approx((16 * n - 22) / eps ** 2, rel=1e-6)
    assert net.a_norm2 / net.a_bound == pytest.approx((16 * n - 22) / (16 * n), rel=1e-6)


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
    sd = separating_direction(x, generator=g)
    assert sd.gap >= gap_threshold(40) == sd.threshold
    assert sd.z_norm2 <= 2 * 40
    assert abs(float(sd.v.norm()) - 1) < 1e-12
    assert sd.tries >= 1
    s = torch.sort(x @ sd.v).values
    assert float((s[1:] - s[:-1]).min()) >= sd.gap


def test_separating_direction_errors():
    g = torch.Generator().manual_seed(0)
    x = torch.zeros(3, 2, dtype=f64)  # coincident points: no direction separates them
    with pytest.raises(ValueError, match="max_tries"):
        separating_direction(x, generator=g, max_tries=5)
    with pytest.raises(ValueError, match="float64"):
        separating_direction(torch.zeros(3, 2), generator=g)
    for shape in ((1, 2), (3, 0)):  # one point; points of dimension 0
        with pytest.raises(ValueError, match="n >= 2 points of dimension D >= 1"):
            separating_direction(torch.zeros(*shape, dtype=f64), generator=g)
    with pytest.raises(ValueError, match="generator"):
        separating_direction(torch.randn(3, 2, dtype=f64), generator=None)
    with pytest.raises(ValueError, match="threshold"):
        separating_direction(torch.randn(3, 2, dtype=f64), generator=g, threshold=-1.0)
    with pytest.raises(ValueError, match="n must be"):
        gap_threshold(1)


def test_lemma37_probability():
    ev = lemma37_events(20, 5, trials=2000, generator=torch.Generator().manual_seed(1))
    assert ev.joint_ok / ev.trials > 1 / 3 + 0.3
    assert 1 - ev.gap_ok / ev.trials < ev.gap_failure_bound + 0.05
    ev10 = lemma37_events(20, 5, trials=2000, generator=torch.Generator().manual_seed(1),
                          threshold=10 * gap_threshold(20))
    assert ev10.joint_ok / ev10.trials < 1 / 3


# ------------------------------------------------------------------ Lemma 36


def test_lemma36_exact_and_bounds():
    g = torch.Generator().manual_seed(5)
    for n in (2, 10, 50):
        x = torch.randn(n, 4, generator=g, dtype=f64)
        y = torch.randn(n, generator=g, dtype=f64)
        net = interpolate_points(x, y, generator=g)
        assert net.max_error <= 1e-9
        assert float((evaluate_net(net.net, x) - y).abs().max()) <= 1e-9
        assert net.norm2 <= net.bound <= net.bound_n * (1 + 1e-12)
        assert net.net.W.shape == (n, 4)
        # W has rank one: every row is tau v
        assert torch.allclose(net.net.W, net.net.W[:1].expand(n, 4))


def _general_prompts(n, N, d, g):
    x = torch.randn(n, N, d, generator=g, dtype=f64)
    t = torch.randint(N, (n, N, 1), generator=g)
    u = torch.randn(d, generator=g, dtype=f64)
    u = u / u.norm()
    y = (x[torch.arange(n)[:, None], t[..., 0]] * u).sum(-1)
    return x, t, y, u


@pytest.mark.parametrize("depth", [2, 3])
def test_memorising_rnn_point_wise(depth):
    g = torch.Generator().manual_seed(11)
    n, N, d = 12, 16, 3
    x, t, y, _ = _general_prompts(n, N, d, g)
    omega = build_codebook(N, kind="rs-hadamard", dtype=f64).omega
    Z = rnn_encoding(x, t, omega)
    model, gu = memorising_rnn(x, y, D_in=Z.shape[-1], position=7, generator=g, depth=depth)
    with torch.no_grad():
        out = model(Z)
        h_f, h_b = model.states(Z)
    assert float((out[:, 7] - y[:, 7]).abs().max()) <= 1e-9
    assert float(h_f.abs().max()) == 0.0 and float(h_b.abs().max()) == 0.0  # U = 0: states unused
    assert gu.norm2 == pytest.approx(parameter_norm2(model))
    assert gu.norm2 <= gu.bound * (1 + 1e-12)
    assert gu.n_points == n and gu.width == n and gu.depth == depth


def test_memorising_rnn_norm_is_N_free():
    g = torch.Generator().manual_seed(2)
    n, d = 6, 2
    x, t, y, u = _general_prompts(n, 64, d, g)
    t[:, 3, 0] = torch.randint(8, (n,), generator=g)
    norms = []
    for N in (8, 64):
        tN = t[:, :N] % N
        tN[:, 3] = t[:, 3]
        yN = (x[:, :N][torch.arange(n)[:, None], tN[..., 0]] * u).sum(-1)
        _, gu = memorising_rnn(
            x[:, :N].contiguous(),
            yN,
            D_in=d,
            position=3,
            generator=torch.Generator().manual_seed(9),
        )
        norms.append(gu.norm2)
    assert norms[0] == norms[1]


def test_memorising_rnn_all_positions_exact_but_not_N_free():
    g = torch.Generator().manual_seed(4)
    n, d = 3, 2
    norms = []
    for N in (4, 32):
        x, t, y, _ = _general_prompts(n, N, d, g)
        omega = build_codebook(N, kind="rs-hadamard", dtype=f64).omega
        Z = rnn_encoding(x, t, omega)
        model, gu = memorising_rnn(x, y, D_in=Z.shape[-1], position="all", generator=g)
        with torch.no_grad():
            assert float((model(Z) - y).abs().max()) <= 1e-8
        assert gu.n_points == n * N
        norms.append(gu.norm2)
    assert norms[1] > 10 * norms[0]


def test_memorising_rnn_errors():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 5, 2, dtype=f64)
    y = torch.randn(4, 5, dtype=f64)
    with pytest.raises(ValueError, match="position"):
        memorising_rnn(x, y, D_in=2, position=5, generator=g)
    with pytest.raises(ValueError, match="position"):
        memorising_rnn(x, y, D_in=2, position="last", generator=g)
    with pytest.raises(ValueError, match="D_in"):
        memorising_rnn(x, y, D_in=1, position=0, generator=g)
    with pytest.raises(ValueError, match="depth"):
        memorising_rnn(x, y, D_in=2, position=0, generator=g, depth=1)
    with pytest.raises(ValueError, match="y must"):
        memorising_rnn(x, y[:, :3], D_in=2, position=0, generator=g)
    with pytest.raises(ValueError, match="float64"):
        memorising_rnn(x.float(), y, D_in=2, position=0, generator=g)
    with pytest.raises(ValueError, match="at least 2"):
        memorising_rnn(x[:1], y[:1], D_in=2, position=0, generator=g)


# ------------------------------------------------------------------ the generalising RNN


def test_slot_memory_rnn_exact_everywhere():
    g = torch.Generator().manual_seed(7)
    N, d, B = 12, 3, 20
    omega = build_codebook(N, kind="rs-hadamard", dtype=f64).omega
    u = torch.randn(d, generator=g, dtype=f64)
    u = u / u.norm()
    model, gu = slot_memory_rnn(omega, u, r_x=8.0)
    x = torch.randn(B, N, d, generator=g, dtype=f64)
    t = torch.randint(N, (B, N, 1), generator=g)
    y = (x[torch.arange(B)[:, None], t[..., 0]] * u).sum(-1)
    with torch.no_grad():
        assert float((model(rnn_encoding(x, t, omega)) - y).abs().max()) <= 1e-9
        h_f, _ = model.states(rnn_encoding(x, t, omega))
    # h_fwd at position i holds x_k in block k for k < i, zeros elsewhere
    i = 5
    expect = torch.zeros(B, N * d, dtype=f64)
    expect[:, : i * d] = x[:, :i].reshape(B, -1)
    assert torch.allclose(h_f[:, i], expect, atol=1e-12)
    assert gu.d_h == N * d and gu.r_h == pytest.approx(math.sqrt(N - 1) * 8.0)
    assert gu.L == pytest.approx(math.sqrt(2) * gu.r_h)
    assert gu.norm2 == pytest.approx(parameter_norm2(model))


def test_slot_memory_rnn_errors():
    omega = build_codebook(6, kind="rs-hadamard", dtype=f64).omega
    u = t64(1.0, 0.0)
    with pytest.raises(ValueError, match="mu"):
        slot_memory_rnn(
            t64(1, 0, 1, 0, 0, 1).reshape(3, 2), u, r_x=1.0
        )  # two equal codes: coherence 1
    with pytest.raises(ValueError, match="unit norm"):
        slot_memory_rnn(omega, t64(1.0, 1.0), r_x=1.0)
    with pytest.raises(ValueError, match="r_x"):
        slot_memory_rnn(omega, u, r_x=0.0)
    with pytest.raises(ValueError, match="omega"):
        slot_memory_rnn(omega.float(), u, r_x=1.0)
    with pytest.raises(ValueError, match="below the codebook"):
        slot_memory_rnn(omega, u, r_x=1.0, mu=0.0)


@pytest.mark.gpu
def test_cuda_paths():
    g = torch.Generator(device="cuda").manual_seed(0)
    ev = lemma37_events(16, 4, trials=500, generator=g)
    assert ev.joint_ok / ev.trials > 1 / 3
    x = torch.randn(6, 10, 2, generator=g, dtype=f64, device="cuda")
    y = torch.randn(6, 10, generator=g, dtype=f64, device="cuda")
    model, gu = memorising_rnn(x, y, D_in=2, position=4, generator=g)
    with torch.no_grad():
        assert float((model(x)[:, 4] - y[:, 4]).abs().max()) <= 1e-9
    omega = build_codebook(8, kind="rs-hadamard", dtype=f64, device="cuda").omega
    u = torch.tensor([1.0, 0.0], dtype=f64, device="cuda")
    slot, _ = slot_memory_rnn(omega, u, r_x=8.0)
    xx = torch.randn(3, 8, 2, generator=g, dtype=f64, device="cuda")
    t = torch.randint(8, (3, 8, 1), generator=g, device="cuda")
    with torch.no_grad():
        assert (
            float(
                (
                    slot(rnn_encoding(xx, t, omega))
                    - xx[torch.arange(3, device="cuda")[:, None], t[..., 0], 0]
                )
                .abs()
                .max()
            )
            <= 1e-9
        )


# ------------------------------------------------------------------ Lemma 37: records and defaults
# (moved from the claim lemma-37 of verify/claims/rnn_lower.py: facts about the software)


def test_unit_roundoff_is_half_the_float64_epsilon():
    """The certified gaps' allowance rests on u = 2^-53 = finfo(float64).eps / 2 (Higham 3.1)."""
    from qstr.constructions.interpolation import UNIT_ROUNDOFF

    assert UNIT_ROUNDOFF == torch.finfo(f64).eps / 2 == 2.0 ** -53


def test_lemma37_union_bound_record_at_any_threshold():
    """gap_failure_bound = C(n, 2) threshold / sqrt(pi): (n - 1)/(6n) at eps_n, 10x at 10 eps_n."""
    for scale in (1.0, 10.0):
        ev = lemma37_events(24, 10, trials=4, generator=torch.Generator().manual_seed(0),
                            threshold=scale * gap_threshold(24))
        assert ev.gap_failure_bound == pytest.approx(scale * 23 / 144, rel=1e-12)


def test_lemma37_events_documented_defaults():
    """lemma37_events defaults to Lemma 37's norm factor 2 and threshold eps_n."""
    ev = lemma37_events(24, 10, trials=1, generator=torch.Generator().manual_seed(0))
    assert ev.norm_factor == 2.0 and ev.threshold == gap_threshold(24)


def test_separating_direction_record_fields():
    """The record's gap is certified_gap(x, v) bit for bit, z = x v, z_norm2 = ||z||^2, norm
    factor 2 by default; with norm_factor 1 what is returned has ||z||^2 <= n and says so."""
    g = torch.Generator().manual_seed(370)
    x = torch.randn(24, 10, generator=g, dtype=f64)
    thr = gap_threshold(24)
    sd = separating_direction(x, generator=g, threshold=thr, max_tries=50)
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
    thr = 20 * gap_threshold(24)  # a few tries
    sd = separating_direction(x, generator=g, threshold=thr, max_tries=1000)
    g, fresh = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    torch.randn(x.shape, generator=g, dtype=f64)
    again = separating_direction(x, generator=g, threshold=thr, max_tries=sd.tries)
    assert again.tries == sd.tries and torch.equal(again.v, sd.v)
    torch.randn(x.shape, generator=fresh, dtype=f64)
    for _ in range(sd.tries):
        torch.randn(10, generator=fresh, dtype=f64)
    assert torch.equal(torch.randn(4, generator=g, dtype=f64),
                       torch.randn(4, generator=fresh, dtype=f64))


# ------------------------------------------------------------- Lemma 38: records and edge cases
# (moved from the claim lemma-38 of verify/claims/rnn_lower.py)


def test_lemma38_zero_labels_give_the_zero_function():
    """All-zero labels: the interpolant is the zero function (error exactly 0, no norm gain)."""
    z = torch.arange(4, dtype=f64) * 0.05
    net = interpolate_sorted(z, torch.zeros(4, dtype=f64), 0.05 * (1 - 1e-9))
    assert net.max_error == 0.0 and net.norm2_balanced <= net.norm2_raw


def test_lemma38_record_error_is_the_measured_error():
    """max_error is max |evaluate_net(balanced, z) - y|; rounding is rounding_allowance at z."""
    from qstr.constructions.interpolation import rounding_allowance

    g = torch.Generator().manual_seed(38)
    gaps = 0.05 + torch.rand(31, generator=g, dtype=f64)
    z = torch.cat([torch.zeros(1, dtype=f64), gaps.cumsum(0)])
    y = torch.randn(32, generator=g, dtype=f64)
    net = interpolate_sorted(z, y, 0.05)
    assert net.max_error == float((evaluate_net(net.balanced, z[:, None]) - y).abs().max())
    assert net.rounding == rounding_allowance(net.balanced, z[:, None])


# ------------------------------------------------------------------ Lemma 36: records and defaults
# (moved from the claim lemma-36 of verify/claims/rnn_lower.py)


def test_memorising_rnn_records_and_default_depth():
    """Default depth 2; norm2 = parameter_norm2 of the module; the inner Lemma 36 net's norm2 is
    ||a||^2 + ||W||^2 + ||b||^2 of its weights, and its fit is within its rounding allowance."""
    g = torch.Generator().manual_seed(36)
    x, t, y, _ = _general_prompts(8, 8, 3, g)
    omega = build_codebook(8, kind="rs-hadamard", dtype=f64).omega
    model, gu = memorising_rnn(x, y, D_in=3 + 2 * omega.shape[1], position=2, generator=g)
    assert gu.depth == 2
    assert gu.norm2 == pytest.approx(parameter_norm2(model), rel=1e-12)
    net = gu.lemma36.net
    norm2 = float(net.a @ net.a + (net.W ** 2).sum() + net.b @ net.b)
    assert gu.lemma36.norm2 == pytest.approx(norm2, rel=1e-12)
    assert gu.lemma36.max_error <= max(1e-9, gu.lemma36.rounding)
    assert lemma36_constant() == pytest.approx(C36 * math.sqrt(6.0), rel=1e-15)


def test_slot_memory_record_as_derived():
    """The guarantee's record (rnn-lower-bounds.md): d_h = N d, r_h = sqrt(N - 1) r_x = the module's
    projection radius, U_op = 1, lambda = sqrt 2, L = lambda r_h, norm2 = parameter_norm2."""
    N, d, r_x = 16, 3, 2.5
    omega = build_codebook(N, kind="rs-hadamard", dtype=f64).omega
    u = torch.tensor([0.6, 0.0, 0.8], dtype=f64)
    model, gu = slot_memory_rnn(omega, u, r_x=r_x)
    assert gu.d_h == N * d and gu.N == N and gu.d == d and gu.r_x == r_x
    assert gu.r_h == math.sqrt(N - 1) * r_x == model.r_h
    assert gu.U_op == 1.0 and gu.lipschitz == math.sqrt(2.0) and gu.L == gu.lipschitz * gu.r_h
    assert gu.norm2 == pytest.approx(parameter_norm2(model), rel=1e-12)
