"""Lemmas 29 and 30 (Appendix C.2), as reconstructed in docs/derivations/rnn-lower-bounds.md
(section 4, item 5): how far the built Prop 28 RNN's transitions, states and outputs move when its
parameters move, against the constants Theorem 7's covering uses. Bounds: ``bounds/recurrent.py``
(``layer_sensitivities``, ``rnn_parameter_lipschitz``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Dict, Tuple

import torch
from torch import nn
from torch.func import functional_call

from qstr.bounds.recurrent import layer_sensitivities, prop28_rnn
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.links import make_link
from qstr.constructions.recurrent import module_from_state, rnn_state
from qstr.constructions.task import QSTR
from qstr.verify.adversarial import clip_to_ball
from qstr.verify.claim import Claim, Context, Ref, at_most, worst
from qstr.verify.claims._transition import transition_rounding
from qstr.verify.registry import register

F64 = torch.float64
L29_N, L29_D, L29_RX, L29_EPS, L29_B = 32, 3, 2.5, 0.1, 4
RATIO_TERM = 1e-9  # relative rounding allowance (differences of O(1) float64 quantities)

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
        statement="(reconstructed) transitions that do not read h: a state moves by at most the "
        "sum of the changes of the transition outputs it adds up (<= (i - 1) max); the output by "
        "at most f_y's parameter term plus Lip(f_y) times its states' change",
        builds=(prop28_rnn,),
        bounds=(layer_sensitivities,),
        derivation="docs/derivations/rnn-lower-bounds.md",
    )
)


# ------------------------------------------------------------------ the inputs


@dataclass(frozen=True)
class Bounds:
    """What the checks compare with (faults swap one for a slipped form)."""

    sensitivities: Callable = layer_sensitivities
    accumulates: bool = True  # a state's change is the sum of its transitions' changes
    through_states: bool = True  # the output moves with its states


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


@dataclass(frozen=True)
class RNNInputs:
    cases: Tuple[RNNCase, ...]
    bounds: Bounds = Bounds()


def _nets(module: nn.Module) -> Dict[str, list]:
    """Parameter names of each net, layer by layer: {net: [(weight name, bias name or None)]}."""
    names = dict(module.named_parameters())
    out = {}
    for net in ("f_fwd", "f_bwd", "f_y"):
        idx = sorted({int(k.split(".")[1]) for k in names if k.startswith(net + ".")})
        out[net] = [
            (f"{net}.{i}.weight", f"{net}.{i}.bias" if f"{net}.{i}.bias" in names else None)
            for i in idx
        ]
    return out


def _random(module, names, size: float, d_h: int, gen) -> dict:
    """A random change of the named parameters, each of Frobenius norm ``size`` x its own; the
    transitions' first layer keeps its h columns (the class: transitions do not read h)."""
    params = dict(module.named_parameters())
    out = {}
    for k in names:
        p = params[k].detach()
        D = torch.randn(p.shape, generator=gen, dtype=F64)
        if k.endswith("0.weight") and not k.startswith("f_y"):
            D[:, :d_h] = 0
        out[k] = D * (size * float(p.norm()) / float(D.norm()))
    return out


def _changes(module, d_h: int, ctx: Context) -> Tuple[Tuple[str, dict], ...]:
    gen = ctx.generator("lemma-29/changes")
    nets, out = _nets(module), []
    for net in ("f_fwd", "f_y"):
        for l, pair in enumerate(nets[net]):
            names = [n for n in pair if n is not None]
            out.append((f"{net} layer {l + 1} x 1e-3", _random(module, names, 1e-3, d_h, gen)))
    every = [n for net in nets.values() for pair in net for n in pair if n is not None]
    for size in (1e-6, 1e-3):
        out.append((f"all layers x {size:g}", _random(module, every, size, d_h, gen)))
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
    d_h = rnn.transition.d_h
    changes = tuple(
        (name, {k: v.to(ctx.device) for k, v in ch.items()})
        for name, ch in _changes(module, d_h, ctx)
    )
    label = f"Prop 28 RNN, rs-hadamard N={L29_N}, d={L29_D}, q=1"
    with torch.no_grad():
        honest = _run(module, {}, Z)
    rounding = 2 * transition_rounding(rnn.transition, L29_N, rnn.r_h).term  # theta and theta'
    return RNNInputs((RNNCase(label, module, Z, changes, honest, rounding),))


@lemma30.inputs
def lemma30_inputs(ctx: Context) -> RNNInputs:
    """The same RNN, its transition and output net as the deep ReLU nets."""
    return lemma29_inputs(ctx)


def _scope(inp: RNNInputs) -> str:
    c = inp.cases[0]
    return f"{c.label}; {c.Z.shape[0]} prompts; {len(c.changes)} parameter changes"


lemma29.scope_with(_scope)
lemma30.scope_with(_scope)


# ------------------------------------------------------------------ evaluation


class _States(nn.Module):
    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, Z):
        return self.module.states(Z)


def _moved(module, change: dict) -> dict:
    return {k: p + change[k] if k in change else p for k, p in module.named_parameters()}


def _states(module, change: dict, Z):
    """(h_fwd, h_bwd) of the module with ``change`` (its own ``states``; torch.func swaps the
    parameters)."""
    params = {f"module.{k}": v for k, v in _moved(module, change).items()}
    return functional_call(_States(module), params, (Z,))


def _run(module, change: dict, Z):
    """(h_fwd, h_bwd, y) of the module with ``change`` (``states`` and ``forward``)."""
    return (*_states(module, change, Z), functional_call(module, _moved(module, change), (Z,)))


def _mlp(params: dict, layers, u):
    for i, (w, b) in enumerate(layers):
        u = u @ params[w].T + (params[b] if b else 0)
        if i < len(layers) - 1:
            u = torch.relu(u)
    return u


def _net_bound(module, change, layers, r_in, b: Bounds) -> float:
    """sum_l c_l ||Delta_l||_F with R_l the larger of both nets' ||[W_l b_l]||_F."""
    old, new = dict(module.named_parameters()), _moved(module, change)

    def fro(params, w, bias):
        return float(torch.cat([params[w].flatten()] + ([params[bias]] if bias else [])).norm())

    radii = [max(fro(old, w, bias), fro(new, w, bias)) for w, bias in layers]
    deltas = [
        float(
            torch.cat(
                [change.get(w, 0 * old[w]).flatten()]
                + ([change.get(bias, 0 * old[bias])] if bias else [])
            ).norm()
        )
        for w, bias in layers
    ]
    c = b.sensitivities(radii, [bias is not None for _, bias in layers], r_in)
    return sum(ci * di for ci, di in zip(c, deltas, strict=True))


def _worst_over_changes(inp: RNNInputs, one, nets=("f_fwd", "f_bwd", "f_y"), absolute=False):
    """The worst of ``one(case, change) -> (measured, bound)`` over every case and every change
    that touches one of ``nets``; the rounding term relative to the bound, or (``absolute``) the
    case's state rounding."""
    rows = []
    for c in inp.cases:
        for name, change in c.changes:
            if not any(k.split(".")[0] in nets for k in change):
                continue
            with torch.no_grad():
                m, bound = one(c, change, inp.bounds)
            term = c.rounding if absolute else RATIO_TERM * bound
            rows.append((f"{c.label}, {name}", at_most(m, bound, term)))
    return worst(rows)


# ------------------------------------------------------------------ Lemma 30


def _net_check(net: str):
    def one(c: RNNCase, change: dict, b: Bounds):
        layers = _nets(c.module)[net]
        h_fwd, h_bwd, _ = c.honest
        u = torch.cat([h_fwd, c.Z] if net == "f_fwd" else [h_fwd, h_bwd, c.Z], -1)
        old, new = dict(c.module.named_parameters()), _moved(c.module, change)
        moved = torch.linalg.vector_norm(_mlp(new, layers, u) - _mlp(old, layers, u), dim=-1)
        r_in = float(torch.linalg.vector_norm(u, dim=-1).max())
        return float(moved.max()), _net_bound(c.module, change, layers, r_in, b)

    return lambda inp: _worst_over_changes(inp, one, nets=(net,))


transition_moves = lemma30.check(
    "transition: ||f(u) - f'(u)|| <= sum_l c_l ||Delta_l||_F", evidence="built"
)(_net_check("f_fwd"))
output_net_moves = lemma30.check(
    "output net: |f_y(u) - f_y'(u)| <= sum_l c_l ||Delta_l||_F", evidence="built"
)(_net_check("f_y"))


def _without_feed(radii, biases, r_in):
    """c_l = prod_{k>l} R_k: the layer's input norm sqrt(a_{l-1}^2 + 1) dropped."""
    return [math.prod(radii[l + 1 :]) for l in range(len(radii))]


lemma30.fault(
    "c_l without the input norm sqrt(a_{l-1}^2 + 1)",
    breaks=(transition_moves, output_net_moves),
    apply=lambda inp: replace(inp, bounds=replace(inp.bounds, sensitivities=_without_feed)),
)


# ------------------------------------------------------------------ Lemma 29


def _state_changes(c: RNNCase, change: dict, b: Bounds):
    """(largest ||h_i - h'_i|| / bound, and that pair) over positions and both directions: bound
    the sum of the transition-output changes the state adds up (their largest, if
    ``b.accumulates`` is False)."""
    h_fwd, h_bwd, _ = c.honest
    g_fwd, g_bwd = _states(c.module, change, c.Z)
    old, new = dict(c.module.named_parameters()), _moved(c.module, change)
    best = (0.0, 0.0, -1.0)
    for net, h, g, reverse in (("f_fwd", h_fwd, g_fwd, False), ("f_bwd", h_bwd, g_bwd, True)):
        layers = _nets(c.module)[net]
        u = torch.cat([h, c.Z], -1)
        df = torch.linalg.vector_norm(_mlp(new, layers, u) - _mlp(old, layers, u), dim=-1)  # (B, N)
        if reverse:
            df = df.flip(1)
        acc = torch.cumsum(df, 1) if b.accumulates else torch.cummax(df, 1).values
        bound = torch.cat([torch.zeros_like(acc[:, :1]), acc[:, :-1]], 1)  # adds z_1..z_{i-1}
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


states_accumulate = lemma29.check(
    "||h_i - h'_i|| <= sum_{j<i} ||f(z_j) - f'(z_j)||", evidence="built"
)(lambda inp: _worst_over_changes(inp, _state_changes, ("f_fwd", "f_bwd"), absolute=True))


def _output_change(c: RNNCase, change: dict, b: Bounds):
    """|y_i - y'_i| against f_y's parameter term plus Lip(f_y') = prod_l R_l times the change of
    (h_fwd_i, h_bwd_i), at the position where the ratio is largest."""
    h_fwd, h_bwd, y = c.honest
    g_fwd, g_bwd, y2 = _run(c.module, change, c.Z)
    layers = _nets(c.module)["f_y"]
    u = torch.cat([h_fwd, h_bwd, c.Z], -1)
    r_in = float(torch.linalg.vector_norm(u, dim=-1).max())
    param_term = _net_bound(c.module, change, layers, r_in, b)
    new = _moved(c.module, change)
    lip = math.prod(
        float(torch.cat([new[w].flatten()] + ([new[bb]] if bb else [])).norm()) for w, bb in layers
    )
    dstate = torch.linalg.vector_norm(torch.cat([g_fwd - h_fwd, g_bwd - h_bwd], -1), dim=-1)
    bound = param_term + (lip * dstate if b.through_states else 0 * dstate)
    dy = (y2 - y).abs()
    ratio = dy / bound.clamp_min(1e-300)
    k = int(ratio.flatten().argmax())
    return float(dy.flatten()[k]), float(bound.flatten()[k])


output_moves = lemma29.check(
    "|y_i - y'_i| <= f_y's term + Lip(f_y) ||state change||", evidence="built"
)(lambda inp: _worst_over_changes(inp, _output_change))


lemma29.fault(
    "no accumulation: a state moves by one transition's change",
    breaks=states_accumulate,
    apply=lambda inp: replace(inp, bounds=replace(inp.bounds, accumulates=False)),
)
lemma29.fault(
    "the output's dependence on the states forgotten",
    breaks=output_moves,
    apply=lambda inp: replace(inp, bounds=replace(inp.bounds, through_states=False)),
)
