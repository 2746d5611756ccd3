"""Tests of verify/claims/sparse_average.py through the declared claim (the single-head sparse
average, remark after Prop 3): the exact worst case it measures on RS-Hadamard and signed codes, a
bound without its within term, the halved rho exponent the signed codes expose
(test_registered.py runs every check and every fault)."""

import dataclasses
import math

import mpmath as mp
import pytest
import torch

import qstr.bounds.sparse_averaging as bsa
from qstr.verify.claim import Context
from qstr.verify.claims import sparse_average as sa
from qstr.verify.claims._attention import sa_bound_mp
from qstr.verify.claims._signed_codes import (
    SIGNED_MU,
    SIGNED_N,
    factored_codebook,
    rho_halved,
    set_gaps,
    signed_gram,
    worst_set_parts,
)

CID = "sparse-average-single-head"


def _case(d, code: str, q: int):
    return next(c for c in d.inputs.cases if c.code == code and c.q == q)


def test_sparse_average_worst_case_is_exact_over_every_set(declared):
    """q = 3: the exact sup runs over all C(64, 3) = 41,664 sets (C(8, 3) = 56 on the signed codes),
    the built module attains it, and it is between 0.3 and 1 of the bound on RS-Hadamard codes."""
    d = declared(CID)
    for code, N in ((sa.RS, 64), (sa.SIGNED, 8)):
        q3 = _case(d, code, 3)
        assert q3.n_sets == math.comb(N, 3)
        assert q3.measured["module"] == pytest.approx(q3.exact, rel=1e-12)
    rows = dict(d.verdict("exact sup <= bound").cases)
    assert all(v.holds for v in rows.values())
    assert all(0.3 < rows[f"q = {q}"].measured / rows[f"q = {q}"].bound < 0.5 for q in (2, 3))


def test_sparse_average_faults_leave_the_honest_inputs(declared):
    """The faults (the leak-only bound, a query one slot short) leave the honest inputs."""
    declared(CID).faults_leave_the_honest_inputs()


def test_sparse_average_a_bound_without_the_within_term_is_caught(declared):
    """sparse_average_within set to 0 in the bound: the bound drops below the q = 3 exact sup."""
    d = declared(CID)

    def no_within(*, N, q, mu, c, alpha, r_x):
        return 2 * r_x * bsa.sparse_average_leak(N=N, q=q, mu=mu, A=alpha * c**2)

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
    for case in (c for c in d.inputs.cases if c.code == sa.RS):
        g = case.head.guarantee
        assert float((case.head.omega @ case.head.omega.T).min()) >= 0
        A = g.alpha * g.c**2
        assert rows[f"q = {case.q}"].measured == pytest.approx(A * (1 - case.q * g.mu), rel=1e-12)
        assert rows[f"q = {case.q}"].bound == pytest.approx(A * (1 - (2 * case.q - 1) * g.mu))


def test_sparse_average_bound_for_nonnegative_codes_is_near_the_exact_sup(declared):
    """The derivation redone for inner products >= 0 (rho = e^{A (q - 2) mu}, gap A (1 - q mu)) is
    still above the exact sup, and more than twice as near as the signed bound."""
    d = declared(CID)
    for case in (c for c in d.inputs.cases if c.code == sa.RS):
        g = case.head.guarantee
        with mp.workdps(40):
            nonneg = float(sa_bound_mp(64, case.q, g.mu, g.alpha * g.c**2, g.r_x, spread=1))
        assert case.exact <= nonneg
        assert case.exact / nonneg > 2 * case.exact / g.error_bound


def test_sparse_average_the_halved_rho_exponent_is_seen_only_from_q_3(declared):
    """rho = e^{A (q - 2) mu}: the pin's rows at the q = 2 heads hold (rho = 1 either way), the rows
    at the q = 3 heads fail."""
    d = declared(CID)
    rows = dict(
        d.verdict("bound, leak, gap = 40-digit evaluation", d.broken("exponent halved")).cases
    )
    for case in d.inputs.cases:
        g = case.head.guarantee
        at = f"bound, N={g.N} q={case.q} mu={g.mu:.4g}"
        own = [v for lab, v in rows.items() if lab.startswith(at)]
        assert len(own) == 1 and own[0].holds == (case.q == 2)


def test_sparse_average_signed_codes_are_the_gram_asked_for():
    """The signed codes: unit rows whose Gram matrix is I + mu S, S = J - I with -1 on the triangle
    {0, 1, 2} and the edge {6, 7}; their measured coherence is mu."""
    book = factored_codebook(signed_gram(SIGNED_N, SIGNED_MU))
    G = book.omega @ book.omega.T
    S = torch.ones(SIGNED_N, SIGNED_N, dtype=torch.float64) - torch.eye(SIGNED_N).double()
    for a, b in ((0, 1), (0, 2), (1, 2), (6, 7)):
        S[a, b] = S[b, a] = -1
    assert torch.allclose(G, torch.eye(SIGNED_N).double() + SIGNED_MU * S, atol=1e-15)
    assert book.mu == pytest.approx(SIGNED_MU, rel=1e-14) and book.kind == "custom"
    with pytest.raises(RuntimeError):  # mu S with mu ||S|| >= 1: not a Gram matrix
        factored_codebook(signed_gram(SIGNED_N, 0.9))


def test_sparse_average_the_signed_codes_attain_the_bound(declared):
    """q = 2: the exact sup equals the bound (the leak's gap A (1 - 3 mu) met by the set {6, 7}),
    and so do the least score gap and the largest leak; q = 3 at its minimising alpha: within 1e-6
    (the triangle's leak, the within-set term ~0 there)."""
    d = declared(CID)
    for q, tol in ((2, 1e-12), (3, 1e-6)):
        case = _case(d, sa.SIGNED, q)
        g = case.head.guarantee
        assert case.exact == pytest.approx(g.error_bound, rel=tol)
        assert case.measured["module"] == pytest.approx(g.error_bound, rel=tol)
    for check in ("least score gap >= recorded gap", "largest leak <= recorded leak"):
        rows = dict(d.verdict(check).cases)
        for q in (2, 3):
            v = rows[f"signed q = {q}"]
            assert v.holds and v.measured == pytest.approx(v.bound, rel=1e-12)


def test_sparse_average_signed_sweep_approaches_the_bound(declared):
    """On the signed codes (q = 3) the exact sup over all sets climbs towards the bound as A grows
    (the leak's share fading), and the worst set's within-set part is W(L, e^{2A(q-2)mu})."""
    d = declared(CID)
    rows = [v for _, v in d.verdict("signed codes: exact sup <= bound as A grows").cases]
    ratios = [v.measured / v.bound for v in rows]
    assert all(v.holds for v in rows) and ratios == sorted(ratios)
    assert ratios[0] < 0.9 and ratios[-1] > 1 - 1e-6
    assert all(v.holds for _, v in d.verdict("signed codes: within-set term attained").cases)


def test_sparse_average_the_counterexample_to_the_halved_rho():
    """N = 8, q = 3, mu = 0.13 at A = 10 (issue 54): ||pi - w||_1 over every set is 1.075, within
    the bound (1.087) and above the bound with the rho exponent halved (0.662)."""
    omega = factored_codebook(signed_gram(SIGNED_N, SIGNED_MU)).omega
    sup, leak, within = worst_set_parts(omega, 3, 10.0)
    kw = dict(N=SIGNED_N, q=3, mu=SIGNED_MU, c=1.0, alpha=10.0, r_x=1.0)
    assert sup <= bsa.sparse_average_error_bound(**kw) < sup * 1.02
    assert rho_halved(**kw) < 0.7 * sup
    assert float(set_gaps(omega, 3, 10.0)[0].max()) == sup and within > 2 * leak


def test_sparse_average_the_halved_rho_in_the_bounds_fails_the_built_head(monkeypatch):
    """The planted mistake of issue 54: bounds/sparse_averaging.py's rho exponent halved. The signed
    q = 3 head is then built at the halved bound's minimiser; its built error and its exact sup
    exceed the bound its guarantee records."""

    def halved(N, q, mu, A):
        L, rho = bsa._sparse_leak(N, q, mu, A), math.exp(min(A * max(q - 2, 0) * mu, 700.0))
        return 2 * L + bsa.sparse_average_within(q=q, leak=L, rho=rho)

    book = factored_codebook(signed_gram(SIGNED_N, SIGNED_MU))
    ctx = Context(profile="quick")
    honest = sa.SparseAverageInputs((sa._sa_case(ctx, sa.SIGNED, 3, None, book),))
    monkeypatch.setattr(bsa, "_sparse_bound_A", halved)
    case = sa._sa_case(ctx, sa.SIGNED, 3, None, book)
    slipped = sa.SparseAverageInputs((case,), error_bound=bsa.sparse_average_error_bound)
    for check in (sa.sparse_average_exact_within_bound, sa.sparse_average_built_within_guarantee):
        assert check(honest).holds and not check(slipped).holds
