"""Lemmas 13 and 15's bounds (bounds/perturbation.py) against direct computations on small
modules and on the softmax's tight case."""

import math

import torch

from qstr.bounds.perturbation import attention_lipschitz, lemma13_terms, softmax_l1_bound
from qstr.bounds.perturbation import state_radius
from qstr.bounds.transformer import Theorem4Params, theorem4_bound
from qstr.constructions.paper_models import MergedAttention

F64 = torch.float64


def test_softmax_bound_is_attained_at_two_equal_scores():
    """||softmax(s) - softmax(s')||_1 / ||s - s'||_inf -> 1 at s = (0, 0), s' = (c, -c)."""
    c = 1e-6
    p, p2 = (
        torch.softmax(torch.zeros(2, dtype=F64), 0),
        torch.softmax(torch.tensor([c, -c], dtype=F64), 0),
    )
    ratio = float((p2 - p).abs().sum()) / softmax_l1_bound(c)
    assert math.isclose(ratio, 1.0, rel_tol=1e-6)


def test_lemma13_terms_by_hand():
    g = torch.Generator().manual_seed(0)
    m = MergedAttention(4, 2, 3, generator=g, dtype=F64)
    other = MergedAttention(4, 2, 3, generator=g, dtype=F64)
    t = lemma13_terms(m, other, 2.0)
    rho = math.sqrt(2 * 4 + 1)
    Wb = torch.cat([m.W.detach().flatten(), m.b.detach()]).norm()
    dWb = torch.cat([(m.W - other.W).detach().flatten(), (m.b - other.b).detach()]).norm()
    a_p = other.a.detach().norm()
    assert math.isclose(float(t.a), float((m.a - other.a).detach().norm() * Wb * rho))
    assert math.isclose(float(t.Wb), float(a_p * rho * dWb))
    op = torch.linalg.matrix_norm(other.W.detach(), ord=2)
    dqk = (m.W_QK - other.W_QK).detach().norm()
    assert math.isclose(float(t.attention), float(a_p * op * 8.0 * dqk))
    assert math.isclose(float(t.total), float(t.a + t.Wb + t.attention))
    assert state_radius(2.0, 2) == rho and attention_lipschitz(2.0) == 8.0


def test_theorem4_covering_uses_lemma_15s_constant():
    """Theorem 4's covering constant A = 6 K max(rho, sqrt(q) r_qk r_z^3) reads its r_z^3 and
    rho from bounds/perturbation.py."""
    P = Theorem4Params(2, 4, 1.0, 1.0, 8, 1e-3, C_x=1.0, C_y=1.0, s=0.5, mu=0.5, delta=0.1)
    b = theorem4_bound(10**6, 4096, P)
    K = P.r_a * P.r_w
    want = 6 * K * max(state_radius(b.r_z, 2), math.sqrt(2) * b.r_qk * b.r_z**3)
    assert math.isclose(b.lipschitz, want, rel_tol=1e-13)
