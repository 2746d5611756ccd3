"""Cor 27 (Appendix B): every hidden state is exactly 0 on one side of its target and within eps
of x_{t_l} on the other, flat in N. Construction: ``constructions/recurrent.py``;
docs/derivations/rnn-transition.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Tuple

import torch

from qstr.bounds.recurrent import prop28_rnn, token_radius
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.links import make_link
from qstr.constructions.recurrent import rnn_weights
from qstr.verify.adversarial import clip_to_ball
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, by_ratio, exact
from qstr.verify.claims._transition import F64, certified_eps_as_asked, largest_gap
from qstr.verify.claims._transition import module_bands_from_zero, none_counted
from qstr.verify.claims._transition import orthogonally_rotated, qstr_prompts, rnn_with
from qstr.verify.claims._transition import transition_rounding, worst_case
from qstr.verify.registry import register

C27_D, C27_Q, C27_EPS = 4, 2, 0.1

claim = register(
    Claim(
        "cor-27",
        Ref("Cor 27"),
        statement="every hidden state is exactly 0 before (after) its target and within eps of "
        "x_{t_l} after (before) it, for N up to 1e5 (1e6 on GPU): the error does not accumulate",
        builds=(rnn_weights,),
        bounds=(prop28_rnn,),
        derivation="docs/derivations/rnn-transition.md",
    )
)


@dataclass(frozen=True)
class StateCase:
    """An RNN on N positions, B simple-qSTR prompts in its r_x ball (prompt 0's selected tokens on
    the sphere), and the states the scan computes for them with their targets."""

    label: str
    N: int
    rnn: object  # RNNConstruction
    x: torch.Tensor
    t: torch.Tensor
    states: object  # RNNStates
    targets: tuple  # (forward, backward)

    @property
    def error(self) -> float:
        """The largest |state - target| of both directions."""
        (tf, tb), st = self.targets, self.states
        return max(largest_gap(st.h_fwd, tf), largest_gap(st.h_bwd, tb))


@dataclass(frozen=True)
class Cor27Inputs:
    """The state cases (RS-Hadamard codes up to N = 1e5, 1e6 on GPU, and a rotated code with
    approximate products), and the literal module of the first case (a loop over positions)."""

    cases: Tuple[StateCase, ...]
    module: object  # DeepTransitionBiRNN of cases[0]
    eps: float
    clipped: Tuple[object, StateCase]  # cases[0] at r_h = sqrt(q) r_x / 2: its module and scan


def _evaluated(label: str, rnn, x: torch.Tensor, t: torch.Tensor) -> StateCase:
    """The case with its states by the scan (at the RNN's own r_h) and their targets."""
    with torch.no_grad():
        return StateCase(label, x.shape[1], rnn, x, t, rnn.states(x, t), rnn.targets(x, t))


def _at_half_radius(c: StateCase) -> StateCase:
    """The case at r_h = sqrt(q) r_x / 2, below Cor 27's radius: the projection clips the states
    that carry x_t (tokens on the r_x sphere)."""
    rnn = rnn_with(c.rnn, r_h=0.5 * math.sqrt(C27_Q) * c.rnn.guarantee.r_x)
    return _evaluated(f"{c.label}, r_h = {rnn.r_h:.3g}", rnn, c.x, c.t)


def _c27_case(N: int, rotate: bool, k: int, ctx: Context) -> StateCase:
    book = rs_hadamard_codebook(N, dtype=F64)
    if rotate:
        book = orthogonally_rotated(book, ctx.generator("cor-27/rotation"))
    book = book.to(device=ctx.device)
    link = make_link("teacher", C27_Q, C27_D, generator=ctx.generator("cor-27/link")).to(ctx.device)
    B = 1 if rotate else max(1, min(8, ctx.pick(quick=200_000, full=1_000_000, gpu=4_000_000) // N))
    rnn = prop28_rnn(book, C27_D, link.two_layer_net(), eps=C27_EPS, r_x=token_radius(C27_D, N * B))
    r_x = rnn.guarantee.r_x
    p = qstr_prompts(N, C27_D, link, B, ctx.generator("cor-27/prompts", k, device=ctx.device), ctx)
    x = clip_to_ball(p.x, r_x)
    t0 = p.t[0, 0]
    x[0, t0] = x[0, t0] / x[0, t0].norm(dim=-1, keepdim=True) * r_x  # on the sphere
    label = f"N={N} ({'rotated, ' if rotate else ''}B={B}, d_e={rnn.d_e}, mu={rnn.guarantee.mu:g})"
    return _evaluated(label, rnn, x, p.t)


@claim.inputs
def cor27_inputs(ctx: Context) -> Cor27Inputs:
    """Ns: 1e2 to 1e5 (1e3 to 1e6 on GPU), then the rotated code at N = 16384 (32768 in full);
    the first case also at r_h = sqrt(q) r_x / 2 (the module users get at that r_h, and the
    scan's states there)."""
    Ns = ctx.pick(quick=(100, 1000, 10_000, 100_000), gpu=(1000, 10_000, 100_000, 1_000_000))
    plan = [(N, False) for N in Ns] + [(ctx.pick(quick=16_384, full=32_768), True)]
    cases = tuple(_c27_case(N, rotate, k, ctx) for k, (N, rotate) in enumerate(plan))
    clipped = _at_half_radius(cases[0])
    module = cases[0].rnn.module(device=ctx.device)
    return Cor27Inputs(cases, module, C27_EPS, (clipped.rnn.module(device=ctx.device), clipped))


@claim.check("state error <= eps at every N", evidence="built")
def states_within_eps(inp: Cor27Inputs) -> Verdict:
    """Cor 27: every state within eps of x_{t_l} after (before) its target, at every N."""
    ratios = "err/eps by N: " + ", ".join(
        f"{c.N}: {c.error / c.rnn.guarantee.state_eps:.3g}" for c in inp.cases
    )

    def case(c: StateCase) -> Verdict:
        rounding = transition_rounding(c.rnn.transition, c.N, c.rnn.r_h)
        return at_most(c.error, c.rnn.guarantee.state_eps, rounding, detail=ratios)

    return worst_case(inp.cases, case, key=by_ratio)


@claim.check("exactly 0 off target", evidence="built")
def zero_off_target(inp: Cor27Inputs) -> Verdict:
    """Cor 27: every state is exactly 0 before (after) its target."""
    rows = []
    for c in inp.cases:
        (tf, tb), st = c.targets, c.states
        n = int(((tf == 0) & (st.h_fwd != 0)).sum() + ((tb == 0) & (st.h_bwd != 0)).sum())
        rows.append((c.label, n))
    return none_counted(rows, "nonzero states where the target is 0")


@claim.check("projection inactive", evidence="built")
def projection_inactive(inp: Cor27Inputs) -> Verdict:
    """Cor 27: at r_h = sqrt(q)(r_x + sqrt(d) eps) the projection onto the r_h ball never acts."""
    return none_counted(
        [(c.label, c.states.projection_active) for c in inp.cases], "projected steps"
    )


@claim.check("certified eps <= asked", evidence="formula")
def eps_as_asked(inp: Cor27Inputs) -> Verdict:
    """The transition's certified eps meets the accuracy asked for."""
    return certified_eps_as_asked(inp.cases, inp.eps)


def _module_states(inp: Cor27Inputs):
    c = inp.cases[0]
    with torch.no_grad():
        return inp.module.states(c.rnn.encode(c.x, c.t))


def _gap(states, c: StateCase) -> float:
    """max |module state - scan state| over both directions."""
    (hf, hb), st = states, c.states
    return max(largest_gap(hf, st.h_fwd), largest_gap(hb, st.h_bwd))


@claim.check("module loop = scan", evidence="built")
def module_equals_scan(inp: Cor27Inputs) -> Verdict:
    """The literal module (a loop h <- P(h + f(h, z_i))) computes the scan's states (first case)."""
    c = inp.cases[0]
    gap = _gap(_module_states(inp), c)
    return at_most(gap, 1e-9, detail=f"{c.label}: max |loop - scan| (absolute 1e-9)")


@claim.check("module zeros = scan zeros", evidence="built")
def module_zeros_equal_scan(inp: Cor27Inputs) -> Verdict:
    """The literal module's states are exactly 0 where the scan's are (first case)."""
    (hf, hb), st = _module_states(inp), inp.cases[0].states
    differ = int(((hf == 0) != (st.h_fwd == 0)).sum() + ((hb == 0) != (st.h_bwd == 0)).sum())
    return exact(differ, 0, detail=f"{inp.cases[0].label}: states zero in one and not the other")


@claim.check("module projection = scan where it clips", evidence="built")
def module_projection_equals_scan(inp: Cor27Inputs) -> Verdict:
    """The literal module's projection h <- P(h + f) (Appendix B.1, Thm 9's class) is the scan's
    where it clips: the first case at r_h = sqrt(q) r_x / 2; +inf when nothing was clipped."""
    module, c = inp.clipped
    with torch.no_grad():
        gap = _gap(module.states(c.rnn.encode(c.x, c.t)), c)
    active = c.states.projection_active
    detail = f"{c.label}: max |loop - scan|, {active} projected steps (absolute 1e-9)"
    return at_most(gap if active else math.inf, 1e-9, detail=detail)


@claim.fault("r_h = sqrt(q) r_x / 2", breaks=(states_within_eps, projection_inactive))
def _r_h_halved(inp: Cor27Inputs) -> Cor27Inputs:
    """r_h = sqrt(q) r_x / 2, below Cor 27's radius, at N = 1000 (tokens on the r_x sphere): the
    projection clips the states that carry x_t."""
    return replace(inp, cases=(_at_half_radius(next(c for c in inp.cases if c.N == 1000)),))


@claim.fault(
    "inclusive prefix sums (index off by one)", breaks=(zero_off_target, states_within_eps)
)
def _inclusive_scan(inp: Cor27Inputs) -> Cor27Inputs:
    """States by inclusive prefix sums (an index off by one: h_fwd_i has read z_i, h_bwd_i too):
    at i = t_l the state already holds x_{t_l}, where Cor 27 says it is exactly 0 (the cases
    up to N = 1000: the slip does not depend on N)."""
    cases = []
    for c in inp.cases[:2]:
        st = c.states
        st = replace(st, h_fwd=st.h_fwd + st.direct, h_bwd=st.h_bwd + st.direct)
        cases.append(replace(c, states=st))
    return replace(inp, cases=tuple(cases))


@claim.fault("built for twice the eps asked", breaks=eps_as_asked)
def _built_for_twice_eps(inp: Cor27Inputs) -> Cor27Inputs:
    """The first RNN rebuilt for 2 eps (the accuracy asked for, doubled on its way to
    prop28_rnn), its states evaluated again."""
    c = inp.cases[0]
    g = c.rnn.guarantee
    rnn = prop28_rnn(c.rnn.omega, c.rnn.d, c.rnn.g_net, eps=2 * inp.eps, r_x=g.r_x, mu=g.mu)
    return replace(inp, cases=(_evaluated(f"{c.label}, eps = {2 * inp.eps:g}", rnn, c.x, c.t),))


@claim.fault("the clipped module built at Cor 27's radius", breaks=module_projection_equals_scan)
def _module_at_cor27_radius(inp: Cor27Inputs) -> Cor27Inputs:
    """The clipped case's module built at Cor 27's radius (its r_h not passed on)."""
    _, c = inp.clipped
    return replace(inp, clipped=(inp.cases[0].rnn.module(device=c.x.device), c))


claim.fault(
    "module gate bands from 0, not 1/2",
    breaks=(module_equals_scan, module_zeros_equal_scan),
    apply=module_bands_from_zero,
)
