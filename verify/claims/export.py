"""The export path users take (Appendix A.1): a construction saved as a plain state dict, reloaded
with ``torch.load(weights_only=True)`` into ``nn.MultiheadAttention`` (merged W_QK split into
W_Q, W_K, W_V), and folded back. Each reloaded module answers like the built one, to rounding."""

from __future__ import annotations

import copy
import io
import math
import os
import tempfile
from dataclasses import dataclass, replace
from typing import Callable, Tuple

import torch

from qstr.bounds.attention import lemma11, sparse_average_head
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
from qstr.verify.claim import Check, Claim, Context, Fault, Ref, Verdict, at_most
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

EX_N, EX_D = 128, 3  # the two large constructions: prompt length, token dimension
SMALL_N, SMALL_D = 16, 2  # the small one read back by load_multihead from a real file


def through_file(state: dict) -> dict:
    """``state`` through torch.save and torch.load(weights_only=True): what `qstr construct`
    writes and a user reads."""
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def saved_and_reloaded(cons):
    """(MergedAttention, PracticalTransformer) exactly as a user gets them from a saved file
    (the Appendix A.1 export: ``construction_state`` :func:`through_file`)."""
    return load_construction_state(through_file(construction_state(cons)))


def through_path(state: dict, load, **kw):
    """``state`` written to a real file by torch.save (what `qstr construct` does) and read back
    by the public loader ``load(path, **kw)`` (torch.load(path, weights_only=True) inside)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "construction.pt")
        torch.save(state, path)
        return load(path, **kw)


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
    gen = lambda part, *i: ctx.generator(
        f"export-roundtrip/{name}/{part}",
        *i,  # noqa: E731
        device=ctx.device,
    )
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
        E = biased.q * biased.D_e
        w = biased.readout.weight
        biased.mha.out_proj.bias = torch.nn.Parameter(
            torch.linspace(-0.1, 0.1, E, dtype=w.dtype, device=w.device)
        )
    return biased


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
    small_net = make_link(
        "teacher", 2, SMALL_D, generator=ctx.generator("export-roundtrip/small-link")
    ).two_layer_net()
    small = lemma11(SMALL_N, SMALL_D, 2, small_net, eps=0.05, r_x=3.0, device=ctx.device)
    state = construction_state(small)
    mt = through_path(state, load_multihead)
    cases.append(
        Case(
            "small lemma11 q=2 via load_multihead(file)",
            from_multihead(mt),
            mt,
            *_prompts(small, 2, SMALL_N, SMALL_D, "small", ctx),
        )
    )
    float32 = (
        (
            "load_multihead(file, dtype=float32)",
            through_path(state, load_multihead, dtype=torch.float32),
        ),
        (
            "init_from_construction(dtype=float32)",
            init_from_construction(small, dtype=torch.float32),
        ),
    )
    biased = _with_bias(mt)
    return ExportInputs(tuple(cases), float32, biased, from_multihead(biased))


def _worst_case(inp: ExportInputs, output: Callable[[Case], torch.Tensor], label: str) -> Verdict:
    """max |output(case) - y| against each case's rounding, reduced by the largest err / term."""
    rows, worst = [], None
    for c in inp.cases:
        with torch.no_grad():
            err = float((output(c).reshape(c.y.shape) - c.y).abs().max())
        rnd = c.rounding
        rows.append(f"{c.name} {err:.2g}")
        if worst is None or err / rnd.term > worst[0] / worst[1].term:
            worst = (err, rnd, c.name)
    err, rnd, name = worst
    detail = f"max |{label} - y_built|, worst {name}; " + ", ".join(rows)
    return at_most(err, 0.0, rnd, detail=detail)


def exported_matches(inp: ExportInputs, ctx: Context) -> Verdict:
    """The reloaded nn.MultiheadAttention module answers like the built one (Appendix A.1)."""
    return _worst_case(inp, lambda c: c.exported(c.Z), "nn.MultiheadAttention")


def merged_matches(inp: ExportInputs, ctx: Context) -> Verdict:
    """The reloaded merged module (W_QK, W, b, a) answers like the built one."""
    return _worst_case(inp, lambda c: c.merged(c.Z), "reloaded merged")


def folded_matches(inp: ExportInputs, ctx: Context) -> Verdict:
    """The reloaded nn.MultiheadAttention, folded back by from_multihead, answers like the built."""
    return _worst_case(inp, lambda c: from_multihead(c.exported)(c.Z), "folded back")


def float32_matches(inp: ExportInputs, ctx: Context) -> Verdict:
    """The float32 loaders answer like the built module within the same count in float32."""
    small = inp.cases[-1]
    rnd = replace(small.rounding, dtype=torch.float32)
    rows, worst = [], (-math.inf, "")
    for how, mt in inp.float32:
        with torch.no_grad():
            y = mt(small.Z.float()).reshape(small.y.shape).double()
        err = float((y - small.y).abs().max())
        rows.append(f"{how} {err:.2g}")
        worst = max(worst, (err, how))
    return at_most(worst[0], 0.0, rnd, detail=f"{small.name}, worst {worst[1]}; " + ", ".join(rows))


def biases_fold(inp: ExportInputs, ctx: Context) -> Verdict:
    """from_multihead folds a readout bias c (one more unit relu(1) c) and an out_proj bias
    (before the ReLU): the folded module answers like the biased one."""
    small = inp.cases[-1]
    with torch.no_grad():
        y = inp.biased(small.Z)
        err = float((inp.folded(small.Z).reshape(y.shape) - y).abs().max())
    rnd = replace(small.rounding, scale=float(y.abs().max()) + 1.0)
    return at_most(err, 0.0, rnd, detail=f"{small.name}, c = 0.25, out_proj bias in [-0.1, 0.1]")


def _forgot_head_dim_scale(mt: PracticalTransformer) -> PracticalTransformer:
    """torch divides each head's logits by sqrt(head_dim): an exporter that does not pre-multiply
    the query projection by sqrt(D_e) attends too softly."""
    mt = copy.deepcopy(mt)
    with torch.no_grad():
        mt.projection_weights()[0].div_(math.sqrt(mt.D_e))
    return mt


def _heads_swapped(mt: PracticalTransformer) -> PracticalTransformer:
    """The key projection blocks of heads 0 and 1 exchanged (an off-by-one in the reshape)."""
    mt = copy.deepcopy(mt)
    with torch.no_grad():
        Wk, D = mt.projection_weights()[1], mt.D_e
        if Wk.shape[0] >= 2 * D:
            Wk[: 2 * D] = torch.cat([Wk[D : 2 * D].clone(), Wk[:D].clone()])
    return mt


def _transposed_qk(merged: MergedAttention) -> MergedAttention:
    """A loader that reads each head's W_QK key-left (transposed)."""
    merged = copy.deepcopy(merged)
    with torch.no_grad():
        merged.W_QK.copy_(merged.W_QK.transpose(-1, -2).clone())
    return merged


def _every_export(slip):
    """A fault applying ``slip`` to every reloaded nn.MultiheadAttention module (copies)."""

    def apply(inp: ExportInputs, ctx: Context) -> ExportInputs:
        cases = tuple(replace(c, exported=slip(c.exported)) for c in inp.cases)
        return replace(inp, cases=cases, float32=tuple((h, slip(m)) for h, m in inp.float32))

    return apply


def _merged_transposed(inp: ExportInputs, ctx: Context) -> ExportInputs:
    return replace(inp, cases=tuple(replace(c, merged=_transposed_qk(c.merged)) for c in inp.cases))


def _biases_dropped(inp: ExportInputs, ctx: Context) -> ExportInputs:
    """A fold that drops the biases (the unbiased module's fold stands in for the biased one's)."""
    return replace(inp, folded=from_multihead(inp.cases[-1].exported))


EXPORTED, MERGED = "nn.MultiheadAttention = built", "reloaded merged = built"
FOLDED = "folded back = built"
FLOAT32, BIASES = "float32 loaders = built", "biases folded"

register(
    Claim(
        id="export-roundtrip",
        ref=Ref("Appendix A.1", "Appendix A.1"),
        statement="a saved construction reloaded (weights_only) into nn.MultiheadAttention, and folded "
        "back, gives the built module's outputs",
        inputs=export_inputs,
        checks=[
            Check(EXPORTED, exported_matches),
            Check(MERGED, merged_matches),
            Check(FOLDED, folded_matches),
            Check(FLOAT32, float32_matches),
            Check(BIASES, biases_fold),
        ],
        faults=[
            Fault(
                "exporter forgets torch's 1/sqrt(head_dim)",
                _every_export(_forgot_head_dim_scale),
                breaks=(EXPORTED, FOLDED, FLOAT32),
            ),
            Fault(
                "two heads' key blocks swapped",
                _every_export(_heads_swapped),
                breaks=(EXPORTED, FOLDED, FLOAT32),
            ),
            Fault("W_QK read transposed", _merged_transposed, breaks=(MERGED,)),
            Fault("fold drops the biases", _biases_dropped, breaks=(BIASES,)),
        ],
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
