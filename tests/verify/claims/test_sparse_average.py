"""Tests of verify/claims/sparse_average.py through the declared claim (the single-head sparse
average, remark after Prop 3): each check holds, each fault makes its checks fail."""

import dataclasses
import math

import pytest

import qstr.bounds.attention as ba

from qstr.verify.claim import Context
from qstr.verify.claims import all_claims


@pytest.fixture(scope="module")
def sparse_claim():
    claim, ctx = all_claims()["sparse-average-single-head"], Context()
    return claim, claim.inputs(ctx), ctx


def test_sparse_average_worst_case_is_exact_over_every_set(sparse_claim):
    """q = 3: the exact sup runs over all C(64, 3) = 41,664 sets, the built module attains it, and
    it is between 0.3 and 1 of the bound; every check holds."""
    claim, inp, ctx = sparse_claim
    q3 = next(c for c in inp.cases if c.q == 3)
    assert q3.n_sets == math.comb(64, 3)
    assert q3.measured["module"] == pytest.approx(q3.exact, rel=1e-12)
    v = claim.check_named("exact sup <= bound").run(inp, ctx)
    assert v.holds and 0.3 < v.measured / v.bound < 1
    for check in claim.checks:
        assert check.run(inp, ctx).holds, check.name


def test_sparse_average_faults_break_their_checks(sparse_claim):
    """The leak-only bound falls below the exact sup; a query one slot short misses it."""
    claim, inp, ctx = sparse_claim
    for fault in claim.faults:
        broken = fault.apply(inp, ctx)
        for name in fault.breaks:
            assert not claim.check_named(name).run(broken, ctx).holds, (fault.name, name)
    assert claim.check_named("worst prompt = exact sup").run(inp, ctx).holds


def test_sparse_average_a_bound_without_the_within_term_is_caught(sparse_claim):
    """sparse_average_within set to 0 in the bound: the bound drops below the q = 3 exact sup."""
    claim, inp, ctx = sparse_claim

    def no_within(*, N, q, mu, c, alpha, r_x):
        return 2 * r_x * ba.sparse_average_leak(N=N, q=q, mu=mu, A=alpha * c**2)

    broken = dataclasses.replace(inp, error_bound=no_within)
    assert not claim.check_named("exact sup <= bound").run(broken, ctx).holds
