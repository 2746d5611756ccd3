"""Tests for constructions/paper_models.py: the paper's architectures as nn.Modules
(MergedAttention, Appendix A.1; DeepTransitionBiRNN, Appendix B.1; VecFFN, Section 4).

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

from qstr.constructions.mlp import MLPWeights
from qstr.constructions.paper_models import DeepTransitionBiRNN, MergedAttention, VecFFN
from tests.fixtures import seeded

F64 = torch.float64
FAST = settings(max_examples=25, deadline=None)


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
    B=st.integers(1, 2),
    N=st.integers(1, 5),
    D_e=st.integers(1, 4),
    H=st.integers(1, 3),
    m=st.integers(1, 5),
    out_dim=st.sampled_from([1, 2]),
    scale=st.sampled_from([1.0, 30.0]),
    seed=st.integers(0, 2**16),
)
def test_merged_attention_matches_naive_double_loop(B, N, D_e, H, m, out_dim, scale, seed):
    model = MergedAttention(D_e, H, m, out_dim, generator=seeded(seed), dtype=F64)
    with torch.no_grad():  # make scores O(scale) so the softmax is far from uniform
        model.W_QK.mul_(scale * D_e)
        model.b.normal_(generator=seeded(seed + 1))
    Z = torch.randn(B, N, D_e, generator=seeded(seed + 2), dtype=F64)
    y = model(Z).detach().numpy()
    ref = naive_merged(model, Z.numpy())
    assert y.shape == ((B, N) if out_dim == 1 else (B, N, out_dim))
    np.testing.assert_allclose(y, ref, atol=1e-10, rtol=0)


@FAST
@given(B=st.integers(1, 2), N=st.integers(1, 9), H=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_attention_rows_sum_to_one_and_heads_are_weighted_sums(B, N, H, seed):
    D_e = 3
    model = MergedAttention(D_e, H, 4, generator=seeded(seed), dtype=F64)
    with torch.no_grad():
        model.W_QK.mul_(20.0)
    Z = torch.randn(B, N, D_e, generator=seeded(seed + 1), dtype=F64)
    A = model.attention(Z)
    assert A.shape == (B, H, N, N)
    assert bool((A >= 0).all())
    torch.testing.assert_close(A.sum(-1), torch.ones(B, H, N, dtype=F64), atol=1e-12, rtol=0)
    heads = model.heads(Z)
    assert heads.shape == (B, N, H, D_e)
    torch.testing.assert_close(heads, torch.einsum("bhij,bjd->bihd", A, Z), atol=1e-12, rtol=0)
    s = model.scores(Z)  # z_i^T W_QK[h] z_j, query on the left
    want = torch.einsum("bid,hde,bje->bhij", Z, model.W_QK.detach(), Z)
    torch.testing.assert_close(s, want, atol=1e-10, rtol=1e-12)
    torch.testing.assert_close(torch.softmax(s, -1), A, atol=1e-12, rtol=0)


@FAST
@given(N=st.integers(1, 11), chunk=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_chunked_equals_unchunked(N, chunk, seed):
    model = MergedAttention(4, 2, 6, generator=seeded(seed), dtype=F64)
    Z = torch.randn(2, N, 4, generator=seeded(seed + 1), dtype=F64)
    torch.testing.assert_close(model(Z, chunk=chunk), model(Z), atol=1e-13, rtol=0)
    torch.testing.assert_close(model.heads(Z, chunk=chunk), model.heads(Z), atol=1e-13, rtol=0)
    torch.testing.assert_close(
        model.attention(Z, chunk=chunk), model.attention(Z), atol=1e-13, rtol=0
    )


def test_hand_set_W_QK_attends_to_chosen_key():
    """Lemma 11 with orthonormal position codes: head h returns the token z_{t_ih}."""
    B, N, d, H = 3, 6, 2, 2
    g = seeded(0)
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
    a = MergedAttention(5, 2, 4, generator=seeded(7))
    b = MergedAttention(5, 2, 4, generator=seeded(7))
    c = MergedAttention(5, 2, 4, generator=seeded(8))
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
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
    MergedAttention(5, 2, 4, generator=seeded(1))
    assert torch.equal(torch.random.get_rng_state(), before)


def test_merged_attention_float32_and_gradients():
    model = MergedAttention(4, 2, 5)
    Z = torch.randn(2, 7, 4)
    y = model(Z, chunk=3)
    assert y.dtype == torch.float32 and y.shape == (2, 7)
    y.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_merged_attention_random_init_as_documented():
    """MergedAttention's documented init at D_e = 32, H = 2, m = 2048: W_QK ~ N(0, (0.1/D_e)^2),
    W ~ N(0, 1/(H D_e)), b = 0, a ~ N(0, 1/m); each sample std within 10% of its target."""
    D_e, H, m = 32, 2, 2048
    model = MergedAttention(D_e, H, m, generator=seeded(304), dtype=F64)
    targets = {"W_QK": 0.1 / D_e, "W": (H * D_e) ** -0.5, "a": m**-0.5}
    for k, v in targets.items():
        assert abs(float(getattr(model, k).detach().std()) / v - 1) <= 0.1, k
    assert bool((model.b == 0).all())


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
        return [
            (W.numpy(), None if b is None else b.numpy())
            for W, b in MLPWeights.from_sequential(seq)
        ]

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
    dims=st.tuples(st.integers(1, 2), st.integers(1, 6), st.integers(1, 3), st.integers(1, 3)),
    tw=st.lists(st.integers(1, 4), max_size=2),
    ow=st.lists(st.integers(1, 4), max_size=2),
    r_h=st.sampled_from([0.3, 2.0, math.inf]),
    scale=st.sampled_from([1.0, 4.0]),
    out_dim=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_birnn_states_match_naive_recurrence(dims, tw, ow, r_h, scale, out_dim, seed):
    B, N, D_in, d_h = dims  # batch, positions, input width, state width
    model = DeepTransitionBiRNN(
        D_in,
        d_h,
        transition_widths=tuple(tw),
        output_widths=tuple(ow),
        r_h=r_h,
        out_dim=out_dim,
        generator=seeded(seed),
        dtype=F64,
    )
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(scale)
    Z = torch.randn(B, N, D_in, generator=seeded(seed + 1), dtype=F64)
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
        generator=seeded(0),
        dtype=F64,
    )
    Z = torch.randn(1, N, 2, generator=seeded(1), dtype=F64)
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
    model = DeepTransitionBiRNN(
        3, 4, transition_widths=(8, 8), output_widths=(5,), r_h=r_h, generator=seeded(2), dtype=F64
    )
    with torch.no_grad():
        for p in list(model.f_fwd.parameters()) + list(model.f_bwd.parameters()):
            p.mul_(10.0)
    Z = torch.randn(4, 9, 3, generator=seeded(3), dtype=F64)
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
    model = DeepTransitionBiRNN(
        2, 3, transition_widths=(5,), output_widths=(4,), r_h=r_h, generator=seeded(seed), dtype=F64
    )
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    swapped = DeepTransitionBiRNN(
        2, 3, transition_widths=(5,), output_widths=(4,), r_h=r_h, dtype=F64
    )
    MLPWeights.from_sequential(model.f_bwd).load_into(swapped.f_fwd)
    MLPWeights.from_sequential(model.f_fwd).load_into(swapped.f_bwd)
    Z = torch.randn(2, N, 2, generator=seeded(seed + 1), dtype=F64)
    hf, hb = model.states(Z)
    hf_r, hb_r = swapped.states(Z.flip(1))
    torch.testing.assert_close(hf_r, hb.flip(1), atol=1e-12, rtol=0)
    torch.testing.assert_close(hb_r, hf.flip(1), atol=1e-12, rtol=0)


def test_birnn_layer_structure():
    model = DeepTransitionBiRNN(5, 3, transition_widths=(7, 6), output_widths=(), r_h=1.0)
    lin = [l for l in model.f_fwd if isinstance(l, torch.nn.Linear)]
    assert [(l.in_features, l.out_features, l.bias is not None) for l in lin] == [
        (8, 7, True),
        (7, 6, True),
        (6, 3, False),
    ]
    ylin = [l for l in model.f_y if isinstance(l, torch.nn.Linear)]
    assert [(l.in_features, l.out_features, l.bias is not None) for l in ylin] == [(11, 1, False)]


# ===================================================================== VecFFN


def test_vecffn_first_layer_x_columns_act_on_vec_x():
    N, d, q = 4, 3, 2
    model = VecFFN(N, d, q, hidden=(6,), generator=seeded(0), dtype=F64)
    Wx = model.first_layer_x_weight()
    assert Wx.shape == (6, N * d)
    assert torch.equal(Wx, model.first_layer.weight[:, : N * d])
    assert model.first_layer.in_features == N * d + N * q * N
    x = torch.randn(3, N, d, generator=seeded(1), dtype=F64)
    t = torch.randint(0, N, (3, N, q), generator=seeded(2))
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
        N,
        d,
        q,
        hidden=(7, 5),
        task=task,
        t_encoding=t_encoding,
        out_dim=out_dim,
        generator=seeded(0),
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
