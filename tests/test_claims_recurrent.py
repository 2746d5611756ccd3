"""The recurrent claims (verify/claims/recurrent.py) hold and their falsifiers are caught (quick profile)."""
import pytest

import verify.claims.recurrent  # noqa: F401  (registers the claims)
from verify.registry import REGISTRY, Context, run_claim

IDS = ("lemma-22", "lemma-24", "prop-26", "cor-27", "prop-28")


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_and_falsifier_is_caught(cid):
    r = run_claim(REGISTRY[cid], Context(profile="quick"))
    assert r.error == "", r.error
    assert r.holds, r.detail
    assert r.falsifier_caught, r.falsifier_detail
    assert r.passed


def test_claims_are_registered_with_references():
    for cid in IDS:
        c = REGISTRY[cid]
        assert c.ref_seed and c.ref_conference and c.falsifier_statement


@pytest.mark.gpu
def test_cor27_gpu_profile():
    r = run_claim(REGISTRY["cor-27"], Context(profile="gpu", device="cuda"))
    assert r.passed, (r.detail, r.falsifier_detail, r.error)
