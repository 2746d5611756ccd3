"""Appendix A.1: a construction saved, reloaded (weights_only) into nn.MultiheadAttention and
folded back answers like the built one, to rounding (docs/derivations/rounding.md)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Callable, Tuple

import torch

from qstr.bounds.attention import lemma11
from qstr.bounds.sparse_averaging import sparse_average_head
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.experiment_models import PracticalTransformer
from qstr.constructions.export import (
    construction_state,
    from_multihead,
    init_from_construction,
    load_construction_state,
    load_multihead,
)
from qstr.constructions.links import make_link
from qstr.constructions.paper_models import MergedAttention
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, by_measured, mapped, worst
from qstr.verify.claims._roundtrip import forgot_head_dim_scale, saved_and_reloaded, through_path
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

EX_N, EX_D = 128, 3  # the two large constructions: prompt length, token dimension
SMALL_N, SMALL_D = 16, 2  # the small one read back by load_multihead from a real file

claim = register(
    Claim(
        "export-roundtrip",
        Ref("Appendix A.1"),
        statement="a saved construction reloaded (weights_only) into nn.MultiheadAttention, and "
        "folded back, gives the built module's outputs",
        builds=(
            construction_state,
            load_construction_state,
            load_multihead,
            from_multihead,
            init_from_construction,
        ),
        bounds=(lemma11, sparse_average_head),
        derivation="docs/derivations/rounding.md",
    )
)


@dataclass(frozen=True)
class Case:
    """One saved construction: the modules read back from its file, a batch of its encoded
    prompts Z and the built module's outputs y on them."""

    name: str
    merged: MergedAttention  # the merged module read back
    exported: PracticalTransformer  # the nn.MultiheadAttention module read back
    Z: torch.Tensor
    y: torch.Tensor

    @property
    def rounding(self) -> Rounding:
        """Two forward passes of N + H D_e + m terms each (docs/derivations/rounding.md)."""
        m = self.merged
        return Rounding(
            n=2 * (self.Z.shape[1] + m.D_e * m.H + m.m),
            scale=float(self.y.abs().max()) + 1.0,
            what="2 (N + H D_e + m) eps (|y|max + 1)",
        )


@dataclass(frozen=True)
class ExportInputs:
    """The saved-and-reloaded constructions; float32 loaders and a biased module (the small one)."""

    cases: Tuple[Case, ...]
    float32: Tuple[Tuple[str, PracticalTransformer], ...]  # (how it was loaded, module)
    biased: PracticalTransformer  # the small export with readout bias c and an out_proj bias
    folded: MergedAttention  # from_multihead(biased)


def _prompts(cons, B: int, N: int, d: int, name: str, ctx: Context):
    """B prompts of N tokens whose q indices are distinct (the averaging head needs them)."""

    def gen(part: str, *i: int) -> torch.Generator:
        return ctx.generator(f"export-roundtrip/{name}/{part}", *i, device=ctx.device)

    x = torch.randn(B, N, d, generator=gen("x"), dtype=torch.float64, device=ctx.device)
    t = torch.stack(
        [
            torch.randperm(N, generator=gen("t", b), device=ctx.device)[: cons.q].expand(N, cons.q)
            for b in range(B)
        ]
    )
    with torch.no_grad():
        return cons.encode(x, t), cons.predict(x, t)


def _with_bias(mt: PracticalTransformer) -> PracticalTransformer:
    """A copy of ``mt`` with readout bias c = 0.25 and an out_proj bias (as training leaves it)."""
    biased = copy.deepcopy(mt)
    with torch.no_grad():
        biased.readout.bias.fill_(0.25)
        E, w = biased.q * biased.D_e, biased.readout.weight
        bias = torch.linspace(-0.1, 0.1, E, dtype=w.dtype, device=w.device)
        biased.mha.out_proj.bias = torch.nn.Parameter(bias)
    return biased


@claim.inputs
def export_inputs(ctx: Context) -> ExportInputs:
    """Lemma 11 (teacher link, q = 3) and the sparse averaging head (q = 3) at N = 128 through
    torch.load; a small Lemma 11 (N = 16, q = 2) through load_multihead(file) (Appendix A.1)."""
    B = ctx.pick(quick=2, full=32)
    link = make_link("teacher", 3, EX_D, generator=ctx.generator("export-roundtrip/link"))
    net = link.two_layer_net()
    l11 = lemma11(EX_N, EX_D, 3, net, eps=0.05, r_x=3.0, device=ctx.device)
    book = rs_hadamard_codebook(EX_N, mu=0.15, device=ctx.device)
    avg = sparse_average_head(EX_N, EX_D, 3, codebook=book, r_x=3.0, device=ctx.device)
    cases = [
        Case(name, *saved_and_reloaded(cons), *_prompts(cons, B, EX_N, EX_D, name, ctx))
        for name, cons in (("lemma11 q=3", l11), ("sparse-average q=3", avg))
    ]
    small_link = make_link(
        "teacher", 2, SMALL_D, generator=ctx.generator("export-roundtrip/small-link")
    )
    small_net, f32 = small_link.two_layer_net(), torch.float32
    small = lemma11(SMALL_N, SMALL_D, 2, small_net, eps=0.05, r_x=3.0, device=ctx.device)
    state = construction_state(small)
    mt = through_path(state, load_multihead)
    small_prompts = _prompts(small, 2, SMALL_N, SMALL_D, "small", ctx)
    name = "small lemma11 q=2 via load_multihead(file)"
    cases.append(Case(name, from_multihead(mt), mt, *small_prompts))
    float32 = (
        ("load_multihead(file, dtype=float32)", through_path(state, load_multihead, dtype=f32)),
        ("init_from_construction(dtype=float32)", init_from_construction(small, dtype=f32)),
    )
    biased = _with_bias(mt)
    return ExportInputs(tuple(cases), float32, biased, from_multihead(biased))


def _worst_case(inp: ExportInputs, output: Callable[[Case], torch.Tensor], label: str) -> Verdict:
    """max |output(case) - y| against each case's rounding; the case with the largest err / term."""
    rows = []
    for c in inp.cases:
        with torch.no_grad():
            err = float((output(c).reshape(c.y.shape) - c.y).abs().max())
        rows.append((c.name, at_most(err, 0.0, c.rounding, detail=f"max |{label} - y_built|")))
    errors = ", ".join(f"{name} {v.measured:.2g}" for name, v in rows)
    return worst(rows, key=lambda v: v.measured / v.rounding).labelled(errors)


@claim.check("nn.MultiheadAttention = built", evidence="built")
def exported_matches(inp: ExportInputs) -> Verdict:
    """The reloaded nn.MultiheadAttention module answers like the built one (Appendix A.1)."""
    return _worst_case(inp, lambda c: c.exported(c.Z), "nn.MultiheadAttention")


@claim.check("reloaded merged = built", evidence="built")
def merged_matches(inp: ExportInputs) -> Verdict:
    """The reloaded merged module (W_QK, W, b, a) answers like the built one."""
    return _worst_case(inp, lambda c: c.merged(c.Z), "reloaded merged")


@claim.check("folded back = built", evidence="built")
def folded_matches(inp: ExportInputs) -> Verdict:
    """The reloaded nn.MultiheadAttention, folded back by from_multihead, answers like the built."""
    return _worst_case(inp, lambda c: from_multihead(c.exported)(c.Z), "folded back")


@claim.check("float32 loaders = built", evidence="built")
def float32_matches(inp: ExportInputs) -> Verdict:
    """The float32 loaders answer like the built module within the same count in float32."""
    small = inp.cases[-1]
    rnd = replace(small.rounding, dtype=torch.float32)
    rows = []
    for how, mt in inp.float32:
        with torch.no_grad():
            y = mt(small.Z.float()).reshape(small.y.shape).double()
        rows.append((how, at_most(float((y - small.y).abs().max()), 0.0, rnd, detail=small.name)))
    return worst(rows, key=by_measured)


@claim.check("biases folded", evidence="built")
def biases_fold(inp: ExportInputs) -> Verdict:
    """from_multihead folds a readout bias c (one more unit relu(1) c) and an out_proj bias
    (before the ReLU): the folded module answers like the biased one."""
    small = inp.cases[-1]
    with torch.no_grad():
        y = inp.biased(small.Z)
        err = float((inp.folded(small.Z).reshape(y.shape) - y).abs().max())
    rnd = replace(small.rounding, scale=float(y.abs().max()) + 1.0)
    return at_most(err, 0.0, rnd, detail=f"{small.name}, c = 0.25, out_proj bias in [-0.1, 0.1]")


def _every_export(slip: Callable[[PracticalTransformer], PracticalTransformer]):
    """An edit applying ``slip`` to every reloaded nn.MultiheadAttention module (copies)."""

    def apply(inp: ExportInputs) -> ExportInputs:
        cases = tuple(replace(c, exported=slip(c.exported)) for c in inp.cases)
        return replace(inp, cases=cases, float32=tuple((h, slip(m)) for h, m in inp.float32))

    return apply


EXPORTS = (exported_matches, folded_matches, float32_matches)
claim.fault(
    "exporter forgets torch's 1/sqrt(head_dim)",
    breaks=EXPORTS,
    apply=_every_export(forgot_head_dim_scale),
)


def _heads_swapped(mt: PracticalTransformer) -> PracticalTransformer:
    """The key projection blocks of heads 0 and 1 exchanged (an off-by-one in the reshape)."""
    mt = copy.deepcopy(mt)
    with torch.no_grad():
        Wk, D = mt.projection_weights()[1], mt.D_e
        if Wk.shape[0] >= 2 * D:
            Wk[: 2 * D] = torch.cat([Wk[D : 2 * D].clone(), Wk[:D].clone()])
    return mt


claim.fault("two heads' key blocks swapped", breaks=EXPORTS, apply=_every_export(_heads_swapped))


def _transposed_qk(case: Case) -> Case:
    """A loader that reads each head's W_QK key-left (transposed)."""
    merged = copy.deepcopy(case.merged)
    with torch.no_grad():
        merged.W_QK.copy_(merged.W_QK.transpose(-1, -2).clone())
    return replace(case, merged=merged)


claim.fault("W_QK read transposed", breaks=merged_matches, apply=mapped("cases", _transposed_qk))


@claim.fault("fold drops the biases", breaks=biases_fold)
def _biases_dropped(inp: ExportInputs) -> ExportInputs:
    """A fold that drops the biases (the unbiased module's fold stands in for the biased one's)."""
    return replace(inp, folded=from_multihead(inp.cases[-1].exported))


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        "; ".join(c.name for c in inp.cases)
        + "; float32: "
        + ", ".join(name for name, _ in inp.float32)
    )
)
