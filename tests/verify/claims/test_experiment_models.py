"""The experiment-models claim (verify/claims/experiment_models.py) through its declared checks
and faults; gru_reference is torch's GRU."""

import pytest
import torch

from qstr.constructions.experiment_models import PracticalRNN
from qstr.verify.claims import all_claims
from qstr.verify.claims.experiment_models import gru_reference
from qstr.verify.registry import Context

CTX = Context(profile="quick")
MODELS = all_claims()["experiment-models"]


@pytest.fixture(scope="module")
def models():
    return MODELS.inputs(CTX)


def test_experiment_model_checks_hold(models):
    for check in MODELS.checks:
        v = check.run(models, CTX)
        assert v.holds, (check.name, v)


def test_a_unidirectional_gru_reaches_neither_end_from_the_last(models):
    fault = MODELS.faults[0]
    v = MODELS.check_named("GRU reaches both ends").run(fault.apply(models, CTX), CTX)
    assert not v.holds and v.measured == 0.0
    assert MODELS.check_named("GRU reaches both ends").run(models, CTX).holds  # honest untouched


@pytest.mark.parametrize("fault", MODELS.faults, ids=lambda f: f.name)
def test_experiment_model_faults_fail_their_checks(models, fault):
    """A porting slip (update convention, gate order, 1/sqrt(D_e), keys for queries, vec order)
    moves the equations' output far from the model's, and leaves the honest inputs alone."""
    broken = fault.apply(models, CTX)
    for name in fault.breaks:
        v = MODELS.check_named(name).run(broken, CTX)
        assert not v.holds and (v.measured > 1e-3 or name == "GRU reaches both ends"), (name, v)
        assert MODELS.check_named(name).run(models, CTX).holds


def test_gru_reference_matches_torch():
    rnn = PracticalRNN(4, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    Z = torch.randn(3, 7, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(rnn(Z), gru_reference(rnn.rnn, rnn.readout, Z), atol=1e-12)
