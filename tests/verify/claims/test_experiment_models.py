"""The experiment-models claim (verify/claims/experiment_models.py) through its declared checks
and faults; gru_reference is torch's GRU, the closed-form counts are the tests' own, the one-hot
layout is torch's."""

import pytest
import torch
import torch.nn.functional as F

from qstr.constructions.experiment_models import PracticalRNN
from qstr.verify.claims import all_claims
from qstr.verify.claims.experiment_models import (
    closed_form_counts,
    gru_reference,
    onehot_tuples,
)

from tests.constructions.model_counts import birnn_count, mlp_count, transformer_count

CID = "experiment-models"


def test_a_unidirectional_gru_reaches_neither_end_from_the_last(declared):
    d = declared(CID)
    v = d.verdict("GRU reaches both ends", d.broken(d.claim.faults[0].name))
    assert not v.holds and v.measured == 0.0
    assert d.verdict("GRU reaches both ends").holds  # honest untouched


@pytest.mark.parametrize("fault", all_claims()[CID].faults, ids=lambda f: f.name)
def test_experiment_model_faults_fail_their_checks(declared, fault):
    """A porting slip (update convention, gate order, 1/sqrt(D_e), keys for queries, biases, the
    head's scale, vec order, one-hot layout) moves the equations' output far from the model's; a
    slipped default moves the parameter count; the honest inputs are left alone."""
    d = declared(CID)
    broken = fault.apply(d.inputs, d.ctx)
    for name in fault.breaks:
        v = d.verdict(name, broken)
        assert not v.holds, (name, v)
        if v.relation == "<=":
            assert v.measured > 1e-3, (name, v)
        assert d.verdict(name).holds


def test_the_models_are_built_at_appendix_e_sizes(declared):
    """The honest GRU is at hidden 500 q = 1000, the Transformer at width 100, the FFNs at
    (1000, 1000), and every count check case holds."""
    d = declared(CID)
    assert d.inputs.rnn.hidden_size == 1000 and d.inputs.transformer.width == 100
    assert d.inputs.ffn.hidden == (1000, 1000) == d.inputs.encoded.hidden
    v = d.verdict("parameter counts = closed form")
    assert v.holds and len(v.cases) == 6 and all(c.holds for _, c in v.cases)


@pytest.mark.parametrize(
    "N, d, q, d_e", [(6, 2, 2, 4), (6, 2, 1, 4), (3, 5, 3, 2), (100, 10, 1, 23)]
)
def test_closed_form_counts_are_the_tests_counts(N, d, q, d_e):
    D = d + (q + 1) * d_e
    got = closed_form_counts(N, d, q, d_e)
    assert got["transformer"] == transformer_count(D, q, 100)
    assert got["biased transformer"] == transformer_count(D, q, 100, True)
    assert got["GRU"] == birnn_count(D, 500 * q)
    assert got["FFN on onehot(t)"] == mlp_count((N * d + N * q * N, 1000, 1000, N))
    assert got["encoded FFN"] == mlp_count((N * D, 1000, 1000, N))


def test_onehot_tuples_is_torchs_one_hot_position_then_slot():
    t = torch.randint(5, (3, 5, 2), generator=torch.Generator().manual_seed(0))
    want = F.one_hot(t, 5).to(torch.float64).reshape(3, -1)
    assert torch.equal(onehot_tuples(t, 5), want)


def test_gru_reference_matches_torch():
    rnn = PracticalRNN(4, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    Z = torch.randn(3, 7, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(rnn(Z), gru_reference(rnn.rnn, rnn.readout, Z), atol=1e-12)
