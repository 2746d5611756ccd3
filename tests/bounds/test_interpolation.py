"""bounds/interpolation.py: Lemmas 36-38's constants and guarantees, Theorem 9's memoriser and
the slot-memory RNN's Prop 8 quantities (docs/derivations/interpolation.md)."""

import math

import pytest
import torch

from qstr.bounds.interpolation import (
    C36,
    C36_PRIME,
    C38_A,
    LEMMA37_NORM_FACTOR,
    gap_threshold,
    lemma36_constant,
    lemma36_net,
    lemma37_union_bound,
    lemma38_bound,
    memoriser,
    slot_memory,
)
from qstr.constructions.codes import build_codebook
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.interpolation import (
    MemoriserLayout,
    evaluate_net,
    interpolate_sorted,
    lemma37_events,
    parameter_norm2,
)

from tests.fixtures import general_prompts, t64

f64 = torch.float64


def _events(n, D, trials, seed, threshold=None):
    thr = gap_threshold(n) if threshold is None else threshold
    return lemma37_events(
        n,
        D,
        trials=trials,
        generator=torch.Generator().manual_seed(seed),
        threshold=thr,
        norm_factor=LEMMA37_NORM_FACTOR,
    )


# ------------------------------------------------------------------ constants


def test_constants_hand_computed():
    assert gap_threshold(2) == pytest.approx(math.sqrt(math.pi) / 12)
    assert gap_threshold(10) == pytest.approx(math.sqrt(math.pi) / 300)
    assert C38_A == 16.0 and LEMMA37_NORM_FACTOR == 2.0
    # C36 = 2 sqrt((144/pi)(5 + pi/72)), C36_PRIME = (C36 / 2)^2
    assert C36_PRIME == pytest.approx(144 / math.pi * (5 + math.pi / 72), rel=1e-15)
    assert C36 == pytest.approx(2 * math.sqrt(144 / math.pi * (5 + math.pi / 72)))
    assert C36 == pytest.approx(30.4094, abs=1e-4)
    assert lemma36_constant(6.0) == pytest.approx(C36 * math.sqrt(6))
    assert lemma36_constant() == pytest.approx(C36 * math.sqrt(6.0), rel=1e-15)
    # union bound at eps_n: C(n,2) eps_n / sqrt(pi) = (n - 1) / (6 n)
    assert lemma37_union_bound(7, gap_threshold(7)) == pytest.approx(6 / 42)
    with pytest.raises(ValueError, match="n must be"):
        gap_threshold(1)
    with pytest.raises(ValueError, match="K_y"):
        lemma36_constant(0.0)


def test_lemma37_union_bound_at_any_threshold():
    """C(n, 2) threshold / sqrt(pi): (n - 1)/(6n) at eps_n, 10x at 10 eps_n."""
    for scale in (1.0, 10.0):
        assert lemma37_union_bound(24, scale * gap_threshold(24)) == pytest.approx(
            scale * 23 / 144, rel=1e-12
        )


# ------------------------------------------------------------------ Lemma 37


def test_lemma37_probability():
    ev = _events(20, 5, 2000, 1)
    assert ev.threshold == gap_threshold(20) and ev.norm_factor == 2.0
    assert ev.joint_ok / ev.trials > 1 / 3 + 0.3
    assert 1 - ev.gap_ok / ev.trials < lemma37_union_bound(20, ev.threshold) + 0.05
    ev10 = _events(20, 5, 2000, 1, threshold=10 * gap_threshold(20))
    assert ev10.joint_ok / ev10.trials < 1 / 3


# ------------------------------------------------------------------ Lemma 38


def test_lemma38_bound_hand_example():
    # z = (0, 1, 3), y = (2, -1, 3), eps = 1: ||a'||^2 = 54 <= 16 * 14
    y = t64(2, -1, 3)
    net = interpolate_sorted(t64(0, 1, 3), y, 1.0)
    assert lemma38_bound(y, 1.0) == pytest.approx(16 * 14)
    assert net.a_norm2 <= lemma38_bound(y, 1.0)


@pytest.mark.parametrize("n", [2, 5, 64, 300])
def test_lemma38_within_bound(n):
    g = torch.Generator().manual_seed(n)
    eps = 0.01
    z = torch.arange(n, dtype=f64) * 2 * eps + torch.rand(n, generator=g, dtype=f64) * eps / 2
    y = torch.randn(n, generator=g, dtype=f64)
    assert interpolate_sorted(z, y, eps).a_norm2 <= lemma38_bound(y, eps)


@pytest.mark.parametrize("n, eps", [(8, 0.05), (128, 0.05), (200, 0.1)])
def test_lemma38_bound_is_tight_for_alternating_labels(n, eps):
    z = torch.arange(n, dtype=f64) * eps
    y = torch.tensor([(-1.0) ** k for k in range(n)], dtype=f64)
    built = eps * (1 - 1e-9)
    net = interpolate_sorted(z, y, built)
    # ||a||^2 = (16 n - 22) / eps^2: (16 n - 22) / (16 n) of the bound C38_A n / eps^2
    assert net.a_norm2 / lemma38_bound(y, built) == pytest.approx(
        (16 * n - 22) / (16 * n), rel=1e-6
    )


# ------------------------------------------------------------------ Lemma 36


def test_lemma36_exact_and_bounds():
    g = torch.Generator().manual_seed(5)
    for n in (2, 10, 50):
        x = torch.randn(n, 4, generator=g, dtype=f64)
        y = torch.randn(n, generator=g, dtype=f64)
        net, gu = lemma36_net(x, y, generator=g)
        assert net.direction.threshold == gap_threshold(n) == gu.eps
        assert net.direction.norm_factor == LEMMA37_NORM_FACTOR
        assert net.max_error <= 1e-9
        assert float((evaluate_net(net.net, x) - y).abs().max()) <= 1e-9
        assert net.norm2 <= gu.bound <= gu.bound_n * (1 + 1e-12)
        assert net.lemma38.a_norm2 <= gu.a_bound
        # the bounds as derived (docs/derivations/interpolation.md)
        y2, eps, z2 = float(y @ y), gu.eps, net.direction.z_norm2
        assert gu.a_bound == 16 * y2 / eps**2
        assert gu.bound == pytest.approx(
            2 * math.sqrt(gu.a_bound * (n + 2 * z2 + 2 * eps**2)), rel=1e-15
        )
        assert gu.bound_n == pytest.approx(C36 * n**2.5 * math.sqrt(y2), rel=1e-15)


def test_lemma36_net_errors():
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="float64"):
        lemma36_net(torch.zeros(3, 2), torch.zeros(3, dtype=f64), generator=g)
    with pytest.raises(ValueError, match="threshold"):
        lemma36_net(
            torch.randn(3, 2, dtype=f64), torch.zeros(3, dtype=f64), generator=g, threshold=-1.0
        )
    with pytest.raises(ValueError, match="max_tries"):
        lemma36_net(
            torch.zeros(3, 2, dtype=f64), torch.zeros(3, dtype=f64), generator=g, max_tries=3
        )


# ------------------------------------------------------------------ Theorem 9's memoriser


@pytest.mark.parametrize("depth", [2, 3])
def test_memoriser_point_wise(depth):
    g = torch.Generator().manual_seed(11)
    n, N, d = 12, 16, 3
    x, t, y, _ = general_prompts(n, N, d, g)
    omega = build_codebook(N, kind="rs-hadamard", dtype=f64).omega
    Z = rnn_encoding(x, t, omega)
    model, gu = memoriser(
        x, y, D_in=Z.shape[-1], position=7, generator=g, layout=MemoriserLayout(depth=depth)
    )
    with torch.no_grad():
        out = model(Z)
    assert float((out[:, 7] - y[:, 7]).abs().max()) <= 1e-9
    assert gu.norm2 == pytest.approx(parameter_norm2(model))
    assert gu.norm2 <= gu.bound * (1 + 1e-12)
    assert gu.n_points == n and gu.width == n and gu.depth == depth
    assert gu.n_prompts == n and gu.N == N and gu.position == 7
    assert gu.tries == gu.lemma36.direction.tries
    # the depth-L bound as derived: L (A P m^(L-2))^(1/L), A = Lemma 38's bound
    l36, eps = gu.lemma36, gu.lemma36_guarantee.eps
    P = n + 2 * l36.direction.z_norm2 + 2 * eps**2
    A = gu.lemma36_guarantee.a_bound
    assert gu.bound == pytest.approx(depth * (A * P * n ** (depth - 2)) ** (1 / depth), rel=1e-14)
    assert gu.bound_n == gu.lemma36_guarantee.bound_n


def test_memoriser_norm_is_N_free():
    g = torch.Generator().manual_seed(2)
    n, d = 6, 2
    x, t, y, u = general_prompts(n, 64, d, g)
    t[:, 3, 0] = torch.randint(8, (n,), generator=g)
    norms = []
    for N in (8, 64):
        tN = t[:, :N] % N
        tN[:, 3] = t[:, 3]
        yN = (x[:, :N][torch.arange(n)[:, None], tN[..., 0]] * u).sum(-1)
        _, gu = memoriser(
            x[:, :N].contiguous(),
            yN,
            D_in=d,
            position=3,
            generator=torch.Generator().manual_seed(9),
        )
        norms.append(gu.norm2)
    assert norms[0] == norms[1]


def test_memoriser_all_positions_exact_but_not_N_free():
    g = torch.Generator().manual_seed(4)
    n, d = 3, 2
    norms = []
    for N in (4, 32):
        x, t, y, _ = general_prompts(n, N, d, g)
        omega = build_codebook(N, kind="rs-hadamard", dtype=f64).omega
        Z = rnn_encoding(x, t, omega)
        model, gu = memoriser(x, y, D_in=Z.shape[-1], position="all", generator=g)
        with torch.no_grad():
            assert float((model(Z) - y).abs().max()) <= 1e-8
        assert gu.n_points == n * N
        norms.append(gu.norm2)
    assert norms[1] > 10 * norms[0]


def test_memoriser_errors():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 5, 2, dtype=f64)
    y = torch.randn(4, 5, dtype=f64)
    with pytest.raises(ValueError, match="position"):
        memoriser(x, y, D_in=2, position=5, generator=g)
    with pytest.raises(ValueError, match="position"):
        memoriser(x, y, D_in=2, position="last", generator=g)
    with pytest.raises(ValueError, match="D_in"):
        memoriser(x, y, D_in=1, position=0, generator=g)
    with pytest.raises(ValueError, match="depth"):
        memoriser(x, y, D_in=2, position=0, generator=g, layout=MemoriserLayout(depth=1))
    with pytest.raises(ValueError, match="y must"):
        memoriser(x, y[:, :3], D_in=2, position=0, generator=g)
    with pytest.raises(ValueError, match="float64"):
        memoriser(x.float(), y, D_in=2, position=0, generator=g)
    with pytest.raises(ValueError, match="at least 2"):
        memoriser(x[:1], y[:1], D_in=2, position=0, generator=g)


def test_memoriser_records_and_default_depth():
    """Default depth 2; norm2 = parameter_norm2 of the module; the inner Lemma 36 net's norm2 is
    ||a||^2 + ||W||^2 + ||b||^2 of its weights, and its fit is within its rounding allowance."""
    g = torch.Generator().manual_seed(36)
    x, t, y, _ = general_prompts(8, 8, 3, g)
    omega = build_codebook(8, kind="rs-hadamard", dtype=f64).omega
    model, gu = memoriser(x, y, D_in=3 + 2 * omega.shape[1], position=2, generator=g)
    assert gu.depth == 2
    assert gu.norm2 == pytest.approx(parameter_norm2(model), rel=1e-12)
    net = gu.lemma36.net
    norm2 = float(net.a @ net.a + (net.W**2).sum() + net.b @ net.b)
    assert gu.lemma36.norm2 == pytest.approx(norm2, rel=1e-12)
    assert gu.lemma36.max_error <= max(1e-9, gu.lemma36.rounding)
    assert gu.bound == pytest.approx(gu.lemma36_guarantee.bound, rel=1e-14)


# ------------------------------------------------------------------ the generalising RNN


def test_slot_memory_exact_everywhere():
    g = torch.Generator().manual_seed(7)
    N, d, B = 12, 3, 20
    omega = build_codebook(N, kind="rs-hadamard", dtype=f64).omega
    u = torch.randn(d, generator=g, dtype=f64)
    u = u / u.norm()
    model, gu = slot_memory(omega, u, r_x=8.0)
    x = torch.randn(B, N, d, generator=g, dtype=f64)
    t = torch.randint(N, (B, N, 1), generator=g)
    y = (x[torch.arange(B)[:, None], t[..., 0]] * u).sum(-1)
    with torch.no_grad():
        assert float((model(rnn_encoding(x, t, omega)) - y).abs().max()) <= 1e-9
    assert gu.d_h == N * d and gu.r_h == pytest.approx(math.sqrt(N - 1) * 8.0)
    assert gu.L == pytest.approx(math.sqrt(2) * gu.r_h)
    assert gu.norm2 == pytest.approx(parameter_norm2(model))


def test_slot_memory_errors():
    omega = build_codebook(6, kind="rs-hadamard", dtype=f64).omega
    u = t64(1.0, 0.0)
    with pytest.raises(ValueError, match="mu"):
        slot_memory(t64(1, 0, 1, 0, 0, 1).reshape(3, 2), u, r_x=1.0)  # two equal codes: coherence 1
    with pytest.raises(ValueError, match="unit norm"):
        slot_memory(omega, t64(1.0, 1.0), r_x=1.0)
    with pytest.raises(ValueError, match="r_x"):
        slot_memory(omega, u, r_x=0.0)
    with pytest.raises(ValueError, match="omega"):
        slot_memory(omega.float(), u, r_x=1.0)
    with pytest.raises(ValueError, match="below the codebook"):
        slot_memory(omega, u, r_x=1.0, mu=0.0)


def test_slot_memory_record_as_derived():
    """The guarantee's record (rnn-lower-bounds.md): d_h = N d, r_h = sqrt(N - 1) r_x = the module's
    projection radius, U_op = 1, lambda = sqrt 2, L = lambda r_h, norm2 = parameter_norm2."""
    N, d, r_x = 16, 3, 2.5
    omega = build_codebook(N, kind="rs-hadamard", dtype=f64).omega
    u = torch.tensor([0.6, 0.0, 0.8], dtype=f64)
    model, gu = slot_memory(omega, u, r_x=r_x)
    assert gu.d_h == N * d and gu.N == N and gu.d == d and gu.r_x == r_x
    assert gu.r_h == math.sqrt(N - 1) * r_x == model.r_h
    assert gu.U_op == 1.0 and gu.lipschitz == math.sqrt(2.0) and gu.L == gu.lipschitz * gu.r_h
    assert gu.norm2 == pytest.approx(parameter_norm2(model), rel=1e-12)
    G = omega @ omega.T
    assert gu.mu == float((G - torch.eye(N, dtype=f64)).abs().max())
    assert slot_memory(omega, u, r_x=r_x, mu=0.5)[1].mu == 0.5


@pytest.mark.gpu
def test_cuda_paths():
    g = torch.Generator(device="cuda").manual_seed(0)
    ev = lemma37_events(
        16, 4, trials=500, generator=g, threshold=gap_threshold(16), norm_factor=LEMMA37_NORM_FACTOR
    )
    assert ev.joint_ok / ev.trials > 1 / 3
    x = torch.randn(6, 10, 2, generator=g, dtype=f64, device="cuda")
    y = torch.randn(6, 10, generator=g, dtype=f64, device="cuda")
    model, gu = memoriser(x, y, D_in=2, position=4, generator=g)
    with torch.no_grad():
        assert float((model(x)[:, 4] - y[:, 4]).abs().max()) <= 1e-9
    omega = build_codebook(8, kind="rs-hadamard", dtype=f64, device="cuda").omega
    u = torch.tensor([1.0, 0.0], dtype=f64, device="cuda")
    slot, _ = slot_memory(omega, u, r_x=8.0)
    xx = torch.randn(3, 8, 2, generator=g, dtype=f64, device="cuda")
    t = torch.randint(8, (3, 8, 1), generator=g, device="cuda")
    with torch.no_grad():
        err = (
            slot(rnn_encoding(xx, t, omega))
            - xx[torch.arange(3, device="cuda")[:, None], t[..., 0], 0]
        )
        assert float(err.abs().max()) <= 1e-9
