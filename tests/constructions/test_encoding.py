import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qstr.constructions.encoding import default_prefactor, encode, layout_of, rnn_encoding, transformer_encoding
from qstr.constructions.layout import Layout, token_layout
from qstr.verify.strategies import prompts


def test_layout_slices():
    lay = token_layout(d=3, q=2, d_e=4)
    assert lay.dim == 3 + 3 * 4
    assert lay["x"] == slice(0, 3)
    assert lay["pos"] == slice(3, 7)
    assert lay.slot(0) == slice(7, 11) and lay.slot(1) == slice(11, 15)
    assert lay.names == ("x", "pos", "slot0", "slot1")
    with pytest.raises(ValueError, match="no block named 'slot2'"):
        lay.slot(2)


def test_layout_split_join_roundtrip():
    lay = token_layout(2, 1, 3)
    z = torch.randn(4, 5, lay.dim)
    assert torch.equal(lay.join(lay.split(z)), z)
    with pytest.raises(ValueError, match="missing"):
        lay.join({"x": z[..., :2]})
    with pytest.raises(ValueError, match="distinct"):
        Layout((("a", 1), ("a", 2)))
    with pytest.raises(ValueError, match="size of block"):
        Layout((("a", 0),))


@settings(max_examples=40, deadline=None)
@given(prompts(max_N=8, dtypes=(torch.float64,)), st.integers(1, 5))
def test_transformer_encoding_blocks(case, d_e):
    task, p = case
    omega = torch.randn(task.N + 2, d_e, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
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
