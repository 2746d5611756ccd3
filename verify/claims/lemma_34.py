"""Lemma 34 (Appendix C.2), as reconstructed in docs/derivations/rnn-lower-bounds.md (section 4,
items 3-4): the facts the RNN's truncation bound rests on, on the built Prop 28 RNN and members
of its class: the output growth |y_hat_i| <= Lam ||x_i|| + beta_0 (nearly attained) and the
token moments of Assumption 1. The moment bound m_p is these two through Minkowski's inequality
(``rnn_output_moment``, held to a 40-digit evaluation in ``thm-7``). Bounds:
``bounds/theorem7.py``."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Callable, Optional, Tuple

import mpmath as mp
import torch
from torch import nn
from torch.func import functional_call

from qstr.bounds.attention import lemma12_radius
from qstr.bounds.theorem7 import Theorem7Params, prop28_layers, rnn_output_growth, token_norm_moment
from qstr.bounds.transition import prop28_rnn
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.links import make_link
from qstr.constructions.recurrent import module_from_state, rnn_state
from qstr.constructions.task import QSTR
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, replaced, worst
from qstr.verify.claims._class_member import net_constants_mp
from qstr.verify.registry import register

F64 = torch.float64
L34_N, L34_D, L34_RX, L34_EPS = 32, 3, 2.5, 0.1
L34_SCALES = (1.0, 4.0, 30.0)  # Gaussian tokens, and the same prompts far outside the r_x ball
L34_PS = (1.0, 2.0, 4.0)
GROWTH_TERM = 1e-12  # relative rounding allowance of |y_hat| / bound (float64, O(1) depth)
ATTAINED_WITHIN = 1.3  # the bound over a rank-one member's output where it is built for
# float64 growth constants against 40 digits: products of <= 5 radii and a square root, good to
# 1e-14 relative; the reference is exact there
PIN_RTOL = 1e-12

claim = register(
    Claim(
        "lemma-34",
        Ref("Lemma 34"),
        statement="(reconstructed) the truncation's facts for the RNN class: states in the "
        "r_h-ball and |y_hat_i| <= Lam ||x_i|| + beta_0 (Lam = prod R_l of f_y, beta_0 = Lam "
        "sqrt(2 r_h^2 + q + 1) + b_y) for every member and prompt, nearly attained; "
        "(E ||x||^{2p})^{1/p} <= 2p C_x d, the token moments the truncation level reads",
        builds=(prop28_rnn,),
        bounds=(rnn_output_growth, token_norm_moment),
        derivation="docs/derivations/rnn-lower-bounds.md",
    )
)


# ------------------------------------------------------------------ the inputs


@dataclass(frozen=True)
class Member:
    """An RNN of the class: the built module, or the built one with f_y swapped for ``f_y``
    (parameters by name, swapped in by torch.func)."""

    label: str
    f_y: dict  # {} for the module as built
    at: Optional[torch.Tensor] = None  # the f_y input a rank-one member is built for


@dataclass(frozen=True)
class GrowthInputs:
    module: nn.Module  # DeepTransitionBiRNN
    q: int
    Z: torch.Tensor  # (B, N, D) prompts: Gaussian tokens at each scale of L34_SCALES
    X: torch.Tensor  # (B, N, d) their tokens
    extreme: torch.Tensor  # (E, 2 d_h + D) inputs of f_y with both states at radius r_h
    members: Tuple[Member, ...]
    tokens: torch.Tensor  # (S, d) Gaussian tokens (C_x = 1) for the moments
    growth: Callable = rnn_output_growth
    token_moment: Callable = token_norm_moment


def _layers(module: nn.Module):
    """f_y's linear layers as (weight name, bias name or None), in order."""
    names = dict(module.f_y.named_parameters())
    idx = sorted({int(k.split(".")[0]) for k in names})
    return [(f"{i}.weight", f"{i}.bias" if f"{i}.bias" in names else None) for i in idx]


def _radii(module: nn.Module):
    """(R_l = ||[W_l b_l]||_F, has a bias) of each layer of f_y as built: the class's radii."""
    p = dict(module.f_y.named_parameters())
    out = []
    for w, b in _layers(module):
        parts = [p[w].detach().flatten()] + ([p[b].detach()] if b else [])
        out.append((float(torch.cat(parts).norm()), b is not None))
    return out


def rank_one_output_net(module: nn.Module, u: torch.Tensor) -> dict:
    """Lemma 34's growth (item 3) attained: the f_y of the class (the built radii R_l) largest
    at input ``u``. Each layer maps the previous layer's one active unit onto unit 0 with [W b]
    along (a_{l-1}, 1), so its output is a_l = R_l sqrt(a_{l-1}^2 + 1), a_0 = ||u|| (R_L a_{L-1}
    at the unbiased last layer)."""
    p = dict(module.f_y.named_parameters())
    out, a, v = {}, float(u.norm()), u / u.norm()
    for (w, b), (R, _) in zip(_layers(module), _radii(module), strict=True):
        W = torch.zeros_like(p[w])
        if b is None:
            W[0] = R * v
            out[w], a = W, R * a
            continue
        s = R / math.sqrt(a * a + 1.0)
        W[0] = s * a * v
        bias = torch.zeros_like(p[b])
        bias[0] = s
        out[w], out[b], a = W, bias, R * math.sqrt(a * a + 1.0)
        v = torch.zeros(W.shape[0], dtype=W.dtype, device=W.device)
        v[0] = 1.0
    return out


def _f_y_input(module: nn.Module, Z: torch.Tensor) -> torch.Tensor:
    h_fwd, h_bwd = module.states(Z)
    return torch.cat([h_fwd, h_bwd, Z], -1)


def _extreme_inputs(module: nn.Module, Z: torch.Tensor, d: int, gen) -> torch.Tensor:
    """f_y inputs (h_fwd, h_bwd, z_i) with both states at radius r_h (what a member of the class
    whose transitions reach the projection's radius feeds f_y) and x_i = 0, where the growth
    bound is beta_0 alone; the codes of four positions of one prompt."""
    z = Z[0, :4].clone()
    h = torch.randn(2, z.shape[0], module.d_h, generator=gen, dtype=F64).to(z.device)
    h = h / torch.linalg.vector_norm(h, dim=-1, keepdim=True) * module.r_h
    z[:, :d] = 0.0
    return torch.cat([h[0], h[1], z], -1)


@claim.inputs
def lemma34_inputs(ctx: Context) -> GrowthInputs:
    """The Prop 28 RNN (RS-Hadamard N = 32, d = 3, q = 1, a teacher link, eps = 0.1, r_x = 2.5)
    as users load it; simple-qSTR prompts with Gaussian tokens at scales 1, 4 and 30."""
    book = rs_hadamard_codebook(L34_N, dtype=F64)
    link = make_link("teacher", 1, L34_D, generator=ctx.generator("lemma-34/link"))
    rnn = prop28_rnn(book, L34_D, link.two_layer_net(), eps=L34_EPS, r_x=L34_RX)
    module = module_from_state(rnn_state(rnn), device=ctx.device)
    task = QSTR(N=L34_N, d=L34_D, link=link.to(ctx.device), variant="simple")
    gen = ctx.generator("lemma-34/prompts", device=ctx.device)
    B = ctx.pick(quick=4, full=16)
    p = task.sample(B, generator=gen, device=ctx.device, dtype=F64)
    X = torch.cat([p.x * s for s in L34_SCALES])
    Z = rnn.encode(X, p.t.repeat(len(L34_SCALES), 1, 1))
    extreme = _extreme_inputs(module, Z, L34_D, ctx.generator("lemma-34/states"))
    with torch.no_grad():
        U = _f_y_input(module, Z).flatten(0, 1)
    largest = U[int(torch.linalg.vector_norm(U, dim=-1).argmax())]
    members = [
        Member("built", {}),
        Member(
            "rank-one f_y at the prompts' largest input",
            rank_one_output_net(module, largest),
            largest,
        ),
    ]
    for k, u in enumerate(extreme):
        members.append(
            Member(f"rank-one f_y at extreme input {k}", rank_one_output_net(module, u), u)
        )
    S = ctx.pick(quick=40000, full=400000)
    tokens = torch.randn(S, L34_D, generator=ctx.generator("lemma-34/tokens"), dtype=F64)
    tokens = tokens.to(ctx.device)
    return GrowthInputs(module, 1, Z, X, extreme, tuple(members), tokens)


claim.scope_with(
    lambda inp: (
        f"Prop 28 RNN, rs-hadamard N={L34_N}, d={L34_D}, q={inp.q}; {inp.Z.shape[0]} prompts "
        f"(Gaussian tokens x {', '.join(f'{s:g}' for s in L34_SCALES)}), {len(inp.members)} "
        f"class members, {inp.extreme.shape[0]} f_y inputs with both states at r_h; token "
        f"moments from {inp.tokens.shape[0]} Gaussian tokens, p = "
        f"{', '.join(f'{p:g}' for p in L34_PS)}"
    )
)


# ------------------------------------------------------------------ evaluation


def _envelope(inp: GrowthInputs):
    """(Lam, beta_0) for the built f_y's radii and the module's r_h."""
    radii = _radii(inp.module)
    return inp.growth([R for R, _ in radii], [b for _, b in radii], inp.module.r_h, inp.q)


def _outputs(inp: GrowthInputs, m: Member, Z: torch.Tensor) -> torch.Tensor:
    """y_hat (B, N) of the member on prompts Z (the module's own forward)."""
    params = {f"f_y.{k}": v for k, v in m.f_y.items()}
    with torch.no_grad():
        return functional_call(inp.module, params, (Z,)).reshape(Z.shape[0], Z.shape[1])


def _on_inputs(inp: GrowthInputs, m: Member, U: torch.Tensor) -> torch.Tensor:
    """f_y of the member on its inputs U (E, 2 d_h + D)."""
    params = dict(inp.module.f_y.named_parameters()) | m.f_y
    with torch.no_grad():
        return functional_call(inp.module.f_y, params, (U,)).reshape(-1)


# ------------------------------------------------------------------ the checks


@claim.check("||h_i|| <= r_h", evidence="built")
def states_in_ball(inp: GrowthInputs) -> Verdict:
    """Both state streams of the module stay in the projection's ball, at every scale."""
    with torch.no_grad():
        h_fwd, h_bwd = inp.module.states(inp.Z)
    top = float(torch.linalg.vector_norm(torch.cat([h_fwd, h_bwd], 1), dim=-1).max())
    return at_most(top, inp.module.r_h, GROWTH_TERM * inp.module.r_h, detail="largest ||h_i||")


def _x_norm(inp: GrowthInputs, u: torch.Tensor) -> torch.Tensor:
    """||x_i|| of f_y inputs (h_fwd, h_bwd, z_i): the first d entries of z_i."""
    d_h = inp.module.d_h
    return torch.linalg.vector_norm(u[..., 2 * d_h : 2 * d_h + L34_D], dim=-1)


@claim.check("|y_hat_i| <= Lam ||x_i|| + beta_0", evidence="built")
def growth_holds(inp: GrowthInputs) -> Verdict:
    """Item 3: every member at every prompt and position (the module's forward), and at the f_y
    inputs with both states at r_h."""
    lam, beta_0 = _envelope(inp)
    bound = lam * torch.linalg.vector_norm(inp.X, dim=-1) + beta_0
    ext = lam * _x_norm(inp, inp.extreme) + beta_0
    rows = []
    for m in inp.members:
        r = float((_outputs(inp, m, inp.Z).abs() / bound).max())
        r = max(r, float((_on_inputs(inp, m, inp.extreme).abs() / ext).max()))
        rows.append((m.label, at_most(r, 1.0, GROWTH_TERM, detail="largest |y_hat| / bound")))
    return worst(rows)


@claim.check(f"the growth bound attained within {ATTAINED_WITHIN:g}", evidence="built")
def growth_attained(inp: GrowthInputs) -> Verdict:
    """Item 3 is nearly tight: each rank-one member reaches the bound within the factor at the
    input it is built for: both states at r_h and x_i = 0 (beta_0 alone; slack: sqrt(a^2 + 1)
    <= a + 1 in b_y), and the prompts' largest input (||x_i|| large: Lam alone)."""
    lam, beta_0 = _envelope(inp)
    rows = []
    for m in inp.members:
        if m.at is None:
            continue
        y = float(_on_inputs(inp, m, m.at[None]).abs()[0])
        x = float(_x_norm(inp, m.at))
        what = f"bound / |y_hat| at ||x_i|| = {x:.3g}"
        rows.append((m.label, at_most((lam * x + beta_0) / y, ATTAINED_WITHIN, detail=what)))
    return worst(rows)


def _growth_points(inp: GrowthInputs):
    """(label, radii, biases, r_h, q) where the growth constants are pinned: the built f_y at the
    module's r_h, Theorem 7's class at its defaults (N = 256, n = 1000) and at q = 3, and an edge
    net (radii below 1, an unbiased middle layer)."""
    radii = _radii(inp.module)
    rows = [("built f_y", [R for R, _ in radii], [b for _, b in radii], inp.module.r_h, inp.q)]
    for q in (1, 3):
        P = Theorem7Params(q=q)
        r_x = lemma12_radius(P.d, 1000, 256, P.C_x)
        _, out = prop28_layers(256, P, r_x)
        R, B = [L.radius for L in out], [L.bias for L in out]
        rows.append((f"Theorem 7 class, q = {q}", R, B, math.sqrt(q) * r_x, q))
    rows.append(("edge", [0.5, 0.9, 0.3], [True, False, True], 0.25, 2))
    return rows


@claim.check(
    "Lam, beta_0 and the moments = 40-digit evaluation", evidence="formula", agreement=True
)
def growth_pinned(inp: GrowthInputs) -> Verdict:
    """``rnn_output_growth``'s (Lam, beta_0) against prod R_l and Lam sqrt(2 r_h^2 + q + 1) + b_y
    (b_y by R_l (b + 1)) written from rnn-lower-bounds.md (section 4, item 3) in mpmath at 40
    digits (``net_constants_mp``), and ``token_norm_moment`` against sqrt(r C_x d) at r = 2, 4, 8;
    the largest relative gap."""
    rows = []
    with mp.workdps(40):
        for label, R, B, r_h, q in _growth_points(inp):
            lam, beta_0 = inp.growth(R, B, r_h, q)
            Lam, _, b_y = net_constants_mp([mp.mpf(r) ** 2 for r in R], B, 0)
            want_beta = Lam * mp.sqrt(2 * mp.mpf(r_h) ** 2 + q + 1) + b_y
            gap = max(abs(lam - Lam) / Lam, abs(beta_0 - want_beta) / want_beta)
            rows.append((label, at_most(float(gap), PIN_RTOL, detail="(Lam, beta_0)")))
        for r in (2.0, 4.0, 8.0):
            want = mp.sqrt(mp.mpf(r) * L34_D)
            gap = abs(inp.token_moment(r, 1.0, L34_D) - want) / want
            rows.append(
                (f"moment r = {r:g}", at_most(float(gap), PIN_RTOL, detail="sqrt(r C_x d)"))
            )
    return worst(rows, key=lambda v: v.measured)


@claim.check("(E ||x||^{2p})^{1/p} <= 2p C_x d", evidence="monte-carlo")
def token_moments(inp: GrowthInputs) -> Verdict:
    """Assumption 1 at r = 2p for Gaussian tokens (C_x = 1): the Monte Carlo E ||x||^{2p} plus 4
    standard errors, to the power 1/p, at each p."""
    rows = []
    n2 = inp.tokens.pow(2).sum(-1)
    for p in L34_PS:
        v = n2.pow(p)
        mean, se = float(v.mean()), float(v.std() / math.sqrt(v.numel()))
        upper = (mean + 4 * se) ** (1 / p)
        bound = inp.token_moment(2 * p, 1.0, L34_D) ** 2
        what = f"(E ||x||^2p + 4 se)^(1/p), E ||x||^2p = {mean:.4g} +- {se:.2g}"
        rows.append((f"p={p:g}", at_most(upper, bound, detail=what)))
    return worst(rows)


# ------------------------------------------------------------------ faults


def _without_intercept(radii, biases, r_h, q):
    lam, _ = rnn_output_growth(radii, biases, r_h, q)
    return lam, lam * math.sqrt(2.0 * r_h * r_h + q + 1.0)


def _one_state(radii, biases, r_h, q):
    """beta_0 with r_h^2 for 2 r_h^2: sqrt(2 (r_h / sqrt 2)^2 + q + 1) = sqrt(r_h^2 + q + 1)."""
    return rnn_output_growth(radii, biases, r_h / math.sqrt(2.0), q)


def _without_last_layer(radii, biases, r_h, q):
    return rnn_output_growth(radii[:-1], biases[:-1], r_h, q)


def _unprojected(module: nn.Module) -> nn.Module:
    """The module with its projection skipped (its r_h still stated)."""
    out = copy.deepcopy(module)
    out.project = lambda h: h
    return out


claim.fault(
    "b_y dropped: the biases' growth left out of beta_0",
    breaks=(growth_holds, growth_pinned),
    apply=replaced(growth=_without_intercept),
)
claim.fault(
    "beta_0 with one state: r_h^2 for 2 r_h^2",
    breaks=(growth_holds, growth_pinned),
    apply=replaced(growth=_one_state),
)
claim.fault(
    "f_y's last (unbiased) layer left out of Lam and b_y",
    breaks=(growth_attained, growth_pinned),
    apply=replaced(growth=_without_last_layer),
)
claim.fault(
    "states not projected onto the r_h-ball",
    breaks=(states_in_ball, growth_holds),
    apply=lambda inp: replace(inp, module=_unprojected(inp.module)),
)
claim.fault(
    "Assumption 1's moments without r: (E ||x||^r)^{1/r} <= sqrt(C_x d)",
    breaks=(token_moments, growth_pinned),
    apply=replaced(token_moment=lambda r, C_x, d: math.sqrt(C_x * d)),
)
