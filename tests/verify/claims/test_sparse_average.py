"""Tests of verify/claims/sparse_average.py through the declared claim (the single-head sparse
average, remark after Prop 3): the exact worst case it measures, a bound without its within term
(test_registered.py runs every check and every fault)."""

import dataclasses
import math

import mpmath as mp
import pytest

import qstr.bounds.attention as ba
from qstr.verify.claims._attention import sa_bound_mp

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


def test_sparse_average_every_guarantee_field_and_its_file_is_held_to_the_built_head(declared):
    """The record check has a row for each field users read and for the guarantee saved in the
    head's file, for each q."""
    d = declared(CID)
    labels = [label for label, _ in d.verdict("guarantee = built head and its file").cases]
    fields = ("error_bound", "alpha", "gap", "leak", "mu", "c", "lipschitz", "||W_QK||", "||a||")
    for case in d.inputs.cases:
        for where in ("", ", file"):
            assert all(f"q = {case.q}{where}: {f}" in labels for f in fields)


def test_sparse_average_least_gap_is_that_of_nonnegative_codes(declared):
    """RS-Hadamard inner products are >= 0: the built head's least score gap is A (1 - q mu), not
    the recorded A (1 - (2q - 1) mu) (docs/derivations/sparse-averaging.md, 'Slack')."""
    d = declared(CID)
    rows = dict(d.verdict("least score gap >= recorded gap").cases)
    for case in d.inputs.cases:
        g = case.head.guarantee
        assert float((case.head.omega @ case.head.omega.T).min()) >= 0
        A = g.alpha * g.c**2
        assert rows[f"q = {case.q}"].measured == pytest.approx(A * (1 - case.q * g.mu), rel=1e-12)
        assert rows[f"q = {case.q}"].bound == pytest.approx(A * (1 - (2 * case.q - 1) * g.mu))


def test_sparse_average_bound_for_nonnegative_codes_is_near_the_exact_sup(declared):
    """The derivation redone for inner products >= 0 (rho = e^{A (q - 2) mu}, gap A (1 - q mu)) is
    still above the exact sup, and more than twice as near as the signed bound."""
    d = declared(CID)
    for case in d.inputs.cases:
        g = case.head.guarantee
        with mp.workdps(40):
            nonneg = float(sa_bound_mp(64, case.q, g.mu, g.alpha * g.c**2, g.r_x, spread=1))
        assert case.exact <= nonneg
        assert case.exact / nonneg > 2 * case.exact / g.error_bound


def test_sparse_average_the_halved_rho_exponent_is_seen_only_from_q_3(declared):
    """rho = e^{A (q - 2) mu}: the pin's rows at the q = 2 head hold (rho = 1 either way), the row
    at the q = 3 head fails."""
    d = declared(CID)
    rows = dict(
        d.verdict("bound, leak, gap = 40-digit evaluation", d.broken("exponent halved")).cases
    )
    for case in d.inputs.cases:
        mu = case.head.guarantee.mu
        own = [
            v for lab, v in rows.items() if lab.startswith(f"bound, N=64 q={case.q} mu={mu:.4g}")
        ]
        assert len(own) == 1 and own[0].holds == (case.q == 2)
