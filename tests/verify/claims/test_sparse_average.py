"""Tests of verify/claims/sparse_average.py through the declared claim (the single-head sparse
average, remark after Prop 3): the exact worst case it measures, a bound without its within term
(test_registered.py runs every check and every fault)."""

import dataclasses
import math

import pytest

import qstr.bounds.attention as ba

CID = "sparse-average-single-head"


def test_sparse_average_worst_case_is_exact_over_every_set(declared):
    """q = 3: the exact sup runs over all C(64, 3) = 41,664 sets, the built module attains it, and
    it is between 0.3 and 1 of the bound."""
    d = declared(CID)
    q3 = next(c for c in d.inputs.cases if c.q == 3)
    assert q3.n_sets == math.comb(64, 3)
    assert q3.measured["module"] == pytest.approx(q3.exact, rel=1e-12)
    v = d.verdict("exact sup <= bound")
    assert v.holds and 0.3 < v.measured / v.bound < 1


def test_sparse_average_faults_leave_the_honest_inputs(declared):
    """The faults (the leak-only bound, a query one slot short) leave the honest inputs."""
    declared(CID).faults_leave_the_honest_inputs()


def test_sparse_average_a_bound_without_the_within_term_is_caught(declared):
    """sparse_average_within set to 0 in the bound: the bound drops below the q = 3 exact sup."""
    d = declared(CID)

    def no_within(*, N, q, mu, c, alpha, r_x):
        return 2 * r_x * ba.sparse_average_leak(N=N, q=q, mu=mu, A=alpha * c**2)

    broken = dataclasses.replace(d.inputs, error_bound=no_within)
    assert not d.verdict("exact sup <= bound", broken).holds
