"""Lemma 34 (verify/claims/lemma_34.py): the RNN's output growth held by every member, nearly
attained by rank-one output nets, the states in the r_h-ball, Assumption 1's token moments
(test_registered.py runs every fault)."""

import math

import pytest
import torch

from qstr.verify.claims.lemma_34 import _envelope, _on_inputs, rank_one_output_net


def test_rank_one_output_net_reaches_the_radius_recursion(declared):
    """The rank-one member's output at its input is a_L: a_l = R_l sqrt(a_{l-1}^2 + 1) (biased
    layers), R_L a_{L-1} at the last; its layers have exactly the built radii."""
    inp = declared("lemma-34").inputs
    u = inp.extreme[0]
    m = next(m for m in inp.members if m.at is not None and torch.equal(m.at, u))
    a = float(u.norm())
    layers = [k for k in m.f_y if k.endswith("weight")]
    radii = []
    for w in layers:
        b = w.replace("weight", "bias")
        parts = [m.f_y[w].flatten()] + ([m.f_y[b]] if b in m.f_y else [])
        radii.append((float(torch.cat(parts).norm()), b in m.f_y))
    for R, bias in radii:
        a = R * math.sqrt(a * a + 1.0) if bias else R * a
    y = float(_on_inputs(inp, m, u[None])[0])
    assert y == pytest.approx(a, rel=1e-12)
    lam, beta_0 = _envelope(inp)
    assert lam == pytest.approx(math.prod(R for R, _ in radii), rel=1e-12)
    assert a < beta_0 < 1.3 * a  # x_i = 0 there: the bound is beta_0 alone


def test_lemma34_growth_holds_and_is_nearly_attained(declared):
    d = declared("lemma-34")
    v = d.verdict("|y_hat_i| <= Lam ||x_i|| + beta_0")
    assert v.holds and 0.9 < v.measured <= 1.0
    a = d.verdict("the growth bound attained within 1.3")
    assert a.holds and 1.0 < a.measured < 1.3
    assert not d.verdict("|y_hat_i| <= Lam ||x_i|| + beta_0", d.broken("b_y dropped")).holds
    s = d.verdict("||h_i|| <= r_h")
    assert s.holds and s.measured == pytest.approx(s.bound, rel=1e-9)  # the projection is active
    assert not d.verdict("||h_i|| <= r_h", d.broken("not projected")).holds


def test_lemma34_token_moments(declared):
    d = declared("lemma-34")
    v = d.verdict("(E ||x||^{2p})^{1/p} <= 2p C_x d")
    assert v.holds and 0.3 < v.measured / v.bound < 1
    assert not d.verdict("(E ||x||^{2p})^{1/p} <= 2p C_x d", d.broken("without r")).holds
    d.faults_leave_the_honest_inputs()


def test_rank_one_output_net_keeps_the_shapes(declared):
    inp = declared("lemma-34").inputs
    out = rank_one_output_net(inp.module, inp.extreme[1])
    for k, p in inp.module.f_y.named_parameters():
        assert out[k].shape == p.shape


def test_lemma34_growth_pinned_at_40_digits(declared):
    """(Lam, beta_0) and the token moments equal their 40-digit evaluation; dropping b_y or a
    state breaks the pin as well as the growth check."""
    d = declared("lemma-34")
    name = "Lam, beta_0 and the moments = 40-digit evaluation"
    v = d.verdict(name)
    assert v.holds and v.measured < 1e-13
    for fault in ("b_y dropped", "beta_0 with one state", "moments without r"):
        assert not d.verdict(name, d.broken(fault)).holds, fault
