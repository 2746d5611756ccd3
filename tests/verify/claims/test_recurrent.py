"""Registration of verify/claims/recurrent.py (tests/verify/claims/test_registered.py runs every claim, on the CPU
and, with CUDA, the whole gpu profile)."""
import qstr.verify.claims.recurrent  # noqa: F401  (registers the claims)
from qstr.verify.claims import REGISTRY

IDS = ("lemma-22", "lemma-24", "prop-26", "cor-27", "prop-28")


def test_claims_are_registered_with_references():
    for cid in IDS:
        c = REGISTRY[cid]
        assert c.ref_seed and c.ref_conference and c.falsifier_statement

