"""Tests for constructions/layout.py: named token blocks, their slices, split and join."""

import pytest
import torch

from qstr.constructions.layout import Layout, token_layout


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


@pytest.mark.parametrize("d, q, d_e", [(2, 2, 4), (4, 1, 13), (3, 3, 2)])
def test_token_layout_blocks_of_the_encoding(d, q, d_e):
    """Appendix A.1's token z = (x, omega_i, omega_t1, ..., omega_tq): blocks of sizes d, d_e, ...,
    d_e named x, pos, slot0..slot{q-1} (no slot{q}), D_e = d + (q + 1) d_e."""
    lay = token_layout(d, q, d_e)
    sizes = [lay.size("x"), lay.size("pos")] + [lay.size(f"slot{k}") for k in range(q)]
    assert sizes == [d] + [d_e] * (q + 1) and lay.dim == d + (q + 1) * d_e
    assert all(f"slot{k}" in lay for k in range(q)) and f"slot{q}" not in lay and "pos" in lay
