"""The thm-6 claim (verify/claims/thm_6.py) through its declared checks and faults."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from qstr.bounds.feedforward import floor_for_direction, orthonormal_row_basis, risk_floor
from qstr.verify.claims.thm_6 import D_TOKEN, min_norm_draws, slipped_floor

CID = "thm-6"
LARGE = (8, 4, 16)  # the quick profile's larger case (N, d, n)


def only(inputs, N: int, d: int, n: int):
    """The inputs of the one config (N, d, n): its trained models, estimates, Lemma 11 risk,
    min-norm draws and edge (every check then reads that case alone)."""
    (i,) = [i for i, c in enumerate(inputs.configs) if (c.N, c.d, c.n) == (N, d, n)]
    cfg, pick = inputs.configs[i], lambda xs: (xs[i],)
    return replace(
        inputs,
        configs=(cfg,),
        trained=tuple(t for t in inputs.trained if t.cfg == cfg),
        stopped=tuple(t for t in inputs.stopped if t.cfg == cfg),
        averaged=pick(inputs.averaged),
        fixed=pick(inputs.fixed),
        lemma11s=pick(inputs.lemma11s),
        transformer=pick(inputs.transformer),
        min_norm=tuple(m for m in inputs.min_norm if (m.N, m.d, m.n) == (N, d, n)),
        edge=tuple(e for e in inputs.edge if (e.N, e.d) == (N, d)),
    )


def test_the_quick_profile_checks_a_larger_case_and_names_it(declared):
    """Besides (N, n) = (2, 4), (4, 8) at d = 3, the quick profile checks N = 8, d = 4, n = 16
    (floor 1/2), and the scope line names all three."""
    d = declared(CID)
    sizes = [(c.N, c.d, c.n) for c in d.inputs.configs]
    assert sizes == [(2, 3, 4), (4, 3, 8), LARGE]
    scope = d.claim.scope(d.inputs)
    assert all(f"(N={N}, d={k}, n={n}," in scope for N, k, n in sizes), scope
    assert [(e.N, e.d, e.inputs) for e in d.inputs.edge] == [(2, 3, 6), (4, 3, 12), (8, 4, 32)]
    assert [(m.N, m.d, m.n, m.R.numel()) for m in d.inputs.min_norm] == [
        (2, 3, 4, 3000),
        (4, 3, 8, 3000),
        (8, 4, 16, 1125),  # 3000 * 12 / (N d), 12 the d = 3 configs' largest N d
    ]


def test_every_check_holds_on_the_larger_case_alone(declared):
    """On N = 8, d = 4, n = 16 alone: the FFN is at twice its floor_u (0.944 vs 0.462), the
    Transformer 1e-7 of it, the Monte Carlo and min-norm means within a few thousandths of
    1 - n/(N d) = 1/2 and the closed form 0.9375, no risk at n = N d = 32."""
    d = declared(CID)
    v = {c.name: c.run(only(d.inputs, *LARGE), d.ctx) for c in d.claim.checks_in("quick")}
    assert all(x.holds for x in v.values()), {k: x for k, x in v.items() if not x.holds}
    ffn = v["FFNs never beat floor_u"]
    assert ffn.bound == pytest.approx(0.4623, abs=1e-4) and ffn.measured > 1.8 * ffn.bound
    assert v["Lemma 11 Transformer beats floor_u"].measured < 1e-6 * ffn.bound
    for name in ("Bayes risk given Vx = 1 - n/(Nd)", "mean floor_u(V) = 1 - n/(Nd)"):
        assert v[name].bound == 0.5 and abs(v[name].measured - 0.5) < 0.005, (name, v[name])
    closed = v["min-norm risk = closed form"]
    assert closed.bound == pytest.approx(0.9375, abs=2e-3) and closed.tol < 0.003
    assert abs(closed.measured - closed.bound) < 1e-3
    assert v["min-norm risk >= own floor_u(V)"].measured > 0.3  # R_k - floor_u(V_k) >= 0.32
    assert v["fixed-u Bayes risk = floor_u(V)"].bound == pytest.approx(ffn.bound, rel=1e-12)
    assert v["no risk left at n = N d"].measured == 0.0
    end = {label: case for label, case in v["span distance at the end"].cases}
    assert end["N=8 d=4 n=16 m=16 tanh at step 486"].measured < 1e-14  # converged: in the span
    stopped = end["N=8 d=4 n=16 m=16 tanh at step 50"]  # 0.9^50 of its start, to rounding
    assert stopped.measured == pytest.approx(stopped.bound, rel=1e-12) and stopped.measured > 1e-3
    assert v["off-span part decays as prod(1 - lr lambda)"].measured < 1e-14


def test_every_fault_breaks_its_checks_on_the_larger_case_alone(declared):
    """Each quick fault, applied to N = 8, d = 4, n = 16 alone, makes each check it names fail."""
    d = declared(CID)
    inputs = only(d.inputs, *LARGE)
    for fault in d.claim.faults_in("quick"):
        broken = fault.apply(inputs, d.ctx)
        held = [n for n in fault.breaks if d.claim.check_named(n).run(broken, d.ctx).holds]
        assert not held, (fault.name, held)


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


@pytest.mark.parametrize("N, n, d", [(3, 5, D_TOKEN), (4, 9, 4)])
def test_min_norm_draws_equal_per_group_lstsq(N, n, d):
    """The batched pseudo-inverse of min_norm_draws is the per-group min-norm interpolant
    (torch.linalg.lstsq, gelsd) and R = (1/N) sum_t ||P_t u - w_t||^2; the oracle is floor_u(V),
    at d = 3 and at the larger case's d = 4."""
    K = 4
    R, counts, oracle, kappa = min_norm_draws(N, n, K, torch.Generator().manual_seed(7), d)
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
    """From N d - 1 inputs the Bayes risk is 1/(N d) (1/6 at N = 2, d = 3; 1/32 at N = 8,
    d = 4), not 0: the check reports the largest, and every (N, d) fails alone."""
    d = declared(CID)
    broken = d.broken("N d - 1")
    v = d.verdict("no risk left at n = N d", broken)
    assert v.measured == pytest.approx(1 / (2 * D_TOKEN), abs=0.05) and not v.holds
    for e in broken.edge:
        assert e.inputs == e.N * e.d - 1
        assert e.estimate.estimate == pytest.approx(1 / (e.N * e.d), rel=0.3), (e.N, e.d)
        alone = d.verdict("no risk left at n = N d", replace(broken, edge=(e,)))
        assert not alone.holds, (e.N, e.d)


def test_thm6_pin_holds_and_sees_a_slipped_floor(declared):
    """The exact / 40-digit pin of risk_floor and floor_for_direction holds on the honest functions;
    1 - n/(N d + 1), 1 - n/d and floor_u without its 1/N each fail it."""
    d = declared(CID)
    pin = "floor and floor_u = exact / 40-digit evaluation"
    assert d.verdict(pin).holds and d.verdict(pin).measured <= 1e-12
    for fault in ("N d + 1", "sequence length forgotten", "without the 1/N"):
        assert not d.verdict(pin, d.broken(fault)).holds, fault


def test_thm6_decay_record_is_held_to_the_trained_weights(declared):
    """The off-span check holds the trace's last record to ||W (I - V^T V)||_F of the weights: rows
    added outside the span after training (the record unchanged) fail it."""
    d = declared(CID)
    check = "off-span part decays as prod(1 - lr lambda)"
    assert d.verdict(check).holds
    assert not d.verdict(check, d.broken("outside the span")).holds


def test_span_distance_at_the_end_sees_the_rate(declared):
    """The runs stopped after 50 steps end at GD's law prod (1 - eta lambda) of their start
    (0.9^50 = 5.2e-3 without backtracking, lr lambda = 0.1); the law with a halved rate or read
    as e^{-lambda tau} misses by more than 1e-2 relative, far beyond the check's 1e-10."""
    d = declared(CID)
    for tr in d.inputs.stopped:
        assert tr.trace.final_step == 50 and tr.trace.stopped == "step cap"
        final = d.inputs.span_distance(tr.W, tr.X) * float(torch.linalg.matrix_norm(tr.W))
        law = tr.trace.predicted_perp[-1]
        assert final == pytest.approx(law, rel=1e-12)
        if tr.trace.rejected == 0:
            assert law == pytest.approx(0.9**50 * tr.trace.perp_norm[0], rel=1e-12)
        halved = tr.trace.perp_norm[0] * 0.95**50
        assert abs(halved / law - 1) > 1e-2 and abs(tr.trace.exp_perp[-1] / law - 1) > 1e-2
    broken = d.broken("gradient-flow law")
    assert not d.verdict("span distance at the end", broken).holds
