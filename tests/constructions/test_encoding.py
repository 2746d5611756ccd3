"""Tests for constructions/encoding.py: the Transformer and RNN token encodings (Appendices A.1,
B.1)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qstr.bounds.attention import lemma11
from qstr.constructions.encoding import (
    default_prefactor,
    encode,
    layout_of,
    rnn_encoding,
    transformer_encoding,
)
from qstr.constructions.links import make_link
from qstr.verify.strategies import prompts


@settings(max_examples=40, deadline=None)
@given(prompts(max_N=8, dtypes=(torch.float64,)), st.integers(1, 5))
def test_transformer_encoding_blocks(case, d_e):
    task, p = case
    omega = torch.randn(
        task.N + 2, d_e, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
    )
    z = transformer_encoding(p.x, p.t, omega)
    c = math.sqrt(task.d / task.q)
    lay = layout_of(z, task.d, task.q)
    parts = lay.split(z)
    assert z.shape == (p.x.shape[0], task.N, task.d + (task.q + 1) * d_e)
    assert torch.equal(parts["x"], p.x)
    for i in range(task.N):
        assert torch.allclose(parts["pos"][:, i], c * omega[i].expand(p.x.shape[0], d_e))
        for k in range(task.q):
            for b in range(p.x.shape[0]):
                assert torch.allclose(parts[f"slot{k}"][b, i], c * omega[p.t[b, i, k]])


def test_rnn_encoding_has_no_prefactor(gen):
    x = torch.randn(2, 4, 3, generator=gen)
    t = torch.randint(4, (2, 4, 2), generator=gen)
    omega = torch.randn(4, 5, generator=gen)
    z = rnn_encoding(x, t, omega)
    assert torch.equal(z[..., 3:8], omega.expand(2, 4, 5))
    assert torch.allclose(transformer_encoding(x, t, omega, c=1.0), z)
    assert default_prefactor(3, 2) == pytest.approx(math.sqrt(1.5))
    # equal norms of token and code parts in expectation: E||x||^2 = d, ||c omega||^2 (q+1) ~ d
    assert default_prefactor(8, 2) ** 2 * 2 == 8


def test_encoding_errors(gen):
    x = torch.randn(2, 4, 3, generator=gen)
    t = torch.randint(4, (2, 4, 1), generator=gen)
    omega = torch.randn(4, 5, generator=gen)
    with pytest.raises(ValueError, match="omega has 3 rows"):
        encode(x, t, omega[:3])
    with pytest.raises(ValueError, match="must match x"):
        encode(x, t, omega.double())
    with pytest.raises(ValueError, match=r"t must have q >= 1 entries in \[0, N\)"):
        encode(x, t + 4, omega)
    with pytest.raises(ValueError, match="t must be a torch.long"):
        encode(x, t.float(), omega)
    bad = x.clone()
    bad[1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match="x contains NaN"):
        encode(bad, t, omega)
    with pytest.raises(ValueError, match="c must be"):
        encode(x, t, omega, c=-1.0)
    with pytest.raises(ValueError, match="not d \\+ \\(q \\+ 1\\) d_e"):
        layout_of(torch.zeros(1, 1, 10), 3, 2)


@pytest.mark.parametrize("link, q", [("linear", 2), ("teacher", 3)])
def test_layout_of_an_encoded_batch_is_the_constructions_layout(link, q):
    """The blocks read back from the width of transformer_encoding (default c) are the Lemma 11
    construction's layout (what the exported module reads)."""
    net = make_link(link, q, 4, generator=torch.Generator().manual_seed(q)).two_layer_net()
    cons = lemma11(16, 4, q, net, eps=0.05, r_x=3.0)
    x = torch.randn(1, 16, 4, dtype=torch.float64)
    t = torch.randint(0, 16, (1, 16, q))
    assert layout_of(transformer_encoding(x, t, cons.omega[:16]), 4, q) == cons.layout


def test_transformer_encoding_of_lists_says_it_takes_tensors(gen):
    """Issue 52: a list for x was an AttributeError (its .shape read for the default c)."""
    x = torch.randn(2, 4, 3, generator=gen)
    t = torch.randint(4, (2, 4, 1), generator=gen)
    omega = torch.randn(4, 5, generator=gen)
    with pytest.raises(ValueError) as err:
        transformer_encoding(x.tolist(), t, omega)
    assert str(err.value) == "x must be a torch.Tensor, got list"
    with pytest.raises(ValueError) as err:
        transformer_encoding(x, t.tolist(), omega)
    assert str(err.value) == "t must be a torch.long tensor of shape (B, N, q)"
    with pytest.raises(ValueError) as err:
        transformer_encoding(x[0, 0, 0], t, omega)
    assert str(err.value) == "x must have shape (*, *, *), got ()"
    assert torch.equal(transformer_encoding(x, t, omega), encode(x, t, omega, c=math.sqrt(3)))
