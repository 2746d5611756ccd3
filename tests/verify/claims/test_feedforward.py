"""What thm-6 (verify/claims/feedforward.py) reports beyond holding (tests/verify/claims/test_registered.py runs every claim)."""
from __future__ import annotations

import qstr.verify.claims.feedforward  # noqa: F401  (registers thm-6)
from qstr.verify.claims import REGISTRY
from qstr.verify.registry import Context, run_claim


def test_thm6_reports_the_decay_and_the_floor():
    result = run_claim(REGISTRY["thm-6"], Context(profile="quick"))
    assert "span" in result.detail and "floor_u" in result.detail and "Lemma 11 Transformer" in result.detail
    assert "tolerance" in result.detail or "step cap" in result.detail
    assert "decay FAILED" in result.falsifier_measured  # the off-span row does not decay
