"""Tests for constructions/attention.py: Lemma 11's weights and the sparse-averaging head as modules
(named blocks, the fast path, a new scale, validation). Their bounds:
tests/bounds/test_attention.py."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import qstr.constructions.attention as attention
from qstr.bounds.attention import lemma11, sparse_average_guarantee, sparse_average_head
from qstr.bounds.lemma11_leaks import worst_target
from qstr.constructions.attention import (
    lemma11_adversarial_prompt,
    lemma11_weights,
    place_block,
    sparse_average_weights,
)
from qstr.constructions.codes import Codebook, rs_hadamard_codebook
from qstr.constructions.layout import token_layout
from qstr.constructions.links import make_link
from tests.fixtures import seeded, via_old_path

F64 = torch.float64


# ================================================================ named blocks


def test_lemma11_weights_at_alpha():
    d, q, N = 3, 3, 256
    net = make_link("teacher", q, d, generator=seeded(0)).two_layer_net()
    con = lemma11_weights(N, d, q, net, alpha=2.5)
    lay, W_QK = con.layout, con.model.W_QK.detach()
    assert (con.N, con.d, con.q, con.H, con.alpha, con.guarantee) == (N, d, q, q, 2.5, None)
    assert con.mu == rs_hadamard_codebook(N, mu=0.5).mu == 0.25 and con.c == pytest.approx(
        math.sqrt(d / q)
    )
    for h in range(q):
        expect = torch.zeros_like(W_QK[h])
        expect[lay.slot(h), lay["pos"]] = 2.5 * torch.eye(con.d_e, dtype=F64)
        assert torch.equal(W_QK[h], expect)
    W = con.model.W.detach().reshape(net.m, q, lay.dim)
    for h in range(q):
        assert torch.equal(W[:, h, lay["x"]], net.W[:, h * d : (h + 1) * d])
        assert W[:, h, lay["x"].stop :].abs().sum() == 0


def test_with_alpha_is_a_new_module_at_the_new_scale():
    net = make_link("teacher", 2, 3, generator=seeded(0)).two_layer_net()
    con = lemma11_weights(64, 3, 2, net, alpha=1.0)
    big = con.with_alpha(3.0)
    assert big.alpha == 3.0 and con.alpha == 1.0 and big.model is not con.model
    assert torch.equal(big.model.W_QK, 3.0 * con.model.W_QK)  # the pattern is linear in alpha
    assert torch.equal(big.model.W, con.model.W) and torch.equal(
        big.expected_W_QK(), big.model.W_QK
    )
    with pytest.raises(ValueError, match="alpha"):
        con.with_alpha(-1.0)


def test_sparse_average_weights_sum_the_slots():
    N, d, q = 64, 2, 3
    book = rs_hadamard_codebook(N, mu=0.1)
    con = sparse_average_weights(N, d, q, codebook=book, alpha=2.0)
    lay, W_QK = con.layout, con.model.W_QK.detach()[0]
    for k in range(q):
        assert torch.equal(W_QK[lay.slot(k), lay["pos"]], 2.0 * torch.eye(con.d_e, dtype=F64))
    assert float(W_QK.abs().sum()) == pytest.approx(2.0 * q * con.d_e)
    h = torch.randn(1, N, lay.dim, dtype=F64, generator=seeded(2))
    with torch.no_grad():  # the output net is the exact identity on the x block
        out = torch.relu(h @ con.model.W.T + con.model.b) @ con.model.a.T
    assert torch.allclose(out, h[..., lay["x"]], atol=1e-12)


def test_sparse_average_weights_build_at_any_mu_and_the_head_refuses():
    """The weights are built from the codes given; the head with its guarantee
    (bounds.attention.sparse_average_head) refuses mu >= 1/(2q - 1) (issue 56: the threshold is a
    bound, computed in bounds/)."""
    N, d, q = 64, 2, 3
    om = torch.zeros(N, 4, dtype=F64)
    om[:, 0] = 1
    book = Codebook.from_tensor(om)
    weights = sparse_average_weights(N, d, q, codebook=book, alpha=1.0)
    assert weights.mu == 1.0 and weights.guarantee is None
    refused = r"mu must lie in \[0, 1/\(2q - 1\)\) = \[0, 0.2\)"
    with pytest.raises(ValueError, match=refused):
        sparse_average_head(N, d, q, codebook=book, r_x=1.0, alpha=1.0)
    with pytest.raises(ValueError, match=refused):
        sparse_average_head(N, d, q, codebook=book, r_x=1.0)  # alpha from the bound
    with pytest.raises(ValueError, match=refused):
        sparse_average_guarantee(weights, r_x=1.0)


def test_the_builders_with_guarantees_are_not_in_constructions():
    """constructions/attention.py builds weights at a given alpha; lemma11 (alpha from eps, with
    its guarantee) is bounds.attention's, and the old "moved to" names are gone (CHANGELOG)."""
    assert not hasattr(attention, "lemma11") and not hasattr(attention, "Guarantee")


def test_adversarial_prompt_needs_a_radius_without_a_guarantee():
    net = make_link("teacher", 1, 2, generator=seeded(0)).two_layer_net()
    con = lemma11_weights(8, 2, 1, net, alpha=1.0)
    with pytest.raises(ValueError, match="r_x must be given"):
        lemma11_adversarial_prompt(con, torch.ones(2, dtype=F64), target=0)
    x, t = lemma11_adversarial_prompt(con, torch.ones(2, dtype=F64), target=0, r_x=2.0)
    assert float(x.norm(dim=-1).max()) == pytest.approx(2.0) and int(t.unique().numel()) == 1


def test_place_block():
    lay = token_layout(2, 2, 3)
    W = torch.zeros(lay.dim, lay.dim, dtype=F64)
    place_block(W, lay, "slot1", "pos", 2.5)
    assert torch.equal(W[lay["slot1"], lay["pos"]], 2.5 * torch.eye(3, dtype=F64))
    assert W.abs().sum() == 7.5
    place_block(W, lay, "slot0", "x", 1.0)  # rectangular identity (3 x 2)
    assert torch.equal(W[lay["slot0"], lay["x"]], torch.eye(3, 2, dtype=F64))
    M = torch.arange(6, dtype=F64).reshape(3, 2)
    place_block(W, lay, "pos", "x", M)
    assert torch.equal(W[lay["pos"], lay["x"]], M)
    with pytest.raises(ValueError, match="no block named"):
        place_block(W, lay, "slot9", "pos", 1.0)
    with pytest.raises(ValueError, match="value"):
        place_block(W, lay, "pos", "x", torch.ones(2, 2, dtype=F64))
    with pytest.raises(ValueError, match="W must have shape"):
        place_block(torch.zeros(3, 3), lay, "pos", "x", 1.0)


# ================================================================ fast path


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    N=st.integers(1, 40),
    q=st.integers(1, 3),
    chunk=st.integers(3, 50),
    alpha=st.floats(0.0, 4.0),
)
def test_fast_predict_equals_predict(seed, N, q, chunk, alpha):
    q = min(q, N)
    d = 3
    net = make_link("teacher", q, d, generator=seeded(seed)).two_layer_net()
    con = lemma11_weights(N, d, q, net, alpha=alpha)
    x = torch.randn(2, N, d, dtype=F64, generator=seeded(seed + 1))
    t = torch.randint(N, (2, N, q), generator=seeded(seed + 2))
    with torch.no_grad():
        ref = con.predict(x, t)
        scale = float(ref.abs().max()) + 1e-300
        for y in (
            con.fast_predict(x, t),
            con.fast_predict(x, t, chunk=chunk),
            con.predict(x, t, chunk=chunk),
        ):
            assert float((y - ref).abs().max()) <= 1e-10 * scale
        heads = con.model.heads(con.encode(x, t))[..., con.layout["x"]]
        assert torch.allclose(con.fast_heads(x, t, chunk=chunk), heads, rtol=1e-10, atol=1e-12)


def test_fast_predict_equals_predict_large_N():
    N, d, q = 2048, 3, 1
    net = make_link("teacher", q, d, generator=seeded(0)).two_layer_net()
    con = lemma11_weights(N, d, q, net, alpha=6.0)
    x = torch.randn(1, N, d, dtype=F64, generator=seeded(1))
    t = torch.randint(N, (1, N, q), generator=seeded(2))
    with torch.no_grad():
        ref = con.predict(x, t, chunk=256)
        fast = con.fast_predict(x, t, chunk=256)
    assert float((fast - ref).abs().max()) <= 1e-10 * float(ref.abs().max())


def test_fast_path_respects_float32():
    N, d, q = 64, 3, 2
    net = make_link("teacher", q, d, generator=seeded(0)).two_layer_net()
    con = lemma11_weights(N, d, q, net, alpha=6.0, dtype=torch.float32)
    assert con.model.W_QK.dtype == torch.float32 and con.omega.dtype == torch.float32
    x = torch.randn(2, N, d, generator=seeded(1))
    t = torch.randint(N, (2, N, q), generator=seeded(2))
    with torch.no_grad():
        assert torch.allclose(
            con.fast_predict(x, t, chunk=16), con.predict(x, t), rtol=1e-4, atol=1e-5
        )
    with pytest.raises(ValueError, match="must match the construction"):
        con.predict(x.double(), t)


@pytest.mark.parametrize("dtype, tol", [(F64, 1e-10), (torch.float32, 1e-4)])
def test_fused_backend_equals_math_backend_on_cpu(dtype, tol):
    """The fused SDPA kernels CUDA users get by default (torch has a flash kernel on CPU too)
    against the chunked math path, including a last chunk shorter than the others."""
    N, d, q = 50, 3, 2
    net = make_link("teacher", q, d, generator=seeded(0)).two_layer_net()
    con = lemma11_weights(N, d, q, net, alpha=6.0, dtype=dtype)
    x = torch.randn(2, N, d, generator=seeded(1)).to(dtype)
    t = torch.randint(N, (2, N, q), generator=seeded(2))
    with torch.no_grad():
        ref = con.predict(x, t)
        for chunk in (None, 16):
            y = con.fast_predict(x, t, chunk=chunk, backend="fused")
            assert float((y - ref).abs().max()) <= tol * (1 + float(ref.abs().max()))
        assert torch.equal(
            con.fast_predict(x, t, backend="auto"), con.fast_predict(x, t, backend="math")
        )
    with pytest.raises(ValueError, match="backend must be one of"):
        con.fast_heads(x, t, backend="flash")


def test_fused_backend_pads_values_to_the_key_width_when_no_kernel_takes_narrower_values(
    monkeypatch,
):
    """Where CUDA has no fused kernel for values narrower than the keys (a RuntimeError), the values
    are padded to the key width and the answer is unchanged: the refusal is simulated on CPU, so
    this runs without a GPU."""
    N, d, q = 40, 3, 2
    net = make_link("teacher", q, d, generator=seeded(0)).two_layer_net()
    con = lemma11_weights(N, d, q, net, alpha=6.0, dtype=torch.float32)
    x = torch.randn(2, N, d, generator=seeded(1))
    t = torch.randint(N, (2, N, q), generator=seeded(2))
    real, widths = F.scaled_dot_product_attention, []

    def refuses_narrow_values(Q, K, V, **kw):
        widths.append((K.shape[-1], V.shape[-1]))
        if V.shape[-1] != K.shape[-1]:
            raise RuntimeError("No available kernel.")
        return real(Q, K, V, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", refuses_narrow_values)
    with torch.no_grad():
        y = con.fast_predict(x, t, chunk=16, backend="fused")
    monkeypatch.setattr(F, "scaled_dot_product_attention", real)
    with torch.no_grad():
        ref = con.fast_predict(x, t, backend="math")
    assert (
        widths[0][0] != widths[0][1] and widths[1][0] == widths[1][1]
    )  # refused, then padded to the key width
    assert float((y - ref).abs().max()) <= 1e-4 * (1 + float(ref.abs().max()))


@pytest.mark.gpu
def test_fast_predict_cuda_matches_cpu():
    N, d, q = 4096, 4, 2
    net = make_link("teacher", q, d, generator=seeded(0)).two_layer_net()
    cpu = lemma11_weights(N, d, q, net, alpha=6.0)
    gpu = lemma11_weights(N, d, q, net, alpha=6.0, device="cuda", dtype=torch.float32)
    x = torch.randn(2, N, d, dtype=F64, generator=seeded(1))
    t = torch.randint(N, (2, N, q), generator=seeded(2))
    with torch.no_grad():
        ref = cpu.fast_predict(x, t, chunk=512)
        y = gpu.fast_predict(x.float().cuda(), t.cuda(), chunk=512).double().cpu()
    assert float((y - ref).abs().max()) <= 1e-3 * (1 + float(ref.abs().max()))


@pytest.mark.gpu
def test_fused_backend_refuses_float64_on_cuda():
    """CUDA has no fused attention kernel for float64: a clear ValueError, not torch's
    'No available kernel'; 'auto' takes the math path there."""
    N, d, q = 64, 2, 1
    net = make_link("teacher", q, d, generator=seeded(0)).two_layer_net()
    con = lemma11_weights(N, d, q, net, alpha=2.0, device="cuda")
    x = torch.randn(1, N, d, dtype=F64, generator=seeded(1)).cuda()
    t = torch.randint(N, (1, N, q), generator=seeded(2)).cuda()
    with pytest.raises(ValueError, match="float64"):
        con.fast_heads(x, t, backend="fused")
    with torch.no_grad():
        auto, math_ = (con.fast_heads(x, t, backend=b) for b in ("auto", "math"))
    assert torch.equal(auto, math_)


@pytest.mark.gpu
def test_math_backend_on_cuda_never_takes_the_fused_kernel(monkeypatch):
    """backend='math' is the reference the fused kernels are checked against, on CUDA too."""

    def fused(*args, **kw):
        raise AssertionError("backend='math' took the fused kernel")

    N, d, q = 64, 2, 2
    net = make_link("teacher", q, d, generator=seeded(0)).two_layer_net()
    con = lemma11_weights(N, d, q, net, alpha=2.0, device="cuda", dtype=torch.float32)
    x = torch.randn(1, N, d, generator=seeded(1)).cuda()
    t = torch.randint(N, (1, N, q), generator=seeded(2)).cuda()
    monkeypatch.setattr(attention, "_fused_heads", fused)
    with torch.no_grad():
        heads = con.fast_heads(x, t, backend="math")
    assert heads.shape[0] == 1 and bool(torch.isfinite(heads).all())


@pytest.mark.parametrize("field", ["a", "W", "b"])
def test_lemma11_weights_refuse_a_net_with_non_finite_or_missing_weights(field):
    net = make_link("teacher", 1, 2, generator=seeded(0)).two_layer_net()
    bad = getattr(net, field).clone()
    bad.view(-1)[0] = float("nan")
    with pytest.raises(ValueError, match=f"net.{field}"):
        lemma11_weights(8, 2, 1, dataclasses.replace(net, **{field: bad}), alpha=1.0)
    with pytest.raises(ValueError, match=f"net.{field} must be a torch.Tensor"):
        lemma11_weights(8, 2, 1, dataclasses.replace(net, **{field: bad.tolist()}), alpha=1.0)


def test_predict_validation():
    net = make_link("teacher", 1, 2, generator=seeded(0)).two_layer_net()
    con = lemma11_weights(8, 2, 1, net, alpha=1.0)
    x = torch.randn(1, 8, 2, dtype=F64)
    t = torch.zeros(1, 8, 1, dtype=torch.long)
    with pytest.raises(ValueError, match="x must have shape"):
        con.predict(x[:, :5], t[:, :5])
    for bad in (t + 8, t - 1):  # one past either end
        with pytest.raises(ValueError, match="t entries"):
            con.predict(x, bad)
    with pytest.raises(ValueError, match="t must be"):
        con.predict(x, t.float())
    with pytest.raises(ValueError, match="chunk"):
        con.fast_predict(x, t, chunk=0)
    with pytest.raises(ValueError, match="NaN"):
        con.predict(x * float("nan"), t)


def test_adversarial_prompt_is_one_prompt_by_default():
    """lemma11_adversarial_prompt's default B = 1: one prompt (x (1, N, d), t (1, N, q))."""
    net = make_link("linear", 2, 4, generator=seeded(13)).two_layer_net()
    cons = lemma11(16, 4, 2, net, eps=0.05, r_x=3.0)
    x, t = lemma11_adversarial_prompt(cons, torch.ones(4, dtype=F64), target=3)
    assert x.shape == (1, 16, 4) and t.shape == (1, 16, 2) and bool((t == 3).all())


def test_adversarial_prompt_without_target_warns_and_picks_the_worst():
    """Without ``target`` the prompt still reads the worst target (the argmax of the exact leak,
    computed in bounds/lemma11_leaks.py), with one DeprecationWarning naming worst_target."""
    net = make_link("linear", 2, 4, generator=seeded(13)).two_layer_net()
    cons = lemma11(16, 4, 2, net, eps=0.05, r_x=3.0)
    u = torch.ones(4, dtype=F64)
    x, t = via_old_path(lambda: lemma11_adversarial_prompt(cons, u), "lemma11_leaks.worst_target")
    want = lemma11_adversarial_prompt(cons, u, target=worst_target(cons))
    assert torch.equal(x, want[0]) and torch.equal(t, want[1])
