"""Lemmas 13 and 15 (Appendix A.1), as reconstructed in docs/derivations/theorem4.md, section 3:
how far the built Lemma 11 Transformer's output moves when its parameters move, step by step,
against the bounds Theorem 4's covering (Prop 17) uses. Bounds: ``bounds/perturbation.py``."""

from __future__ import annotations

import types

from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Optional, Tuple

import torch
from torch import nn
from torch.func import functional_call

from qstr.bounds.attention import lemma11, lemma12_radius
from qstr.bounds.perturbation import attention_lipschitz, head_change_bound, lemma13_terms
from qstr.bounds.perturbation import score_change_bound, softmax_l1_bound
from qstr.constructions.links import make_link
from qstr.constructions.task import QSTR
from qstr.verify.adversarial import clip_to_ball, sphere_ascent
from qstr.verify.claims import _theorem4_pins as pins
from qstr.verify.claims._lemma13_worst import a_step_case, antipodal_case
from qstr.verify.claims._theorem4_pins import largest_gap
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, close, each, worst
from qstr.verify.registry import register

F64 = torch.float64
L13_D, L13_EPS, L13_B = 3, 0.05, 8  # token dimension, Lemma 11's eps, prompts per case
PIN_ENTRIES = 20_000  # Lemma 13's pin reads modules up to this many W_QK entries (q=2, N=16)
RATIO_TERM = 1e-9  # relative rounding allowance of a ratio (differences of O(1) quantities)

lemma15 = register(
    Claim(
        "lemma-15",
        Ref("Lemma 15"),
        statement="(reconstructed) attention heads under W_QK -> W_QK', tokens ||z_j|| <= r_z: "
        "|s - s'| <= r_z^2 ||dW^h||_F, ||A_i - A'_i||_1 <= ||s_i - s'_i||_inf, ||u_i - u'_i|| <= "
        "r_z ||A_i - A'_i||_1, so ||h_i - h'_i|| <= r_z^3 ||dW_QK||_F",
        builds=(lemma11,),
        bounds=(attention_lipschitz, score_change_bound, softmax_l1_bound, head_change_bound),
        derivation="docs/derivations/theorem4.md",
    )
)
lemma13 = register(
    Claim(
        "lemma-13",
        Ref("Lemma 13"),
        statement="(reconstructed) one block at a time: |f_Theta - f_Theta'| <= ||a - a'|| "
        "||(W,b)||_F rho + ||a'|| rho ||d(W,b)||_F + ||a'|| ||W'||_op r_z^3 ||dW_QK||_F, "
        "rho = sqrt(H r_z^2 + 1), on every prompt with ||z_j|| <= r_z",
        builds=(lemma11,),
        bounds=(lemma13_terms,),
        derivation="docs/derivations/theorem4.md",
    )
)


# ------------------------------------------------------------------ the inputs


@dataclass(frozen=True)
class Bounds:
    """The step bounds a check compares with (faults swap one for a slipped form)."""

    score: Callable = score_change_bound
    softmax: Callable = softmax_l1_bound
    value: Callable = head_change_bound
    attention: Callable = attention_lipschitz
    lemma13: Callable = lemma13_terms


@dataclass(frozen=True)
class PerturbCase:
    """A built Lemma 11 module, prompts Z with tokens in the r_x ball (half on its sphere), their
    radii r_z = max_j ||z_j||, and the perturbations found for each step (random ones and the
    ascent's, at each size): ``found[step]`` a tuple of dicts {parameter name: change}."""

    label: str
    model: nn.Module  # MergedAttention
    Z: torch.Tensor
    r_z: torch.Tensor  # (B,)
    found: Dict[str, Tuple[dict, ...]]
    why: Dict[str, str] = field(default_factory=dict)  # a constructed case: by step, its factor


@dataclass(frozen=True)
class PerturbInputs:
    cases: Tuple[PerturbCase, ...]
    bounds: Bounds = Bounds()


class _Method(nn.Module):
    """``model.<name>(Z)`` as a module, so torch.func.functional_call can swap its parameters."""

    def __init__(self, model: nn.Module, name: str):
        super().__init__()
        self.model, self.name = model, name

    def forward(self, Z):
        return getattr(self.model, self.name)(Z)


def _call(model, name: str, change: dict, Z: torch.Tensor) -> torch.Tensor:
    """``model.<name>(Z)`` with each parameter p replaced by p + change[p] (the built module's own
    code, parameters swapped by torch.func)."""
    params = {f"model.{k}": getattr(model, k) + v for k, v in change.items()}
    return functional_call(_Method(model, name), params, (Z,))


def _attention_parts(model, change: dict, Z: torch.Tensor):
    """(scores, attention, head outputs) of the module with ``change``."""
    return tuple(_call(model, name, change, Z) for name in ("scores", "attention", "heads"))


def _step_ratios(model, Z, r_z, change: dict, b: Bounds) -> Dict[str, Tuple]:
    """Each attention step's (measured, bound) at the position where their ratio is largest."""
    s0, A0, u0 = _attention_parts(model, {}, Z)
    s1, A1, u1 = _attention_parts(model, change, Z)
    D = change["W_QK"]
    rz = r_z[:, None, None]  # (B, 1, 1) against (B, H, N)
    ds = (s1 - s0).abs()  # (B, H, N, N)
    ds_inf = ds.amax(-1)
    dA = (A1 - A0).abs().sum(-1)  # (B, H, N)
    du = torch.linalg.vector_norm(u1 - u0, dim=-1).transpose(1, 2)  # (B, H, N)
    dh = torch.linalg.vector_norm((u1 - u0).flatten(2), dim=-1)  # (B, N)
    d_head = torch.linalg.vector_norm(D, dim=(1, 2))[None, :, None, None]
    pairs = {
        "score": (ds, b.score(r_z[:, None, None, None], d_head)),
        "softmax": (dA, b.softmax(ds_inf)),
        "value": (du, b.value(rz, dA)),
        "attention": (dh, b.attention(r_z[:, None]) * torch.linalg.vector_norm(D)),
    }
    return {k: _at_worst(m, bound) for k, (m, bound) in pairs.items()}


def _at_worst(measured: torch.Tensor, bound: torch.Tensor) -> Tuple:
    """(measured, bound, ratio) where measured / bound is largest (inf where a zero bound is
    exceeded, 0 where both are 0)."""
    bound = bound.expand_as(measured)
    ratio = torch.where(
        bound > 0,
        measured / bound.clamp_min(1e-300),
        torch.where(measured > 0, torch.inf, 0.0).to(measured),
    )
    k = int(ratio.flatten().argmax())
    return measured.flatten()[k], bound.flatten()[k], ratio.flatten()[k]


def _output_steps(model, Z, r_z, change: dict, b: Bounds) -> Dict[str, Tuple]:
    """Lemma 13's steps through the module's forward: a -> a', then (W, b) -> (W', b'), then
    W_QK -> W_QK' (each with the earlier blocks already moved), and the whole change."""
    keys = (("a",), ("W", "b"), ("W_QK",))
    moved = [{}]
    for block in keys:
        moved.append({**moved[-1], **{k: change[k] for k in block}})
    f = [_call(model, "forward", c, Z) for c in moved]  # (B, N) each
    other = _copy(model, change)
    terms = b.lemma13(model, other, r_z)
    bounds = (terms.a, terms.Wb, terms.attention, terms.total)
    names = ("a", "Wb", "attention", "total")
    diffs = [(f[k + 1] - f[k]).abs() for k in range(3)] + [(f[3] - f[0]).abs()]
    return {n: _at_worst(d, t[:, None]) for n, d, t in zip(names, diffs, bounds, strict=True)}


def _copy(model, change: Optional[dict] = None) -> nn.Module:
    """A copy of the module with its parameters moved by ``change`` (Theta')."""
    change = change or {}
    other = type(model)(model.D_e, model.H, model.m, model.out_dim, dtype=F64)
    other = other.to(model.W_QK.device)
    with torch.no_grad():
        other.set_weights(
            **{k: getattr(model, k) + change.get(k, 0) for k in ("W_QK", "W", "b", "a")}
        )
    return other


def _prompts(cons, link, k: int, ctx: Context):
    """L13_B prompts of the qSTR task, tokens clipped to the r_x ball, the second half pushed to
    its sphere (where r_z = max ||z_j|| is largest); (Z, r_z)."""
    g = cons.guarantee
    gen = ctx.generator("lemma-13/prompts", k, device=ctx.device)
    p = QSTR(N=cons.N, d=L13_D, link=link).sample(
        L13_B, generator=gen, device=ctx.device, dtype=F64
    )
    x = clip_to_ball(p.x, g.r_x)
    half = L13_B // 2
    x[half:] = x[half:] / x[half:].norm(dim=-1, keepdim=True) * g.r_x
    Z = cons.encode(x, p.t)
    return Z, torch.linalg.vector_norm(Z, dim=-1).amax(1)


def _random_change(model, blocks, scale: float, gen) -> dict:
    """A random change of the named blocks, of total Frobenius norm ``scale`` x their norm (or
    ``scale`` where they are zero)."""
    raw = {k: torch.randn(getattr(model, k).shape, generator=gen, dtype=F64) for k in blocks}
    size = sum(float(getattr(model, k).detach().norm()) ** 2 for k in blocks) ** 0.5 or 1.0
    norm = sum(float(v.norm()) ** 2 for v in raw.values()) ** 0.5
    return {k: (v * scale * size / norm).to(getattr(model, k).device) for k, v in raw.items()}


def _searched(model, Z, r_z, step_fn, steps, blocks, gen, iters: int) -> Dict[str, Tuple]:
    """For each step name: the random changes of ``blocks`` at each relative size and, from each,
    the ascent's change maximising that step's ratio."""
    found = {name: [] for name in steps}
    for scale in (1e-3, 0.3):
        start = _random_change(model, blocks, scale, gen)
        flat0 = torch.cat([start[k].flatten() for k in blocks])

        def unflat(v, start=start):
            out, at = {}, 0
            for k in blocks:
                n = start[k].numel()
                out[k] = v[at : at + n].view_as(start[k])
                at += n
            return out

        for name in steps:

            def ratio(v, name=name, unflat=unflat):
                return step_fn(model, Z, r_z, unflat(v), Bounds())[name][2]

            best, _ = sphere_ascent(ratio, flat0, iters)
            found[name] += [start, unflat(best)]
    return {k: tuple(v) for k, v in found.items()}


def _zero_others(model, change: dict) -> dict:
    """The change with every parameter it leaves alone set to zero change."""
    return {k: change.get(k, torch.zeros_like(getattr(model, k))) for k in ("W_QK", "W", "b", "a")}


def _worst_cases(cons, r_x: float, steps, for_output: bool) -> Tuple[PerturbCase, ...]:
    """The constructed worst cases (_lemma13_worst.py): the antipodal prompt at alpha = 0 for the
    attention steps and, for Lemma 13, the a-step's prompt on the built module."""
    m0, w = antipodal_case(cons, r_x)
    label = f"q={cons.q} N={cons.N}"
    why = {"attention": w.why["output" if for_output else "heads"]}
    out = [PerturbCase(f"{label} antipodal, alpha=0", m0, w.Z, w.r_z, _each(steps, w), why)]
    if for_output:
        a = a_step_case(cons, r_x)
        out.append(
            PerturbCase(f"{label} a-step prompt", cons.model, a.Z, a.r_z, _each(steps, a), a.why)
        )
    return tuple(out)


def _each(steps, w) -> Dict[str, Tuple[dict, ...]]:
    """The constructed change as the one change found for every step."""
    return {name: (w.change,) for name in steps}


def _cases(ctx: Context, for_output: bool) -> Tuple[PerturbCase, ...]:
    """Lemma 11 with a teacher link (q = 2, N = 16; full: also q = 3, N = 64): the built module,
    and for the attention steps also the same construction at alpha = 0 (uniform attention,
    where the softmax bound is nearly attained) and, in full, at alpha / 4; then the
    constructed worst cases of each size."""
    out = []
    sizes = ctx.pick(quick=((2, 16),), full=((2, 16), (3, 64)))
    iters = ctx.pick(quick=12, full=60)
    for k, (q, N) in enumerate(sizes):
        link = make_link("teacher", q, L13_D, generator=ctx.generator("lemma-13/link", q))
        link = link.to(ctx.device)
        r_x = lemma12_radius(L13_D, n=10_000, N=N)
        cons = lemma11(N, L13_D, q, link.two_layer_net(), eps=L13_EPS, r_x=r_x, device=ctx.device)
        Z, r_z = _prompts(cons, link, k, ctx)
        gen = ctx.generator("lemma-13/changes", k)
        if for_output:
            found = _searched(
                cons.model,
                Z,
                r_z,
                _output_steps,
                ("a", "Wb", "total"),
                ("W_QK", "W", "b", "a"),
                gen,
                iters,
            )
            out.append(PerturbCase(f"q={q} N={N}", cons.model, Z, r_z, found))
            out += _worst_cases(cons, cons.guarantee.r_x, ("a", "Wb", "total"), True)
            continue
        scales = (("alpha", cons.alpha), ("alpha/4", cons.alpha / 4), ("alpha=0", 0.0))
        for label, alpha in scales[:: ctx.pick(quick=2, full=1)]:  # quick: alpha and 0
            m = cons.with_alpha(alpha).model if alpha != cons.alpha else cons.model
            found = _searched(
                m,
                Z,
                r_z,
                _step_ratios,
                ("score", "softmax", "value"),
                ("W_QK",),
                gen,
                iters,
            )
            out.append(PerturbCase(f"q={q} N={N} {label}={alpha:.3g}", m, Z, r_z, found))
        out += _worst_cases(cons, cons.guarantee.r_x, ("score", "softmax", "value"), False)
    return tuple(out)


@lemma15.inputs
def lemma15_inputs(ctx: Context) -> PerturbInputs:
    """The attention steps' perturbations of W_QK, random and searched, on built Lemma 11
    modules at three scales alpha."""
    return PerturbInputs(_cases(ctx, for_output=False))


@lemma13.inputs
def lemma13_inputs(ctx: Context) -> PerturbInputs:
    """Joint perturbations of (a, W, b, W_QK), random and searched, on the built module."""
    return PerturbInputs(_cases(ctx, for_output=True))


def _scope(inp: PerturbInputs) -> str:
    c = inp.cases[0]
    return "; ".join(x.label for x in inp.cases) + f"; {c.Z.shape[0]} prompts, d = {L13_D}"


lemma15.scope_with(_scope)
lemma13.scope_with(_scope)


# ------------------------------------------------------------------ the checks


def _blockwise(changes) -> Tuple[dict, ...]:
    """Every change, and each one of several blocks restricted to one (a; W and b; W_QK)."""
    blocks = (("a",), ("W", "b"), ("W_QK",))
    parts = [{k: ch[k] for k in b if k in ch} for ch in changes if len(ch) > 1 for b in blocks]
    return tuple(changes) + tuple(p for p in parts if p)


def _step_check(step: str, fn, spread: bool = False) -> Callable[[PerturbInputs], Verdict]:
    """The check of one step: its largest ratio over the changes found for it (``spread``: every
    change found for any step, whole and block by block)."""

    def check(inp: PerturbInputs) -> Verdict:
        rows = []  # a constructed case whose change leaves the step alone (0 <= 0) is skipped
        for c in inp.cases:
            every = [ch for found in c.found.values() for ch in found]
            changes = _blockwise(every) if spread else c.found[step]
            with torch.no_grad():
                got = [
                    fn(c.model, c.Z, c.r_z, _zero_others(c.model, ch), inp.bounds)[step]
                    for ch in changes
                ]
            m, bnd, ratio = max(got, key=lambda v: float(v[2]))
            if c.why and float(bnd) == 0 and float(m) == 0:
                continue
            what = f"largest ratio {float(ratio):.3g} over {len(got)} changes"
            what += f"; {c.why[step]}" if step in c.why else ""
            rows.append((c.label, at_most(float(m), float(bnd), RATIO_TERM * float(bnd), what)))
        return worst(rows)

    return check


score_step = lemma15.check("|s - s'| <= r_z^2 ||dW^h||_F", evidence="built")(
    _step_check("score", _step_ratios)
)
softmax_step = lemma15.check("||A_i - A'_i||_1 <= ||s_i - s'_i||_inf", evidence="built")(
    _step_check("softmax", _step_ratios)
)
value_step = lemma15.check("||u_i - u'_i|| <= r_z ||A_i - A'_i||_1", evidence="built")(
    _step_check("value", _step_ratios)
)
attention_step = lemma15.check("||h_i - h'_i|| <= r_z^3 ||dW_QK||_F", evidence="built")(
    _step_check("attention", _step_ratios, spread=True)
)


@lemma15.check("r_z^3 = the steps' constants composed", evidence="formula")
def composed(inp: PerturbInputs) -> Verdict:
    """Lemma 15's constant is the product of its steps' (r_z^2 scores, 1 softmax, r_z values) at
    the radii checked and at 10 and 1000."""
    radii = [float(r) for c in inp.cases for r in c.r_z] + [10.0, 1000.0]
    b = inp.bounds
    gaps = [abs(b.attention(r) - b.value(r, b.softmax(b.score(r, 1.0)))) / r**3 for r in radii]
    return close(max(gaps), 0.0, 0.0, 1e-15, detail="largest relative gap")


@lemma15.check("step bounds = 40-digit evaluation", evidence="formula", agreement=True)
def lemma15_pin(inp: PerturbInputs) -> Verdict:
    """The four step bounds (r_z^2 x, x, r_z x, r_z^3) against mpmath at 40 digits (theorem4.md,
    section 3) at the radii checked and at 0.5, 1 and 1000, sizes x = 1e-6, 0.7 and 5; relative
    1e-12."""
    radii = sorted({float(r) for c in inp.cases for r in c.r_z} | {0.5, 1.0, 1000.0})
    b, pairs = inp.bounds, []
    for r in radii:
        for x in (1e-6, 0.7, 5.0):
            got = (b.score(r, x), b.softmax(x), b.value(r, x), b.attention(r))
            for k, name in enumerate(("score", "softmax", "value", "attention")):
                pairs.append((got[k], lambda r=r, x=x, n=name: pins.lemma15_steps(r, x)[n]))
    gap = largest_gap(pairs)
    return at_most(gap, pins.PIN_RTOL, detail=f"largest relative gap at r_z in {len(radii)} radii")


def _mp_weights(model, other) -> Callable[[str], object]:
    """Block k's entries of (Theta, Theta') as float lists (exact in mpmath), and Theta''s W."""

    def flat(net, k):
        p = torch.cat([net.W.flatten(), net.b]) if k == "Wb" else getattr(net, k).flatten()
        return p.detach().cpu().tolist()

    def weights(k):
        if k == "W'":
            return other.W.detach().cpu().tolist()
        return flat(model, k), flat(other, k)

    return weights


@lemma13.check("Lemma 13's terms = 40-digit evaluation", evidence="formula", agreement=True)
def lemma13_pin(inp: PerturbInputs) -> Verdict:
    """``lemma13_terms`` against Lemma 13's three terms in mpmath at 40 digits (theorem4.md,
    section 3; ||W'||_op from the eigenvalues of W' W'^T), on each module with its first change
    where that moves W_QK (the built module's random change, the antipodal one), at the case's
    radii and r_z = 1, 1000 (modules of at most PIN_ENTRIES attention entries: the quick size);
    relative 1e-12."""
    gaps = []
    with pins.digits():
        for c in inp.cases:
            first = next(iter(c.found.values()))[0]
            if c.model.W_QK.numel() > PIN_ENTRIES or "W_QK" not in first:
                continue
            ch = _zero_others(c.model, first)
            other = _copy(c.model, ch)
            radii = torch.cat([c.r_z.unique(), torch.tensor([1.0, 1e3], dtype=F64).to(c.r_z)])
            t = inp.bounds.lemma13(c.model, other, radii)
            want = pins.lemma13_terms(_mp_weights(c.model, other), c.model.H, radii.tolist())
            for k, terms in enumerate(want):
                got = (t.a[k], t.Wb[k], t.attention[k])
                gaps += [pins.relative_gap(float(g), v) for g, v in zip(got, terms, strict=True)]
    detail = f"largest relative gap over {len(gaps)} terms"
    return at_most(max(gaps), pins.PIN_RTOL, detail=detail)


output_a = lemma13.check("a-step <= ||a - a'|| ||(W,b)||_F rho", evidence="built")(
    _step_check("a", _output_steps)
)
output_Wb = lemma13.check("(W,b)-step <= ||a'|| rho ||d(W,b)||_F", evidence="built")(
    _step_check("Wb", _output_steps)
)
output_attention = lemma13.check(
    "attention step <= ||a'|| ||W'||_op r_z^3 ||dW_QK||_F", evidence="built"
)(_step_check("attention", _output_steps, spread=True))
output_total = lemma13.check("|f - f'| <= the three terms", evidence="built")(
    _step_check("total", _output_steps, spread=True)
)


# ------------------------------------------------------------------ the faults


def _with(**changes):
    return lambda inp: replace(inp, bounds=replace(inp.bounds, **changes))


lemma15.fault(
    "softmax bound ||ds||_inf / 2",  # the mean deviation taken as a quarter of the range
    breaks=(softmax_step, lemma15_pin),
    apply=_with(softmax=lambda ds: ds / 2),
)
lemma15.fault(
    "value step without r_z",  # Lemma 39 with unit tokens
    breaks=(value_step, lemma15_pin),
    apply=_with(value=lambda r_z, dA: dA),
)
lemma15.fault(
    "score step r_z ||dW||_F",  # one token norm, not two
    breaks=(score_step, lemma15_pin),
    apply=_with(score=lambda r_z, dW: r_z * dW),
)
lemma15.fault(
    "attention constant r_z^2",  # one of the three factors dropped in the composition
    breaks=(composed, lemma15_pin, attention_step),
    apply=_with(attention=lambda r_z: r_z * r_z),
)


def _query_axis_attention(self, Z, chunk=None):
    """Softmax over the queries (dim -2) instead of the keys: each column of A sums to 1, not
    each row (an axis slip in an attention implementation)."""
    return torch.softmax(self.scores(Z), dim=-2)


def _exp_attention(self, Z, chunk=None):
    """exp(s) for softmax(s): the weights are never divided by their sum."""
    return torch.exp(self.scores(Z))


def _slipped_attention(model, attention: Callable) -> nn.Module:
    """A copy of the built module whose attention weights are ``attention(module, Z)``; its heads
    read them (A Z per head), so the slip reaches the output."""
    other = _copy(model)
    other.attention = types.MethodType(attention, other)
    other.heads = lambda Z, chunk=None: (other.attention(Z) @ Z.unsqueeze(1)).transpose(1, 2)
    return other


@lemma15.fault("softmax over the queries, not the keys", breaks=softmax_step)
@each(field="model")
def _query_axis(c: PerturbCase) -> nn.Module:
    """A copy of the built module whose attention normalises each column instead of each row."""
    return _slipped_attention(c.model, _query_axis_attention)


@lemma15.fault("attention weights exp(s), never normalised", breaks=(softmax_step, attention_step))
@each(field="model")
def _unnormalised(c: PerturbCase) -> nn.Module:
    """A copy of the built module whose attention weights are exp(s), not softmax(s)."""
    return _slipped_attention(c.model, _exp_attention)


def _without_attention(model, other, r_z):
    t = lemma13_terms(model, other, r_z)
    return replace(t, attention=torch.zeros_like(t.attention))


def _a_without_rho(model, other, r_z):
    t = lemma13_terms(model, other, r_z)
    return replace(t, a=t.a / (model.H * r_z * r_z + 1) ** 0.5)


def _without_rho(model, other, r_z):
    t = lemma13_terms(model, other, r_z)
    return replace(t, Wb=t.Wb / (model.H * r_z * r_z + 1) ** 0.5)


def _attention_r_z_squared(model, other, r_z):
    t = lemma13_terms(model, other, r_z)
    return replace(t, attention=t.attention / r_z)


lemma13.fault(
    "Lemma 13's attention term with r_z^2, one power short",
    breaks=(output_attention, lemma13_pin),
    apply=_with(lemma13=_attention_r_z_squared),
)
lemma13.fault(
    "Lemma 13 without the attention term",
    breaks=(output_attention, output_total, lemma13_pin),
    apply=_with(lemma13=_without_attention),
)
lemma13.fault(
    "a-step without rho (||relu(W h + b)|| <= ||(W,b)||_F)",
    breaks=(output_a, lemma13_pin),
    apply=_with(lemma13=_a_without_rho),
)
lemma13.fault(
    "(W,b) step without rho (||(h, 1)|| taken as 1)",
    breaks=(output_Wb, lemma13_pin),
    apply=_with(lemma13=_without_rho),
)
