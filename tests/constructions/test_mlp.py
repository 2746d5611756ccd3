"""Tests for constructions/mlp.py: an MLP's weights as MLPWeights, evaluated directly and
converted to and from nn.Sequential, TwoLayerNet and the rnn_state dicts."""

from __future__ import annotations

import pytest
import torch

from qstr.constructions.links import TwoLayerNet
from qstr.constructions.mlp import Dense, MLPWeights, make_mlp

F64 = torch.float64


def test_load_into_copies_and_checks():
    seq = make_mlp(3, (4,), 2)  # Linear(3,4)+bias, ReLU, Linear(4,2) no bias
    assert seq[0].bias is not None and seq[2].bias is None
    W1, b1, W2 = torch.arange(12.0).reshape(4, 3), torch.ones(4), torch.full((2, 4), 0.5)
    MLPWeights(((W1, b1), (W2, None))).load_into(seq)
    assert (
        torch.equal(seq[0].weight, W1)
        and torch.equal(seq[0].bias, b1)
        and torch.equal(seq[2].weight, W2)
    )
    x = torch.tensor([1.0, -1.0, 2.0])
    torch.testing.assert_close(seq(x), W2 @ torch.relu(W1 @ x + b1))
    MLPWeights(((W1, None), (W2, None))).load_into(seq)  # None on a biased layer: zero bias
    assert torch.equal(seq[0].bias, torch.zeros(4))
    with pytest.raises(ValueError, match="weights"):
        MLPWeights(((W1, b1),)).load_into(seq)
    with pytest.raises(ValueError, match=r"weights\[0\]\.W"):
        MLPWeights(((W1[:, :2], b1), (W2, None))).load_into(seq)
    with pytest.raises(ValueError, match=r"weights\[1\]\.b"):
        MLPWeights(((W1, b1), (W2, torch.zeros(2)))).load_into(seq)
    with pytest.raises(ValueError, match="NaN"):
        MLPWeights(((W1 * float("nan"), b1), (W2, None))).load_into(seq)


def test_weights_check_their_shapes():
    W1, b1, W2 = torch.zeros(4, 3), torch.zeros(4), torch.zeros(2, 4)
    with pytest.raises(ValueError, match=r"layers\[0\]\.b"):
        MLPWeights(((W1, torch.zeros(5)), (W2, None)))
    with pytest.raises(ValueError, match=r"layers\[1\]\.W must have 4 columns"):
        MLPWeights(((W1, b1), (W2.T, None)))
    with pytest.raises(ValueError, match="2-D"):
        MLPWeights(((b1, None),))
    with pytest.raises(ValueError, match="pair"):
        MLPWeights((W1,))
    with pytest.raises(ValueError, match="at least one layer"):
        MLPWeights(())
    w = MLPWeights([(W1, b1), (W2, None)])
    assert isinstance(w.layers, tuple) and all(isinstance(L, Dense) for L in w)
    assert (w.in_dim, w.widths, w.out_dim, w.bias_last, len(w)) == (3, (4,), 2, False, 2)
    assert w[0].W is W1 and w[0].b is b1 and w[1].b is None  # shared, not copied


def test_call_is_the_mlp_chunked_and_in_the_input_dtype():
    g = torch.Generator().manual_seed(0)
    W1, b1 = torch.randn(5, 3, generator=g, dtype=F64), torch.randn(5, generator=g, dtype=F64)
    W2, b2 = torch.randn(4, 5, generator=g, dtype=F64), torch.randn(4, generator=g, dtype=F64)
    W3 = torch.randn(2, 4, generator=g, dtype=F64)
    w = MLPWeights(((W1, b1), (W2, b2), (W3, None)))
    u = torch.randn(7, 6, 3, generator=g, dtype=F64)
    want = torch.relu(torch.relu(u @ W1.T + b1) @ W2.T + b2) @ W3.T
    assert torch.allclose(w(u), want, rtol=0, atol=1e-13)
    assert torch.allclose(w(u, chunk=5), w(u), rtol=0, atol=1e-13)  # rows in chunks
    assert w(u.float()).dtype == torch.float32
    assert w(torch.zeros(0, 3, dtype=F64)).shape == (0, 2)
    with pytest.raises(ValueError, match="chunk"):
        w(u, chunk=0)


def test_sequential_round_trip():
    """to_sequential / from_sequential: the same weights and the same function, a bias on the last
    layer exactly when the weights have one."""
    g = torch.Generator().manual_seed(1)
    for bias_last in (False, True):
        layers = (
            (torch.randn(5, 3, generator=g, dtype=F64), torch.randn(5, generator=g, dtype=F64)),
            (
                torch.randn(2, 5, generator=g, dtype=F64),
                torch.randn(2, generator=g, dtype=F64) if bias_last else None,
            ),
        )
        w = MLPWeights(layers)
        seq = w.to_sequential()
        assert (seq[-1].bias is not None) == bias_last and seq[0].weight.dtype == F64
        back = MLPWeights.from_sequential(seq)
        for A, B in zip(w, back, strict=True):
            assert torch.equal(A.W, B.W) and (A.b is B.b is None or torch.equal(A.b, B.b))
            assert A.W is not B.W  # detached clones
        u = torch.randn(9, 3, generator=g, dtype=F64)
        with torch.no_grad():
            assert torch.allclose(seq(u), w(u), rtol=0, atol=1e-14)
    assert MLPWeights.from_sequential(w.to_sequential(dtype=torch.float32))[0].W.dtype == (
        torch.float32
    )


def test_two_layer_net_and_dicts_round_trip():
    g = torch.Generator().manual_seed(2)
    net = TwoLayerNet(
        a=torch.randn(6, generator=g, dtype=F64),
        W=torch.randn(6, 4, generator=g, dtype=F64),
        b=torch.randn(6, generator=g, dtype=F64),
    )
    w = net.as_mlp()
    assert w.widths == (6,) and w.out_dim == 1 and not w.bias_last
    xt = torch.randn(10, 2, 2, generator=g, dtype=F64)
    assert torch.allclose(w(xt.flatten(-2)).squeeze(-1), net(xt), rtol=0, atol=1e-14)
    back = TwoLayerNet.from_mlp(w)
    assert back.a is not None and torch.equal(back.a, net.a) and back.W is net.W
    with pytest.raises(ValueError, match="two layers"):
        TwoLayerNet.from_mlp(MLPWeights(((net.W, None), (net.a[None, :], None))))
    with pytest.raises(ValueError, match="MLPWeights"):
        TwoLayerNet.from_mlp([(net.W, net.b)])
    dicts = w.as_dicts()
    assert [sorted(L) for L in dicts] == [["W", "b"], ["W"]]
    again = MLPWeights.from_dicts(dicts)
    assert again[0].W is net.W and again[1].b is None
    with pytest.raises(ValueError, match="dicts"):
        MLPWeights.from_dicts([{"b": net.b}])


def test_replace_layer():
    W1, b1, W2 = torch.ones(4, 3), torch.ones(4), torch.ones(2, 4)
    w = MLPWeights(((W1, b1), (W2, None)))
    half = w.replace_layer(1, W=W2 / 2)
    assert half[0].W is W1 and half[0].b is b1 and torch.equal(half[1].W, W2 / 2) and w[1].W is W2
    assert w.replace_layer(0, drop_bias=True)[0].b is None
    assert torch.equal(w.replace_layer(0, b=2 * b1)[0].b, 2 * b1)
