"""The exact coherence (constructions/coherence.py): the chunked scan against brute force, exact
ties, sign codes' integer Gram, one row."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qstr.constructions import coherence as coherence_module
from qstr.constructions.codes import build_codebook, rademacher, rs_hadamard_codebook
from qstr.constructions.coherence import coherence, coherence_report
from tests.fixtures import seeded as gen

FAST = settings(max_examples=60, deadline=None)


# --------------------------------------------------------------------------- brute force


def brute_gram(omega):
    g = omega.double() @ omega.double().T
    return g.fill_diagonal_(0).abs()  # diagonal out of the max (mu >= 0 anyway)


def brute_sign_gram(signs: np.ndarray) -> np.ndarray:
    s = signs.astype(np.int64)
    return np.abs(s @ s.T)


def upper(a):
    i, j = np.triu_indices(a.shape[0], 1)
    return np.asarray(a)[i, j]


# --------------------------------------------------------------------------- coherence


@st.composite
def matrices(draw):
    N = draw(st.integers(1, 40))
    d_e = draw(st.integers(1, 24))
    chunk = draw(st.integers(1, 50))
    seed = draw(st.integers(0, 2**31 - 1))
    style = draw(st.sampled_from(["gauss64", "gauss32", "sign32", "sign64", "sign_scaled"]))
    g = gen(seed)
    if style.startswith("gauss"):
        omega = torch.randn(N, d_e, generator=g, dtype=torch.float64)
        omega = omega / omega.norm(dim=1, keepdim=True).clamp_min(1e-12)
        omega = omega.to(torch.float32 if style == "gauss32" else torch.float64)
    else:
        dtype = torch.float64 if style == "sign64" else torch.float32
        omega = rademacher(N, d_e, generator=g, dtype=dtype)
        if style == "sign_scaled":
            omega = torch.sign(omega) * 0.375  # same magnitude, not unit norm
    return omega, chunk, style


@FAST
@given(matrices())
def test_coherence_matches_brute_force(case):
    omega, chunk, style = case
    mu = coherence(omega, chunk_rows=chunk)
    if omega.shape[0] == 1:
        assert mu == 0.0
        return
    if style.startswith("gauss"):
        assert mu == pytest.approx(float(brute_gram(omega).max()), rel=1e-12, abs=1e-15)
    else:  # integer Gram, exact
        S = int(upper(brute_sign_gram(torch.sign(omega).numpy())).max())
        d_e = omega.shape[1]
        expected = S / d_e if style != "sign_scaled" else S * 0.375**2
        assert mu == expected
        assert mu == pytest.approx(float(brute_gram(omega).max()), rel=1e-6)


@FAST
@given(matrices(), st.sampled_from([0.0, 0.25, 1 / 3, 0.5, 0.75]))
def test_coherence_report_matches_brute_force(case, threshold):
    omega, chunk, style = case
    N = omega.shape[0]
    rep = coherence_report(omega, threshold, chunk_rows=chunk)
    assert rep.n_pairs == N * (N - 1) // 2
    assert rep.threshold == threshold
    if N == 1:
        assert (rep.mu, rep.pair, rep.n_violations) == (0.0, None, 0)
        return
    i, j = rep.pair
    assert 0 <= i < j < N
    assert rep.mu == pytest.approx(
        coherence(omega), rel=1e-12
    )  # float64: chunking moves the last ulp
    if style.startswith("gauss"):
        vals = upper(brute_gram(omega).numpy())
        assert float(brute_gram(omega)[i, j]) == pytest.approx(rep.mu, rel=1e-12, abs=1e-15)
        assert rep.n_violations == int((vals > threshold).sum())
    else:
        S = brute_sign_gram(torch.sign(omega).numpy())
        unit = Fraction(1, omega.shape[1]) if style != "sign_scaled" else Fraction(3, 8) ** 2
        assert S[i, j] == upper(S).max()
        assert rep.n_violations == sum(int(v) * unit > Fraction(threshold) for v in upper(S))
    assert rep.ok == (rep.n_violations == 0)
    assert ("violates" in str(rep)) != rep.ok


def test_coherence_exact_ties_and_single_row():
    # two orthogonal codes and one coherent pair at exactly 1/2: no violation at threshold 1/2
    omega = torch.tensor([[1, 1, 1, 1], [1, 1, 1, -1], [1, -1, 1, -1.0]]) / 2
    rep = coherence_report(omega, 0.5)
    assert rep.mu == 0.5 and rep.n_violations == 0 and rep.pair == (0, 1)
    assert coherence_report(omega, 0.25).n_violations == 2
    assert coherence(omega[:1]) == 0.0
    assert coherence_report(omega[:1]).n_pairs == 0


def test_coherence_chunk_invariance_larger():
    omega = rademacher(300, 37, generator=gen(3))
    values = {coherence(omega, chunk_rows=c) for c in (1, 7, 64, 299, 300, 10_000)}
    assert len(values) == 1
    reps = {coherence_report(omega, 0.3, chunk_rows=c).n_violations for c in (1, 13, 300)}
    assert len(reps) == 1


def test_sign_codes_past_float32_integers_use_float64():
    """Inner products of sign codes are counted exactly: past 2**24 columns float32 would round
    them."""
    d_e = 2**24 + 1
    omega = torch.ones(2, d_e) / math.sqrt(d_e)  # two equal unit rows: coherence exactly 1
    omega[1, 0] = -omega[1, 0]  # <w_0, w_1> = (d_e - 2) / d_e, with d_e - 2 = 2**24 - 1 odd
    assert coherence(omega) == pytest.approx((d_e - 2) / d_e, abs=1e-12)
    assert coherence_module._sign_form(omega)[0].dtype == torch.float64


def test_coherence_of_one_row_is_zero_with_no_pair():
    """One row: mu = 0, no pair attains it, no pairs at all, and the report is satisfied."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    one = coherence_report(base.omega[:1])
    assert coherence(base.omega[:1]) == 0.0
    assert one.pair is None and one.n_pairs == 0 and one.ok


def test_non_unit_sign_codes_scale_their_coherence_exactly():
    """Sign codes of norm 1/2 (entries +-1/(2 sqrt d_e)): mu / 4 exactly, = the float64 Gram."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    half = 0.5 * base.omega
    assert coherence(half) == base.mu / 4
    assert abs(coherence(half) - float(brute_gram(half).max())) <= 1e-15


def test_sign_codes_have_rational_coherence_over_d_e():
    """Sign codes: inner products are integers over d_e, and mu is that fraction exactly."""
    for book in (build_codebook(8192), build_codebook(2048, kind="rademacher", generator=gen(3))):
        d_e = book.d_e
        assert book.mu == float(Fraction(round(book.mu * d_e), d_e))


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: coherence(torch.tensor([[1.0, float("nan")]])), "omega"),
        (lambda: coherence(torch.ones(3)), "omega"),
        (lambda: coherence(torch.ones(3, 2), chunk_rows=0), "chunk_rows"),
        (lambda: coherence_report(torch.ones(3, 2), threshold=-1), "threshold"),
    ],
)
def test_bad_arguments_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
