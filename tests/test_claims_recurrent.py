"""Registration and the GPU profile of verify/claims/recurrent.py (tests/test_claims.py runs every claim)."""
import pytest

import verify.claims.recurrent  # noqa: F401  (registers the claims)
from verify.registry import REGISTRY, Context, run_claim

IDS = ("lemma-22", "lemma-24", "prop-26", "cor-27", "prop-28")


def test_claims_are_registered_with_references():
    for cid in IDS:
        c = REGISTRY[cid]
        assert c.ref_seed and c.ref_conference and c.falsifier_statement


@pytest.mark.gpu
def test_cor27_gpu_profile():
    r = run_claim(REGISTRY["cor-27"], Context(profile="gpu", device="cuda"))
    assert r.passed, (r.detail, r.falsifier_detail, r.error)
