"""Tests for verify/training/ffn.py: full-batch weight-decayed training of vec(x) FFNs (Theorem 6's
Definition 5 algorithms) -- exact gradients, the off-span decay, stationarity."""

from __future__ import annotations

import pytest
import torch

from qstr.bounds.feedforward import floor_for_direction, orthonormal_row_basis, span_distance
from qstr.constructions.paper_models import VecFFN
from qstr.verify.training.ffn import (
    _layers,
    _objective_and_grads,
    ffn_test_risk,
    fit_full_batch,
    make_vec_ffn,
    simple_1str_data,
)
from tests.fixtures import seeded

F64 = torch.float64


def _unit(d, seed):
    u = torch.randn(d, generator=seeded(seed), dtype=F64)
    return u / u.norm()


def test_simple_data_labels():
    u = _unit(3, 1)
    data = simple_1str_data(5, 4, 3, u, generator=seeded(2))
    assert data.x.shape == (5, 4, 3) and data.t.shape == (5, 1) and data.y.shape == (5, 4)
    for i in range(5):
        assert torch.allclose(data.y[i], (data.x[i, data.t[i, 0]] @ u).expand(4))
    assert data.X.shape == (5, 12)
    with pytest.raises(ValueError, match="u must be a unit"):
        simple_1str_data(5, 4, 3, 2 * u, generator=seeded(2))


@pytest.mark.parametrize("activation, hidden", [("tanh", (7,)), ("relu", (5, 4))])
def test_manual_gradients_match_autograd(activation, hidden):
    N, d, lam = 3, 2, 0.3
    data = simple_1str_data(6, N, d, _unit(d, 3), generator=seeded(4))
    model = make_vec_ffn(N, d, hidden, activation=activation, generator=seeded(5))
    lins, acts = _layers(model)
    Z = model.inputs(data.x, data.t)
    loss, J, grads, _ = _objective_and_grads(lins, acts, Z, data.y, lam)
    params = [p for lin in lins for p in (lin.weight, lin.bias)]
    ref_loss = ((model(data.x, data.t) - data.y) ** 2).mean()
    ref_J = ref_loss + 0.5 * lam * sum((p * p).sum() for p in params)
    ref = torch.autograd.grad(ref_J, params)
    assert loss == pytest.approx(float(ref_loss.detach()), rel=1e-12)
    assert J == pytest.approx(float(ref_J.detach()), rel=1e-12)
    for g, r in zip(grads, ref, strict=True):
        assert torch.allclose(g, r, atol=1e-12)


def test_off_span_component_decays_exactly():
    N, d, n = 3, 2, 4
    data = simple_1str_data(n, N, d, _unit(d, 6), generator=seeded(7))
    model = make_vec_ffn(N, d, (8,), generator=seeded(8))
    lr, lam = 0.5, 0.2
    tr = fit_full_batch(
        model,
        data,
        weight_decay=lam,
        lr=lr,
        max_steps=200,
        tol=1e-30,
        record_every=20,
        backtrack=False,
    )
    assert tr.stopped == "step cap" and tr.final_step == 200
    assert tr.max_decay_deviation < 1e-12
    for k, p, pred in zip(tr.steps, tr.perp_norm, tr.predicted_perp, strict=True):
        assert pred == pytest.approx(tr.perp_norm[0] * (1 - lr * lam) ** k)
        assert abs(p - pred) <= 1e-12 * tr.initial_norm
    assert tr.times[-1] == pytest.approx(lr * 200)
    assert tr.span_distance[-1] < 1e-8
    final = span_distance(model.first_layer_x_weight().detach(), data.X)
    assert final == pytest.approx(tr.span_distance[-1])


def test_reaches_stationarity_with_tanh_and_backtracking():
    N, d = 2, 2
    data = simple_1str_data(3, N, d, _unit(d, 9), generator=seeded(10))
    model = make_vec_ffn(N, d, (4,), generator=seeded(11))
    tr = fit_full_batch(model, data, weight_decay=0.2, lr=0.5, max_steps=5000, tol=1e-6)
    assert tr.stopped == "tolerance"
    assert tr.rel_grad[-1] <= 1e-6
    assert tr.rejected >= 1 and tr.final_lr == 0.5 / 2**tr.rejected  # lr 0.5 oscillates here
    assert tr.max_decay_deviation < 1e-12  # the decay law holds with the varying step sizes
    assert tr.predicted_perp[-1] <= tr.exp_perp[-1]  # prod (1 - eta lambda) <= e^{-lambda tau}
    risk, se = ffn_test_risk(model, data.u, samples=2000, generator=seeded(12))
    V = orthonormal_row_basis(data.X)
    assert risk + 4 * se >= floor_for_direction(V, data.u, N)  # the FFN cannot beat its floor


def test_fit_bad_arguments():
    N, d = 2, 2
    data = simple_1str_data(3, N, d, _unit(d, 1), generator=seeded(1))
    model = make_vec_ffn(N, d, (4,), generator=seeded(2))
    with pytest.raises(ValueError, match="lr \\* weight_decay"):
        fit_full_batch(model, data, weight_decay=2.0, lr=0.5, max_steps=5)
    with pytest.raises(ValueError, match="weight_decay"):
        fit_full_batch(model, data, weight_decay=0.0, lr=0.5, max_steps=5)
    with pytest.raises(ValueError, match="max_steps"):
        fit_full_batch(model, data, weight_decay=0.1, lr=0.5, max_steps=0)
    with pytest.raises(ValueError, match="model must be VecFFN"):
        fit_full_batch(
            VecFFN(N, d, 1, (4,), task="general", dtype=F64),
            data,
            weight_decay=0.1,
            lr=0.5,
            max_steps=5,
        )
    with pytest.raises(ValueError, match="must match the model"):
        fit_full_batch(
            make_vec_ffn(N, d, (4,), dtype=torch.float32, generator=seeded(3)),
            data,
            weight_decay=0.1,
            lr=0.5,
            max_steps=5,
        )
    with pytest.raises(ValueError, match="activation"):
        make_vec_ffn(N, d, (4,), activation="gelu")
