"""The experiment-models claim (verify/claims/experiment_models.py) through its declared checks
and faults; gru_reference is torch's GRU."""

import pytest
import torch

from qstr.constructions.experiment_models import PracticalRNN
from qstr.verify.claims import all_claims
from qstr.verify.claims.experiment_models import gru_reference

CID = "experiment-models"


def test_a_unidirectional_gru_reaches_neither_end_from_the_last(declared):
    d = declared(CID)
    v = d.verdict("GRU reaches both ends", d.broken(d.claim.faults[0].name))
    assert not v.holds and v.measured == 0.0
    assert d.verdict("GRU reaches both ends").holds  # honest untouched


@pytest.mark.parametrize("fault", all_claims()[CID].faults, ids=lambda f: f.name)
def test_experiment_model_faults_fail_their_checks(declared, fault):
    """A porting slip (update convention, gate order, 1/sqrt(D_e), keys for queries, vec order)
    moves the equations' output far from the model's, and leaves the honest inputs alone."""
    d = declared(CID)
    broken = fault.apply(d.inputs, d.ctx)
    for name in fault.breaks:
        v = d.verdict(name, broken)
        assert not v.holds and (v.measured > 1e-3 or name == "GRU reaches both ends"), (name, v)
        assert d.verdict(name).holds


def test_gru_reference_matches_torch():
    rnn = PracticalRNN(4, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    Z = torch.randn(3, 7, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(rnn(Z), gru_reference(rnn.rnn, rnn.readout, Z), atol=1e-12)
