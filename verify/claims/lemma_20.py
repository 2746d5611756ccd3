"""Lemma 20 (Appendix A.1), as reconstructed in docs/derivations/theorem4.md ((1b), (2.1),
section 6): the two facts its truncation bound rests on, on built modules and sampled tokens: the
output envelope |f_Theta(X)_i| <= B(X) over the class (attained), and the maximum's moments
(E M^{2p})^{1/p} <= C_x d psi(p). Bounds: ``bounds/transformer.py``."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Tuple

import torch

from qstr.bounds.attention import lemma11, lemma12_radius
from qstr.bounds.transformer import max_moment_factor, output_envelope
from qstr.constructions.links import make_link
from qstr.constructions.task import QSTR
from qstr.verify.adversarial import clip_to_ball
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, close, worst
from qstr.verify.registry import register

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
    """A one-layer Transformer of the class (a MergedAttention) on prompts Z, with M = max_j
    ||x_j|| per prompt and K = ||a|| ||(W, b)||_F, and which outputs are compared."""

    label: str
    model: torch.nn.Module
    Z: torch.Tensor
    M: torch.Tensor  # (B,)
    K: float
    at: Tuple[int, int]  # (prompt, position) the member was built for, or (-1, -1): all


@dataclass(frozen=True)
class EnvelopeInputs:
    members: Tuple[Member, ...]
    q: int
    c: float
    moments: Tuple[Tuple[int, float, float, float], ...]  # (N, p, E M^{2p} estimate, its se)
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
    M = x.norm(dim=-1).amax(1)
    members = [Member("built", cons.model, Z, M, _K(cons.model), (-1, -1))]
    g = ctx.generator("lemma-20/members")
    for k in range(ctx.pick(quick=4, full=32)):
        m = _random_member(cons, g)
        members.append(Member(f"random {k}", m, Z, M, _K(m), (-1, -1)))
    for b, i in ((L20_B - 1, 0), (L20_B - 1, N - 1), (L20_B - 2, 5), (L20_B - 3, 11)):
        m = _worst_member(cons, Z, b, i)
        members.append(Member(f"worst at prompt {b}, position {i}", m, Z, M, _K(m), (b, i)))
    return EnvelopeInputs(tuple(members), L20_Q, cons.c, _moments(ctx))


claim.scope_with(
    lambda inp: (
        f"Lemma 11 module q={inp.q} N=16 d={L20_D}, {len(inp.members)} class members, "
        f"{inp.members[0].Z.shape[0]} prompts; moments at N = {L20_MOMENT_NS}, p = {L20_PS}"
    )
)


# ------------------------------------------------------------------ the checks


def _ratios(inp: EnvelopeInputs, m: Member) -> torch.Tensor:
    """|f(X)_i| / B(X) on every prompt and position (B, N)."""
    with torch.no_grad():
        f = m.model(m.Z).abs()
    return f / inp.envelope(m.M, m.K, inp.q, inp.c)[:, None]


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


@claim.check("(E M^{2p})^{1/p} <= C_x d psi(p)", evidence="monte-carlo")
def moments_of_the_maximum(inp: EnvelopeInputs) -> Verdict:
    """(1b) for Gaussian tokens (C_x = 1): the Monte Carlo E M^{2p} plus 4 standard errors, to the
    power 1/p, is at most d psi(p) at each (N, p)."""
    rows = []
    for N, p, mean, se in inp.moments:
        upper = (mean + 4 * se) ** (1 / p)
        what = f"(E M^2p + 4 se)^(1/p), E M^2p = {mean:.4g} +- {se:.2g}"
        rows.append((f"N={N} p={p:g}", at_most(upper, L20_D * inp.psi(p, N), detail=what)))
    return worst(rows)


claim.fault(
    "B(X) without the bias's 1",
    breaks=(within_envelope, envelope_attained),
    apply=lambda inp: replace(
        inp, envelope=lambda M, K, q, c: K * (q * (M * M + c * c * (q + 1))) ** 0.5
    ),
)
claim.fault(
    "B(X) with c^2 q, the position block forgotten",
    breaks=(within_envelope, envelope_attained),
    apply=lambda inp: replace(
        inp, envelope=lambda M, K, q, c: K * (q * (M * M + c * c * q) + 1) ** 0.5
    ),
)
claim.fault(
    "psi(p) = 2p: the maximum over N tokens forgotten",
    breaks=moments_of_the_maximum,
    apply=lambda inp: replace(inp, psi=lambda p, N: 2 * p),
)
