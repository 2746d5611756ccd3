"""Prop 8's generalising slot-memory RNN (constructions/slot_memory.py), built from given
parameters (r_x, r_h, mu): exactness, its state blocks, its errors. Its guarantee (Prop 8's
quantities): tests/bounds/test_interpolation.py."""

import math

import pytest
import torch

import qstr.constructions.interpolation as interpolation
from qstr.constructions.codes import build_codebook, coherence
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.slot_memory import slot_memory_rnn
from tests.fixtures import t64

f64 = torch.float64


def test_the_old_path_is_the_same_function():
    """qstr.constructions.interpolation keeps serving slot_memory_rnn (listed in its __all__)."""
    assert interpolation.slot_memory_rnn is slot_memory_rnn
    assert "slot_memory_rnn" in interpolation.__all__


def test_slot_memory_rnn_exact_everywhere():
    g = torch.Generator().manual_seed(7)
    N, d, B = 12, 3, 20
    omega = build_codebook(N, kind="rs-hadamard", dtype=f64).omega
    u = torch.randn(d, generator=g, dtype=f64)
    u = u / u.norm()
    model = slot_memory_rnn(omega, u, r_x=8.0, r_h=math.sqrt(N - 1) * 8.0, mu=coherence(omega))
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
    assert model.d_h == N * d and model.r_h == math.sqrt(N - 1) * 8.0


def test_slot_memory_rnn_refuses_codes_that_are_not_float64_or_too_few():
    omega = build_codebook(16, kind="rs-hadamard", dtype=f64).omega
    u = t64(1.0, 0.0)
    with pytest.raises(ValueError, match="float64"):
        slot_memory_rnn(omega.float(), u, r_x=1.0, r_h=1.0, mu=0.5)
    with pytest.raises(ValueError, match="N >= 2"):
        slot_memory_rnn(omega[:1], u, r_x=1.0, r_h=1.0, mu=0.5)


def test_slot_memory_rnn_errors():
    omega = build_codebook(6, kind="rs-hadamard", dtype=f64).omega
    u = t64(1.0, 0.0)
    kw = dict(r_x=1.0, r_h=1.0, mu=coherence(omega))
    with pytest.raises(ValueError, match="mu"):
        slot_memory_rnn(
            t64(1, 0, 1, 0, 0, 1).reshape(3, 2), u, r_x=1.0, r_h=1.0, mu=1.0
        )  # two equal codes: coherence 1
    with pytest.raises(ValueError, match="unit norm"):
        slot_memory_rnn(omega, t64(1.0, 1.0), **kw)
    with pytest.raises(ValueError, match="r_x"):
        slot_memory_rnn(omega, u, r_x=0.0, r_h=1.0, mu=kw["mu"])
    with pytest.raises(ValueError, match="r_h"):
        slot_memory_rnn(omega, u, r_x=1.0, r_h=0.0, mu=kw["mu"])
    with pytest.raises(ValueError, match="omega"):
        slot_memory_rnn(omega.float(), u, **kw)
    with pytest.raises(ValueError, match="below the codebook"):
        slot_memory_rnn(omega, u, r_x=1.0, r_h=1.0, mu=0.0)
