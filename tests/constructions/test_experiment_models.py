"""Tests for constructions/experiment_models.py: the trainable models of the experiments
(Appendix E, Figure 1): PracticalTransformer, PracticalRNN, PracticalFFN, build_practical.

Every comparison runs in float64 against torch's own modules or closed forms.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qstr.constructions.encoding import encode, rnn_encoding
from qstr.constructions.experiment_models import (
    PracticalFFN,
    PracticalRNN,
    PracticalTransformer,
    build_practical,
)
from qstr.constructions.paper_models import VecFFN
from tests.constructions.model_counts import birnn_count, mlp_count, n_params, transformer_count
from tests.fixtures import seeded

F64 = torch.float64
FAST = settings(max_examples=25, deadline=None)


# ================================================================ PracticalFFN


def test_practical_ffn_is_depth_three_vecffn():
    model = PracticalFFN(6, 2, 1, generator=seeded(0))
    assert isinstance(model, VecFFN)
    lin = [l for l in model.net if isinstance(l, torch.nn.Linear)]
    assert [(l.in_features, l.out_features) for l in lin] == [
        (6 * 2 + 6 * 6, 1000),
        (1000, 1000),
        (1000, 6),
    ]
    assert model(torch.randn(2, 6, 2), torch.randint(0, 6, (2, 6, 1))).shape == (2, 6)


# ======================================================== PracticalTransformer


@FAST
@given(
    D_e=st.integers(1, 5),
    q=st.integers(1, 3),
    N=st.integers(1, 6),
    B=st.integers(1, 2),
    seed=st.integers(0, 2**16),
)
def test_merged_qk_reproduces_mha_weights(D_e, q, N, B, seed):
    model = PracticalTransformer(D_e, q, width=4, generator=seeded(seed), dtype=F64)
    with torch.no_grad():  # sharpen the attention so the check is not against near-uniform rows
        for p in model.mha.parameters():
            p.mul_(3.0)
    Z = torch.randn(B, N, D_e, generator=seeded(seed + 1), dtype=F64)
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
    model = PracticalRNN(4, 6, cell=cell, out_dim=out_dim, generator=seeded(0))
    assert isinstance(model.rnn, PracticalRNN.CELLS[cell]) and model.rnn.bidirectional
    Z = torch.randn(3, 5, 4)
    y = model(Z)
    assert y.shape == ((3, 5) if out_dim == 1 else (3, 5, out_dim))
    assert bool(torch.isfinite(y).all())
    # readout reads the concatenated forward/backward outputs at each position
    out, _ = model.rnn(Z)
    torch.testing.assert_close(y.reshape(3, 5, out_dim), model.readout(out), atol=0, rtol=0)


def test_practical_rnn_deterministic_and_bad_cell():
    a, b = PracticalRNN(3, 4, generator=seeded(5)), PracticalRNN(3, 4, generator=seeded(5))
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
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


# ========================================== parameter counts and documented defaults


def test_experiment_models_have_the_documented_defaults():
    """build_practical's defaults are the models docs/experiments.md documents (Appendix E):
    Transformer ReLU width 100, bidirectional GRU hidden 500 q, FFN with hidden widths
    (1000, 1000) (EncodedFFN's: tests/constructions/test_published_models.py)."""
    shapes = lambda m: {n: tuple(p.shape) for n, p in m.named_parameters()}  # noqa: E731
    assert shapes(build_practical("transformer", N=8, d=2, q=2, d_e=4))["hidden.weight"] == (
        100,
        14 * 2,
    )
    rnn = shapes(build_practical("rnn", N=8, d=2, q=3, d_e=4))
    assert (
        rnn["rnn.weight_hh_l0"] == (3 * 1500, 1500) and "rnn.weight_hh_l0_reverse" in rnn
    )  # GRU: 3 gates
    ffn = build_practical("ffn", N=8, d=2, q=2, d_e=4)
    assert shapes(ffn)["net.0.weight"][0] == 1000 and shapes(ffn)["net.2.weight"] == (1000, 1000)


def test_experiment_models_parameter_counts_are_the_closed_forms():
    """Appendix E at N = 6, d = 2, q = 2, d_e = 4 (D_e = 14): Transformer width 100, GRU hidden
    500 q, FFN (1000, 1000) on the one-hot input, a GRU of hidden 16 (moved here from the
    experiment-models claim); small hand values (the published variants:
    tests/constructions/test_published_models.py)."""
    N, d, q, d_e = 6, 2, 2, 4
    D_e = d + (q + 1) * d_e
    kw = dict(N=N, d=d, q=q, d_e=d_e, generator=seeded(300), dtype=F64)
    assert n_params(build_practical("transformer", **kw)) == transformer_count(D_e, q, 100)
    assert n_params(build_practical("rnn", **kw)) == birnn_count(D_e, 500 * q)
    assert n_params(build_practical("rnn", hidden=16, **kw)) == birnn_count(D_e, 16)
    assert n_params(build_practical("ffn", **kw)) == mlp_count((N * d + N * q * N, 1000, 1000, N))
    assert n_params(PracticalRNN(5, 3, generator=seeded(0))) == birnn_count(5, 3) == 187
    assert transformer_count(2, 1, 1) == 4 * 4 + 3 + 2 and mlp_count((2, 3, 1)) == 9 + 4


def test_experiment_model_defaults_and_encodings_as_documented():
    """Documented defaults (Appendix E): Transformer width 100, VecFFN (1000,), PracticalFFN
    (1000, 1000) at N = 4, d = 2, q = 1, D_e = 8; encode's c = 1 (= rnn_encoding, codes copied
    as they are); the FFN takes t as (B, q) or (B, N, q); t_encoding="index" feeds t / N, one
    int width being one hidden layer."""
    N, d, q, D_e = 4, 2, 1, 8
    assert n_params(PracticalTransformer(D_e, q, dtype=F64)) == transformer_count(D_e, q, 100)
    assert n_params(VecFFN(N, d, q, dtype=F64)) == mlp_count((N * d + N * q * N, 1000, N))
    assert n_params(PracticalFFN(N, d, q, dtype=F64)) == mlp_count(
        (N * d + N * q * N, 1000, 1000, N)
    )
    g = seeded(305)
    x = torch.randn(2, N, d, generator=g, dtype=F64)
    t = torch.randint(0, N, (2, N, q), generator=g)
    omega = torch.randn(N, 3, generator=g, dtype=F64)
    assert torch.equal(encode(x, t, omega), rnn_encoding(x, t, omega))
    assert torch.equal(encode(x, t, omega)[..., d : d + 3], omega.expand(2, N, 3))
    N, d, q, d_e = 6, 2, 2, 4
    ffn = build_practical("ffn", N=N, d=d, q=q, d_e=d_e, generator=seeded(300), dtype=F64)
    x = torch.randn(2, N, d, generator=seeded(303), dtype=F64)
    t = torch.randint(0, N, (2, q), generator=seeded(304))
    net = VecFFN(N, d, q, 3, t_encoding="index", dtype=F64)
    want = torch.cat([x.reshape(2, -1), t[:, None].expand(-1, N, q).reshape(2, -1).to(x) / N], 1)
    with torch.no_grad():
        assert (ffn(x, t) - ffn(x, t[:, None].expand(2, N, q))).abs().max() <= 1e-12
        assert (net.inputs(x, t) - want).abs().max() <= 1e-15
    assert n_params(net) == mlp_count((N * d + N * q, 3, N))
