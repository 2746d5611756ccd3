"""Tests of verify/claims/lemma_11.py through the declared claim (Lemma 11): what its checks
measure on the honest inputs, and further slips planted in the inputs that make its checks fail
(test_registered.py runs every check and every fault)."""

import dataclasses

import pytest
import torch

from qstr.verify.claims._roundtrip import saved_and_reloaded
from qstr.verify.claims._lemma11 import L11_D, l11_case
from qstr.verify.claims.lemma_11 import _published_prefactor

CID = "lemma-11"


def test_lemma11_every_check_holds_and_the_star_code_attains_the_bound(declared):
    """The star code measures error / bound = 1."""
    star = declared(CID).verdict("star code attains the bound")
    assert star.measured == pytest.approx(1, abs=1e-9)


def test_lemma11_faults_leave_the_honest_inputs(declared):
    """Each fault returns new inputs and leaves the honest inputs as they were."""
    declared(CID).faults_leave_the_honest_inputs()


def test_lemma11_c_1_is_caught_beside_a_case_it_balances(declared):
    """With a case of q = d (where c = 1 is sqrt(d/q), as on the gpu profile) beside the quick
    cases, the published prefactor c = 1 still fails 'encoding balanced' (it reported the
    largest ratio, 1, until an H100 run of 2026-11-27 showed the gpu profile blind to it)."""
    d, check = declared(CID), "encoding balanced: q c^2 = d"
    q_is_d = l11_case(d.ctx, "linear", L11_D, 16)
    wide = dataclasses.replace(d.inputs, cases=d.inputs.cases + (q_is_d,))
    assert d.verdict(check, wide).holds
    assert not d.verdict(check, _published_prefactor(wide, d.ctx)).holds


def test_lemma11_a_bound_above_the_eps_asked_is_caught(declared):
    """A bound 4x larger (a construction for 4 eps) fails 'bound <= eps'."""
    d = declared(CID)
    wide = dataclasses.replace(d.inputs, error_bound=lambda **kw: 4 * d.inputs.error_bound(**kw))
    assert not d.verdict("bound <= eps", wide).holds


def test_lemma11_a_loose_bound_is_caught_by_the_star_code(declared):
    """A bound 25% too large: the star code measures error / bound = 0.8, and fails."""
    d = declared(CID)
    loose = dataclasses.replace(
        d.inputs, error_bound=lambda **kw: 1.25 * d.inputs.error_bound(**kw)
    )
    v = d.verdict("star code attains the bound", loose)
    assert not v.holds and v.measured == pytest.approx(0.8, rel=1e-9)


def test_lemma11_scores_10_percent_low_are_read_from_the_built_module(declared):
    """W_QK 10% low in the module users get: the fast path (from alpha, c, codes) does not see it,
    the module and its export (saved and reloaded) do: 'module = fast path' fails, 'exported =
    module' holds."""
    d = declared(CID)

    def low(case):
        module = case.cons.with_alpha(case.cons.alpha)
        with torch.no_grad():
            module.model.W_QK.mul_(0.9)
        return dataclasses.replace(case, module=module, exported=saved_and_reloaded(module)[1])

    broken = dataclasses.replace(
        d.inputs, cases=tuple(low(c) if c.exported is not None else c for c in d.inputs.cases)
    )
    assert not d.verdict("module = fast path", broken).holds
    assert not d.verdict("worst prompt attains the worst case", broken).holds
    assert d.verdict("exported = module", broken).holds
