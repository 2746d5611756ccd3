"""Lemma 20 (Appendix A.1), as reconstructed in docs/derivations/theorem4.md ((1b), (2.1),
section 6): the two facts its truncation bound rests on, on built modules and sampled tokens: the
output envelope |f_Theta(X)_i| <= B(X) over the class (attained), and the maximum's moments
(E M^{2p})^{1/p} <= C_x d psi(p). Bounds: ``bounds/transformer.py``."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Tuple

import mpmath as mp
import torch

from qstr.bounds.attention import lemma11, lemma12_radius
from qstr.bounds.transformer import max_moment_factor, output_envelope
from qstr.constructions.links import make_link
from qstr.constructions.task import QSTR
from qstr.verify.adversarial import clip_to_ball
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, close, worst
from qstr.verify.claims import _theorem4_pins as pins
from qstr.verify.claims._theorem4_pins import largest_gap
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

F64 = torch.float64
L20_D, L20_Q, L20_EPS, L20_B = 3, 2, 0.05, 16
L20_MOMENT_NS, L20_PS = (16, 1024), (1.0, 2.0, 4.0)
ENVELOPE_TOL = 1e-9  # the constructed member attains B(X) up to its attention's leak

claim = register(
    Claim(
        "lemma-20",
        Ref("Lemma 20"),
        statement="(reconstructed) the truncation's two facts: |f_Theta(X)_i| <= B(X) = K sqrt(q "
        "(M^2 + c^2 (q+1)) + 1) for every Theta with ||a|| ||(W,b)||_F <= K (attained), and "
        "(E max_j ||x_j||^{2p})^{1/p} <= C_x d psi(p) for N tokens",
        builds=(lemma11,),
        bounds=(output_envelope, max_moment_factor),
        derivation="docs/derivations/theorem4.md",
    )
)


# ------------------------------------------------------------------ the inputs


@dataclass(frozen=True)
class Member:
    """A one-layer Transformer of the class (a MergedAttention) on the encoded prompts Z, and
    which outputs are compared (M = max_j ||x_j|| and K = ||a|| ||(W, b)||_F are read from Z and
    the module's weights inside the checks)."""

    label: str
    model: torch.nn.Module
    Z: torch.Tensor
    at: Tuple[int, int]  # (prompt, position) the member was built for, or (-1, -1): all


@dataclass(frozen=True)
class EnvelopeInputs:
    members: Tuple[Member, ...]
    q: int
    c: float
    moments: Tuple[Tuple[int, float, float, float], ...]  # (N, p, E M^{2p} estimate, its se)
    prompt: Tuple[torch.Tensor, torch.Tensor]  # (x, t) the members' Z encode
    encode: Callable  # the built construction's encoding (x, t) -> Z
    envelope: Callable = output_envelope
    psi: Callable = max_moment_factor


def _K(model) -> float:
    Wb = torch.cat([model.W.detach().flatten(), model.b.detach()])
    return float(model.a.detach().norm() * Wb.norm())


def _worst_member(cons, Z, b: int, i: int) -> torch.nn.Module:
    """The class member with the built norms whose output at (prompt b, position i) is B(X): each
    head on one key (W_QK x 50), one unit reading (h_i, 1) along itself at ||(W, b)||_F, a on it."""
    m = cons.model
    worst = type(m)(m.D_e, m.H, m.m, m.out_dim, dtype=F64).to(Z.device)
    r_ma = float(m.a.detach().norm())
    R_mw = float(torch.cat([m.W.detach().flatten(), m.b.detach()]).norm())
    with torch.no_grad():
        worst.set_weights(W_QK=50 * m.W_QK)
        h = worst.heads(Z[b : b + 1])[0, i].flatten()
        u = torch.cat([h, torch.ones(1, dtype=F64, device=Z.device)])
        u = u / u.norm()
        W, bias, a = torch.zeros_like(m.W), torch.zeros_like(m.b), torch.zeros_like(m.a)
        W[0], bias[0], a[0] = R_mw * u[:-1], R_mw * u[-1], r_ma
        worst.set_weights(W=W, b=bias, a=a)
    return worst


def _random_member(cons, gen) -> torch.nn.Module:
    """A random member with the built module's ||a||, ||(W, b)||_F and ||W^(h)||_F."""
    m = cons.model
    out = type(m)(m.D_e, m.H, m.m, m.out_dim, dtype=F64).to(m.W_QK.device)

    def like(p):
        r = torch.randn(p.shape, generator=gen, dtype=F64).to(p.device)
        return r * (p.detach().norm() / r.norm())

    with torch.no_grad():
        W, b = like(m.W), like(m.b)
        scale = (
            torch.cat([m.W.detach().flatten(), m.b.detach()]).norm()
            / torch.cat([W.flatten(), b]).norm()
        )
        out.set_weights(W_QK=like(m.W_QK), W=W * scale, b=b * scale, a=like(m.a))
    return out


def _moments(ctx: Context):
    """(N, p, E M^{2p}, standard error) for Gaussian tokens in R^d (C_x = 1)."""
    S = ctx.pick(quick=4000, full=40000)
    gen = ctx.generator("lemma-20/moments")
    out = []
    for N in L20_MOMENT_NS:
        M2 = torch.randn(S, N, L20_D, generator=gen, dtype=F64).pow(2).sum(-1).amax(1)
        for p in L20_PS:
            v = M2.pow(p)
            out.append((N, p, float(v.mean()), float(v.std() / math.sqrt(S))))
    return tuple(out)


@claim.inputs
def lemma20_inputs(ctx: Context) -> EnvelopeInputs:
    """Lemma 11 (teacher link, q = 2, N = 16, d = 3), prompts with tokens in the r_x ball, half of
    them on its sphere; the built module, random members with its norms, and for 4 (prompt,
    position) pairs on the sphere the member that attains B(X) there; Gaussian tokens for the
    moments (N = 16 and 1024)."""
    N = 16
    link = make_link("teacher", L20_Q, L20_D, generator=ctx.generator("lemma-20/link"))
    link = link.to(ctx.device)
    r_x = lemma12_radius(L20_D, n=10_000, N=N)
    cons = lemma11(N, L20_D, L20_Q, link.two_layer_net(), eps=L20_EPS, r_x=r_x, device=ctx.device)
    gen = ctx.generator("lemma-20/prompts", device=ctx.device)
    p = QSTR(N=N, d=L20_D, link=link).sample(L20_B, generator=gen, device=ctx.device, dtype=F64)
    x = clip_to_ball(p.x, r_x)
    x[L20_B // 2 :] = x[L20_B // 2 :] / x[L20_B // 2 :].norm(dim=-1, keepdim=True) * r_x
    Z = cons.encode(x, p.t)
    members = [Member("built", cons.model, Z, (-1, -1))]
    g = ctx.generator("lemma-20/members")
    for k in range(ctx.pick(quick=4, full=32)):
        members.append(Member(f"random {k}", _random_member(cons, g), Z, (-1, -1)))
    for b, i in ((L20_B - 1, 0), (L20_B - 1, N - 1), (L20_B - 2, 5), (L20_B - 3, 11)):
        m = _worst_member(cons, Z, b, i)
        members.append(Member(f"worst at prompt {b}, position {i}", m, Z, (b, i)))
    return EnvelopeInputs(tuple(members), L20_Q, cons.c, _moments(ctx), (x, p.t), cons.encode)


claim.scope_with(
    lambda inp: (
        f"Lemma 11 module q={inp.q} N=16 d={L20_D}, {len(inp.members)} class members, "
        f"{inp.members[0].Z.shape[0]} prompts; moments at N = {L20_MOMENT_NS}, p = {L20_PS}"
    )
)


# ------------------------------------------------------------------ the checks


def _ratios(inp: EnvelopeInputs, m: Member) -> torch.Tensor:
    """|f(X)_i| / B(X) on every prompt and position (B, N), K read from the member's weights and
    M = max_j ||x_j|| from the x block of Z."""
    with torch.no_grad():
        f = m.model(m.Z).abs()
    M = m.Z[..., :L20_D].norm(dim=-1).amax(1)
    return f / inp.envelope(M, _K(m.model), inp.q, inp.c)[:, None]


@claim.check("|f(X)_i| <= B(X)", evidence="built")
def within_envelope(inp: EnvelopeInputs) -> Verdict:
    """(2.1): every member's output at every prompt and position is at most B(X) for its K."""
    rows = []
    for m in inp.members:
        r = float(_ratios(inp, m).max())
        rows.append((m.label, at_most(r, 1.0, 1e-12, detail="largest |f| / B(X)")))
    return worst(rows)


@claim.check("B(X) attained", evidence="built")
def envelope_attained(inp: EnvelopeInputs) -> Verdict:
    """(2.1) is tight: the member built for (prompt, position) reaches B(X) there, to 1e-9 (its
    heads concentrated on one key, its unit along (h_i, 1))."""
    rows = []
    for m in inp.members:
        if m.at[0] < 0:
            continue
        r = float(_ratios(inp, m)[m.at])
        rows.append((m.label, close(r, 1.0, ENVELOPE_TOL, detail="|f| / B(X) there")))
    return worst(rows)


def _gaussian_factor(N: int, p: float) -> float:
    """What (1b)'s chain gives with the Gaussian's own moments, E||x||^r = 2^{r/2}
    Gamma((d + r)/2) / Gamma(d/2), in place of Assumption 1's (d r)^{r/2}: (N E||x||^r)^{2/r} at
    r = max(2p, 2 ln N), over d psi(p). The ratio cannot exceed about this (theorem4.md, 6)."""
    with mp.workdps(pins.DPS):
        r = max(2 * mp.mpf(p), 2 * mp.log(N))
        moment = 2 ** (r / 2) * mp.gamma((L20_D + r) / 2) / mp.gamma(mp.mpf(L20_D) / 2)
        return float((N * moment) ** (2 / r) / (L20_D * pins.psi(p, N)))


@claim.check("(E M^{2p})^{1/p} <= C_x d psi(p)", evidence="monte-carlo")
def moments_of_the_maximum(inp: EnvelopeInputs) -> Verdict:
    """(1b) for Gaussian tokens (C_x = 1): the Monte Carlo E M^{2p} plus 4 standard errors, to the
    power 1/p, is at most d psi(p) at each (N, p); the detail gives the Gaussian's factor (the
    slack is Assumption 1's moment constant, not the union bound or Jensen)."""
    rows = []
    for N, p, mean, se in inp.moments:
        upper = (mean + 4 * se) ** (1 / p)
        what = (
            f"(E M^2p + 4 se)^(1/p), E M^2p = {mean:.4g} +- {se:.2g}; Gaussian moments in (1b) "
            f"give {_gaussian_factor(N, p):.3f} of the bound (Assumption 1's (d r)^(r/2) loose)"
        )
        rows.append((f"N={N} p={p:g}", at_most(upper, L20_D * inp.psi(p, N), detail=what)))
    return worst(rows)


def _envelope_points(inp: EnvelopeInputs):
    """(M, K, q, c): the claim's (its members' K, M = 0, the r_x sphere) and edge ones."""
    K = [_K(m.model) for m in inp.members]
    Ms = (0.0, float(inp.prompt[0].norm(dim=-1).max()))
    own = [(M, k, inp.q, inp.c) for M in Ms for k in K]
    return own + [(0.0, 1e-3, 1, 0.0), (1e3, 50.0, 8, 2.0), (1e-8, 1.0, 1, 1e-8)]


@claim.check("B(X) = 40-digit evaluation", evidence="formula", agreement=True)
def envelope_pin(inp: EnvelopeInputs) -> Verdict:
    """``output_envelope`` against K sqrt(q (M^2 + c^2 (q+1)) + 1) in mpmath at 40 digits
    (theorem4.md, (2.1)); relative 1e-12."""
    pts = _envelope_points(inp)
    gap = largest_gap((inp.envelope(*p), lambda p=p: pins.envelope(*p)) for p in pts)
    return at_most(gap, pins.PIN_RTOL, detail=f"largest relative gap over {len(pts)} points")


def _psi_points(inp: EnvelopeInputs):
    """(p, N): the claim's, both sides of p = ln N and on it, and Theorem 4's p at n = 1e12."""
    own = [(p, N) for N, p, _, _ in inp.moments]
    edges = [(1.0, 2), (math.log(16), 16), (0.5, 2**20), (100.0, 2**20), (math.log(2e12), 1024)]
    return own + edges


@claim.check("psi(p) = 40-digit evaluation", evidence="formula", agreement=True)
def psi_pin(inp: EnvelopeInputs) -> Verdict:
    """``max_moment_factor`` against min_{r >= 2p} r N^{2/r} in mpmath at 40 digits, written as
    its two cases (2 e ln N where ln N >= p, else 2p N^{1/p}; theorem4.md, (1b)); relative
    1e-12."""
    pts = _psi_points(inp)
    gap = largest_gap((inp.psi(*p), lambda p=p: pins.psi(*p)) for p in pts)
    return at_most(gap, pins.PIN_RTOL, detail=f"largest relative gap at (p, N) = {pts}")


@claim.check("c^2 (q+1) = ||z_j||^2 - ||x_j||^2 of the built encoding", evidence="built")
def c_as_built(inp: EnvelopeInputs) -> Verdict:
    """The recorded c, which B(X) reads, against the built construction's encoding of the
    prompts: every ||z_j||^2 - ||x_j||^2 is c^2 (q + 1) (unit codes), up to the sums' rounding."""
    x, t = inp.prompt
    Z = inp.encode(x, t)
    z2 = Z.pow(2).sum(-1)
    want = inp.c**2 * (inp.q + 1)
    gap = float((z2 - x.pow(2).sum(-1) - want).abs().max())
    n = 2 * (Z.shape[-1] + L20_D)
    rnd = Rounding(n=n, scale=float(z2.max()), what="2 (D_e + d) eps max||z||^2")
    return close(gap, 0.0, 0.0, rnd, detail=f"largest gap to c^2 (q+1) = {want:.6g}")


claim.fault(
    "B(X) without the bias's 1",
    breaks=(within_envelope, envelope_attained, envelope_pin),
    apply=lambda inp: replace(
        inp, envelope=lambda M, K, q, c: K * (q * (M * M + c * c * (q + 1))) ** 0.5
    ),
)
claim.fault(
    "B(X) with c^2 q, the position block forgotten",
    breaks=(within_envelope, envelope_attained, envelope_pin),
    apply=lambda inp: replace(
        inp, envelope=lambda M, K, q, c: K * (q * (M * M + c * c * q) + 1) ** 0.5
    ),
)
claim.fault(
    "psi(p) = 2p: the maximum over N tokens forgotten",
    breaks=(moments_of_the_maximum, psi_pin),
    apply=lambda inp: replace(inp, psi=lambda p, N: 2 * p),
)
claim.fault(
    "psi without its minimum over r: 2p N^(1/p) at r = 2p",  # conservative
    breaks=psi_pin,
    apply=lambda inp: replace(inp, psi=lambda p, N: 2 * p * N ** (1 / p)),
)
claim.fault(
    "c recorded as the published code's 1, not sqrt(d / q)",
    breaks=c_as_built,
    apply=lambda inp: replace(inp, c=1.0),
)
