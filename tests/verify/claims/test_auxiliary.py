"""value/limit of the auxiliary-lemma claims (verify/claims/auxiliary.py); every claim and falsifier runs in
tests/verify/claims/test_registered.py."""
import math

from qstr.verify.claims import auxiliary
from qstr.verify.registry import Context

CTX = Context(profile="quick")


def _consistent(out):
    assert isinstance(out.value, float) and isinstance(out.limit, float)
    assert math.isfinite(out.value) and math.isfinite(out.limit)
    return out.value <= out.limit  # upper-bound claims: holds means value <= limit


def test_lemma41_and_lemma42_value_and_limit_agree_with_holds():
    for out in (auxiliary._lemma41(CTX, 1.0), auxiliary._lemma41(CTX, 4.0), auxiliary._lemma42(CTX)):
        assert _consistent(out) == out.holds
    fals = auxiliary._lemma42_falsifier(CTX)
    assert not fals.holds and not _consistent(fals) and fals.value > 1.5  # a 2L function: about twice the bound


def test_interval_and_smaller_bound_as_derived(monkeypatch):
    assert auxiliary.interval_as_derived() and auxiliary.smaller_as_derived()
    monkeypatch.setattr(auxiliary, "smaller_bound", lambda d, eps: "volume")
    assert not auxiliary.smaller_as_derived()
