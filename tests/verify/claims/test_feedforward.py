"""What thm-6 (verify/claims/feedforward.py) reports beyond holding (tests/verify/claims/test_registered.py runs every claim)."""
from __future__ import annotations

import math

import pytest
import torch

import qstr.verify.claims.feedforward as ff  # registers thm-6
from qstr.bounds.feedforward import risk_floor
from qstr.verify.claims import REGISTRY
from qstr.verify.registry import Context, run_claim

CTX = Context(profile="quick")


def test_thm6_reports_the_decay_and_the_floor():
    result = run_claim(REGISTRY["thm-6"], CTX)
    assert "span" in result.detail and "floor_u" in result.detail and "Lemma 11 Transformer" in result.detail
    assert "tolerance" in result.detail or "step cap" in result.detail
    assert "decay FAILED" in result.falsifier_measured  # the off-span row does not decay
    assert "(d) min-norm FAILED" in result.falsifier_measured  # the floor 1 - n/d
    assert result.holds and result.falsifier_caught
    assert 0.0 <= result.measured_value <= 1.0 == result.bound_value


def test_slipped_floor_hand_values():
    assert ff.slipped_floor(4, 2, 3) == 0.0 and risk_floor(4, 2, 3) == pytest.approx(1 / 3)
    assert ff.slipped_floor(2, 4, 3) == pytest.approx(1 / 3) and risk_floor(2, 4, 3) == pytest.approx(5 / 6)


def test_min_norm_branch_equals_per_group_lstsq():
    """The batched pseudo-inverse of min_norm_branch is the per-group min-norm interpolant (torch.linalg.lstsq
    with the gelsd driver) and the risk is (1/N) sum_t ||P_t u - w_t||^2; the oracle is floor_u(V)."""
    from qstr.bounds.feedforward import floor_for_direction, orthonormal_row_basis

    cfg, K, d = ff.Config(3, 5, (8,)), 4, ff.D_TOKEN
    mb = ff.min_norm_branch(cfg, K, torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(7)  # the same draws, in the same order
    N, n, D = cfg.N, cfg.n, cfg.N * d
    X = torch.randn(K, n, D, generator=g, dtype=torch.float64)
    t = torch.randint(N, (K, n), generator=g)
    u = torch.randn(K, d, generator=g, dtype=torch.float64)
    u = u / u.norm(dim=1, keepdim=True)
    risks, oracles = [], []
    for k in range(K):
        y = torch.stack([X[k, i].reshape(N, d)[t[k, i]] @ u[k] for i in range(n)])
        r = 0.0
        for s in range(N):
            a = torch.zeros(N, d, dtype=torch.float64)
            a[s] = u[k]
            rows = t[k] == s
            w = (torch.linalg.lstsq(X[k][rows], y[rows, None], driver="gelsd").solution[:, 0]
                 if rows.any() else torch.zeros(D, dtype=torch.float64))
            assert torch.allclose(X[k][rows] @ w, y[rows], atol=1e-12)  # interpolates its group
            r += float(((a.reshape(-1) - w) ** 2).sum()) / N
        risks.append(r)
        oracles.append(floor_for_direction(orthonormal_row_basis(X[k]), u[k], N))
    assert mb.risk_mean == pytest.approx(sum(risks) / K, abs=1e-12)
    assert mb.oracle_mean == pytest.approx(sum(oracles) / K, abs=1e-12)
    assert mb.below == pytest.approx(min(a - b for a, b in zip(risks, oracles)), abs=1e-12) and mb.below >= 0


@pytest.mark.parametrize("N, n", [(2, 4), (4, 8), (3, 7)])
def test_min_norm_branch_matches_its_closed_form(N, n):
    cfg = ff.Config(N, n, (8,))
    mb = ff.min_norm_branch(cfg, 4000, torch.Generator().manual_seed(N * 100 + n))
    d = ff.D_TOKEN
    assert mb.closed_mean == pytest.approx(1 - n / (N * N * d), abs=1e-12)  # linear floor: no clipping below n = N d
    assert abs(mb.risk_mean - mb.closed_mean) <= 4 * mb.gap_se and mb.gap_se < 0.01
    assert abs(mb.oracle_mean - risk_floor(n, N, d)) <= 4 * mb.oracle_se and mb.oracle_se < 0.01
    assert mb.below >= -mb.rounding.term and mb.risk_mean > mb.floor


def test_each_falsifier_mistake_is_caught_by_its_own_parts():
    row = ff._thm6(CTX, extra_row=True)
    assert not row.holds and "(a) decay FAILED" in row.measured and "(d) min-norm ok" in row.measured
    slip = ff._thm6(CTX, extra_row=False, floor=ff.slipped_floor)
    assert not slip.holds and "(a) decay ok" in slip.measured and "(b) FAILED" in slip.measured
    assert "(d) min-norm FAILED" in slip.measured and slip.value > 10  # |gap| / tolerance: 67.5 at seed 0


@pytest.mark.parametrize("planted", [
    lambda n, N, d: max(0.0, 1.0 - n / ((N + 1) * d)),  # one position too many
    lambda n, N, d: max(0.0, 1.0 - n / (N * d)) + 0.02,  # a small offset
    lambda n, N, d: max(0.0, 1.0 - n / (N * d + 1)),  # N d + 1 in the denominator
])
def test_planted_fault_in_risk_floor_fails_the_check(monkeypatch, planted):
    monkeypatch.setattr(ff, "risk_floor", planted)  # the claim looks risk_floor up when it runs
    out = ff._thm6(CTX, extra_row=False)
    assert not out.holds and "(d) min-norm FAILED" in out.measured and out.value > 1.0


def test_honest_check_values():
    out = ff._thm6(CTX, extra_row=False)
    assert out.holds and out.limit == 1.0 and 0.0 <= out.value <= 1.0
    assert "(d) min-norm ok" in out.measured and math.isfinite(out.value)
