"""The thm-6 claim (verify/claims/thm_6.py) through its declared checks and faults."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from qstr.bounds.feedforward import floor_for_direction, orthonormal_row_basis, risk_floor
from qstr.verify.claims.thm_6 import D_TOKEN, min_norm_draws, slipped_floor

CID = "thm-6"


def test_the_headline_is_the_floor_with_a_wide_margin(declared):
    d = declared(CID)
    v = d.verdict(d.claim.checks[0].name)
    assert v.relation == ">=" and v.measured > 1.5 * v.bound and "floor_u" in v.detail


def test_the_transformer_beats_the_floor_by_far(declared):
    v = declared(CID).verdict("Lemma 11 Transformer beats floor_u")
    assert v.measured < 1e-3 * v.bound


def test_the_faults_leave_the_trained_models(declared):
    """Each fault returns new inputs; every check still holds on the honest ones after all."""
    declared(CID).faults_leave_the_honest_inputs()


def test_slipped_floor_hand_values():
    assert slipped_floor(4, 2, 3) == 0.0 and risk_floor(4, 2, 3) == pytest.approx(1 / 3)
    assert slipped_floor(2, 4, 3) == pytest.approx(1 / 3)
    assert risk_floor(2, 4, 3) == pytest.approx(5 / 6)


@pytest.mark.parametrize(
    "planted",
    [
        lambda n, N, d: max(0.0, 1.0 - n / ((N + 1) * d)),  # one position too many
        lambda n, N, d: max(0.0, 1.0 - n / (N * d)) + 0.02,  # a small offset
        lambda n, N, d: max(0.0, 1.0 - n / (N * d + 1)),  # N d + 1 in the denominator
    ],
)
def test_a_planted_floor_fails_the_min_norm_closed_form(declared, planted):
    d = declared(CID)
    assert not d.verdict("min-norm risk = closed form", replace(d.inputs, risk_floor=planted)).holds


def test_min_norm_draws_equal_per_group_lstsq():
    """The batched pseudo-inverse of min_norm_draws is the per-group min-norm interpolant
    (torch.linalg.lstsq, gelsd) and R = (1/N) sum_t ||P_t u - w_t||^2; the oracle is floor_u(V)."""
    N, n, K, d = 3, 5, 4, D_TOKEN
    R, counts, oracle, kappa = min_norm_draws(N, n, K, torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(7)  # the same draws, in the same order
    D = N * d
    X = torch.randn(K, n, D, generator=g, dtype=torch.float64)
    t = torch.randint(N, (K, n), generator=g)
    u = torch.randn(K, d, generator=g, dtype=torch.float64)
    u = u / u.norm(dim=1, keepdim=True)
    for k in range(K):
        y = torch.stack([X[k, i].reshape(N, d)[t[k, i]] @ u[k] for i in range(n)])
        r = 0.0
        for s in range(N):
            a = torch.zeros(N, d, dtype=torch.float64)
            a[s] = u[k]
            rows = t[k] == s
            w = (
                torch.linalg.lstsq(X[k][rows], y[rows, None], driver="gelsd").solution[:, 0]
                if rows.any()
                else torch.zeros(D, dtype=torch.float64)
            )
            assert torch.allclose(X[k][rows] @ w, y[rows], atol=1e-12)  # interpolates its group
            r += float(((a.reshape(-1) - w) ** 2).sum()) / N
            assert int(counts[k, s]) == int(rows.sum())
        assert float(R[k]) == pytest.approx(r, abs=1e-12)
        floor_u = floor_for_direction(orthonormal_row_basis(X[k]), u[k], N)
        assert float(oracle[k]) == pytest.approx(floor_u, abs=1e-12) and r >= floor_u - 1e-12
    assert kappa >= 1.0


def test_uniform_attention_loses_to_the_floor(declared):
    """Lemma 11 at alpha = 0 averages the tokens: its risk is above floor_u, the honest one far
    below; the honest constructions are left as they were."""
    d = declared(CID)
    v = d.verdict("Lemma 11 Transformer beats floor_u", d.broken("alpha = 0"))
    assert v.measured > v.bound > 0 and d.inputs.lemma11s[0].alpha > 0


def test_the_flow_law_is_off_by_the_discreteness_of_gd(declared):
    """e^{-lambda tau} differs from prod (1 - eta lambda) by far more than the rounding term."""
    d = declared(CID)
    v = d.verdict("off-span part decays as prod(1 - lr lambda)", d.broken("gradient-flow"))
    assert v.measured > 1e6 * v.rounding and not v.holds


def test_edge_from_one_input_short_leaves_one_direction(declared):
    """From N d - 1 inputs the Bayes risk is 1/(N d) (1/6 at N = 2), not 0."""
    d = declared(CID)
    v = d.verdict("no risk left at n = N d", d.broken("N d - 1"))
    assert v.measured == pytest.approx(1 / (2 * D_TOKEN), abs=0.05)
