"""Tests for constructions/mlp.py: ReLU MLPs as nn.Sequential and their (W, b) weight lists."""
from __future__ import annotations

import pytest
import torch

from qstr.constructions.mlp import make_mlp, set_mlp_weights


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
