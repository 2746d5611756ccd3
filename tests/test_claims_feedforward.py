"""The claims thm-6 (verify/claims/feedforward.py) and lemma-39, lemma-41, lemma-42
(verify/claims/auxiliary.py) hold in the quick profile, and their falsifiers are caught."""
from __future__ import annotations

import pytest

import verify.claims.auxiliary  # noqa: F401  (registers lemma-39/40/41/42)
import verify.claims.feedforward  # noqa: F401  (registers thm-6)
from verify.registry import REGISTRY, Context, run_claim


@pytest.mark.parametrize("cid, conference", [("thm-6", "Thm 9"), ("lemma-39", "Lemma 39"), ("lemma-41", "Lemma 41"),
                                             ("lemma-42", "Lemma 42")])
def test_claim_holds_and_falsifier_is_caught(cid, conference):
    claim = REGISTRY[cid]
    assert claim.ref_conference == conference
    result = run_claim(claim, Context(profile="quick"))
    assert result.error == "", result.error
    assert result.holds, result.detail
    assert result.falsifier_caught, result.falsifier_detail
    assert result.passed


def test_thm6_reports_the_decay_and_the_floor():
    result = run_claim(REGISTRY["thm-6"], Context(profile="quick"))
    assert "span" in result.detail and "floor_u" in result.detail and "Lemma 11 Transformer" in result.detail
    assert "tolerance" in result.detail or "step cap" in result.detail
    assert "decay FAILED" in result.falsifier_measured  # the off-span row does not decay


def test_same_seed_same_numbers():
    a = run_claim(REGISTRY["lemma-41"], Context(profile="quick", seed=3))
    b = run_claim(REGISTRY["lemma-41"], Context(profile="quick", seed=3))
    assert a.measured == b.measured and a.detail == b.detail
