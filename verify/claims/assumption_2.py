"""Assumption 2 (the links): each link's E g^2 is as stated, the random teacher's as derived, and
the exact two-layer nets equal g (docs/derivations/theorem4.md)."""

import math
from functools import partial
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Tuple

import numpy as np
import torch
from scipy import integrate
from scipy.special import ndtr

from qstr.constructions.links import CallableLink, Link, Teacher, TwoLayerNet, make_link
from qstr.constructions.links import gaussian_second_moment, relu_pair_moments
from qstr.verify.claim import (
    Claim,
    Context,
    Ref,
    Verdict,
    at_most,
    by_measured,
    close,
    edited,
    replaced,
    worst,
)
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

Q, D = 3, 4
Z = 6.0  # standard errors allowed between a Monte Carlo mean and its stated value
# closed form vs the quadrature, relative: both are float64 and the quadrature asks QUADPACK for
# 1e-13 on each of the m(m + 1)/2 = 36 pair terms; measured gaps are below 1e-15
QUAD_RTOL = 1e-12
ZSCORE = "a z-score, about 1 when the value is right: 6 is a tolerance, not a bound to approach"
# E g^2 for q distinct N(0, I_d) tokens, as the links are stated (constructions/links.py)
SECOND_MOMENT = {
    "linear": lambda q, d: 1.0,
    "hermite": lambda q, d: 1.0,
    "sqnorm": lambda q, d: 2.0,
    "mean": lambda q, d: d / q,
    "mean-projected": lambda q, d: 1.0 / q,
}
LINKS = ("linear", "hermite", "sqnorm", "mean", "mean-projected", "teacher")
_draw_teacher = partial(make_link, "teacher", Q, D)  # generator= -> a random teacher link


def teacher_second_moment_closed(q: int, d: int) -> float:
    """The random teacher's E g^2 = m E a_j^2 E relu(w.x + b)^2 = (1 + 1/(q d)) / 2 (a ~ N(0, 1/m),
    W, b ~ N(0, 1/(q d)); cross terms vanish, E relu(z)^2 = E z^2 / 2 for symmetric z)."""
    return (1 + 1 / (q * d)) / 2


def _pair_by_conditioning(wj: np.ndarray, bj: float, wk: np.ndarray, bk: float) -> float:
    """E relu(u_j) relu(u_k), u = W z + b, by conditioning on u_j = x (theorem4.md, "The random
    teacher's E g^2"): int_0^inf x E[relu(u_k) | u_j = x] f_{u_j}(x) dx, u_k | x Gaussian."""
    sj2, c, sk2 = float(wj @ wj), float(wj @ wk), float(wk @ wk)
    sj, sd = math.sqrt(sj2), math.sqrt(max(sk2 - c * c / sj2, 0.0))

    def phi(z: float) -> float:
        return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

    def f(x: float) -> float:  # x E[relu(u_k) | u_j = x] times the density of u_j at x
        mu = bk + c / sj2 * (x - bj)
        e = max(mu, 0.0) if sd == 0 else mu * ndtr(mu / sd) + sd * phi(mu / sd)
        return x * e * phi((x - bj) / sj) / sj

    lo = max(bj, 0.0)
    parts = ((0.0, lo), (lo, lo + 12 * sj), (lo + 12 * sj, math.inf))
    return sum(
        integrate.quad(f, u, v, epsabs=0, epsrel=1e-13, limit=200)[0] for u, v in parts if v > u
    )


def second_moment_by_quadrature(net: TwoLayerNet) -> float:
    """E g^2 = sum_jk a_j a_k E relu(u_j) relu(u_k), each term by a 1-D quadrature after
    conditioning (no bivariate normal CDF): the independent path for the closed form."""
    W, b, a = (v.detach().cpu().double().numpy() for v in (net.W, net.b, net.a))
    m = len(a)
    terms = (
        (1 if j == k else 2) * a[j] * a[k] * _pair_by_conditioning(W[j], b[j], W[k], b[k])
        for j in range(m)
        for k in range(j, m)
    )
    return math.fsum(terms)


claim = register(
    Claim(
        "assumption-2",
        Ref("Assumption 2"),
        statement="links as stated: E g^2 (Monte Carlo) = its stated value; the random "
        "teacher's E g^2 per draw in closed form (= quadrature, = Monte Carlo) averages to "
        "(1 + 1/(qd))/2; the exact two-layer nets equal g (eps_2NN = 0), with r_a, "
        "r_w as Assumption 2 defines them and Lip between every slope and r_a r_w",
        builds=(make_link,),
        bounds=(teacher_second_moment_closed,),
        derivation="docs/derivations/theorem4.md",
    )
)


@dataclass(frozen=True)
class Assumption2Inputs:
    """The links users get from make_link, Gaussian tokens (and some of norm 10), the teacher's
    draw, and the stated second moments."""

    links: Tuple[Tuple[str, Link], ...]
    xt: torch.Tensor  # (n, q, d) N(0, I) tokens
    big: torch.Tensor  # tokens of norm 10, for the exact nets
    teacher: Callable[..., Link] = _draw_teacher  # generator= -> a random teacher link
    stated: Dict[str, Callable[[int, int], float]] = field(default_factory=SECOND_MOMENT.copy)
    teacher_closed: Callable[[int, int], float] = teacher_second_moment_closed
    teacher_moment: Callable[[TwoLayerNet], float] = gaussian_second_moment  # one draw's E g^2
    draws: Tuple[int, int] = (3, 600)  # teachers checked one by one, teachers averaged over
    norms: Callable[[TwoLayerNet], Tuple[float, float, float]] = (
        lambda net: (net.r_a, net.r_w, net.lipschitz)  # what the bounds read from a net
    )


@claim.inputs
def assumption2_inputs(ctx: Context) -> Assumption2Inputs:
    """Each link of constructions/links.py at q = 3, d = 4, and n Gaussian token triples."""
    n = ctx.pick(quick=100_000, full=1_000_000)
    links = tuple(
        (name, make_link(name, Q, D, generator=ctx.generator("assumption-2/link", i)))
        for i, name in enumerate(LINKS)
    )
    xt = torch.randn(n, Q, D, generator=ctx.generator("assumption-2/tokens"), dtype=torch.float64)
    big = xt[:2000] * (10.0 / xt[:2000].norm(dim=-1, keepdim=True))
    draws = ctx.pick(quick=(3, 600), full=(16, 10_000))
    return Assumption2Inputs(links, xt, big, draws=draws)


@claim.check("E g^2 = stated", evidence="monte-carlo", agreement=True)
def second_moments(inp: Assumption2Inputs) -> Verdict:
    """Each link's E g^2 (Monte Carlo) = its stated value: the largest |mean - stated| / se."""
    cases = []
    for name, link in [(k, f) for k, f in inp.links if k in inp.stated]:
        y = link(inp.xt)
        sq = (y * y).sum(-1) if y.dim() == inp.xt.dim() - 1 else y * y
        m, se = float(sq.mean()), float(sq.std() / math.sqrt(sq.numel()))
        want = inp.stated[name](Q, D)
        detail = f"standard errors: E g^2 = {m:.4f} +- {se:.1g} vs stated {want:.4g}"
        detail += f" ({len(y)} draws; {ZSCORE})"
        cases.append((name, at_most(abs(m - want) / se, Z, detail=detail)))
    return worst(cases)


def _teachers(inp: Assumption2Inputs, ctx: Context, count: int) -> Tuple[Teacher, ...]:
    """The first ``count`` random teachers of one seeded stream, drawn as make_link draws them."""
    g = ctx.generator("assumption-2/teachers")
    return tuple(inp.teacher(generator=g) for _ in range(count))


@claim.check("teacher E g^2 closed form = quadrature, per draw", evidence="formula", agreement=True)
def teacher_closed_form(inp: Assumption2Inputs, ctx: Context) -> Verdict:
    """Each drawn teacher's E g^2 in closed form (bivariate normal moments, Owen's T) = the same
    by 1-D quadratures after conditioning, to QUAD_RTOL relative (worst draw)."""
    cases = []
    for i, t in enumerate(_teachers(inp, ctx, inp.draws[0])):
        closed, quad = inp.teacher_moment(t.net), second_moment_by_quadrature(t.net)
        detail = f"relative gap: closed form {closed:.15g}, quadrature {quad:.15g}"
        cases.append((f"draw {i}", at_most(abs(closed - quad) / quad, QUAD_RTOL, detail=detail)))
    return worst(cases, key=by_measured)


@claim.check(
    "teacher E g^2 per draw (Monte Carlo) = closed form", evidence="monte-carlo", agreement=True
)
def teacher_per_draw(inp: Assumption2Inputs, ctx: Context) -> Verdict:
    """Each drawn teacher link, evaluated on the n Gaussian token triples: its mean g^2 = its
    closed-form E g^2 within 6 standard errors (the largest |mean - closed| / se of the draws)."""
    cases = []
    for i, t in enumerate(_teachers(inp, ctx, inp.draws[0])):
        sq = t(inp.xt).pow(2)
        m, se = float(sq.mean()), float(sq.std() / math.sqrt(sq.numel()))
        want = inp.teacher_moment(t.net)
        detail = (
            f"standard errors: mean g^2 {m:.4f} +- {se:.1g} vs closed form {want:.4f}; {ZSCORE}"
        )
        cases.append((f"draw {i}", at_most(abs(m - want) / se, Z, detail=detail)))
    return worst(cases)


@claim.check("teacher E g^2 = (1 + 1/(qd)) / 2", evidence="monte-carlo")
def teacher(inp: Assumption2Inputs, ctx: Context) -> Verdict:
    """Over make_link's random teachers, each draw's exact E g^2 (closed form) averages to
    (1 + 1/(q d)) / 2 within 6 standard errors; so do its factors m E a_j^2 = 1 and, over every
    hidden unit, E relu(w.z + b)^2 = (1 + 1/(q d)) / 2 (the sharp one: no chi-square of a)."""
    ts = _teachers(inp, ctx, inp.draws[1])
    W, b, a = (torch.stack([getattr(t.net, k) for t in ts]).double() for k in ("W", "b", "a"))
    K = relu_pair_moments(W, b)
    stated = inp.teacher_closed(Q, D)
    samples = (
        ("E g^2 per draw", torch.einsum("ti,tij,tj->t", a, K, a), stated),
        ("hidden units: E relu(u)^2", torch.diagonal(K, dim1=-2, dim2=-1).flatten(), stated),
        ("output weights: m a_j^2", (a * a * a.shape[1]).flatten(), 1.0),
    )
    cases = []
    for what, x, want in samples:
        m, se = float(x.mean()), float(x.std() / math.sqrt(x.numel()))
        detail = f"{len(ts)} teachers, {x.numel()} values: mean {m:.4f}, se {se:.2g}, tol 6 se"
        cases.append((what, close(m, want, Z * se, detail=detail)))
    return worst(cases)


@claim.check("exact nets = g", evidence="built")
def exact_nets(inp: Assumption2Inputs) -> Verdict:
    """Every exact Assumption 2 net equals g, on Gaussian tokens and tokens of norm 10."""
    cases = []
    for name, link in inp.links:
        if (net := link.two_layer_net()) is not None:
            err = max(float((net(x) - link(x)).abs().max()) for x in (inp.xt[:2000], inp.big))
            scale, what = 10.0 * Q * max(1.0, net.lipschitz), "(qd + m + 2) eps 10 q Lip"
            rnd = Rounding(n=Q * D + net.m + 2, scale=scale, what=what)
            cases.append((name, at_most(err, 0.0, rnd, detail="max |net - g|")))
    return worst(cases, key=lambda v: v.measured - v.rounding)


def _norm_gaps(inp: Assumption2Inputs, net: TwoLayerNet, x: torch.Tensor) -> Tuple[float, str]:
    """The largest of: |r_a - ||a|| sqrt m| / r_a, |r_w - ||(W, b)||_F / sqrt m| / r_w (Assumption
    2's definitions), (Lip - r_a r_w) / (r_a r_w) (Lip above r_a r_w), and (slope - Lip) / Lip
    (a gradient norm of the net at the tokens above its Lipschitz constant)."""
    r_a, r_w, lip = inp.norms(net)
    want_a = float(net.a.norm()) * math.sqrt(net.m)
    want_w = float(torch.cat([net.W, net.b[:, None]], dim=1).norm()) / math.sqrt(net.m)
    z = x.clone().requires_grad_(True)  # (n, q, d): the net reads each prompt's q tokens
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(net(z).sum(), z)
    slope = float(grad.flatten(1).norm(dim=-1).max())
    gaps = (
        abs(r_a - want_a) / want_a,
        abs(r_w - want_w) / want_w,
        (lip - r_a * r_w) / (r_a * r_w),
        (slope - lip) / lip,
    )
    return max(gaps), f"r_a {r_a:.4g}, r_w {r_w:.4g}, Lip {lip:.4g}, largest slope {slope:.4g}"


@claim.check("norms as Assumption 2 defines them", evidence="built", agreement=True)
def net_norms(inp: Assumption2Inputs) -> Verdict:
    """Each link's two-layer net (the one the bounds read): r_a = ||a|| sqrt m and r_w =
    ||(W, b)||_F / sqrt m as Assumption 2 defines them, its Lipschitz constant at most r_a r_w and
    at least every gradient norm at 2000 Gaussian tokens; the largest relative excess."""
    cases = []
    for name, link in inp.links:
        if (net := link.two_layer_net()) is not None:
            gap, what = _norm_gaps(inp, net, inp.xt[:2000])
            cases.append((name, at_most(gap, 1e-12, detail=what)))
    return worst(cases, key=by_measured)


def _r_w_without_bias(net: TwoLayerNet) -> Tuple[float, float, float]:
    """r_w from ||W||_F alone (the bias column of (W, b) forgotten)."""
    return net.r_a, float(net.W.norm()) / math.sqrt(net.m), net.lipschitz


claim.fault(
    "r_w without the bias column", breaks=net_norms, apply=replaced(norms=_r_w_without_bias)
)


def _hermite_times(factor: float):
    """A fault's edit: the links replaced by the Hermite link alone, times ``factor``."""

    def links(old):
        hermite = dict(old)["hermite"]
        return (("hermite", CallableLink(q=Q, d=D, fn=lambda xt: factor * hermite(xt))),)

    return edited(links=links)


# He2 = z^2 - 1 without its 1/sqrt(2) is the Hermite link times sqrt(2); times sqrt(q) for over
claim.fault("He2 without 1/sqrt 2", breaks=second_moments, apply=_hermite_times(math.sqrt(2)))
claim.fault("the Hermite sum times sqrt q", breaks=second_moments, apply=_hermite_times(Q))


@claim.fault("a linear net with a sign lost", breaks=exact_nets)
def _sign_slip(inp: Assumption2Inputs) -> Assumption2Inputs:
    """A linear link whose exact net lost the sign of its second unit."""
    linear = dict(inp.links)["linear"]
    good = linear.two_layer_net()
    bad = TwoLayerNet(a=torch.tensor([1.0, 1.0], dtype=torch.float64), W=good.W, b=good.b)

    class SignSlip(type(linear)):
        def two_layer_net(self):
            return bad

    return replace(inp, links=(("linear", SignSlip(q=Q, d=D, u=linear.u)),))


@claim.fault("a teacher without the 1/sqrt(m) of its output weights", breaks=teacher)
def _unscaled_teacher(inp: Assumption2Inputs) -> Assumption2Inputs:
    """Teachers drawn with a ~ N(0, 1) (the 1/sqrt(m) of the output weights forgotten)."""

    def draw(generator):
        t = _draw_teacher(generator=generator)
        return replace(t, net=replace(t.net, a=t.net.a * math.sqrt(t.net.m)))

    return replace(inp, teacher=draw)


def _arccos_moment(net: TwoLayerNet) -> float:
    """E g^2 with each bias taken as a zero-mean coordinate (the arc-cosine kernel on (W, b)):
    |v_j| |v_k| (sin t + (pi - t) cos t) / (2 pi), v = (w, b), the biases' means dropped."""
    V = torch.cat([net.W, net.b[:, None]], dim=1).double()
    n = V.norm(dim=1)
    cos = (V @ V.T / (n[:, None] * n[None, :])).clamp(-1, 1)
    t = torch.arccos(cos)
    K = n[:, None] * n[None, :] * (torch.sin(t) + (math.pi - t) * cos) / (2 * math.pi)
    a = net.a.double()
    return float(a @ K @ a)


claim.fault(
    "the closed form with the biases' means dropped (arc-cosine kernel)",
    breaks=teacher_closed_form,
    apply=replaced(teacher_moment=_arccos_moment),
)


class _NoBiasForward(Teacher):
    """A teacher whose forward forgets its bias: g = a^T relu(W z), the net keeping b."""

    def g(self, xt):
        return torch.relu(xt.flatten(-2) @ self.net.W.T.to(xt)) @ self.net.a.to(xt)


@claim.fault("a teacher whose forward drops its bias", breaks=teacher_per_draw)
def _no_bias_forward(inp: Assumption2Inputs) -> Assumption2Inputs:
    """Teachers drawn as make_link draws them, evaluated without their bias."""

    def draw(generator):
        t = _draw_teacher(generator=generator)
        return _NoBiasForward(q=t.q, d=t.d, net=t.net)

    return replace(inp, teacher=draw)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        "links "
        + ", ".join(name for name, _ in inp.links)
        + f" at q = 3, d = 4; {inp.xt.shape[0]} Gaussian token triples, "
        + f"{inp.big.shape[0]} of norm 10; random teachers: {inp.draws[0]} one by one, "
        + f"{inp.draws[1]} averaged"
    )
)
