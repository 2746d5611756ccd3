"""The figure-2 and experiment-models claims (verify/claims/experiments.py) through their declared
checks and faults; block_shares measures shares exactly on a construction of known shape."""

import pytest
import torch

from qstr.constructions.attention import lemma11_weights
from qstr.constructions.layout import token_layout
from qstr.constructions.links import make_link
from qstr.verify.claims import all_claims
from qstr.verify.claims.experiments import F2_BLOCK, F2_D, block_shares, gru_reference
from qstr.verify.registry import Context

CTX = Context(profile="quick")
FIG2, MODELS = all_claims()["figure-2"], all_claims()["experiment-models"]


@pytest.fixture(scope="module")
def fig2():
    return FIG2.inputs(CTX)


@pytest.fixture(scope="module")
def models():
    return MODELS.inputs(CTX)


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


def test_figure2_checks_hold_on_the_trained_head(fig2):
    for check in FIG2.checks:
        v = check.run(fig2, CTX)
        assert v.holds and v.dtype == "float32", (check.name, v)
    assert FIG2.checks[0].run(fig2, CTX).measured >= F2_BLOCK


@pytest.mark.parametrize("fault", FIG2.faults, ids=lambda f: f.name)
def test_figure2_faults_fail_their_checks(fig2, fault):
    broken = fault.apply(fig2, CTX)
    assert all(not FIG2.check(name).run(broken, CTX).holds for name in fault.breaks)


def test_another_wrong_block_fails_too(fig2):
    from dataclasses import replace

    assert not FIG2.check("block share >= 0.9").run(replace(fig2, key="x"), CTX).holds


def test_experiment_model_checks_hold(models):
    for check in MODELS.checks:
        v = check.run(models, CTX)
        assert v.holds, (check.name, v)


def test_a_unidirectional_gru_reaches_neither_end_from_the_last(models):
    fault = MODELS.faults[0]
    v = MODELS.check("GRU reaches both ends").run(fault.apply(models, CTX), CTX)
    assert not v.holds and v.measured == 0.0
    assert MODELS.check("GRU reaches both ends").run(models, CTX).holds  # the honest GRU untouched


@pytest.mark.parametrize("fault", MODELS.faults, ids=lambda f: f.name)
def test_experiment_model_faults_fail_their_checks(models, fault):
    """A porting slip (update convention, gate order, 1/sqrt(D_e), keys for queries, vec order)
    moves the equations' output far from the model's, and leaves the honest inputs alone."""
    broken = fault.apply(models, CTX)
    for name in fault.breaks:
        v = MODELS.check(name).run(broken, CTX)
        assert not v.holds and (v.measured > 1e-3 or name == "GRU reaches both ends"), (name, v)
        assert MODELS.check(name).run(models, CTX).holds


def test_gru_reference_matches_torch():
    from qstr.constructions.experiment_models import PracticalRNN

    rnn = PracticalRNN(4, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    Z = torch.randn(3, 7, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(rnn(Z), gru_reference(rnn.rnn, rnn.readout, Z), atol=1e-12)
