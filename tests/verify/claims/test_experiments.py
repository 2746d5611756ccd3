"""Unit tests for verify/claims/experiments.py: the Figure 2 block test measures shares exactly, passes on
the trained model and fails on the transposed block and the untrained matrix."""
import pytest
import torch

import qstr.verify.claims.experiments as E
from qstr.constructions.attention import lemma11_weights
from qstr.constructions.layout import token_layout
from qstr.constructions.links import make_link
from qstr.verify.registry import Context


def test_blocks_of_the_construction_and_of_a_block_diagonal_matrix():
    net = make_link("linear", 1, E.F2_D, generator=torch.Generator().manual_seed(0)).two_layer_net()
    cons = lemma11_weights(16, E.F2_D, 1, net, alpha=3.0)
    b = E._blocks(cons.model.W_QK, cons.d_e)
    assert b["block"] == pytest.approx(1.0) and b["diag"] == pytest.approx(1.0)
    lay = token_layout(E.F2_D, 1, cons.d_e)
    A = torch.zeros(1, lay.dim, lay.dim, dtype=torch.float64)
    A[0, lay["slot0"], lay["pos"]] = torch.ones(cons.d_e, cons.d_e)  # the block, flat: diagonal share 1/d_e
    A[0, lay["x"], lay["x"]] = torch.eye(E.F2_D) * cons.d_e / E.F2_D ** 0.5  # as much mass elsewhere
    b = E._blocks(A, cons.d_e)
    assert b["block"] == pytest.approx(0.5) and b["diag"] == pytest.approx(b["chance_diag"])
    assert b["chance"] == pytest.approx(cons.d_e ** 2 / lay.dim ** 2)


def test_figure2_claim_holds_and_its_falsifier_fails():
    ctx = Context()
    out = E._figure2(ctx)
    assert out.holds and out.value >= E.F2_BLOCK
    assert not E._figure2_falsifier(ctx).holds
    assert not E._figure2(ctx, query="slot0", key="x").holds  # another wrong block


def test_experiment_models_hold_and_a_unidirectional_gru_is_caught():
    ctx = Context()
    out = E._experiment_models(ctx)
    assert out.holds and out.value <= E.EM_TOL, out.detail
    bad = E._experiment_models_falsifier(ctx)
    assert not bad.holds and "reach of the other end 0" in bad.measured


def test_closed_form_counts_on_small_models():
    from qstr.constructions.models import PracticalRNN
    rnn = PracticalRNN(5, 3, generator=torch.Generator().manual_seed(0))
    assert E._params(rnn) == E.birnn_count(5, 3) == 2 * (3 * 3 * 8 + 18) + 7
    assert E.transformer_count(2, 1, 1) == 4 * 4 + 3 + 2 and E.mlp_count((2, 3, 1)) == 9 + 4


def test_gru_reference_matches_torch_and_sees_both_ends():
    from qstr.constructions.models import PracticalRNN
    rnn = PracticalRNN(4, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    Z = torch.randn(3, 7, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(rnn(Z), E.gru_reference(rnn.rnn, rnn.readout, Z), atol=1e-12)
        assert min(E._later_token_reach(rnn, Z)) > 1e-6


def test_merged_init_and_defaults_as_documented(monkeypatch):
    from qstr.verify.claims import experiments

    assert experiments.merged_init_as_documented(0) <= 0.1 and experiments.defaults_as_documented(0)
    real = experiments.MergedAttention

    def loud(*args, **kw):  # W_QK drawn 10x too large
        model = real(*args, **kw)
        with torch.no_grad():
            model.W_QK.mul_(10)
        return model

    monkeypatch.setattr(experiments, "MergedAttention", loud)
    assert experiments.merged_init_as_documented(0) > 1
