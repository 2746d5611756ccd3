"""Every registered claim holds on the quick profile and its falsifier is caught.

One parametrised test over the whole registry, so a claim added to any ``verify/claims``
module is covered without touching this file.
"""
import pytest

from verify.registry import Context, all_claims, run_claim

CLAIMS = all_claims()


@pytest.mark.parametrize("cid", list(CLAIMS))
def test_claim_holds_and_falsifier_is_caught(cid):
    r = run_claim(CLAIMS[cid], Context(profile="quick"))
    assert r.error == "", r.error
    assert r.holds, r.detail
    assert r.falsifier_caught, r.falsifier_detail


@pytest.mark.parametrize("cid", list(CLAIMS))
def test_claim_states_its_references_and_falsifier(cid):
    c = CLAIMS[cid]
    assert c.ref_seed and c.ref_conference and c.statement and c.falsifier_statement
