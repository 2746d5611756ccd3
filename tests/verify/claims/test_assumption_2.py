"""Assumption 2, the links (verify/claims/assumption_2.py) through its declared structure."""

import math
from dataclasses import replace

import pytest
import torch

from qstr.constructions.links import TwoLayerNet, gaussian_second_moment, relu_pair_moments
from qstr.verify.claims.assumption_2 import second_moment_by_quadrature

CID = "assumption-2"


def test_assumption2_stated_moments_hand_values(declared):
    """E g^2 as stated at q = 3, d = 4: linear and hermite 1, sqnorm 2, mean d/q, projected 1/q;
    the teacher's (1 + 1/12) / 2 = 13/24."""
    inp = declared(CID).inputs
    want = {"linear": 1.0, "hermite": 1.0, "sqnorm": 2.0, "mean": 4 / 3, "mean-projected": 1 / 3}
    assert {k: f(3, 4) for k, f in inp.stated.items()} == pytest.approx(want)
    assert inp.teacher_closed(3, 4) == pytest.approx(13 / 24)


def test_assumption2_unscaled_teacher_is_about_8_times_too_large(declared):
    """Teachers without 1/sqrt(m) (m = 8): E g^2 about 8 x 13/24."""
    d = declared(CID)
    broken = d.broken("a teacher without")
    assert d.verdict("teacher E g^2 = (1 + 1/(qd)) / 2", broken).measured > 2.0


def test_assumption2_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()


def _net(a, W, b):
    return TwoLayerNet(*(torch.tensor(v, dtype=torch.float64) for v in (a, W, b)))


def test_the_closed_form_on_hand_cases():
    """One unit u = z_1 + b: E relu(u)^2 = (1 + b^2) Phi(b) + b phi(b) (1/2 at b = 0); two
    orthogonal units factor; two opposite units w, -w with b = 0 never fire together; a zero row
    is the constant relu(b)."""
    phi = math.exp(-0.5 * 0.3**2) / math.sqrt(2 * math.pi)
    Phi = 0.5 * (1 + math.erf(0.3 / math.sqrt(2)))
    assert gaussian_second_moment(_net([1.0], [[1.0, 0.0]], [0.3])) == pytest.approx(
        (1 + 0.09) * Phi + 0.3 * phi, rel=1e-14
    )
    assert gaussian_second_moment(_net([1.0], [[0.0, 2.0]], [0.0])) == pytest.approx(2.0)
    K = relu_pair_moments(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.zeros(2))
    assert float(K[0, 1]) == pytest.approx(1 / (2 * math.pi), rel=1e-14)
    K = relu_pair_moments(torch.tensor([[1.0, 0.0], [-1.0, 0.0]]), torch.zeros(2))
    assert float(K[0, 1]) == 0.0
    K = relu_pair_moments(torch.tensor([[0.0, 0.0], [1.0, 0.0]]), torch.tensor([0.7, 0.0]))
    assert float(K[0, 0]) == pytest.approx(0.49) and float(K[0, 1]) == pytest.approx(
        0.7 / math.sqrt(2 * math.pi)
    )


def test_the_closed_form_equals_the_quadrature_near_and_at_parallel_units():
    """Units at correlation 1 - 1e-9, exactly -1, with zero and signed biases: the closed form
    and the conditioning quadrature agree."""
    e = 1e-9
    W = [[1.0, 0.0, 0.0], [1.0, math.sqrt(2 * e), 0.0], [-1.0, 0.0, 0.0], [0.2, -0.5, 1.0]]
    net = _net([0.7, -0.4, 0.9, 0.3], W, [0.0, -0.3, 0.5, -1.2])
    assert gaussian_second_moment(net) == pytest.approx(second_moment_by_quadrature(net), rel=1e-6)


def test_the_teacher_check_sees_a_bias_drawn_at_one_over_sqrt_d(declared):
    """Teachers whose bias has standard deviation 1/sqrt(d) (E g^2 = (1 + 1/d)/2 = 0.625): the
    hidden units' mean of E relu(u)^2 is many standard errors above 13/24."""
    d = declared(CID)

    def draw(generator):
        t = d.inputs.teacher(generator=generator)
        net = TwoLayerNet(a=t.net.a, W=t.net.W, b=t.net.b * math.sqrt(t.q))  # 1/sqrt(qd) -> d
        return type(t)(q=t.q, d=t.d, net=net)

    v = d.verdict("teacher E g^2 = (1 + 1/(qd)) / 2", replace(d.inputs, teacher=draw))
    assert not v.holds and "hidden units" in v.detail


def test_the_batched_closed_form_is_the_per_net_one():
    """relu_pair_moments over a batch of nets (T, m, D) equals it net by net."""
    g = torch.Generator().manual_seed(3)
    W, b = torch.randn(5, 4, 6, generator=g, dtype=torch.float64), torch.randn(5, 4, generator=g)
    K = relu_pair_moments(W, b)
    for i in range(5):
        torch.testing.assert_close(K[i], relu_pair_moments(W[i], b[i]), rtol=1e-13, atol=1e-15)
