"""Unit tests for verify/claims/transformer.py: the numeric Theorem 4 bound agrees with the sympy
expression, and a planted fault in psi is caught by that comparison."""
import math

import pytest

import qstr.bounds.transformer as bt
from qstr.bounds.transformer import Theorem4Params
from qstr.verify.claims.transformer import THM4_AGREE_RTOL, thm4_agreement


def test_thm4_numeric_and_sympy_bounds_agree():
    assert thm4_agreement(Theorem4Params.default()) <= THM4_AGREE_RTOL


@pytest.mark.parametrize("fault", [
    lambda p, N: 2 * p * N ** (1 / p),              # psi without the max(2p, 2 ln N)
    lambda p, N: max(2 * p, 2 * math.log(N)) * N ** (1 / max(p, math.log(N))) * 1.001,  # 0.1% off
])
def test_thm4_agreement_catches_a_fault_in_psi(monkeypatch, fault):
    monkeypatch.setattr(bt, "_psi", fault)
    assert thm4_agreement(Theorem4Params.default()) > THM4_AGREE_RTOL


def test_thm4_agreement_catches_a_scaled_bound():
    gap = thm4_agreement(Theorem4Params.default(), bound=lambda n, N, P: bt.theorem4_bound(n, N, P).total * (1 + 1e-6))
    assert gap == pytest.approx(1e-6, rel=1e-3)


def test_lemma11_rejects_a_guarantee_above_the_eps_asked(monkeypatch):
    """A construction built for 4 eps (its own guarantee met, but above the eps asked) must fail the check."""
    import qstr.verify.claims.transformer as T
    from qstr.verify.registry import Context
    orig = T.lemma11
    monkeypatch.setattr(T, "lemma11", lambda *a, eps=None, **k: orig(*a, eps=None if eps is None else 4 * eps, **k))
    assert not T._lemma11(Context()).holds
