"""The figure-2 claim (verify/claims/figure_2.py) through its declared checks and faults;
block_shares measures shares exactly on a construction of known shape."""

from dataclasses import replace

import pytest
import torch

from qstr.constructions.attention import lemma11_weights
from qstr.constructions.layout import token_layout
from qstr.constructions.links import make_link
from qstr.verify.claims.figure_2 import F2_BLOCK, F2_D, block_shares

CID = "figure-2"


def test_blocks_of_the_construction_and_of_a_block_diagonal_matrix():
    net = make_link("linear", 1, F2_D, generator=torch.Generator().manual_seed(0)).two_layer_net()
    cons = lemma11_weights(16, F2_D, 1, net, alpha=3.0)
    b = block_shares(cons.model.W_QK, cons.d_e)
    assert b["block"] == pytest.approx(1.0) and b["diag"] == pytest.approx(1.0)
    lay = token_layout(F2_D, 1, cons.d_e)
    A = torch.zeros(1, lay.dim, lay.dim, dtype=torch.float64)
    A[0, lay["slot0"], lay["pos"]] = torch.ones(cons.d_e, cons.d_e)  # flat: diagonal share 1/d_e
    A[0, lay["x"], lay["x"]] = torch.eye(F2_D) * cons.d_e / F2_D**0.5  # as much mass elsewhere
    b = block_shares(A, cons.d_e)
    assert b["block"] == pytest.approx(0.5) and b["diag"] == pytest.approx(b["chance_diag"])
    assert b["chance"] == pytest.approx(cons.d_e**2 / lay.dim**2)


def test_figure2_checks_hold_on_the_trained_head(declared):
    d = declared(CID)
    verdicts = d.verdicts()
    for name, v in verdicts.items():
        assert v.holds and v.dtype == "float32", (name, v)
    assert verdicts[d.claim.checks[0].name].measured >= F2_BLOCK


def test_another_wrong_block_fails_too(declared):
    d = declared(CID)
    assert not d.verdict("block share >= 0.9", replace(d.inputs, key="x")).holds
