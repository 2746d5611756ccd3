"""Tests for constructions/models.py: the paper's architectures as nn.Modules.

Every comparison runs in float64 against an independent naive implementation (numpy
loops with the paper's 1-based index formulas) or against torch's own modules.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qstr.constructions.models import (
    DeepTransitionBiRNN,
    MergedAttention,
    PracticalFFN,
    PracticalRNN,
    PracticalTransformer,
    VecFFN,
    build_practical,
    make_mlp,
    mlp_weights,
    set_mlp_weights,
)

F64 = torch.float64
FAST = settings(max_examples=25, deadline=None)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ============================================================== MergedAttention


def naive_merged(model: MergedAttention, Z: np.ndarray) -> np.ndarray:
    """Double loop over queries i and keys j, straight from Appendix A.1."""
    W_QK = model.W_QK.detach().numpy()
    W, b, a = (p.detach().numpy() for p in (model.W, model.b, model.a))
    B, N, D = Z.shape
    H = W_QK.shape[0]
    out = []
    for bb in range(B):
        rows = []
        for i in range(N):
            h_i = []
            for h in range(H):
                s = np.array([Z[bb, i] @ W_QK[h] @ Z[bb, j] for j in range(N)])
                w = np.exp(s - s.max())
                w /= w.sum()
                h_i.append(sum(w[j] * Z[bb, j] for j in range(N)))
            hid = np.maximum(W @ np.concatenate(h_i) + b, 0.0)
            rows.append(a @ hid)
        out.append(rows)
    return np.array(out)


@FAST
@given(
    B=st.integers(1, 2), N=st.integers(1, 5), D_e=st.integers(1, 4), H=st.integers(1, 3),
    m=st.integers(1, 5), out_dim=st.sampled_from([1, 2]), scale=st.sampled_from([1.0, 30.0]),
    seed=st.integers(0, 2**16),
)
def test_merged_attention_matches_naive_double_loop(B, N, D_e, H, m, out_dim, scale, seed):
    model = MergedAttention(D_e, H, m, out_dim, generator=gen(seed), dtype=F64)
    with torch.no_grad():  # make scores O(scale) so the softmax is far from uniform
        model.W_QK.mul_(scale * D_e)
        model.b.normal_(generator=gen(seed + 1))
    Z = torch.randn(B, N, D_e, generator=gen(seed + 2), dtype=F64)
    y = model(Z).detach().numpy()
    ref = naive_merged(model, Z.numpy())
    assert y.shape == ((B, N) if out_dim == 1 else (B, N, out_dim))
    np.testing.assert_allclose(y, ref, atol=1e-10, rtol=0)


@FAST
@given(B=st.integers(1, 2), N=st.integers(1, 9), H=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_attention_rows_sum_to_one_and_heads_are_weighted_sums(B, N, H, seed):
    D_e = 3
    model = MergedAttention(D_e, H, 4, generator=gen(seed), dtype=F64)
    with torch.no_grad():
        model.W_QK.mul_(20.0)
    Z = torch.randn(B, N, D_e, generator=gen(seed + 1), dtype=F64)
    A = model.attention(Z)
    assert A.shape == (B, H, N, N)
    assert bool((A >= 0).all())
    torch.testing.assert_close(A.sum(-1), torch.ones(B, H, N, dtype=F64), atol=1e-12, rtol=0)
    heads = model.heads(Z)
    assert heads.shape == (B, N, H, D_e)
    torch.testing.assert_close(heads, torch.einsum("bhij,bjd->bihd", A, Z), atol=1e-12, rtol=0)


@FAST
@given(N=st.integers(1, 11), chunk=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_chunked_equals_unchunked(N, chunk, seed):
    model = MergedAttention(4, 2, 6, generator=gen(seed), dtype=F64)
    Z = torch.randn(2, N, 4, generator=gen(seed + 1), dtype=F64)
    torch.testing.assert_close(model(Z, chunk=chunk), model(Z), atol=1e-13, rtol=0)
    torch.testing.assert_close(model.heads(Z, chunk=chunk), model.heads(Z), atol=1e-13, rtol=0)
    torch.testing.assert_close(
        model.attention(Z, chunk=chunk), model.attention(Z), atol=1e-13, rtol=0
    )


def test_hand_set_W_QK_attends_to_chosen_key():
    """Lemma 11 with orthonormal position codes: head h returns the token z_{t_ih}."""
    B, N, d, H = 3, 6, 2, 2
    g = gen(0)
    x = torch.randn(B, N, d, generator=g, dtype=F64)
    t = torch.randint(0, N, (B, N, H), generator=g)
    eye = torch.eye(N, dtype=F64)
    pos = eye.expand(B, N, N)  # omega_i = e_i
    slots = [eye[t[..., h]] for h in range(H)]  # omega_{t_ih}
    Z = torch.cat([x, pos, *slots], dim=-1)  # z_i = (x_i, e_i, e_{t_i0}, e_{t_i1})
    D_e = Z.shape[-1]
    alpha = 60.0
    W_QK = torch.zeros(H, D_e, D_e, dtype=F64)
    for h in range(H):
        q0 = d + N * (1 + h)  # query's slot h ...
        W_QK[h, q0 : q0 + N, d : d + N] = alpha * torch.eye(
            N, dtype=F64
        )  # ... meets key's position block
    model = MergedAttention(D_e, H, 3, dtype=F64).set_weights(W_QK=W_QK)
    heads = model.heads(Z)
    for h in range(H):
        target = torch.gather(Z, 1, t[..., h : h + 1].expand(B, N, D_e))
        torch.testing.assert_close(heads[:, :, h], target, atol=1e-10, rtol=0)
    A = model.attention(Z)
    for h in range(H):
        picked = torch.gather(A[:, h], 2, t[..., h : h + 1]).squeeze(-1)
        assert bool((picked >= 1 - 1e-12).all())


def test_merged_attention_deterministic_given_seed():
    a = MergedAttention(5, 2, 4, generator=gen(7))
    b = MergedAttention(5, 2, 4, generator=gen(7))
    c = MergedAttention(5, 2, 4, generator=gen(8))
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    assert not torch.equal(a.W_QK, c.W_QK)
    torch.manual_seed(3)
    d = MergedAttention(5, 2, 4)
    torch.manual_seed(3)
    e = MergedAttention(5, 2, 4)
    assert torch.equal(d.W_QK, e.W_QK) and torch.equal(d.a, e.a)
    # a generator leaves the global RNG untouched
    torch.manual_seed(11)
    before = torch.random.get_rng_state()
    MergedAttention(5, 2, 4, generator=gen(1))
    assert torch.equal(torch.random.get_rng_state(), before)


def test_merged_attention_float32_and_gradients():
    model = MergedAttention(4, 2, 5)
    Z = torch.randn(2, 7, 4)
    y = model(Z, chunk=3)
    assert y.dtype == torch.float32 and y.shape == (2, 7)
    y.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


# ======================================================== DeepTransitionBiRNN


def naive_mlp(weights, v):
    for k, (W, b) in enumerate(weights):
        v = W @ v + (0.0 if b is None else b)
        if k < len(weights) - 1:
            v = np.maximum(v, 0.0)
    return v


def naive_birnn(model: DeepTransitionBiRNN, Z: np.ndarray):
    """Appendix B.1 with 1-based positions, written independently of the module."""
    def np_w(seq):
        return [(W.numpy(), None if b is None else b.numpy()) for W, b in mlp_weights(seq)]

    Wf, Wb, Wy = np_w(model.f_fwd), np_w(model.f_bwd), np_w(model.f_y)

    def P(h):
        n = np.linalg.norm(h)
        return h if (model.r_h == math.inf or n <= model.r_h) else h * (model.r_h / n)

    B, N, _ = Z.shape
    d_h = model.d_h
    HF = np.zeros((B, N + 1, d_h))  # HF[:, i] = h_fwd_i for i = 1..N (index 0 unused)
    HB = np.zeros((B, N + 2, d_h))
    Y = []
    for b in range(B):
        z = {i: Z[b, i - 1] for i in range(1, N + 1)}
        hf = {1: np.zeros(d_h)}
        for i in range(1, N):
            hf[i + 1] = P(hf[i] + naive_mlp(Wf, np.concatenate([hf[i], z[i]])))
        hb = {N: np.zeros(d_h)}
        for i in range(N, 1, -1):
            hb[i - 1] = P(hb[i] + naive_mlp(Wb, np.concatenate([hb[i], z[i]])))
        for i in range(1, N + 1):
            HF[b, i], HB[b, i] = hf[i], hb[i]
        Y.append([naive_mlp(Wy, np.concatenate([hf[i], hb[i], z[i]])) for i in range(1, N + 1)])
    return HF[:, 1:], HB[:, 1 : N + 1], np.array(Y)


@FAST
@given(
    B=st.integers(1, 2), N=st.integers(1, 6), D_in=st.integers(1, 3), d_h=st.integers(1, 3),
    tw=st.lists(st.integers(1, 4), max_size=2), ow=st.lists(st.integers(1, 4), max_size=2),
    r_h=st.sampled_from([0.3, 2.0, math.inf]), scale=st.sampled_from([1.0, 4.0]),
    out_dim=st.sampled_from([1, 2]), seed=st.integers(0, 2**16),
)
def test_birnn_states_match_naive_recurrence(B, N, D_in, d_h, tw, ow, r_h, scale, out_dim, seed):
    model = DeepTransitionBiRNN(
        D_in, d_h, transition_widths=tuple(tw), output_widths=tuple(ow), r_h=r_h, out_dim=out_dim,
        generator=gen(seed), dtype=F64,
    )
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(scale)
    Z = torch.randn(B, N, D_in, generator=gen(seed + 1), dtype=F64)
    h_fwd, h_bwd = (h.detach() for h in model.states(Z))
    HF, HB, Y = naive_birnn(model, Z.numpy())
    np.testing.assert_allclose(
        h_fwd.numpy(), HF, atol=1e-10, rtol=1e-12
    )  # states reach ~1e6 when r_h = inf
    np.testing.assert_allclose(
        h_bwd.numpy(), HB, atol=1e-10, rtol=1e-12
    )  # states reach ~1e6 when r_h = inf
    y = model(Z).detach().numpy()
    assert y.shape == ((B, N) if out_dim == 1 else (B, N, out_dim))
    np.testing.assert_allclose(
        y, Y.reshape(y.shape), atol=1e-10, rtol=1e-12
    )  # states reach ~1e6 when r_h = inf
    # boundary states are exactly zero
    assert bool((h_fwd[:, 0] == 0).all()) and bool((h_bwd[:, -1] == 0).all())


def test_birnn_index_convention_prefix_and_suffix():
    """h_fwd_i depends on z_1..z_{i-1} only, h_bwd_i on z_{i+1}..z_N only."""
    N = 5
    model = DeepTransitionBiRNN(
        D_in=2,
        d_h=3,
        transition_widths=(4,),
        output_widths=(4,),
        r_h=math.inf,
        generator=gen(0),
        dtype=F64,
    )
    Z = torch.randn(1, N, 2, generator=gen(1), dtype=F64)
    hf, hb = model.states(Z)
    for k in range(N):  # perturb token k (0-based)
        Z2 = Z.clone()
        Z2[0, k] += 1.0
        hf2, hb2 = model.states(Z2)
        # forward states at tensor index <= k have not read z_k yet
        assert torch.equal(hf2[:, : k + 1], hf[:, : k + 1])
        # backward states at tensor index >= k have not read z_k yet
        assert torch.equal(hb2[:, k:], hb[:, k:])


def test_birnn_projection_keeps_states_in_ball():
    r_h = 0.7
    model = DeepTransitionBiRNN(3, 4, transition_widths=(8, 8), output_widths=(5,), r_h=r_h,
                                generator=gen(2), dtype=F64)
    with torch.no_grad():
        for p in list(model.f_fwd.parameters()) + list(model.f_bwd.parameters()):
            p.mul_(10.0)
    Z = torch.randn(4, 9, 3, generator=gen(3), dtype=F64)
    for h in model.states(Z):
        norms = torch.linalg.vector_norm(h.detach(), dim=-1)
        assert bool((norms <= r_h * (1 + 1e-12)).all())
        assert float(norms[:, 1:-1].max()) == pytest.approx(r_h, rel=1e-12)  # projection was active
    # and without projection the same weights leave the ball
    free = DeepTransitionBiRNN(
        3, 4, transition_widths=(8, 8), output_widths=(5,), r_h=math.inf, dtype=F64
    )
    free.load_state_dict(model.state_dict())
    assert float(torch.linalg.vector_norm(free.states(Z)[0].detach(), dim=-1).max()) > 2 * r_h
    # P itself: zero stays zero, short vectors untouched, long ones land on the sphere
    h = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.1, 0.0, 0.0, 0.0], [3.0, 4.0, 0.0, 0.0]], dtype=F64)
    Ph = model.project(h)
    torch.testing.assert_close(Ph[:2], h[:2], atol=0, rtol=0)
    torch.testing.assert_close(Ph[2], h[2] * (r_h / 5.0), atol=1e-15, rtol=0)


@FAST
@given(N=st.integers(1, 7), r_h=st.sampled_from([0.5, math.inf]), seed=st.integers(0, 2**16))
def test_birnn_reversal_swaps_state_streams(N, r_h, seed):
    model = DeepTransitionBiRNN(2, 3, transition_widths=(5,), output_widths=(4,), r_h=r_h,
                                generator=gen(seed), dtype=F64)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    swapped = DeepTransitionBiRNN(
        2, 3, transition_widths=(5,), output_widths=(4,), r_h=r_h, dtype=F64
    )
    set_mlp_weights(swapped.f_fwd, mlp_weights(model.f_bwd))
    set_mlp_weights(swapped.f_bwd, mlp_weights(model.f_fwd))
    Z = torch.randn(2, N, 2, generator=gen(seed + 1), dtype=F64)
    hf, hb = model.states(Z)
    hf_r, hb_r = swapped.states(Z.flip(1))
    torch.testing.assert_close(hf_r, hb.flip(1), atol=1e-12, rtol=0)
    torch.testing.assert_close(hb_r, hf.flip(1), atol=1e-12, rtol=0)


def test_set_mlp_weights_copies_and_checks():
    seq = make_mlp(3, (4,), 2)  # Linear(3,4)+bias, ReLU, Linear(4,2) no bias
    assert seq[0].bias is not None and seq[2].bias is None
    W1, b1, W2 = torch.arange(12.0).reshape(4, 3), torch.ones(4), torch.full((2, 4), 0.5)
    set_mlp_weights(seq, [(W1, b1), (W2, None)])
    assert (
        torch.equal(seq[0].weight, W1)
        and torch.equal(seq[0].bias, b1)
        and torch.equal(seq[2].weight, W2)
    )
    x = torch.tensor([1.0, -1.0, 2.0])
    torch.testing.assert_close(seq(x), W2 @ torch.relu(W1 @ x + b1))
    set_mlp_weights(seq, [(W1, None), (W2, None)])  # None on a biased layer: zero bias
    assert torch.equal(seq[0].bias, torch.zeros(4))
    with pytest.raises(ValueError, match="weights"):
        set_mlp_weights(seq, [(W1, b1)])
    with pytest.raises(ValueError, match=r"weights\[0\]\.W"):
        set_mlp_weights(seq, [(W1.T, b1), (W2, None)])
    with pytest.raises(ValueError, match=r"weights\[1\]\.b"):
        set_mlp_weights(seq, [(W1, b1), (W2, torch.zeros(2))])
    with pytest.raises(ValueError, match=r"weights\[0\]\.b"):
        set_mlp_weights(seq, [(W1, torch.zeros(5)), (W2, None)])
    with pytest.raises(ValueError, match="NaN"):
        set_mlp_weights(seq, [(W1 * float("nan"), b1), (W2, None)])


def test_birnn_layer_structure():
    model = DeepTransitionBiRNN(5, 3, transition_widths=(7, 6), output_widths=(), r_h=1.0)
    lin = [l for l in model.f_fwd if isinstance(l, torch.nn.Linear)]
    assert [(l.in_features, l.out_features, l.bias is not None) for l in lin] == [
        (8, 7, True), (7, 6, True), (6, 3, False)]
    ylin = [l for l in model.f_y if isinstance(l, torch.nn.Linear)]
    assert [(l.in_features, l.out_features, l.bias is not None) for l in ylin] == [(11, 1, False)]


# ===================================================================== VecFFN


def test_vecffn_first_layer_x_columns_act_on_vec_x():
    N, d, q = 4, 3, 2
    model = VecFFN(N, d, q, hidden=(6,), generator=gen(0), dtype=F64)
    Wx = model.first_layer_x_weight()
    assert Wx.shape == (6, N * d)
    assert torch.equal(Wx, model.first_layer.weight[:, : N * d])
    assert model.first_layer.in_features == N * d + N * q * N
    x = torch.randn(3, N, d, generator=gen(1), dtype=F64)
    t = torch.randint(0, N, (3, N, q), generator=gen(2))
    lin = model.first_layer
    pre = lin(model.inputs(x, t))
    pre0 = lin(model.inputs(torch.zeros_like(x), t))
    torch.testing.assert_close(pre - pre0, x.reshape(3, N * d) @ Wx.T, atol=1e-12, rtol=0)
    # vec order: column j*d + k reads x[j, k]
    e = torch.zeros(1, N, d, dtype=F64)
    e[0, 2, 1] = 1.0
    torch.testing.assert_close(
        model.inputs(e, t[:1])[0, : N * d], torch.eye(N * d, dtype=F64)[2 * d + 1]
    )
    # one-hot encoding of t: exactly N*q ones, at (i, k, t_ik)
    enc = model.inputs(x, t)[:, N * d :].reshape(3, N, q, N)
    assert torch.equal(enc.argmax(-1), t) and torch.equal(
        enc.sum(-1), torch.ones(3, N, q, dtype=F64)
    )


@pytest.mark.parametrize("task", ["general", "simple"])
@pytest.mark.parametrize("t_encoding", ["onehot", "index"])
@pytest.mark.parametrize("out_dim", [None, 2])
def test_vecffn_output_shapes(task, t_encoding, out_dim):
    N, d, q, B = 5, 2, 3, 4
    model = VecFFN(
        N, d, q, hidden=(7, 5), task=task, t_encoding=t_encoding, out_dim=out_dim, generator=gen(0)
    )
    x = torch.randn(B, N, d)
    t_simple = torch.randint(0, N, (B, q))
    expect = (B, N) if out_dim is None else (B, N, out_dim)
    assert model(x, t_simple).shape == expect
    if task == "general":
        t_gen = torch.randint(0, N, (B, N, q))
        assert model(x, t_gen).shape == expect
        # a simple-qSTR t is broadcast to every position
        torch.testing.assert_close(model(x, t_simple), model(x, t_simple[:, None].expand(B, N, q)))
    else:
        with pytest.raises(ValueError, match="t must have shape"):
            model(x, torch.randint(0, N, (B, N, q)))


def test_vecffn_rejects_bad_inputs():
    N, d, q = 4, 2, 1
    model = VecFFN(N, d, q, hidden=(3,))
    x = torch.randn(2, N, d)
    for bad in (torch.full((2, N, q), N), torch.full((2, N, q), -1)):
        with pytest.raises(ValueError, match=r"t entries must lie in \[0, N\)"):
            model(x, bad)
    with pytest.raises(ValueError, match="integer"):
        model(x, torch.zeros(2, N, q))
    with pytest.raises(ValueError, match="t must have shape"):
        model(x, torch.zeros(3, N, q, dtype=torch.long))
    with pytest.raises(ValueError, match="x must have shape"):
        model(torch.randn(2, N + 1, d), torch.zeros(2, q, dtype=torch.long))
    with pytest.raises(ValueError, match="x must have shape"):
        model(torch.randn(2, N, d + 1), torch.zeros(2, q, dtype=torch.long))
    x_nan = x.clone()
    x_nan[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        model(x_nan, torch.zeros(2, q, dtype=torch.long))
    with pytest.raises(ValueError, match="t_encoding"):
        VecFFN(N, d, q, t_encoding="binary")
    with pytest.raises(ValueError, match="task"):
        VecFFN(N, d, q, task="other")


def test_practical_ffn_is_depth_three_vecffn():
    model = PracticalFFN(6, 2, 1, generator=gen(0))
    assert isinstance(model, VecFFN)
    lin = [l for l in model.net if isinstance(l, torch.nn.Linear)]
    assert [(l.in_features, l.out_features) for l in lin] == [(6 * 2 + 6 * 6, 1000), (1000, 1000),
                                                              (1000, 6)]
    assert model(torch.randn(2, 6, 2), torch.randint(0, 6, (2, 6, 1))).shape == (2, 6)


# ======================================================== PracticalTransformer


@FAST
@given(D_e=st.integers(1, 5), q=st.integers(1, 3), N=st.integers(1, 6), B=st.integers(1, 2),
       seed=st.integers(0, 2**16))
def test_merged_qk_reproduces_mha_weights(D_e, q, N, B, seed):
    model = PracticalTransformer(D_e, q, width=4, generator=gen(seed), dtype=F64)
    with torch.no_grad():  # sharpen the attention so the check is not against near-uniform rows
        for p in model.mha.parameters():
            p.mul_(3.0)
    Z = torch.randn(B, N, D_e, generator=gen(seed + 1), dtype=F64)
    A = model.merged_qk()
    assert A.shape == (q, D_e, D_e)
    logits = torch.einsum("bid,hde,bje->bhij", Z, A, Z)
    mine = torch.softmax(logits, dim=-1)
    _, ref = model.mha(Z.repeat(1, 1, q), Z, Z, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(mine, ref, atol=1e-10, rtol=0)
    torch.testing.assert_close(model.attention(Z), ref, atol=0, rtol=0)
    # the documented value path: out_i = out_proj(concat_h sum_j A^h_ij V_h z_j)
    Wv = model.projection_weights()[2].reshape(q, D_e, D_e)
    vals = torch.einsum("bhij,hde,bje->bihd", mine, Wv, Z).reshape(B, N, q * D_e)
    out = vals @ model.mha.out_proj.weight.T
    y = model.readout(torch.relu(model.hidden(out))).squeeze(-1)
    torch.testing.assert_close(model(Z), y, atol=1e-10, rtol=0)


def test_merged_qk_by_hand_on_one_head():
    D_e, q = 2, 2
    model = PracticalTransformer(D_e, q, dtype=F64)
    Wq = torch.arange(16.0, dtype=F64).reshape(4, 4)
    Wk = torch.arange(8.0, dtype=F64).reshape(4, 2) - 3
    with torch.no_grad():
        model.mha.q_proj_weight.copy_(Wq)
        model.mha.k_proj_weight.copy_(Wk)
    A = model.merged_qk()
    for h in range(q):
        Qh = Wq[2 * h : 2 * h + 2, 0:2] + Wq[2 * h : 2 * h + 2, 2:4]
        Kh = Wk[2 * h : 2 * h + 2]
        torch.testing.assert_close(A[h], Qh.T @ Kh / math.sqrt(2.0), atol=0, rtol=0)


# ================================================================ PracticalRNN


@pytest.mark.parametrize("cell", ["gru", "rnn", "lstm"])
@pytest.mark.parametrize("out_dim", [1, 3])
def test_practical_rnn_shapes(cell, out_dim):
    model = PracticalRNN(4, 6, cell=cell, out_dim=out_dim, generator=gen(0))
    assert isinstance(model.rnn, PracticalRNN.CELLS[cell]) and model.rnn.bidirectional
    Z = torch.randn(3, 5, 4)
    y = model(Z)
    assert y.shape == ((3, 5) if out_dim == 1 else (3, 5, out_dim))
    assert bool(torch.isfinite(y).all())
    # readout reads the concatenated forward/backward outputs at each position
    out, _ = model.rnn(Z)
    torch.testing.assert_close(y.reshape(3, 5, out_dim), model.readout(out), atol=0, rtol=0)


def test_practical_rnn_deterministic_and_bad_cell():
    a, b = PracticalRNN(3, 4, generator=gen(5)), PracticalRNN(3, 4, generator=gen(5))
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    with pytest.raises(ValueError, match="cell"):
        PracticalRNN(3, 4, cell="transformer")


# ============================================================== build_practical


def test_build_practical_defaults():
    N, d, q, d_e = 8, 10, 2, 10
    D_e = d + (q + 1) * d_e
    tr = build_practical("transformer", N=N, d=d, q=q, d_e=d_e)
    assert isinstance(tr, PracticalTransformer)
    assert (tr.D_e, tr.q, tr.width, tr.mha.num_heads, tr.mha.head_dim) == (D_e, q, 100, q, D_e)
    assert tr(torch.randn(2, N, D_e)).shape == (2, N)
    rnn = build_practical("rnn", N=N, d=d, q=q, d_e=d_e)
    assert isinstance(rnn.rnn, torch.nn.GRU) and rnn.hidden_size == 500 * q and rnn.D_in == D_e
    ffn = build_practical("ffn", N=N, d=d, q=q, d_e=d_e)
    assert isinstance(ffn, PracticalFFN) and ffn.hidden == (1000, 1000) and ffn.N == N
    small = build_practical("rnn", N=N, d=d, q=q, d_e=d_e, hidden=7, cell="lstm")
    assert small.hidden_size == 7 and small.cell == "lstm"
    with pytest.raises(ValueError, match="kind"):
        build_practical("cnn", N=N, d=d, q=q, d_e=d_e)
    with pytest.raises(ValueError, match="d_e"):
        build_practical("rnn", N=N, d=d, q=q, d_e=0)


# ============================================================ argument errors


@pytest.mark.parametrize(
    "ctor, name",
    [
        (lambda v: MergedAttention(v, 1, 1), "D_e"),
        (lambda v: MergedAttention(2, v, 1), "H"),
        (lambda v: MergedAttention(2, 1, v), "m"),
        (lambda v: MergedAttention(2, 1, 1, out_dim=v), "out_dim"),
        (
            lambda v: DeepTransitionBiRNN(v, 1, transition_widths=(), output_widths=(), r_h=1),
            "D_in",
        ),
        (lambda v: DeepTransitionBiRNN(1, v, transition_widths=(), output_widths=(), r_h=1), "d_h"),
        (
            lambda v: DeepTransitionBiRNN(1, 1, transition_widths=(2, v), output_widths=(), r_h=1),
            r"transition_widths\[1\]",
        ),
        (
            lambda v: DeepTransitionBiRNN(1, 1, transition_widths=(), output_widths=(v,), r_h=1),
            r"output_widths\[0\]",
        ),
        (lambda v: DeepTransitionBiRNN(1, 1, transition_widths=(), output_widths=(), r_h=v), "r_h"),
        (lambda v: VecFFN(v, 1, 1), "N"),
        (lambda v: VecFFN(2, v, 1), "d"),
        (lambda v: VecFFN(2, 1, v), "q"),
        (lambda v: VecFFN(2, 1, 1, hidden=(v,)), r"hidden\[0\]"),
        (lambda v: PracticalTransformer(v, 1), "D_e"),
        (lambda v: PracticalTransformer(2, v), "q"),
        (lambda v: PracticalTransformer(2, 1, width=v), "width"),
        (lambda v: PracticalRNN(v, 2), "D_in"),
        (lambda v: PracticalRNN(2, v), "hidden"),
        (lambda v: build_practical("transformer", N=v, d=1, q=1, d_e=1), "N"),
    ],
)
@pytest.mark.parametrize("value", [0, -3])
def test_bad_sizes_raise_value_error_naming_argument(ctor, name, value):
    with pytest.raises(ValueError, match=name):
        ctor(value)


def test_bad_non_integer_sizes_and_r_h():
    with pytest.raises(ValueError, match="D_e"):
        MergedAttention(2.5, 1, 1)
    with pytest.raises(ValueError, match="H"):
        MergedAttention(2, True, 1)
    with pytest.raises(ValueError, match="r_h"):
        DeepTransitionBiRNN(1, 1, transition_widths=(), output_widths=(), r_h=float("nan"))
    with pytest.raises(ValueError, match="r_h"):
        DeepTransitionBiRNN(1, 1, transition_widths=(), output_widths=(), r_h="big")
    with pytest.raises(ValueError, match="dtype"):
        MergedAttention(2, 1, 1, dtype=torch.int64)
    with pytest.raises(ValueError, match="generator"):
        MergedAttention(2, 1, 1, generator=3)


def _models():
    return [
        (MergedAttention(3, 2, 4, dtype=F64), lambda m, Z: m(Z)),
        (MergedAttention(3, 2, 4, dtype=F64), lambda m, Z: m.heads(Z)),
        (MergedAttention(3, 2, 4, dtype=F64), lambda m, Z: m.attention(Z)),
        (DeepTransitionBiRNN(3, 2, transition_widths=(3,), output_widths=(3,), r_h=1.0, dtype=F64),
         lambda m, Z: m(Z)),
        (DeepTransitionBiRNN(3, 2, transition_widths=(3,), output_widths=(3,), r_h=1.0, dtype=F64),
         lambda m, Z: m.states(Z)),
        (PracticalTransformer(3, 2, width=4, dtype=F64), lambda m, Z: m(Z)),
        (PracticalRNN(3, 4, dtype=F64), lambda m, Z: m(Z)),
    ]


@pytest.mark.parametrize("idx", range(7))
def test_forward_rejects_nan_wrong_shape_and_dtype(idx):
    model, call = _models()[idx]
    Z = torch.randn(2, 4, 3, dtype=F64)
    call(model, Z)  # fine
    bad = Z.clone()
    bad[1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        call(model, bad)
    with pytest.raises(ValueError, match="Z must have shape"):
        call(model, torch.randn(2, 4, 5, dtype=F64))
    with pytest.raises(ValueError, match="Z must have shape"):
        call(model, torch.randn(4, 3, dtype=F64))
    with pytest.raises(ValueError, match="dtype"):
        call(model, Z.float())
    with pytest.raises(ValueError, match="length N >= 1"):
        call(model, torch.randn(2, 0, 3, dtype=F64))


def test_chunk_must_be_positive():
    model = MergedAttention(3, 1, 2)
    with pytest.raises(ValueError, match="chunk"):
        model(torch.randn(1, 4, 3), chunk=0)


def test_experiment_models_have_the_documented_defaults():
    """build_practical's and EncodedFFN's defaults are the models docs/experiments.md documents
    (Appendix E): Transformer ReLU width 100, bidirectional GRU hidden 500 q, FFNs with hidden
    widths (1000, 1000)."""
    from qstr.constructions.models import EncodedFFN, build_practical

    shapes = lambda m: {n: tuple(p.shape) for n, p in m.named_parameters()}  # noqa: E731
    assert shapes(build_practical("transformer", N=8, d=2, q=2, d_e=4))["hidden.weight"] == (
        100,
        14 * 2,
    )
    rnn = shapes(build_practical("rnn", N=8, d=2, q=3, d_e=4))
    assert (
        rnn["rnn.weight_hh_l0"] == (3 * 1500, 1500) and "rnn.weight_hh_l0_reverse" in rnn
    )  # GRU: 3 gates
    for ffn in (build_practical("ffn", N=8, d=2, q=2, d_e=4), EncodedFFN(8, 14)):
        assert shapes(ffn)["net.0.weight"][0] == 1000 and shapes(ffn)["net.2.weight"] == (
            1000,
            1000,
        )


# ============================================ the experiment models (Appendix E, Figure 1)


def _n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _transformer_count(D_e: int, q: int, width: int, attn_bias: bool = False) -> int:
    """q heads of dim D_e (E = q D_e): W_Q (E x E), W_K, W_V (E x D_e), out_proj (E x E), ReLU
    width, scalar readout (+ 3E + E projection biases for the published variant)."""
    E = q * D_e
    return 2 * E * E + 2 * E * D_e + (E + 1) * width + width + 1 + (4 * E if attn_bias else 0)


def _birnn_count(D_in: int, H: int) -> int:
    """Bidirectional GRU: per direction 3 gates of H (D_in + H) weights and 2 x 3H biases."""
    return 2 * (3 * H * (D_in + H) + 6 * H) + 2 * H + 1


def _mlp_count(widths) -> int:
    return sum((a + 1) * b for a, b in zip(widths, widths[1:]))


def test_experiment_models_parameter_counts_are_the_closed_forms():
    """Appendix E at N = 6, d = 2, q = 2, d_e = 4 (D_e = 14): Transformer width 100, GRU hidden
    500 q, FFN (1000, 1000) on the one-hot input, the published biased Transformer, the encoded
    FFN, a GRU of hidden 16 (moved here from the experiment-models claim); small hand values."""
    from qstr.constructions.models import BiasedTransformer, EncodedFFN

    N, d, q, d_e = 6, 2, 2, 4
    D_e = d + (q + 1) * d_e
    kw = dict(N=N, d=d, q=q, d_e=d_e, generator=gen(300), dtype=F64)
    assert _n_params(build_practical("transformer", **kw)) == _transformer_count(D_e, q, 100)
    assert _n_params(build_practical("rnn", **kw)) == _birnn_count(D_e, 500 * q)
    assert _n_params(build_practical("rnn", hidden=16, **kw)) == _birnn_count(D_e, 16)
    assert _n_params(build_practical("ffn", **kw)) == _mlp_count((N * d + N * q * N, 1000, 1000, N))
    assert _n_params(BiasedTransformer(D_e, q, dtype=F64)) == _transformer_count(D_e, q, 100, True)
    assert _n_params(EncodedFFN(N, D_e, dtype=F64)) == _mlp_count((N * D_e, 1000, 1000, N))
    assert _n_params(PracticalRNN(5, 3, generator=gen(0))) == _birnn_count(5, 3) == 187
    assert _transformer_count(2, 1, 1) == 4 * 4 + 3 + 2 and _mlp_count((2, 3, 1)) == 9 + 4


def test_experiment_model_defaults_and_encodings_as_documented():
    """Documented defaults (Appendix E): Transformer width 100, VecFFN (1000,), PracticalFFN
    (1000, 1000) at N = 4, d = 2, q = 1, D_e = 8; encode's c = 1 (= rnn_encoding, codes copied
    as they are); the biased Transformer at zero biases is the plain one; the FFN takes t as
    (B, q) or (B, N, q); t_encoding="index" feeds t / N, one int width being one hidden layer."""
    from qstr.constructions.encoding import encode, rnn_encoding
    from qstr.constructions.models import BiasedTransformer

    N, d, q, D_e = 4, 2, 1, 8
    assert _n_params(PracticalTransformer(D_e, q, dtype=F64)) == _transformer_count(D_e, q, 100)
    assert _n_params(VecFFN(N, d, q, dtype=F64)) == _mlp_count((N * d + N * q * N, 1000, N))
    assert _n_params(PracticalFFN(N, d, q, dtype=F64)) == _mlp_count((N * d + N * q * N, 1000,
                                                                        1000, N))
    g = gen(305)
    x = torch.randn(2, N, d, generator=g, dtype=F64)
    t = torch.randint(0, N, (2, N, q), generator=g)
    omega = torch.randn(N, 3, generator=g, dtype=F64)
    assert torch.equal(encode(x, t, omega), rnn_encoding(x, t, omega))
    assert torch.equal(encode(x, t, omega)[..., d:d + 3], omega.expand(2, N, 3))
    N, d, q, d_e = 6, 2, 2, 4
    D_e = d + (q + 1) * d_e
    tr = build_practical("transformer", N=N, d=d, q=q, d_e=d_e, generator=gen(300), dtype=F64)
    biased = BiasedTransformer(D_e, q, generator=gen(300), dtype=F64)
    ffn = build_practical("ffn", N=N, d=d, q=q, d_e=d_e, generator=gen(300), dtype=F64)
    Z = torch.randn(2, N, D_e, generator=gen(302), dtype=F64)
    x = torch.randn(2, N, d, generator=gen(303), dtype=F64)
    t = torch.randint(0, N, (2, q), generator=gen(304))
    net = VecFFN(N, d, q, 3, t_encoding="index", dtype=F64)
    want = torch.cat([x.reshape(2, -1), t[:, None].expand(-1, N, q).reshape(2, -1).to(x) / N], 1)
    with torch.no_grad():
        assert (biased(Z) - tr(Z)).abs().max() <= 1e-12
        assert (ffn(x, t) - ffn(x, t[:, None].expand(2, N, q))).abs().max() <= 1e-12
        assert (net.inputs(x, t) - want).abs().max() <= 1e-15
    assert _n_params(net) == _mlp_count((N * d + N * q, 3, N))


def test_merged_attention_random_init_as_documented():
    """MergedAttention's documented init at D_e = 32, H = 2, m = 2048: W_QK ~ N(0, (0.1/D_e)^2),
    W ~ N(0, 1/(H D_e)), b = 0, a ~ N(0, 1/m); each sample std within 10% of its target."""
    D_e, H, m = 32, 2, 2048
    model = MergedAttention(D_e, H, m, generator=gen(304), dtype=F64)
    targets = {"W_QK": 0.1 / D_e, "W": (H * D_e) ** -0.5, "a": m ** -0.5}
    for k, v in targets.items():
        assert abs(float(getattr(model, k).detach().std()) / v - 1) <= 0.1, k
    assert bool((model.b == 0).all())
