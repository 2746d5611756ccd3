"""Tests for bounds/packing.py: Lemma 39 (mixed-norm Hölder), Lemma 41 (packings)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from qstr.bounds.packing import (
    conjugate,
    crossover_dimension,
    euclidean_packing_log_lower,
    greedy_packing,
    lemma39,
    lemma39_equality_case,
    lemma39_swapped_rhs,
    maurey_k,
    maurey_log_packing_bound,
    maurey_simple_bound,
    maurey_violation_dimension,
    min_pairwise_distance,
    mixed_norm,
    packing_log_bound,
    sample_ball,
    smaller_bound,
    volume_log_packing_bound,
)
from qstr.bounds.prop8 import euclidean_packing_counterexample
from tests.fixtures import seeded

F64 = torch.float64
INF = math.inf


# ---------------------------------------------------------------- Lemma 39


def test_conjugate_and_mixed_norm_hand_values():
    assert (
        conjugate(2) == 2
        and conjugate(1) == INF
        and conjugate(INF) == 1
        and conjugate(3) == pytest.approx(1.5)
    )
    M = torch.tensor([[3.0, 4.0], [0.0, -1.0]], dtype=F64)
    assert float(mixed_norm(M, 2, 1)) == pytest.approx(6.0)  # 5 + 1
    assert float(mixed_norm(M, 1, INF)) == pytest.approx(7.0)  # max(7, 1)
    assert float(mixed_norm(M, 2, 2)) == pytest.approx(math.sqrt(26))  # Frobenius
    assert float(mixed_norm(M, INF, 1)) == pytest.approx(5.0)  # 4 + 1
    batch = torch.stack([M, 2 * M])
    assert torch.allclose(mixed_norm(batch, 2, 1), torch.tensor([6.0, 12.0], dtype=F64))


def test_lemma39_hand_case():
    A = torch.tensor([[1.0, 2.0]], dtype=F64)
    B = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=F64)
    lhs, rhs = lemma39(A, B, 2, 2, 2)  # ||A||_F ||B||_{2,2} = sqrt5 sqrt2
    assert lhs == pytest.approx(math.sqrt(5)) and rhs == pytest.approx(math.sqrt(10))
    lhs, rhs = lemma39(A, B, 1, 1, INF)  # ||A||_{inf,1} ||B||_{1,1} = 2 * 2
    assert lhs == pytest.approx(3.0) and rhs == pytest.approx(4.0)


def test_lemma39_bad_arguments():
    A, B = torch.ones(2, 3, dtype=F64), torch.ones(3, 2, dtype=F64)
    with pytest.raises(ValueError, match="conjugate"):
        lemma39(A, B, 2, 2, 3, 3)
    with pytest.raises(ValueError, match="compatible"):
        lemma39(A, torch.ones(2, 2, dtype=F64), 2, 2, 2)
    with pytest.raises(ValueError, match="p must lie in"):
        lemma39(A, B, 0.5, 2, 2)
    with pytest.raises(ValueError, match="B contains NaN"):
        lemma39(A, B * float("nan"), 2, 2, 2)
    with pytest.raises(ValueError, match="M must have shape"):
        mixed_norm(torch.ones(3), 2, 2)


exponent = st.sampled_from([1.0, 1.25, 1.5, 2.0, 3.0, 4.0, INF])


@settings(max_examples=60, deadline=None)
@given(
    p=exponent,
    q=exponent,
    r=exponent,
    m=st.integers(1, 4),
    n=st.integers(1, 4),
    k=st.integers(1, 4),
    seed=st.integers(0, 10**6),
    sparse=st.booleans(),
)
def test_lemma39_holds_on_random_matrices(p, q, r, m, n, k, seed, sparse):
    g = seeded(seed)
    A = torch.randn(m, n, generator=g, dtype=F64)
    B = torch.randn(n, k, generator=g, dtype=F64) ** 3
    if sparse:
        A = A * (torch.rand(m, n, generator=g, dtype=F64) < 0.5)
    lhs, rhs = lemma39(A, B, p, q, r)
    assert lhs <= rhs * (1 + 1e-12) + 1e-300
    lhs2, rhs2 = lemma39(
        A, B, p, q, conjugate(r)
    )  # exchanging r and s: still conjugate, still true
    assert lhs2 <= rhs2 * (1 + 1e-12) + 1e-300


@pytest.mark.parametrize(
    "p, q, r", [(2, 2, 2), (1, INF, INF), (INF, 1, 1), (3, 1.5, 4 / 3), (1, 2, 3)]
)
def test_lemma39_equality_case(p, q, r):
    A, B = lemma39_equality_case(6, 3, p, q, r, generator=seeded(1), m=3)
    lhs, rhs = lemma39(A, B, p, q, r)
    assert lhs == pytest.approx(rhs, rel=1e-12)


def test_swapped_exponents_fail():
    """Inner and outer exponents exchanged:
    ||AB||_{inf,inf} = n > ||A||_{inf,1.5} ||B||_{3,inf} = 1."""
    n = 5
    A, B = torch.ones(1, n, dtype=F64), torch.ones(n, 1, dtype=F64)
    lhs, rhs = lemma39(A, B, INF, INF, 1.5)
    assert lhs == pytest.approx(n) and rhs == pytest.approx(n)  # the true inequality is tight here
    assert lemma39_swapped_rhs(A, B, INF, INF, 1.5) == pytest.approx(1.0)


# ---------------------------------------------------------------- Lemma 41


def test_lemma41_hand_values():
    assert volume_log_packing_bound(2, 1.0) == pytest.approx(2 * math.log(3))
    assert maurey_k(1.0) == 4 and maurey_k(0.5) == 16 and maurey_k(1.5) == 2
    assert maurey_log_packing_bound(1, 1.0) == pytest.approx(math.log(15))  # C(6, 4)
    assert maurey_log_packing_bound(3, 2.0) == 0.0 and maurey_simple_bound(3, 2.5) == 0.0
    assert packing_log_bound(2, 1.0, "l2") == volume_log_packing_bound(2, 1.0)
    assert packing_log_bound(50, 1.0, "l1") == maurey_log_packing_bound(50, 1.0)
    assert euclidean_packing_log_lower(3, 0.5) == pytest.approx(3 * math.log(2))
    with pytest.raises(ValueError, match="ball"):
        packing_log_bound(2, 1.0, "linf")
    with pytest.raises(ValueError, match="eps"):
        volume_log_packing_bound(2, 0.0)
    with pytest.raises(ValueError, match="d"):
        maurey_log_packing_bound(0, 1.0)


@settings(max_examples=40, deadline=None)
@given(d=st.integers(1, 10**4), eps=st.floats(0.05, 1.99))
def test_maurey_forms_are_ordered(d, eps):
    exact = maurey_log_packing_bound(d, eps)
    k = maurey_k(eps)
    assert exact <= k * math.log(2 * d + 1) + 1e-9 <= maurey_simple_bound(d, eps) + 1e-9


@pytest.mark.parametrize("eps", [0.5, 1.0, 1.7])
def test_crossover_dimension(eps):
    d = crossover_dimension(eps)
    assert smaller_bound(d, eps) == "maurey"
    assert d == 1 or smaller_bound(d - 1, eps) != "maurey"
    assert smaller_bound(1, eps) == "volume"


def test_maurey_fails_for_the_euclidean_ball():
    d = maurey_violation_dimension(0.5)
    assert d == 72
    assert euclidean_packing_log_lower(d, 0.5) > maurey_log_packing_bound(d, 0.5)
    assert euclidean_packing_log_lower(d - 1, 0.5) <= maurey_log_packing_bound(d - 1, 0.5)
    for eps in (1.0, 1.5):  # from eps = 1 on, eps^-D <= 1: there is no violation to find
        with pytest.raises(ValueError, match="eps must be < 1"):
            maurey_violation_dimension(eps)


def test_greedy_packing_hand_case():
    pts = torch.tensor([[0.0], [0.5], [1.0], [0.2], [-0.6]], dtype=F64)
    P = greedy_packing(pts, 0.4, block=2)
    assert torch.equal(P, torch.tensor([[0.0], [0.5], [1.0], [-0.6]], dtype=F64))
    assert min_pairwise_distance(P) == pytest.approx(0.5)
    assert min_pairwise_distance(P[:1]) == INF


@pytest.mark.parametrize("ball", ["l1", "l2"])
def test_greedy_packings_respect_lemma41(ball):
    for d in (1, 2, 3):
        cand = sample_ball(
            B=2000, d=d, ball=ball, generator=seeded(d)
        )  # by keyword, as the signature allows
        norms = cand.abs().sum(1) if ball == "l1" else cand.norm(dim=1)
        assert float(norms.max()) <= 1.0
        for eps in (0.4, 1.0):
            P = greedy_packing(cand, eps)
            assert min_pairwise_distance(P) > eps
            assert math.log(P.shape[0]) <= packing_log_bound(d, eps, ball)


# ------------------------------------------------ Lemma 41: moved from the claim (software facts)

LEMMA41_CROSSINGS = {0.5: 20, 1.0: 8, 1.5: 5}  # eps: first d where Maurey < volume


def test_smaller_bound_as_derived():
    """docs/derivations/lemmas-39-41-42.md, "Which bound is smaller": the volume bound below the
    crossing d (20, 8, 5 at eps 0.5, 1, 1.5), the Maurey bound from it on (crossover_dimension
    agrees); for eps >= 2 the Maurey bound is 0 (the diameter is 2), so the crossing is d = 1."""
    for eps, d in LEMMA41_CROSSINGS.items():
        assert smaller_bound(d - 1, eps) == "volume" and smaller_bound(d, eps) == "maurey"
        assert crossover_dimension(eps) == d
    assert crossover_dimension(2.5) == 1 and crossover_dimension(0.5, d_max=10) is None
    assert smaller_bound(3, 2.5) == "maurey" and maurey_log_packing_bound(3, 2.5) == 0.0
    assert abs(volume_log_packing_bound(2, 1.0) - 2 * math.log(3)) <= 1e-14
    assert abs(maurey_log_packing_bound(1, 1.0) - math.log(15)) <= 1e-14


def test_packing_log_bound_is_the_smaller_bound_for_l1_only():
    """Lemma 41's public bound: the volume bound for the l2 ball, min(volume, Maurey) for the l1
    ball, also past the crossover (d = 64)."""
    for d in (1, 2, 3, 64):
        for eps in (0.3, 0.5, 0.6, 1.0, 1.5):
            vol, mau = volume_log_packing_bound(d, eps), maurey_log_packing_bound(d, eps)
            assert packing_log_bound(d, eps, "l2") == vol
            assert packing_log_bound(d, eps, "l1") == min(vol, mau)


def test_maurey_bound_is_the_log_multiset_count():
    """log C(2d + k, k), k = ceil(4 / eps^2): multisets of k atoms out of 2d + 1."""
    for d in (1, 2, 3, 10):
        for eps in (0.3, 0.6, 1.0, 1.5):
            k = math.ceil(4 / eps**2)
            assert maurey_k(eps) == k
            want = math.log(math.comb(2 * d + k, k))
            assert maurey_log_packing_bound(d, eps) == pytest.approx(want, rel=1e-12)


def test_maurey_violation_dimension_at_eps_08():
    """The Maurey bound is false for B_2^d from d = 139 at eps = 0.8 (31.017 > 30.968), not
    before."""
    d = maurey_violation_dimension(0.8)
    assert d == 139
    assert euclidean_packing_log_lower(d, 0.8) > maurey_log_packing_bound(d, 0.8)
    assert euclidean_packing_log_lower(d - 1, 0.8) <= maurey_log_packing_bound(d - 1, 0.8)


def test_sample_ball_is_uniform():
    """Uniform in the unit ball means P(||x|| <= t) = t^d, so ||x||^d ~ U(0, 1) (l1 and l2,
    d = 2, 5; Kolmogorov-Smirnov over 4000 points, each inside its ball)."""
    for p, ball in ((1, "l1"), (2, "l2")):
        for d in (2, 5):
            x = sample_ball(4000, d, ball, generator=seeded(4150 + d + 10 * p))
            r = torch.linalg.vector_norm(x, ord=p, dim=1)
            assert float(r.max()) <= 1.0
            assert stats.kstest((r**d).numpy(), "uniform").pvalue >= 1e-4


def test_min_pairwise_distance_agrees_with_pdist():
    """min_pairwise_distance (cdist) against torch.pdist on greedy packings (1e-6 relative: cdist
    may take the Gram route)."""
    for ball in ("l1", "l2"):
        for d in (1, 2, 3):
            P = greedy_packing(sample_ball(3000, d, ball, generator=seeded(d)), 0.3)
            direct = float(torch.pdist(P).min())
            assert abs(min_pairwise_distance(P) - direct) <= 1e-6 * direct


def test_sphere_counterexample_is_lemma41s_greedy_packing():
    """euclidean_packing_counterexample keeps as many points as greedy_packing on the same unit
    vectors, and its Maurey value is maurey_simple_bound / 8 (D = 128, sep = 1.2)."""
    D, M, sep = 128, 2000, 1.2
    k, log_k, vol, mau = euclidean_packing_counterexample(D, M, generator=seeded(4190), sep=sep)
    X = torch.randn(M, D, generator=seeded(4190), dtype=F64)
    assert greedy_packing(X / X.norm(dim=1, keepdim=True), sep).shape[0] == k
    assert abs(mau - maurey_simple_bound(D, sep) / 8) <= 1e-12 * mau
    assert mau < log_k <= vol and vol == pytest.approx(volume_log_packing_bound(D, sep), rel=1e-12)


def test_min_pairwise_distance_of_few_rows():
    """Two rows: their distance; one row or none: inf (no pair)."""
    two = torch.tensor([[0.0, 0.0], [3.0, 4.0]], dtype=torch.float64)
    assert min_pairwise_distance(two) == 5.0
    assert min_pairwise_distance(two[:1]) == float("inf") == min_pairwise_distance(two[:0])


def test_greedy_packing_in_the_sup_norm():
    """p = inf packs in the sup norm: (0, 0) and (0.3, 0.3) are 0.3 apart there (0.42 in l2)."""
    pts = torch.tensor([[0.0, 0.0], [0.3, 0.3], [1.0, 0.0]], dtype=torch.float64)
    assert greedy_packing(pts, 0.35).shape[0] == 3
    P = greedy_packing(pts, 0.35, p=math.inf)
    assert P.tolist() == [[0.0, 0.0], [1.0, 0.0]]
    with pytest.raises(ValueError, match="p must be 2 or math.inf"):
        greedy_packing(pts, 0.35, p=1.0)
