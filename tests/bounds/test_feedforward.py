"""Tests for bounds/feedforward.py (Theorem 6): the floor, the Bayes risk given the span, span
distances."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qstr.bounds.feedforward import (
    embed_direction,
    floor_for_direction,
    mc_bayes_risk,
    mc_bayes_risk_from_training,
    orthonormal_row_basis,
    risk_floor,
    span_distance,
    zcrit,
)
from qstr.bounds.gaussian import random_orthonormal_rows
from tests.fixtures import seeded

F64 = torch.float64


# ---------------------------------------------------------------- closed form


def test_risk_floor_hand_values():
    assert risk_floor(0, 4, 3) == 1.0
    assert risk_floor(3, 2, 3) == 0.5
    assert risk_floor(6, 2, 3) == 0.0
    assert risk_floor(100, 2, 3) == 0.0  # n >= N d: the theorem says nothing
    assert risk_floor(1, 10, 10) == pytest.approx(0.99)


@pytest.mark.parametrize(
    "args, name", [((-1, 2, 3), "n"), ((1, 0, 3), "N"), ((1, 2, 0), "d"), ((1.5, 2, 3), "n")]
)
def test_risk_floor_bad_arguments(args, name):
    with pytest.raises(ValueError, match=name):
        risk_floor(*args)


def test_embed_direction_hand_case():
    u = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64)
    t = torch.tensor([2, 0])
    out = embed_direction(u, t, 3)
    assert torch.equal(out, torch.tensor([[0, 0, 0, 0, 1, 2], [3, 4, 0, 0, 0, 0]], dtype=F64))
    with pytest.raises(ValueError, match="t entries"):
        embed_direction(u, torch.tensor([3, 0]), 3)


def test_floor_for_direction_hand_cases():
    u = torch.tensor([1.0], dtype=F64)
    # N = 2, d = 1, V spans the first token only: t = 0 known exactly, t = 1 not at all
    assert floor_for_direction(torch.tensor([[1.0, 0.0]], dtype=F64), u, 2) == pytest.approx(0.5)
    assert floor_for_direction(torch.eye(2, dtype=F64), u, 2) == pytest.approx(0.0)
    assert floor_for_direction(torch.zeros(0, 2, dtype=F64), u, 2) == pytest.approx(1.0)
    # d = 2, V = (e_1 of token 0): u = (1, 1)/sqrt2 loses half of block 0 and all of block 1
    v = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=F64)
    uu = torch.tensor([1.0, 1.0], dtype=F64) / math.sqrt(2)
    assert floor_for_direction(v, uu, 2) == pytest.approx(0.75)


@settings(max_examples=25, deadline=None)
@given(N=st.integers(1, 5), d=st.integers(1, 4), data=st.data())
def test_floor_averaged_over_a_basis_of_directions_is_closed_form(N, d, data):
    """Averaging floor_for_direction over u = e_1..e_d reproduces E_u (E_u uu^T = I/d):
    1 - r/(N d)."""
    r = data.draw(st.integers(0, N * d))
    V = random_orthonormal_rows(r, N * d, generator=seeded(r + 7 * N + 31 * d))
    eye = torch.eye(d, dtype=F64)
    avg = sum(floor_for_direction(V, eye[i], N) for i in range(d)) / d
    assert avg == pytest.approx(1 - r / (N * d), abs=1e-12)
    assert risk_floor(r, N, d) == pytest.approx(max(0.0, 1 - r / (N * d)))


def test_orthonormal_row_basis_rank_and_span():
    X = torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 1.0]], dtype=F64)
    V = orthonormal_row_basis(X)
    assert V.shape == (2, 3)
    assert torch.allclose(V @ V.T, torch.eye(2, dtype=F64), atol=1e-12)
    assert torch.allclose(X - (X @ V.T) @ V, torch.zeros_like(X), atol=1e-12)
    assert orthonormal_row_basis(torch.zeros(2, 3, dtype=F64)).shape == (0, 3)


def test_span_distance_hand_cases():
    X = torch.tensor([[1.0, 0.0, 0.0]], dtype=F64)
    assert span_distance(torch.tensor([[3.0, 0.0, 0.0]], dtype=F64), X) == pytest.approx(0.0)
    assert span_distance(torch.tensor([[0.0, 1.0, 0.0]], dtype=F64), X) == pytest.approx(1.0)
    assert span_distance(torch.tensor([[1.0, 1.0, 0.0]], dtype=F64), X) == pytest.approx(
        1 / math.sqrt(2)
    )
    assert span_distance(torch.zeros(2, 3, dtype=F64), X) == 0.0
    # rows built from the inputs are in their span
    Xr = torch.randn(4, 10, generator=seeded(1), dtype=F64)
    W = torch.randn(7, 4, generator=seeded(2), dtype=F64) @ Xr
    assert span_distance(W, Xr) < 1e-12


def test_span_distance_bad_arguments():
    X = torch.randn(2, 3, dtype=F64)
    with pytest.raises(ValueError, match="same number of columns"):
        span_distance(torch.randn(2, 4, dtype=F64), X)
    with pytest.raises(ValueError, match="W contains NaN"):
        span_distance(torch.full((1, 3), float("nan"), dtype=F64), X)
    with pytest.raises(ValueError, match="X must have shape"):
        span_distance(torch.randn(1, 3, dtype=F64), torch.randn(3, dtype=F64))
    with pytest.raises(ValueError, match="W must be a torch.Tensor"):
        span_distance([[1.0, 2.0, 3.0]], X)


# ---------------------------------------------------------------- Monte Carlo


@pytest.mark.parametrize("sample_x", [True, False])
def test_mc_bayes_risk_agrees_with_floor(sample_x):
    N, d, r = 3, 2, 4
    V = random_orthonormal_rows(r, N * d, generator=seeded(3))
    est = mc_bayes_risk(V, N, d, samples=40000, generator=seeded(4), sample_x=sample_x)
    assert est.floor == pytest.approx(1 - r / (N * d))
    assert est.agrees
    assert not est.contains(1 - (r + 1) / (N * d))  # one rank off is far outside the interval
    assert est.samples == 40000 and est.rank == r


def test_mc_bayes_risk_fixed_direction_matches_exact_floor():
    N, d = 4, 3
    V = random_orthonormal_rows(5, N * d, generator=seeded(5))
    u = torch.tensor([0.6, 0.0, 0.8], dtype=F64)
    est = mc_bayes_risk(V, N, d, samples=40000, generator=seeded(6), u=u)
    assert est.floor == pytest.approx(floor_for_direction(V, u, N))
    assert est.agrees


def test_mc_bayes_risk_stderr_is_the_unbiased_standard_error():
    """V = e_1 in R^2 (N = 2, d = 1), u = 1, x not sampled: each sample is 0 (t = 0) or 1
    (t = 1), so k ones in n give mean k/n and stderr sqrt(k (n - k) / (n (n - 1)) / n)."""
    V, u, n = torch.tensor([[1.0, 0.0]], dtype=F64), torch.ones(1, dtype=F64), 5
    mixed = 0
    for seed in range(10):
        est = mc_bayes_risk(V, 2, 1, samples=n, generator=seeded(seed), sample_x=False, u=u)
        k = round(est.estimate * n)
        assert est.estimate == pytest.approx(k / n, abs=1e-15)
        assert est.stderr == pytest.approx(math.sqrt(k * (n - k) / (n * (n - 1)) / n), abs=1e-12)
        mixed += 0 < k < n
    assert mixed  # some seed drew both values, where n and n - 1 differ


def test_mc_bayes_risk_from_training():
    est = mc_bayes_risk_from_training(4, 3, 2, samples=30000, generator=seeded(7))
    assert est.n == 4 and est.rank == 4
    assert est.agrees
    full = mc_bayes_risk_from_training(6, 3, 2, samples=100, generator=seeded(8))  # n >= N d: V = I
    assert full.floor == 0.0 and full.estimate < 1e-20


def test_mc_bayes_risk_bad_arguments():
    V = random_orthonormal_rows(2, 6, generator=seeded(9))
    with pytest.raises(ValueError, match="orthonormal"):
        mc_bayes_risk(2 * V, 3, 2, samples=10, generator=seeded(1))
    with pytest.raises(ValueError, match="samples"):
        mc_bayes_risk(V, 3, 2, samples=1, generator=seeded(1))
    with pytest.raises(ValueError, match="N d = 8 columns"):
        mc_bayes_risk(V, 4, 2, samples=10, generator=seeded(1))
    with pytest.raises(ValueError, match="u must be a unit"):
        mc_bayes_risk(V, 3, 2, samples=10, generator=seeded(1), u=torch.ones(2, dtype=F64))
    with pytest.raises(ValueError, match="confidence"):
        mc_bayes_risk(V, 3, 2, samples=10, generator=seeded(1), confidence=1.0)
    with pytest.raises(ValueError, match="generator"):
        mc_bayes_risk(V, 3, 2, samples=10, generator=None)


def test_theorem6_records_and_hand_values_as_documented():
    """Software facts the thm-6 claim once folded in: zcrit(0.95) is the textbook 1.959963984540,
    span_distance of W = ((1, 0, ..), (1, 1, 0, ..)) against X = 2 e_1 is 1/sqrt 3,
    P_t u = e_t kron u for one u shared by every row, and the Monte Carlo records carry their floor
    (floor_u(V) for a fixed u; 1 - rank/(N d) and rank n from training; 0 at n = N d), the
    interval estimate +- zcrit(confidence) stderr and ``agrees`` = (floor inside it)."""
    assert abs(zcrit(0.95) - 1.959963984540054) <= 1e-12
    N, d = 4, 3
    W = torch.zeros(2, N * d, dtype=F64)
    W[:, 0], W[1, 1] = 1.0, 1.0
    X = torch.zeros(1, N * d, dtype=F64)
    X[0, 0] = 2.0
    assert abs(span_distance(W, X) - 3**-0.5) <= 1e-15
    u = torch.arange(1.0, d + 1, dtype=F64)
    t = torch.arange(N).flip(0)
    eye = torch.eye(N, dtype=F64)
    kron = torch.stack([torch.kron(eye[int(ti)], u) for ti in t])
    assert torch.equal(embed_direction(u, t, N), kron)
    V = random_orthonormal_rows(5, N * d, generator=seeded(11))
    uu = u / u.norm()
    for sample_x in (True, False):
        est = mc_bayes_risk(
            V, N, d, samples=500, generator=seeded(12), u=uu, sample_x=sample_x, confidence=0.99
        )
        hw = zcrit(0.99) * est.stderr
        lo, hi = est.interval
        assert est.floor == floor_for_direction(V, uu, N)
        assert abs(lo - (est.estimate - hw)) <= 1e-15 and abs(hi - (est.estimate + hw)) <= 1e-15
        assert est.agrees == (lo <= est.floor <= hi)
    with pytest.raises(ValueError, match="u must be a unit"):
        mc_bayes_risk(V, N, d, samples=2, generator=seeded(13), u=2 * uu)
    trained = mc_bayes_risk_from_training(8, N, d, samples=100, generator=seeded(14))
    assert trained.rank == 8 and abs(trained.floor - risk_floor(8, N, d)) <= 1e-12
    edge = mc_bayes_risk_from_training(N * d, N, d, samples=100, generator=seeded(15))
    assert edge.floor == 0.0
