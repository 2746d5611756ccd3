import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qstr.constructions.links import (
    CallableLink,
    Hermite,
    Linear,
    Mean,
    MeanProjected,
    SqNorm,
    Teacher,
    TwoLayerNet,
    affine_net,
    he2,
    make_link,
)
from qstr.verify.strategies import links

E = torch.eye(3, dtype=torch.float64)


def xt_example():
    # two selected tokens in R^3
    return torch.tensor([[1.0, 2.0, -2.0], [3.0, 0.0, 4.0]], dtype=torch.float64)


def test_linear_value():
    g = Linear(q=2, d=3, u=E[:2].clone())
    assert g(xt_example()).item() == pytest.approx((1.0 + 0.0) / math.sqrt(2))


def test_hermite_value():
    g = Hermite(q=2, d=3, u=torch.stack([E[0], E[2]]))
    want = (he2(torch.tensor(1.0)) + he2(torch.tensor(4.0))) / math.sqrt(2)
    assert g(xt_example()).item() == pytest.approx(want.item())
    assert he2(torch.tensor(1.0)).item() == 0.0
    assert he2(torch.tensor(3.0)).item() == pytest.approx(8 / math.sqrt(2))


def test_sqnorm_value():
    # ||x_1||^2 = 9, ||x_2||^2 = 25, d = 3
    assert SqNorm(q=2, d=3)(xt_example()).item() == pytest.approx((6 + 22) / math.sqrt(6))


def test_mean_values():
    assert Mean(q=2, d=3)(xt_example()).tolist() == [2.0, 1.0, 1.0]
    assert Mean(q=2, d=3).out_dim == 3
    assert MeanProjected(q=2, d=3, u=E[2].clone())(xt_example()).item() == pytest.approx(1.0)


def test_teacher_value():
    W = torch.tensor([[1.0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, -1.0]], dtype=torch.float64)
    net = TwoLayerNet(
        a=torch.tensor([2.0, 3.0], dtype=torch.float64),
        W=W,
        b=torch.tensor([0.5, 5.0], dtype=torch.float64),
    )
    # relu(1 + .5) * 2 + relu(-4 + 5) * 3 = 3 + 3
    assert Teacher(q=2, d=3, net=net)(xt_example()).item() == pytest.approx(6.0)
    assert net.m == 2
    assert net.r_a == pytest.approx(math.sqrt(13) * math.sqrt(2))


@settings(max_examples=40, deadline=None)
@given(links(names=("linear", "mean-projected", "teacher")), st.integers(0, 1000))
def test_exact_two_layer_nets(g, seed):
    """Assumption 2 with eps_2NN = 0: the returned net equals g everywhere."""
    net = g.two_layer_net()
    x = torch.randn(7, g.q, g.d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    assert torch.allclose(net(x), g(x), atol=1e-12)
    assert net.lipschitz <= net.r_a * net.r_w + 1e-12


def test_nonexact_links_have_no_net():
    assert SqNorm(q=1, d=2).two_layer_net() is None


@settings(max_examples=30, deadline=None)
@given(links())
def test_link_batching(g):
    """Evaluating a batch equals evaluating each position alone."""
    x = torch.randn(2, 3, g.q, g.d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = g(x)
    for i in range(2):
        for j in range(3):
            assert torch.allclose(y[i, j], g(x[i, j]), atol=1e-12)


def test_random_directions_are_unit(gen):
    g = make_link("hermite", 3, 5, generator=gen)
    assert torch.allclose(g.u.norm(dim=1), torch.ones(3, dtype=torch.float64))


def test_callable_link_checks_shape():
    ok = CallableLink(q=2, d=3, fn=lambda xt: xt.sum((-2, -1)))
    assert ok(xt_example()).item() == pytest.approx(8.0)
    bad = CallableLink(q=2, d=3, fn=lambda xt: xt)
    with pytest.raises(ValueError, match="fn must return"):
        bad(xt_example())


def test_bad_links():
    with pytest.raises(ValueError, match="link must be one of"):
        make_link("cubic", 1, 2, generator=torch.Generator())
    with pytest.raises(ValueError, match="generator"):
        make_link("linear", 1, 2)
    with pytest.raises(ValueError, match="q must be"):
        make_link("mean", 0, 2)
    with pytest.raises(ValueError, match="unit norm"):
        Linear(q=1, d=2, u=torch.tensor([[1.0, 1.0]]))
    with pytest.raises(ValueError, match="xt must have shape"):
        SqNorm(q=2, d=3)(torch.zeros(3, 3))
    with pytest.raises(ValueError, match="NaN"):
        Linear(q=1, d=2, u=torch.tensor([[float("nan"), 1.0]]))


def test_linear_link_net_carries_its_exact_lipschitz_constant():
    """relu(w.z) - relu(-w.z) = w.z: the linear link's net is 1-Lipschitz,
    not ||a|| ||W||_op = 2."""
    for q in (1, 2, 5):
        net = make_link("linear", q, 4, generator=torch.Generator().manual_seed(q)).two_layer_net()
        generic = float(net.a.norm() * torch.linalg.matrix_norm(net.W, ord=2))
        assert generic == pytest.approx(2.0)
        assert net.lipschitz == pytest.approx(1.0, abs=1e-12)


def test_paired_lipschitz_stays_an_upper_bound():
    """Paired units plus unpaired ones: the constant is still >= every measured difference quotient,
    and never above ||a|| ||W||_op."""
    g = torch.Generator().manual_seed(3)
    W0, b0, a0 = (
        torch.randn(3, 4, generator=g, dtype=torch.float64),
        torch.randn(3, generator=g, dtype=torch.float64),
        torch.randn(3, generator=g, dtype=torch.float64),
    )
    Wr, br, ar = (
        torch.randn(2, 4, generator=g, dtype=torch.float64),
        torch.randn(2, generator=g, dtype=torch.float64),
        torch.randn(2, generator=g, dtype=torch.float64),
    )
    net = TwoLayerNet(
        a=torch.cat([a0, -a0, ar]), W=torch.cat([W0, -W0, Wr]), b=torch.cat([b0, -b0, br])
    )
    generic = float(net.a.norm() * torch.linalg.matrix_norm(net.W, ord=2))
    assert net.lipschitz <= generic + 1e-12
    z1 = torch.randn(4000, 1, 4, generator=g, dtype=torch.float64)
    z2 = z1 + 1e-3 * torch.randn(4000, 1, 4, generator=g, dtype=torch.float64)
    quot = (net(z1) - net(z2)).abs() / (z1 - z2).flatten(1).norm(dim=1)
    assert float(quot.max()) <= net.lipschitz + 1e-9
    unpaired = TwoLayerNet(a=ar, W=Wr, b=br)
    assert unpaired.lipschitz == pytest.approx(
        float(ar.norm() * torch.linalg.matrix_norm(Wr, ord=2))
    )


def test_link_moves_once_and_refuses_inputs_on_another_device():
    link = make_link("teacher", 2, 3, generator=torch.Generator().manual_seed(0))
    moved = link.to("cpu")
    assert moved is not link and torch.equal(moved.net.W, link.net.W)
    net = TwoLayerNet(a=torch.ones(2), W=torch.ones(2, 6), b=torch.zeros(2))
    assert net.to("cpu") is net
    with pytest.raises(ValueError, match="move them once"):
        net.to("meta")(torch.zeros(1, 2, 3))


def test_teacher_default_width_is_8():
    """make_link('teacher', q, d)'s documented default width m = 8 (from assumption-2)."""
    assert make_link("teacher", 3, 4, generator=torch.Generator().manual_seed(33)).net.m == 8


def test_affine_net_is_affine_at_its_worst_input():
    """affine_net's bias keeps its unit on over blocks of norm <= r_x, the worst inputs
    +- r_x (u, u)/||u|| included (r_x = 50): there it equals <w, z> + b (lemma11.md, tightness)."""
    u = torch.full((4,), 0.5, dtype=torch.float64)
    w = torch.cat([u, u]) / math.sqrt(2)
    net = affine_net(w, 50.0)
    zs = torch.stack([-50.0 * torch.cat([u, u]) / u.norm(), 50.0 * torch.cat([u, u]) / u.norm()])
    assert torch.allclose(net(zs.view(2, 2, 4)), zs @ w + net.b, rtol=1e-12, atol=1e-9)


def test_two_layer_net_is_immutable():
    """A TwoLayerNet is frozen: a guarantee recorded from its weights (Lipschitz constant, norms)
    cannot be outlived by a reassigned weight."""
    net = TwoLayerNet(
        a=torch.ones(2, dtype=torch.float64),
        W=torch.eye(2, dtype=torch.float64),
        b=torch.zeros(2, dtype=torch.float64),
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        net.a = torch.zeros(2, dtype=torch.float64)


@pytest.mark.parametrize("generator", [0, "seed", np.random.default_rng(0)])
def test_make_link_validates_its_generator(generator):
    with pytest.raises(ValueError, match="must be a torch.Generator"):
        make_link("hermite", 2, 8, generator=generator)


@pytest.mark.parametrize("q, d", [(1, 10**23), (1, 2**63 - 1), (10**23, 3)])
def test_link_sizes_beyond_memory_are_refused_before_allocating(q, d):
    with pytest.raises(ValueError, match="the link's directions .* needs about"):
        make_link("linear", q, d, generator=torch.Generator())
