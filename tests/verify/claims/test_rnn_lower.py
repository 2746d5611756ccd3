"""Helpers and registration of verify/claims/rnn_lower.py (tests/verify/claims/test_registered.py runs every claim)."""

import qstr.verify.claims.rnn_lower as rnn_lower  # noqa: F401  (registers the claims)
from qstr.verify.claims import REGISTRY

IDS = ("lemma-37", "lemma-38", "lemma-36", "prop-8", "thm-9", "thm-7")


def test_claims_registered_with_references():
    for cid in IDS:
        c = REGISTRY[cid]
        assert c.ref_seed and c.ref_conference and c.falsifier_statement


def test_clopper_pearson():
    lo, hi = rnn_lower.clopper_pearson(50, 100, 0.95)
    assert 0.41 < lo < 0.5 < hi < 0.59
    assert rnn_lower.clopper_pearson(0, 10)[0] == 0.0
    assert rnn_lower.clopper_pearson(10, 10)[1] == 1.0


def test_answer_vectors():
    import torch
    x = torch.arange(12, dtype=torch.float64).reshape(2, 3, 2)
    u = torch.tensor([1.0, 0.0], dtype=torch.float64)
    assert torch.equal(rnn_lower._answer_vectors(x, u), x[..., 0])
    t = torch.tensor([1, 2])
    A = rnn_lower._answer_vectors(x, u, t)
    assert torch.equal(A, torch.tensor([[2.0] * 3, [10.0] * 3], dtype=torch.float64))
