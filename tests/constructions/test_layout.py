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
