"""Cor 27 (Appendix B): every hidden state is exactly 0 on one side of its target and within eps
of x_{t_l} on the other, flat in N. Construction: ``constructions/recurrent.py``;
docs/derivations/rnn-transition.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Tuple

import torch

from qstr.bounds.transition import prop28_rnn, token_radius
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.links import make_link
from qstr.constructions.recurrent import projected_prefix, rnn_weights
from qstr.verify.adversarial import clip_to_ball
from qstr.verify.certified import certified_cor27
from qstr.verify.certified.faults import transition_readout_scaled
from qstr.verify.certified.verdict import certified
from qstr.verify.claim import (
    Claim,
    Context,
    Ref,
    Verdict,
    at_most,
    by_ratio,
    exact,
    replaced,
    worst,
)
from qstr.verify.claims._transition import F64, certified_eps_as_asked, largest_gap
from qstr.verify.claims._transition import module_bands_from_zero, none_counted
from qstr.verify.claims._transition import orthogonally_rotated, pinned, qstr_prompts, rnn_with
from qstr.verify.claims._transition import state_radius
from qstr.verify.claims._transition import transition_rounding, worst_case
from qstr.verify.registry import register

C27_D, C27_Q, C27_EPS = 4, 2, 0.1
C27_CERTIFIED_N = 16  # the RNN built for the certified check on the gpu profile (cases of N >= 1e3)

claim = register(
    Claim(
        "cor-27",
        Ref("Cor 27"),
        marks=("slow",),  # over 3 s in quick on 2 cores (docs/claims.md, "Markers")
        statement="every hidden state is exactly 0 before (after) its target and within eps of "
        "x_{t_l} after (before) it, for N up to 1e5 (1e6 on GPU): the error does not accumulate",
        builds=(rnn_weights,),
        bounds=(prop28_rnn, state_radius),
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


def _transition_outputs(rnn, x: torch.Tensor, t: torch.Tensor, chunk: int) -> torch.Tensor:
    """f(z_i) at every position by the RNN's closed form, ``chunk`` positions at a time."""
    return rnn.transition_outputs(x, t, chunk=chunk)


@dataclass(frozen=True)
class Cor27Inputs:
    """The state cases (RS-Hadamard codes up to N = 1e5, 1e6 on GPU, and a rotated code with
    approximate products), and the literal module of the first case (a loop over positions)."""

    cases: Tuple[StateCase, ...]
    module: object  # DeepTransitionBiRNN of cases[0]
    eps: float
    clipped: Tuple[object, StateCase]  # cases[0] at r_h = sqrt(q) r_x / 2: its module and scan
    boundary: Tuple[torch.Tensor, torch.Tensor]  # cases[0]'s N: targets around chunk boundaries
    scan: Callable[..., Tuple[torch.Tensor, int]] = projected_prefix  # what RNN.states scans by
    outputs: Callable[..., torch.Tensor] = _transition_outputs  # f(z_i) in chunks of positions
    # the RNN the certified check proves Cor 27 on: the first case's (full, N = 100), an
    # RS-Hadamard N = 16 one built for it (gpu, whose first case has N = 1000); none in quick
    certified_rnn: object = None


SCAN_CHUNK = 7  # chunks of the scan in the boundary check: N = 100 is no multiple of it


def _boundary_prompts(c: "StateCase", ctx: Context) -> Tuple[torch.Tensor, torch.Tensor]:
    """Prompts on cases[0]'s N whose q targets sit at the first and last positions and at, just
    before and just after the scan's chunk boundaries (k SCAN_CHUNK - 1, k SCAN_CHUNK, and the
    backward scan's N - 1 - those), tokens random in the r_x ball, the targets' on the sphere."""
    N, k = c.N, SCAN_CHUNK
    fwd = [0, k - 2, k - 1, k, k + 1, 2 * k - 1, 2 * k, N - 2, N - 1]
    pos = sorted({p for p in fwd + [N - 1 - p for p in fwd] if 0 <= p < N})
    B = len(pos)
    t = torch.tensor([[pos[(b + j) % B] for j in range(C27_Q)] for b in range(B)])
    t = t[:, None, :].expand(B, N, C27_Q).to(c.x.device)
    gen = ctx.generator("cor-27/boundary", device=c.x.device)
    r_x = c.rnn.guarantee.r_x
    x = clip_to_ball(torch.randn(B, N, C27_D, generator=gen, dtype=F64, device=c.x.device), r_x)
    at = torch.arange(B, device=x.device)[:, None], t[:, 0, :]
    x[at] = x[at] / x[at].norm(dim=-1, keepdim=True) * r_x
    return x, t


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


def _proved_rnn(first, ctx: Context):
    """The RNN the certified check proves Cor 27 on: none in quick; in full the first case's own
    (N = 100: 45 s in ball arithmetic, 19,800 pair-slots); in gpu, whose first case has N = 1000
    (about 2 million pair-slots), an RS-Hadamard one at N = C27_CERTIFIED_N (2.5 s) with the
    first case's g_net."""
    if ctx.profile == "quick":
        return None
    if ctx.profile == "full":
        return first
    book = rs_hadamard_codebook(C27_CERTIFIED_N, dtype=F64)
    r_x = token_radius(C27_D, C27_CERTIFIED_N)
    return prop28_rnn(book, C27_D, first.g_net, eps=C27_EPS, r_x=r_x)


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
    clipped_pair = (clipped.rnn.module(device=ctx.device), clipped)
    proved = _proved_rnn(cases[0].rnn, ctx)
    bounds = _boundary_prompts(cases[0], ctx)
    return Cor27Inputs(cases, module, C27_EPS, clipped_pair, bounds, certified_rnn=proved)


@claim.scope_with
def cor27_scope(inp: Cor27Inputs) -> str:
    """Every case's N, codes and prompts."""
    cases = "; ".join(c.label for c in inp.cases)
    proved = "" if inp.certified_rnn is None else f"; certified at N = {inp.certified_rnn.N}"
    return (
        f"q = {C27_Q}, d = {C27_D}, eps = {C27_EPS}: {cases}; chunk boundaries at N = 100{proved}"
    )


@claim.check("state error <= eps at every N", evidence="built")
def states_within_eps(inp: Cor27Inputs) -> Verdict:
    """Cor 27: every state within eps of x_{t_l} after (before) its target, at every N."""
    ratios = "err/eps by N: " + ", ".join(
        f"{c.N}: {c.error / c.rnn.guarantee.state_eps:.3g}" for c in inp.cases
    )

    why = (
        "a state's error is one target output's: b ~ eps/3 at most on codes of unit norm (the "
        "gate errs by r_x delta only mid-band, not at s_hat = 1 +- delta_1; prop-26 reaches 0.82 "
        "eps with nu = 0.002; rnn-transition.md, 'Where the measured error sits'), ~3e-7 eps on "
        "alphabet codes"
    )

    def case(c: StateCase) -> Verdict:
        rounding = transition_rounding(c.rnn.transition, c.N, c.rnn.r_h)
        return at_most(c.error, c.rnn.guarantee.state_eps, rounding, detail=f"{ratios}; {why}")

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
    """Cor 27: at r_h = sqrt(q)(r_x + sqrt(d) eps) the projection onto the r_h ball never acts:
    the built RNN's scan run again on each case's prompts counts no projected step."""
    rows = [(c.label, c.rnn.states(c.x, c.t).projection_active) for c in inp.cases]
    return none_counted(rows, "projected steps")


@claim.check(
    "state error <= eps, projection inactive (certified)",
    evidence="certified",
    profiles=("full", "gpu"),
)
def states_certified(inp: Cor27Inputs) -> Verdict:
    """Cor 27 proved on a built RNN's dense transition (full: the first case's, RS-Hadamard
    N = 100; gpu: one at N = C27_CERTIFIED_N, _proved_rnn): Prop 26's zeros and
    target error certified, and sqrt(q)(r_x + sqrt(d) err) < r_h in arb, so every state is 0 off
    target, within err <= eps on it, never projected (docs/derivations/certified.md); where the
    balls straddle, the float64 state check on the cases decides."""
    rnn = inp.certified_rnn
    v = certified(certified_cor27(rnn), fallback=lambda: states_within_eps(inp))
    return v.labelled(f"N={rnn.N} (rs-hadamard, d_e={rnn.d_e})")


@claim.check("certified eps <= asked", evidence="formula")
def eps_as_asked(inp: Cor27Inputs) -> Verdict:
    """The transition's certified eps meets the accuracy asked for."""
    return certified_eps_as_asked(inp.cases, inp.eps)


@claim.check("r_h = sqrt(q)(r_x + sqrt(d) eps), 40 digits", evidence="formula", agreement=True)
def radius_as_derived(inp: Cor27Inputs) -> Verdict:
    """Cor 27's state radius, the r_h the RNN is built at, against sqrt(q)(r_x + sqrt(d) eps) at
    40 digits (eps the transition's certified one): relative 1e-12, every case."""
    return worst_case(inp.cases, lambda c: pinned(c.rnn.r_h, state_radius(c.rnn), "r_h"))


def _module_states(inp: Cor27Inputs):
    c = inp.cases[0]
    with torch.no_grad():
        return inp.module.states(c.rnn.encode(c.x, c.t))


def _gap(states, c: StateCase) -> float:
    """max |module state - scan state| over both directions."""
    (hf, hb), st = states, c.states
    return max(largest_gap(hf, st.h_fwd), largest_gap(hb, st.h_bwd))


@claim.check("module loop = scan", evidence="built", agreement=True)
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


@claim.check("module projection = scan where it clips", evidence="built", agreement=True)
def module_projection_equals_scan(inp: Cor27Inputs) -> Verdict:
    """The literal module's projection h <- P(h + f) (Appendix B.1, Thm 9's class) is the scan's
    where it clips: the first case at r_h = sqrt(q) r_x / 2; +inf when nothing was clipped."""
    module, c = inp.clipped
    with torch.no_grad():
        gap = _gap(module.states(c.rnn.encode(c.x, c.t)), c)
    active = c.states.projection_active
    detail = f"{c.label}: max |loop - scan|, {active} projected steps (absolute 1e-9)"
    return at_most(gap if active else math.inf, 1e-9, detail=detail)


def _chunked_gap(inp: Cor27Inputs, module, rnn) -> Tuple[float, int]:
    """max |literal module loop - scan in chunks of SCAN_CHUNK| over both directions at the
    boundary prompts (the transition outputs also in chunks of SCAN_CHUNK positions), and the
    projected steps the scan took."""
    x, t = inp.boundary
    with torch.no_grad():
        F = inp.outputs(rnn, x, t, SCAN_CHUNK)
        hf, a = inp.scan(F, rnn.r_h, chunk=SCAN_CHUNK)
        hb, b = inp.scan(F, rnn.r_h, reverse=True, chunk=SCAN_CHUNK)
        mf, mb = module.states(rnn.encode(x, t))
    return max(largest_gap(mf, hf), largest_gap(mb, hb)), a + b


@claim.check("scan chunks carry the state", evidence="built", agreement=True)
def chunks_carry_the_state(inp: Cor27Inputs) -> Verdict:
    """The scan in chunks of 7 (N = 100, no multiple) on transition outputs computed in chunks of
    7 positions gives the literal module's states, both directions, with every target at the
    first or last position or at, just before or just after a chunk boundary: at Cor 27's radius
    (the cumsum path) and at half of it (the projected loop inside a chunk); the larger gap."""
    rows = []
    for label, module, rnn in (
        ("Cor 27's r_h", inp.module, inp.cases[0].rnn),
        ("r_h / 2", inp.clipped[0], inp.clipped[1].rnn),
    ):
        gap, active = _chunked_gap(inp, module, rnn)
        what = f"{label}: max |loop - scan in chunks of {SCAN_CHUNK}|, {active} projected steps"
        rows.append((label, at_most(gap, 1e-9, detail=what)))
    return worst(rows, key=by_ratio)


def _carry_one_early(F, r_h, *, reverse=False, chunk=4096):
    """A chunked prefix scan whose carry into the next chunk is the state one position early
    (``cand[:, -2]``): the off-by-one at a chunk boundary (cumsum path, no projection)."""
    if reverse:
        H, n = _carry_one_early(F.flip(1), r_h, chunk=chunk)
        return H.flip(1), n
    B, N, D = F.shape
    H, h = F.new_zeros(B, N, D), F.new_zeros(B, D)
    for s in range(0, N - 1, chunk):
        e = min(s + chunk, N - 1)
        cand = h[:, None] + torch.cumsum(F[:, s:e], dim=1)
        H[:, s + 1 : e + 1] = cand
        h = cand[:, -2] if cand.shape[1] > 1 else cand[:, -1]
    return H, 0


def _chunks_read_tokens_one_early(rnn, x: torch.Tensor, t: torch.Tensor, chunk: int):
    """Transition outputs whose chunks after the first read the tokens x[s - 1 : e - 1] against
    the codes omega[s : e] (a chunk offset off by one in the token slice)."""
    early = x.clone()
    early[:, chunk:] = x[:, chunk - 1 : -1]
    return rnn.transition_outputs(early, t, chunk=chunk)


claim.fault(
    "transition chunks read the tokens one position early",
    breaks=chunks_carry_the_state,
    apply=replaced(outputs=_chunks_read_tokens_one_early),
)


claim.fault(
    "scan carry one position early at a chunk boundary",
    breaks=chunks_carry_the_state,
    apply=replaced(scan=_carry_one_early),
)


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


@claim.fault("r_h = sqrt(q) r_x + sqrt(d) eps (sqrt q on r_x only)", breaks=radius_as_derived)
def _sqrt_q_on_r_x_only(inp: Cor27Inputs) -> Cor27Inputs:
    """Every RNN's recorded radius sqrt(q) r_x + sqrt(d) eps (its states as computed)."""

    def slipped(c: StateCase) -> StateCase:
        g = c.rnn.guarantee
        r_h = math.sqrt(C27_Q) * g.r_x + math.sqrt(C27_D) * g.state_eps
        return replace(c, rnn=rnn_with(c.rnn, r_h=r_h))

    return replace(inp, cases=tuple(slipped(c) for c in inp.cases))


@claim.fault("the clipped module built at Cor 27's radius", breaks=module_projection_equals_scan)
def _module_at_cor27_radius(inp: Cor27Inputs) -> Cor27Inputs:
    """The clipped case's module built at Cor 27's radius (its r_h not passed on)."""
    _, c = inp.clipped
    return replace(inp, clipped=(inp.cases[0].rnn.module(device=c.x.device), c))


@claim.fault(
    "layer 3 (G and -G) halved in the certified RNN",
    breaks=states_certified,
    profiles=("full", "gpu"),
)
def _readout_halved(inp: Cor27Inputs) -> Cor27Inputs:
    """The certified RNN's dense layer 3 halved (Lemma 24's factor 2 dropped): target outputs
    about x / 2, the states' error past eps."""
    rnn = inp.certified_rnn
    tr = rnn.transition.with_layers(transition_readout_scaled(rnn.transition))
    return replace(inp, certified_rnn=rnn_with(rnn, transition=tr))


claim.fault(
    "module gate bands from 0, not 1/2",
    breaks=(module_equals_scan, module_zeros_equal_scan),
    apply=module_bands_from_zero,
)
