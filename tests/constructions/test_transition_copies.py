"""The altered copies of the Prop 26 transition (constructions/recurrent.py:
``Transition.with_threshold``, ``Transition.with_layers``), through which the prop-26 claim
builds its broken transitions (verify/claims/prop_26.py)."""

import pytest
import torch

from tests.fixtures import seeded

F64 = torch.float64


@pytest.fixture(scope="module")
def rotated_case(transitions):
    """The transition on the rotated RS-Hadamard code (approximate products; tests/conftest.py),
    and 32 inputs z and u = (h, z) on it (tokens in the r_x ball's cube, h = 0)."""
    book, tr = transitions[1]
    g = seeded(26)
    i, t = torch.randint(64, (32,), generator=g), torch.randint(64, (32, 2), generator=g)
    om = book.omega
    x = torch.randn(32, 3, generator=g, dtype=F64)
    z = torch.cat([x, om[i], om[t[:, 0]], om[t[:, 1]]], 1)
    u = torch.cat([torch.zeros(32, tr.d_h, dtype=F64), z], 1)
    return tr, z, u


def test_with_threshold_subtracts_the_new_threshold_and_zero_passes_the_gate(rotated_case):
    """At threshold 0 layers 3-4 pass the gate G unchanged (closed form and dense layers); a
    threshold 3 b is layer 3's bias; the guarantee rides along and the original is untouched."""
    tr, z, u = rotated_case
    before = tr.dense(u)
    gate = tr.with_threshold(0.0)
    assert gate is not tr and gate.guarantee is tr.guarantee and gate.threshold == 0.0
    assert torch.equal(gate(z), tr(z, rectify=False))
    assert float((gate.dense(u) - tr.dense(u, rectify=False)).abs().max()) <= 1e-12
    high = tr.with_threshold(3 * tr.threshold)
    assert torch.equal(high.layers[2].b, torch.full_like(tr.layers[2].b, -3 * tr.threshold))
    assert float((high(z) - high.dense(u)).abs().max()) <= 1e-9
    with pytest.raises(ValueError, match="threshold"):
        tr.with_threshold(-1.0)
    assert tr.threshold > 0 and torch.equal(tr.dense(u), before)


def test_with_layers_swaps_the_dense_layers_only(rotated_case):
    """A copy with layer 3 halved: its dense layers (and gate readout, layer 3's top rows) are the
    given ones, its closed form and guarantee the original's; other shapes are refused."""
    tr, z, u = rotated_case
    L = tr.layers
    half = tr.with_layers(L.replace_layer(2, W=L[2].W / 2))
    assert half is not tr and half.guarantee is tr.guarantee and torch.equal(half(z), tr(z))
    assert torch.equal(half.layers[2].W, L[2].W / 2) and tr.layers is L
    readout = half.layers_without_rectifier()[2].W
    assert torch.equal(readout, tr.layers_without_rectifier()[2].W / 2)
    gap = half.dense(u, rectify=False) - tr.dense(u, rectify=False) / 2
    assert float(gap.abs().max()) <= 1e-12
    with pytest.raises(ValueError, match="shapes"):
        tr.with_layers(tr.layers_without_rectifier())  # three layers, not four
