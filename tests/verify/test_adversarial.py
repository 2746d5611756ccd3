"""Tests for verify/adversarial.py: projection onto the token ball, the gradient-ascent search,
and Lemma 11's worst case over target tuples."""

import pytest
import torch

from qstr.bounds.attention import lemma11, lemma12_radius
from qstr.bounds.lemma11_leaks import target_leaks
from qstr.constructions.links import make_link
from qstr.constructions.task import gather_tokens
from qstr.verify.adversarial import (
    affine_gradient,
    ball_ascent,
    clip_to_ball,
    lemma11_tuple_prompt,
    lemma11_worst_case,
    sphere_ascent,
    worst_case_tokens,
)


def test_clip_and_adversarial_ascent(gen):
    x = torch.randn(3, 5, 2, generator=gen, dtype=torch.float64) * 10
    c = clip_to_ball(x, 2.0)
    assert float(c.norm(dim=-1).max()) <= 2.0 + 1e-12
    u = torch.tensor([1.0, 0.0], dtype=torch.float64)
    best = worst_case_tokens(
        lambda xx: (xx @ u).abs(), torch.zeros(1, 4, 2, dtype=torch.float64) + 0.01, 2.0, steps=60
    )
    assert float((best @ u).abs().max()) == pytest.approx(2.0, rel=1e-3)  # the ball's extreme point


def test_ball_ascent_stays_in_the_ball_and_never_loses_its_start():
    """On |<w, x_j>| the ascent reaches the ball's boundary along w (the exact sup r ||w||)."""
    w = torch.tensor([3.0, 4.0], dtype=torch.float64)

    def err(x):
        return (x @ w).abs()

    x0 = torch.tensor([[[0.1, -0.05], [0.0, 0.2]]], dtype=torch.float64)
    x = ball_ascent(err, x0, r=2.0, steps=40)
    assert float(x.norm(dim=-1).max()) <= 2.0 + 1e-12
    assert float(err(x).max()) >= float(err(x0).max())
    assert float(err(x).max()) == pytest.approx(2.0 * 5.0, rel=1e-3)


def _l11(N, q, seed=1):
    link = make_link("linear", q, 4, generator=torch.Generator().manual_seed(seed))
    cons = lemma11(N, 4, q, link.two_layer_net(), eps=0.05, r_x=lemma12_radius(4, n=10_000, N=N))
    return cons, link


def _module_error(cons, link, x, t) -> torch.Tensor:
    """The built module's largest error per prompt: (B,)."""
    with torch.no_grad():
        return (cons.predict(x, t) - link(gather_tokens(x, t))).abs().amax(-1)


@pytest.mark.parametrize("q,seed", [(1, 1), (2, 1), (2, 2), (3, 3)])
def test_lemma11_worst_case_is_the_module_max_over_every_tuple(q, seed):
    """N = 8: the value equals the built module's largest error over the worst prompts of all
    8^q tuples (each tuple's prompt through the module, not the formula), is attained at its own
    prompt, and no random prompt in the ball exceeds it; at q = 1 it is 2 r_x max leak ||w||."""
    cons, link = _l11(8, q, seed)
    wc = lemma11_worst_case(cons, link.two_layer_net())
    assert wc.exact and wc.upper == wc.value and wc.tuples == 8**q
    w = affine_gradient(link.two_layer_net(), q, 4)
    r_x = cons.guarantee.r_x
    every = torch.cartesian_prod(*[torch.arange(8)] * q).reshape(-1, q)
    prompts = [lemma11_tuple_prompt(cons, w, tt, r_x) for tt in every.tolist()]
    x, t = torch.cat([p[0] for p in prompts]), torch.cat([p[1] for p in prompts])
    assert float(_module_error(cons, link, x, t).max()) == pytest.approx(wc.value, rel=1e-10)
    assert float(_module_error(cons, link, *wc.prompt)) == pytest.approx(wc.value, rel=1e-10)
    g = torch.Generator().manual_seed(seed)
    xr = clip_to_ball(torch.randn(200, 8, 4, generator=g, dtype=torch.float64) * r_x, r_x)
    tr = torch.randint(8, (200, 8, q), generator=g)
    assert float(_module_error(cons, link, xr, tr).max()) <= wc.value * (1 + 1e-12)
    if q == 1:
        leak = float(target_leaks(cons).max())
        assert wc.value == pytest.approx(2 * r_x * leak * float(w.norm()), rel=1e-12)
    assert wc.value >= wc.same_target * (1 - 1e-12)


def test_lemma11_worst_case_beyond_the_exhaustive_size_is_bracketed():
    """N = 512, q = 2 (N^3 > 2^24): a lower bound attained by its prompt, under the certified
    upper bound 2 r_x max leak sum_h ||w_h||, itself under Lemma 11's bound."""
    cons, link = _l11(512, 2)
    wc = lemma11_worst_case(cons, link.two_layer_net())
    w = affine_gradient(link.two_layer_net(), 2, 4)
    leak = float(target_leaks(cons).max())
    assert not wc.exact and wc.value <= wc.upper
    upper = 2 * cons.guarantee.r_x * leak * float(w.norm(dim=1).sum())
    assert wc.upper == pytest.approx(upper, rel=1e-12)
    assert float(_module_error(cons, link, *wc.prompt)) == pytest.approx(wc.value, rel=1e-10)
    assert wc.upper <= cons.guarantee.error_bound * (1 + 1e-12)


def test_lemma11_worst_case_refuses_what_it_cannot_compute():
    cons, link = _l11(8, 2)
    with pytest.raises(ValueError, match="affine"):
        lemma11_worst_case(cons, lambda z: torch.relu(z).sum())
    with pytest.raises(ValueError, match="Lemma 11 Construction"):
        lemma11_worst_case(object(), link.two_layer_net())
    with pytest.raises(ValueError, match="r_x"):
        lemma11_worst_case(cons, link.two_layer_net(), r_x=-1.0)


def test_sphere_ascent_finds_the_aligned_direction_and_keeps_the_radius():
    """On <u, D> / ||D|| over the sphere of radius 3 the ascent reaches the maximum, 1 at D = 3u."""
    u = torch.tensor([0.6, 0.8, 0.0], dtype=torch.float64)
    D0 = torch.tensor([0.0, 0.0, 3.0], dtype=torch.float64)
    best, val = sphere_ascent(lambda D: (u * D).sum() / D.norm(), D0, steps=40)
    assert abs(float(best.norm()) - 3.0) < 1e-12 and val > 0.999
