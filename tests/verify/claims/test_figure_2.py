"""The figure-2 claim (verify/claims/figure_2.py) through its declared checks and faults;
block_shares measures shares exactly on a construction of known shape, and the scale check measures
~0 on a head built as Eq. A.2."""

from dataclasses import replace

import pytest
import torch

from qstr.constructions.attention import lemma11_weights
from qstr.constructions.experiment_models import PracticalTransformer
from qstr.constructions.layout import token_layout
from qstr.constructions.links import make_link
from qstr.verify.claims.figure_2 import F2_BLOCK, F2_D, a2_alpha, a2_attention, block_shares

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


def _head_with_block(inputs, alpha: float) -> PracticalTransformer:
    """A one-head Transformer whose merged_qk() is Eq. A.2's: alpha I on [slot0, pos], zero
    elsewhere (W_K = I, W_Q = sqrt(D_e) M^T, so Q^T K / sqrt(D_e) = M)."""
    lay = token_layout(F2_D, 1, inputs.d_e)
    D = lay.dim
    M = torch.zeros(D, D)
    M[lay["slot0"], lay["pos"]] = alpha * torch.eye(inputs.d_e)
    tr = PracticalTransformer(D, 1, generator=torch.Generator().manual_seed(0))
    Wq, Wk, _ = tr.projection_weights()
    with torch.no_grad():
        Wq.copy_(D**0.5 * M.T)
        Wk.copy_(torch.eye(D))
    assert torch.allclose(tr.merged_qk()[0], M, atol=1e-6)
    return tr


@pytest.mark.parametrize("alpha", [0.5, 2.0])
def test_a_head_built_as_eq_a2_is_at_its_own_scale(declared, alpha):
    """On a head whose block is exactly alpha I, the block's target score is alpha and Eq. A.2's
    alpha for the head's attention is alpha again: the scale check measures ~0, its shares 1."""
    d = declared(CID)
    inputs = replace(d.inputs, model=_head_with_block(d.inputs, alpha))
    v = d.verdict("scale = Eq. A.2's for the head's attention", inputs)
    assert v.holds and v.measured < 1e-4, v
    b = block_shares(inputs.model.merged_qk(), inputs.d_e)
    assert b["block"] == pytest.approx(1.0) and b["diag"] == pytest.approx(1.0)


def test_a2_alpha_inverts_a2_attention(declared):
    inp = declared(CID).inputs
    for alpha in (0.1, 1.0, 3.0):
        p = a2_attention(alpha, inp.omega, inp.c, inp.t)
        assert a2_alpha(p, inp.omega, inp.c, inp.t) == pytest.approx(alpha, rel=1e-9)
    assert a2_alpha(1 / inp.omega.shape[0], inp.omega, inp.c, inp.t) == 0.0
