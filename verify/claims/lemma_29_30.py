"""Lemmas 29 and 30 (Appendix C.2), as reconstructed in docs/derivations/rnn-lower-bounds.md
(section 4, item 5): how far the built Prop 28 RNN's transitions, states and outputs move when its
parameters move (random changes and the top singular pairs of each layer's Jacobian), rank-one
members of the class where c_l is attained, and the constants Theorem 7's covering uses against a
40-digit evaluation. Bounds: ``bounds/theorem7.py`` (``layer_sensitivities``,
``rnn_parameter_lipschitz``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Tuple

import mpmath as mp
import torch
from torch import nn

from qstr.bounds.attention import lemma12_radius
from qstr.bounds.theorem7 import (
    Theorem7Params,
    layer_sensitivities,
    prop28_layers,
    rnn_parameter_lipschitz,
)
from qstr.bounds.transition import prop28_rnn
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.links import make_link
from qstr.constructions.recurrent import module_from_state, rnn_state
from qstr.constructions.task import QSTR
from qstr.verify.adversarial import clip_to_ball
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, worst
from qstr.verify.claims._class_member import fro, lipschitz_mp, mlp, rank_one_member
from qstr.verify.claims._class_member import reading_h, singular_change
from qstr.verify.claims._rnn_changes import inputs_of, net_bound, nets_of, random_change, run
from qstr.verify.claims._rnn_changes import moved as moved_params
from qstr.verify.claims._rnn_changes import states_of
from qstr.verify.claims._class_member import sensitivities_mp as _sensitivities_mp
from qstr.verify.claims._transition import transition_rounding
from qstr.verify.registry import register

F64 = torch.float64
L29_N, L29_D, L29_RX, L29_EPS, L29_B = 32, 3, 2.5, 0.1, 4
RATIO_TERM = 1e-9  # relative rounding allowance (differences of O(1) float64 quantities)
# float64 c_l and A against 40 digits: recursions of depth <= 5 (products of <= 5 radii, square
# roots), each step off by <= 2.2e-16 relative, so < 1e-14 in all; the reference is exact there
PIN_RTOL = 1e-12
PIN_DPS = 40
PIN_NS = (2, L29_N, 2**20, 2**40)  # A at these N (N = 2: one transition; 2^40: N - 1 vs N unseen)
# edge nets for c_l: (radii, biases, r_in): a zero input, no biases, one layer, radii below 1
PIN_EDGES = (
    ((3.0, 0.5, 2.0), (True, True, False), 0.0),
    ((2.0, 0.5), (False, False), 3.0),
    ((0.3,), (True,), 0.0),
    ((0.2, 0.7, 1.5, 0.9), (True, True, True, False), 0.05),
)
SHORT_INPUT = 0.1  # the rank-one members' short input: sqrt(a_0^2 + 1) = 1.005 vs a_0 = 0.1

lemma30 = register(
    Claim(
        "lemma-30",
        Ref("Lemma 30"),
        statement="(reconstructed) a ReLU net with ||[W_l b_l]||_F <= R_l on inputs of norm <= r "
        "moves by at most sum_l c_l ||Delta_l||_F, c_l = (prod_{k>l} R_k) sqrt(a_{l-1}^2 + 1), "
        "a_0 = r, a_l = R_l sqrt(a_{l-1}^2 + 1)",
        builds=(prop28_rnn,),
        bounds=(layer_sensitivities,),
        derivation="docs/derivations/rnn-lower-bounds.md",
    )
)
lemma29 = register(
    Claim(
        "lemma-29",
        Ref("Lemma 29"),
        statement="(reconstructed) a state moves by at most the changes of the transition outputs "
        "it adds up, each carried on by 1 + Lip_h per step through h (their sum when the "
        "transitions do not read h; Lip_h <= 1/N in the paper's class); the output by at most "
        "f_y's parameter term plus Lip(f_y) times its states' change; so A = sqrt(A_y^2 + "
        "(S Lam_y A_h)^2), S = sum_j (1 + Lip_h)^j over N - 1 steps",
        builds=(prop28_rnn,),
        bounds=(layer_sensitivities, rnn_parameter_lipschitz),
        derivation="docs/derivations/rnn-lower-bounds.md",
    )
)


# ------------------------------------------------------------------ the inputs


@dataclass(frozen=True)
class Bounds:
    """What the checks compare with (faults swap one for a slipped form)."""

    sensitivities: Callable = layer_sensitivities
    parameter_lipschitz: Callable = rnn_parameter_lipschitz
    accumulates: bool = True  # a state's change is the sum of its transitions' changes
    through_states: bool = True  # the output moves with its states
    compounds: bool = True  # a state's change is carried on by 1 + Lip_h per step through h


@dataclass(frozen=True)
class RNNCase:
    """The built RNN module, its prompts Z, and named parameter changes (each a dict {parameter
    name: change}): every layer alone, randomly, at two sizes; all layers at once; and the
    first rectifier units' offsets lowered (every transition output off target moves alike)."""

    label: str
    module: nn.Module  # DeepTransitionBiRNN
    Z: torch.Tensor
    changes: Tuple[Tuple[str, dict], ...]
    honest: tuple  # (h_fwd, h_bwd, y) of the module as built
    rounding: float  # of one state: the transition's rounding term (verify/claims/_transition.py)
    lip_h: float = 0.0  # the transitions' Lipschitz constant in h (0: they do not read h)


@dataclass(frozen=True)
class RNNInputs:
    cases: Tuple[RNNCase, ...]
    bounds: Bounds = Bounds()


def _changes(module, honest, Z, ctx: Context) -> Tuple[Tuple[str, dict], ...]:
    d_h = honest[0].shape[-1]
    gen = ctx.generator("lemma-29/changes")
    nets, out = nets_of(module), []
    for net in ("f_fwd", "f_y"):
        u = inputs_of(module, honest, Z, net)
        # the rows the singular pairs are sought at: the transition's targets (its output is
        # locally flat elsewhere) and the longest inputs
        rows = torch.cat(
            [
                (mlp(dict(module.named_parameters()), nets[net], u) != 0)
                .any(-1)
                .nonzero()
                .flatten(),
                u.norm(dim=-1).argsort(descending=True)[:12],
            ]
        )
        for l, pair in enumerate(nets[net]):
            names = [n for n in pair if n is not None]
            out.append(
                (f"{net} layer {l + 1} x 1e-3", random_change(module, names, 1e-3, d_h, gen))
            )
            if l > 0 or net == "f_y":  # the transition's first layer keeps its h columns
                sing = singular_change(module, nets[net], pair, u[rows], 1e-3)
                out.append((f"{net} layer {l + 1} top singular pair x 1e-3", sing))
    every = [n for net in nets.values() for pair in net for n in pair if n is not None]
    for size in (1e-6, 1e-3):
        out.append((f"all layers x {size:g}", random_change(module, every, size, d_h, gen)))
    # layer 3's first d_h units (relu(G - b)) opened by 1e-3: every position off target adds the
    # same change to the state
    w3, b3 = nets["f_fwd"][2]
    lowered = torch.zeros_like(dict(module.named_parameters())[b3].detach())
    lowered[:d_h] = 1e-3
    out.append(("rectifier offsets lowered by 1e-3", {b3: lowered}))
    return tuple(out)


@lemma29.inputs
def lemma29_inputs(ctx: Context) -> RNNInputs:
    """The Prop 28 RNN (RS-Hadamard N = 32, d = 3, q = 1, a teacher link, eps = 0.1, r_x = 2.5)
    as the module users load, on simple-qSTR prompts with tokens in the r_x ball."""
    book = rs_hadamard_codebook(L29_N, dtype=F64)
    link = make_link("teacher", 1, L29_D, generator=ctx.generator("lemma-29/link"))
    rnn = prop28_rnn(book, L29_D, link.two_layer_net(), eps=L29_EPS, r_x=L29_RX)
    module = module_from_state(rnn_state(rnn), device=ctx.device)
    gen = ctx.generator("lemma-29/prompts", device=ctx.device)
    task = QSTR(N=L29_N, d=L29_D, link=link.to(ctx.device), variant="simple")
    p = task.sample(L29_B, generator=gen, device=ctx.device, dtype=F64)
    Z = rnn.encode(clip_to_ball(p.x, L29_RX), p.t)
    label = f"Prop 28 RNN, rs-hadamard N={L29_N}, d={L29_D}, q=1"
    with torch.no_grad():
        honest = run(module, {}, Z)
    changes = tuple(
        (name, {k: v.to(ctx.device) for k, v in ch.items()})
        for name, ch in _changes(module, honest, Z, ctx)
    )
    rounding = 2 * transition_rounding(rnn.transition, L29_N, rnn.r_h).term  # theta and theta'
    case = RNNCase(label, module, Z, changes, honest, rounding)
    return RNNInputs((case, _reading_h_case(module, Z, rounding, ctx)))


def _reading_h_case(module, Z, rounding: float, ctx: Context) -> RNNCase:
    """The paper's class (reconstructed): the module's transitions plus h / N (``reading_h``,
    exactly (1/N)-Lipschitz in h), states projected onto 3 r_h (the feedback grows them by up to
    e), and three changes: all layers x 1e-3 (h columns too), the carried h x (1 + 1e-3), and the
    rectifier offsets lowered by 1e-3 (aligned: the compounded sum is attained)."""
    lip_h, d_h, dev = 1.0 / L29_N, module.d_h, Z.device
    member = reading_h(module, lip_h, 3 * module.r_h)
    nets, params = nets_of(member), dict(member.named_parameters())
    every = [n for net in nets.values() for pair in net for n in pair if n is not None]
    carry = torch.zeros_like(params["f_fwd.0.weight"].detach())
    w1 = module.transition_widths[0]
    carry[w1 : w1 + d_h, :d_h] = 1e-3 * torch.eye(d_h, dtype=F64, device=dev)
    b3 = nets["f_fwd"][2][1]
    lowered = torch.zeros_like(params[b3].detach())
    lowered[:d_h] = 1e-3
    every_change = random_change(member, every, 1e-3, 0, ctx.generator("lemma-29/reading-h"))
    changes = (
        ("all layers x 0.001, h columns too", {k: v.to(dev) for k, v in every_change.items()}),
        ("carried h x (1 + 1e-3)", {"f_fwd.0.weight": carry, "f_bwd.0.weight": carry.clone()}),
        ("rectifier offsets lowered by 1e-3", {b3: lowered}),
    )
    with torch.no_grad():
        honest = run(member, {}, Z)
    label = f"paper's class: the same RNN reading h, f(h, z) + h / {L29_N}"
    return RNNCase(label, member, Z, changes, honest, rounding, lip_h)


@lemma30.inputs
def lemma30_inputs(ctx: Context) -> RNNInputs:
    """The same RNN, its transition and output net as the deep ReLU nets."""
    return lemma29_inputs(ctx)


def _scope(inp: RNNInputs) -> str:
    c, rest = inp.cases[0], inp.cases[1:]
    paper = "; ".join(f"{r.label} ({len(r.changes)} changes, Lip_h = {r.lip_h:.3g})" for r in rest)
    return (
        f"{c.label}; {c.Z.shape[0]} prompts; {len(c.changes)} parameter changes (random, top "
        "singular pairs); rank-one members at the longest and a short input; its transitions do "
        "not read h (Theorem 7's default class: the paper's allows h under a Lipschitz "
        f"constraint); {paper or 'no member reading h'}; constants vs 40 digits"
    )


lemma29.scope_with(_scope)
lemma30.scope_with(_scope)


# ------------------------------------------------------------------ evaluation


def _worst_over_changes(
    inp: RNNInputs,
    one,
    nets=("f_fwd", "f_bwd", "f_y"),
    absolute=False,
    why="",
    skip=None,
    which=None,
):
    """The worst of ``one(case, change) -> (measured, bound)`` over every case and every change
    that touches one of ``nets`` (less those whose name ``skip(name)`` picks); the
    rounding term relative to the bound, or (``absolute``) the case's state rounding; ``why``:
    the detail (why the ratio is what it is); ``which(case)``: the cases taken (all by default)."""
    rows = []
    for c in inp.cases if which is None else filter(which, inp.cases):
        for name, change in c.changes:
            if not any(k.split(".")[0] in nets for k in change) or (skip and skip(name)):
                continue
            with torch.no_grad():
                m, bound = one(c, change, inp.bounds)
            term = c.rounding if absolute else RATIO_TERM * bound
            rows.append((f"{c.label}, {name}", at_most(m, bound, term, detail=why)))
    return worst(rows)


# ------------------------------------------------------------------ Lemma 30


LOOSE_ON_BUILT = (
    "the built member sits far inside the class's worst case (largest ratio at a layer's top "
    "singular pair): c_l multiplies the Frobenius radii of the later layers (the gate layer's "
    "||[W b]||_F is 1.8e3, few of its units on at any input) and the a_l recursion bounds "
    "activations the built net never reaches; the rank-one members attain c_l "
    "(rnn-lower-bounds.md, section 4, item 5)"
)


def _net_check(net: str):
    def one(c: RNNCase, change: dict, b: Bounds):
        layers = nets_of(c.module)[net]
        h_fwd, h_bwd, _ = c.honest
        u = torch.cat([h_fwd, c.Z] if net == "f_fwd" else [h_fwd, h_bwd, c.Z], -1)
        old, new = dict(c.module.named_parameters()), moved_params(c.module, change)
        moved = torch.linalg.vector_norm(mlp(new, layers, u) - mlp(old, layers, u), dim=-1)
        r_in = float(torch.linalg.vector_norm(u, dim=-1).max())
        return float(moved.max()), net_bound(c.module, change, layers, r_in, b)

    return lambda inp: _worst_over_changes(inp, one, nets=(net,), why=LOOSE_ON_BUILT)


transition_moves = lemma30.check(
    "transition: ||f(u) - f'(u)|| <= sum_l c_l ||Delta_l||_F", evidence="built"
)(_net_check("f_fwd"))
output_net_moves = lemma30.check(
    "output net: |f_y(u) - f_y'(u)| <= sum_l c_l ||Delta_l||_F", evidence="built"
)(_net_check("f_y"))


def _rank_one_rows(c: RNNCase, net: str, b: Bounds):
    """(label, verdict) for each layer of a rank-one member built from the module's weights at the
    longest input (h zeroed for the transition: the class does not read it) and at that input
    shortened to SHORT_INPUT: the layer's row scaled by 1 + 1e-6 against sum_l c_l ||Delta_l||."""
    layers = nets_of(c.module)[net]
    params = {k: p.detach() for k, p in c.module.named_parameters()}
    u = inputs_of(c.module, c.honest, c.Z, net)
    u = u[int(u.norm(dim=-1).argmax())].clone()
    if net == "f_fwd":
        u[: c.honest[0].shape[-1]] = 0.0
    rows = []
    for at, x in (("longest input", u), ("short input", u / u.norm() * SHORT_INPUT)):
        member = params | rank_one_member(params, layers, x)
        for l, pair in enumerate(layers):
            change = {n: 1e-6 * member[n] for n in pair if n is not None}
            new = {k: p + change[k] if k in change else p for k, p in member.items()}
            moved = float((mlp(new, layers, x[None]) - mlp(member, layers, x[None])).norm())
            bound = net_bound(c.module, change, layers, float(x.norm()), b, params=member)
            what = f"||x|| = {float(x.norm()):.3g}"
            verdict = at_most(moved, bound, RATIO_TERM * bound, detail=what)
            rows.append((f"{net} rank-one at the {at}, layer {l + 1}", verdict))
    return rows


@lemma30.check("rank-one members: c_l attained", evidence="built")
def rank_one_attained(inp: RNNInputs) -> Verdict:
    """Lemma 30 where it is tight: rank-one members of the class (the built transition's and
    output net's radii, weights read from the module here) at the longest input and a short one,
    each layer's row scaled by 1 + 1e-6: the output moves by c_l ||Delta_l|| up to the later
    biased layers' a / sqrt(a^2 + 1); the worst ratio is the least (farthest from attained)."""
    rows = []
    with torch.no_grad():
        for c in inp.cases:
            for net in ("f_fwd", "f_y"):
                rows += _rank_one_rows(c, net, inp.bounds)
    failing = [r for r in rows if not r[1].holds]
    return worst(failing or rows, key=lambda v: -v.measured / v.bound if not failing else 0.0)


def _pin_points(inp: RNNInputs):
    """(label, radii, biases, r_in) of the nets c_l is pinned at: the built transition and output
    net (radii read from the module), Theorem 7's class at its defaults (N = 256, n = 1000), and
    the edge nets of PIN_EDGES."""
    c = inp.cases[0]
    params = dict(c.module.named_parameters())
    out = []
    for net in ("f_fwd", "f_y"):
        layers = nets_of(c.module)[net]
        r_in = float(inputs_of(c.module, c.honest, c.Z, net).norm(dim=-1).max())
        radii = [fro(params, w, b) for w, b in layers]
        out.append((f"built {net}", radii, [b is not None for _, b in layers], r_in))
    P = Theorem7Params()
    r_x = lemma12_radius(P.d, 1000, 256, P.C_x)
    trans, outs = prop28_layers(256, P, r_x)
    r_z = math.sqrt(r_x * r_x + P.q + 1.0)
    r_y = math.sqrt(2.0 * P.q * r_x * r_x + r_z * r_z)
    for label, layers, r in (("Theorem 7 class, transition", trans, r_z), ("f_y", outs, r_y)):
        out.append((label, [L.radius for L in layers], [L.bias for L in layers], r))
    out += [(f"edge {k}", list(R), list(B), r) for k, (R, B, r) in enumerate(PIN_EDGES)]
    return out


def _relative(got: float, want) -> float:
    return float(abs(mp.mpf(got) - want) / max(abs(want), mp.mpf(10) ** -300))


@lemma30.check("c_l = 40-digit evaluation", evidence="formula", agreement=True)
def sensitivities_pinned(inp: RNNInputs) -> Verdict:
    """``layer_sensitivities`` against c_l written from rnn-lower-bounds.md (section 4, item 5)
    in mpmath at 40 digits, at the built nets' radii, Theorem 7's class and edge nets (a zero
    input, no biases, one layer, radii below 1); the largest relative gap."""
    rows = []
    with mp.workdps(PIN_DPS):
        for label, radii, biases, r_in in _pin_points(inp):
            got = inp.bounds.sensitivities(radii, biases, r_in)
            want = _sensitivities_mp(radii, biases, r_in)
            gap = max(_relative(g, w) for g, w in zip(got, want, strict=True))
            rows.append((label, at_most(gap, PIN_RTOL, detail="largest relative gap of c_l")))
    return worst(rows, key=lambda v: v.measured)


def _without_feed(radii, biases, r_in):
    """c_l = prod_{k>l} R_k: the layer's input norm sqrt(a_{l-1}^2 + 1) dropped."""
    return [math.prod(radii[l + 1 :]) for l in range(len(radii))]


lemma30.fault(
    "c_l without the input norm sqrt(a_{l-1}^2 + 1)",
    breaks=(transition_moves, output_net_moves, sensitivities_pinned, rank_one_attained),
    apply=lambda inp: replace(inp, bounds=replace(inp.bounds, sensitivities=_without_feed)),
)


def _unbiased(radii, biases, r_in):
    """c_l with every layer read as unbiased: sqrt(a^2 + 1) -> a (the biases' 1 dropped)."""
    return layer_sensitivities(radii, [False] * len(biases), r_in)


lemma30.fault(
    "c_l without the biases: sqrt(a_{l-1}^2 + 1) -> a_{l-1}",
    breaks=(sensitivities_pinned, rank_one_attained),
    apply=lambda inp: replace(inp, bounds=replace(inp.bounds, sensitivities=_unbiased)),
)


# ------------------------------------------------------------------ Lemma 29


def _state_changes(c: RNNCase, change: dict, b: Bounds):
    """(largest ||h_i - h'_i|| / bound, and that pair) over positions and both directions: the
    bound B_1 = 0, B_{i+1} = (1 + Lip_h) B_i + ||f'(h'_i, z_i) - f(h'_i, z_i)|| (the change of the
    transition at the moved state, carried on through h; Lip_h = 0 unless ``b.compounds`` and the
    case reads h), or B_{i+1} = max(B_i, that change) if ``b.accumulates`` is False."""
    h_fwd, h_bwd, _ = c.honest
    g_fwd, g_bwd = states_of(c.module, change, c.Z)
    old, new = dict(c.module.named_parameters()), moved_params(c.module, change)
    best, L = (0.0, 0.0, -1.0), c.lip_h if b.compounds else 0.0
    for net, h, g, reverse in (("f_fwd", h_fwd, g_fwd, False), ("f_bwd", h_bwd, g_bwd, True)):
        layers = nets_of(c.module)[net]
        u = torch.cat([g, c.Z], -1)
        df = torch.linalg.vector_norm(mlp(new, layers, u) - mlp(old, layers, u), dim=-1)  # (B, N)
        if reverse:
            df = df.flip(1)
        B = [torch.zeros_like(df[:, 0])]
        for k in range(df.shape[1] - 1):  # the state after z_k adds z_k's change
            B.append(
                (1 + L) * B[-1] + df[:, k] if b.accumulates else torch.maximum(B[-1], df[:, k])
            )
        bound = torch.stack(B, 1)
        moved = torch.linalg.vector_norm(g - h, dim=-1)
        if reverse:
            moved = moved.flip(1)
        ratio = torch.where(
            bound > 0,
            moved / bound.clamp_min(1e-300),
            torch.where(moved > 0, torch.inf, 0.0).to(moved),
        )
        k = int(ratio.flatten().argmax())
        if float(ratio.flatten()[k]) > best[2]:
            best = (float(moved.flatten()[k]), float(bound.flatten()[k]), float(ratio.flatten()[k]))
    return best[0], best[1]


SCAN_ONLY = (
    "the scan, not Lemma 29's accumulation through h: these transitions never read h, so a state "
    "is the prefix sum of its transition outputs and its change the sum of theirs (equality when "
    "the changes are aligned, as at the rectifier offsets); a transition that reads h (the "
    "paper's class) would add Lip_h-terms this check cannot see"
)


@lemma29.check(
    "scan: ||h_i - h'_i|| <= sum_{j<i} ||f(z_j) - f'(z_j)|| (h not read)", evidence="built"
)
def states_accumulate(inp: RNNInputs) -> Verdict:
    """The module's states under every parameter change are the prefix sums of its transitions'
    output changes: the triangle inequality of the scan, attained by aligned changes. It checks
    the scan the module runs, not Lemma 29 for transitions that read h."""
    return _worst_over_changes(
        inp,
        _state_changes,
        ("f_fwd", "f_bwd"),
        absolute=True,
        why=SCAN_ONLY,
        skip=_singular_pair,
        which=lambda c: c.lip_h == 0,
    )


@lemma29.check(
    "paper's class: ||h_i - h'_i|| <= sum_{j<i} (1 + Lip_h)^{i-1-j} ||Delta f_j||", evidence="built"
)
def states_compound(inp: RNNInputs) -> Verdict:
    """Lemma 29 for transitions that read h (the paper's class, reconstructed: Lip_h = 1/N): the
    member's states under every change against the changes of its transitions at the moved
    states, each carried on by 1 + 1/N per step; attained by the aligned change (the rectifier
    offsets), so a bound without the compounding fails there."""
    why = "Lip_h = 1/N exactly (f(h, z) + h/N); equality at aligned changes"
    return _worst_over_changes(
        inp, _state_changes, ("f_fwd", "f_bwd"), absolute=True, why=why, which=lambda c: c.lip_h > 0
    )


def _singular_pair(name: str) -> bool:
    """The top-singular-pair changes (lemma-30's search; the scan's ratio is 1 without them)."""
    return "singular" in name


def _singular_in_transition(name: str) -> bool:
    """The transitions' top-singular-pair changes (the output's worst is at f_y's)."""
    return "singular" in name and name.startswith("f_fwd")


def _output_change(c: RNNCase, change: dict, b: Bounds):
    """|y_i - y'_i| against f_y's parameter term plus Lip(f_y') = prod_l R_l times the change of
    (h_fwd_i, h_bwd_i), at the position where the ratio is largest."""
    h_fwd, h_bwd, y = c.honest
    g_fwd, g_bwd, y2 = run(c.module, change, c.Z)
    layers = nets_of(c.module)["f_y"]
    u = torch.cat([h_fwd, h_bwd, c.Z], -1)
    r_in = float(torch.linalg.vector_norm(u, dim=-1).max())
    param_term = net_bound(c.module, change, layers, r_in, b)
    new = moved_params(c.module, change)
    lip = math.prod(
        float(torch.cat([new[w].flatten()] + ([new[bb]] if bb else [])).norm()) for w, bb in layers
    )
    dstate = torch.linalg.vector_norm(torch.cat([g_fwd - h_fwd, g_bwd - h_bwd], -1), dim=-1)
    bound = param_term + (lip * dstate if b.through_states else 0 * dstate)
    dy = (y2 - y).abs()
    ratio = dy / bound.clamp_min(1e-300)
    k = int(ratio.flatten().argmax())
    return float(dy.flatten()[k]), float(bound.flatten()[k])


OUTPUT_LOOSE = (
    "f_y's term carries Lemma 30's slack on the built net (lemma-30's transition and output-net "
    "checks), and Lip(f_y) = prod_l R_l multiplies Frobenius radii (rnn-lower-bounds.md, "
    "section 4, item 5)"
)
output_moves = lemma29.check(
    "|y_i - y'_i| <= f_y's term + Lip(f_y) ||state change||", evidence="built"
)(
    lambda inp: _worst_over_changes(
        inp, _output_change, why=OUTPUT_LOOSE, skip=_singular_in_transition
    )
)


@lemma29.check("A = 40-digit evaluation", evidence="formula", agreement=True)
def lipschitz_pinned(inp: RNNInputs) -> Verdict:
    """``rnn_parameter_lipschitz`` on ``layer_sensitivities``' ||c|| (as ``theorem7_bound``
    composes them) against A written from rnn-lower-bounds.md (section 4, item 5) in mpmath at
    40 digits: the built RNN's radii and Theorem 7's class, at N = 2, 32, 2^20, 2^40, for
    transitions that do not read h and for the paper's class (Lip_h = 1/N: S summed term by term
    up to N = 1e5, by its closed form beyond)."""
    b, rows = inp.bounds, []
    points = _pin_points(inp)[:4]  # (built transition, built f_y), (class transition, class f_y)
    with mp.workdps(PIN_DPS):
        for (label, tR, tB, r_z), (_, oR, oB, r_y) in (points[:2], points[2:]):
            for N, lip in ((n, lip) for n in PIN_NS for lip in (0.0, 1.0 / n)):
                A_h = math.sqrt(sum(x * x for x in b.sensitivities(tR, tB, r_z)))
                A_y = math.sqrt(sum(x * x for x in b.sensitivities(oR, oB, r_y)))
                got = b.parameter_lipschitz(A_y, math.prod(oR), A_h, N, lip)
                want = lipschitz_mp((tR, tB, r_z), (oR, oB, r_y), N, mp.mpf(1) / N if lip else 0)
                gap = at_most(_relative(got, want), PIN_RTOL, detail="relative gap of A")
                rows.append((f"{label.split(',')[0]}, N = {N}, Lip_h = {lip:.3g}", gap))
    return worst(rows, key=lambda v: v.measured)


lemma29.fault(
    "no accumulation: a state moves by one transition's change",
    breaks=states_accumulate,
    apply=lambda inp: replace(inp, bounds=replace(inp.bounds, accumulates=False)),
)
lemma29.fault(
    "no compounding through h: (1 + Lip_h) dropped",
    breaks=states_compound,
    apply=lambda inp: replace(inp, bounds=replace(inp.bounds, compounds=False)),
)
lemma29.fault(
    "the output's dependence on the states forgotten",
    breaks=output_moves,
    apply=lambda inp: replace(inp, bounds=replace(inp.bounds, through_states=False)),
)


def _n_transitions(A_y, Lam_y, A_h, N, lip_h=0.0):
    """A with N transitions for the N - 1 a state adds up."""
    return rnn_parameter_lipschitz(A_y, Lam_y, A_h, N + 1, lip_h)


def _gain_uncompounded(A_y, Lam_y, A_h, N, lip_h=0.0):
    """A with S = N - 1 whatever Lip_h (the compounding through h dropped)."""
    return rnn_parameter_lipschitz(A_y, Lam_y, A_h, N)


lemma29.fault(
    "A without the compounding through h (S = N - 1 at Lip_h = 1/N)",
    breaks=lipschitz_pinned,
    apply=lambda inp: replace(
        inp, bounds=replace(inp.bounds, parameter_lipschitz=_gain_uncompounded)
    ),
)
lemma29.fault(
    "A with N transitions for N - 1",
    breaks=lipschitz_pinned,
    apply=lambda inp: replace(inp, bounds=replace(inp.bounds, parameter_lipschitz=_n_transitions)),
)
lemma29.fault(
    "c_l without the biases: sqrt(a_{l-1}^2 + 1) -> a_{l-1}",
    breaks=lipschitz_pinned,
    apply=lambda inp: replace(inp, bounds=replace(inp.bounds, sensitivities=_unbiased)),
)
