"""The export path users take: a construction saved as a plain state dict, reloaded with
``torch.load(weights_only=True)`` into ``nn.MultiheadAttention``, and folded back (Appendix A.1's
merged W_QK against separate W_Q, W_K, W_V)."""
from __future__ import annotations

import copy
import dataclasses
import io
import math
import os
import tempfile

import torch

from qstr.bounds.attention import lemma11, sparse_average_head
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.export import (construction_state, from_multihead, init_from_construction, load_construction_state,
                                       load_multihead, logical_parameters, to_multihead)
from qstr.constructions.links import make_link
from qstr.verify.legacy import Claim, Context, Outcome, register
from qstr.verify.rounding import Rounding

EX_N, EX_D = 128, 3


def _constructions(ctx: Context):
    """A certified Lemma 11 construction (teacher link, q = 3 heads) and the single averaging head."""
    net = make_link("teacher", 3, EX_D, generator=ctx.generator(50)).two_layer_net()
    l11 = lemma11(EX_N, EX_D, 3, net, eps=0.05, r_x=3.0, device=ctx.device)
    avg = sparse_average_head(EX_N, EX_D, 3, codebook=rs_hadamard_codebook(EX_N, mu=0.15, device=ctx.device),
                              r_x=3.0, device=ctx.device)  # alpha: the minimiser of its bound
    return [("lemma11 q=3", l11), ("sparse-average q=3", avg)]


def through_file(state: dict) -> dict:
    """``state`` through torch.save and torch.load(weights_only=True): what `qstr construct` writes and a user reads."""
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def saved_and_reloaded(cons):
    """(MergedAttention, PracticalTransformer) exactly as a user gets them from a saved file (the Appendix A.1
    export: ``construction_state`` :func:`through_file`)."""
    return load_construction_state(through_file(construction_state(cons)))


def through_path(state: dict, load, **kw):
    """``state`` written to a real file by torch.save (what `qstr construct` does) and read back by the public
    loader ``load(path, **kw)`` (torch.load(path, weights_only=True) inside)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "construction.pt")
        torch.save(state, path)
        return load(path, **kw)


def _heads_gap(merged, Z: torch.Tensor) -> float:
    """max |MergedAttention.heads(Z) - sum_j A[b, h, i, j] z_j| (Eq. A.1: each head averages the tokens)."""
    return float((merged.heads(Z) - torch.einsum("bhij,bjd->bihd", merged.attention(Z), Z)).abs().max())


def _small_lemma11(ctx: Context):
    """A small certified Lemma 11 construction (N = 16, d = 2, q = 2 heads, teacher link) and prompts for it."""
    net = make_link("teacher", 2, 2, generator=ctx.generator(55)).two_layer_net()
    cons = lemma11(16, 2, 2, net, eps=0.05, r_x=3.0, device=ctx.device)
    x = torch.randn(2, 16, 2, generator=ctx.generator(56, ctx.device), dtype=torch.float64, device=ctx.device)
    t = torch.randint(0, 16, (2, 16, 2), generator=ctx.generator(57, ctx.device), device=ctx.device)
    return cons, x, t


def _file_and_options(ctx: Context) -> tuple[bool, str]:
    """The other public ways to the built model (Appendix A.1), on a small construction: the file `qstr construct`
    writes read by load_multihead (float64, and float32 with its own allowance), init_from_construction(dtype=float32),
    a nonzero readout bias c and out_proj bias folded by from_multihead (c as one more ReLU unit relu(1) c, the
    out_proj bias before the ReLU; readout_bias='raise' refuses c), logical_parameters covering every parameter,
    and MergedAttention.heads = attention weights @ Z."""
    cons, x, t = _small_lemma11(ctx)
    with torch.no_grad():
        Z, ref = cons.encode(x, t), cons.predict(x, t)
    mt = through_path(construction_state(cons), load_multihead)
    mt32 = through_path(construction_state(cons), load_multihead, dtype=torch.float32)
    init32 = init_from_construction(cons, dtype=torch.float32)
    biased = copy.deepcopy(mt)
    with torch.no_grad():
        biased.readout.bias.fill_(0.25)
        E = biased.q * biased.D_e
        biased.mha.out_proj.bias = torch.nn.Parameter(torch.linspace(-0.1, 0.1, E, dtype=Z.dtype, device=Z.device))
        folded, merged = from_multihead(biased), from_multihead(mt)
        gaps = {"load_multihead(file)": float((mt(Z).reshape(ref.shape) - ref).abs().max()),
                "folded biases": float((folded(Z) - biased(Z)).abs().max()),
                "heads = A Z (random Z)": _heads_gap(merged, torch.randn(Z.shape, generator=ctx.generator(58),
                                                                        dtype=Z.dtype).to(Z.device))}
        gap32 = max(float((m(Z.float()).reshape(ref.shape).double() - ref).abs().max()) for m in (mt32, init32))
    gap32 = gap32 if all(p.dtype == torch.float32 for m in (mt32, init32) for p in m.parameters()) else math.inf
    count = sum(p.numel() for p in logical_parameters(biased).values())
    gaps["logical parameters vs module"] = abs(count - sum(p.numel() for p in biased.parameters()))
    gaps["extra unit for c"] = abs(folded.m - (merged.m + 1))
    try:
        from_multihead(biased, readout_bias="raise")
        gaps["readout_bias='raise' refuses c"] = math.inf
    except ValueError:
        gaps["readout_bias='raise' refuses c"] = 0.0
    rnd = Rounding(n=2 * (16 + merged.D_e * merged.H + merged.m), scale=float(ref.abs().max()) + 1.0,
                   what="2 (N + H D_e + m) eps (|y|max + 1)")
    tol32 = dataclasses.replace(rnd, dtype=torch.float32).term  # the same rounding count in float32
    ok = all(rnd.within(e, 0.0) for e in gaps.values()) and gap32 <= tol32
    return ok, ("small Lemma 11 (N=16, d=2, q=2) through the other public ways: "
                + ", ".join(f"{k} {e:.2g}" for k, e in gaps.items()) + f" ({rnd.term:.2g} allowed); float32 "
                f"(load_multihead(file, dtype), init_from_construction(dtype)) {gap32:.2g} (allowed {tol32:.2g})")


INIT_NOISE = 0.1


def _init_noise(cons, ctx: Context) -> tuple:
    """``init_from_construction(noise=s)``: every logical tensor P moves by s ||P||_F in relative Frobenius norm
    (each of the largest tensors within [0.8 s, 1.2 s]; there numel >= 100, so chi-square noise is under 15%),
    zero tensors stay zero, and noise 0 is the export itself. Returns (holds, text)."""
    exact = logical_parameters(init_from_construction(cons, noise=0.0))
    noisy = logical_parameters(init_from_construction(cons, noise=INIT_NOISE, generator=ctx.generator(53)))
    exported = logical_parameters(to_multihead(cons.model))
    with torch.no_grad():
        rel = {k: float((noisy[k] - P).norm() / P.norm()) for k, P in exact.items() if P.numel() >= 100 and P.norm() > 0}
    zeros_kept = all(bool((noisy[k] == 0).all()) for k, P in exact.items() if bool((P == 0).all()))
    same = all(torch.equal(exact[k], exported[k]) for k in exact)
    holds = bool(rel) and all(0.8 <= r / INIT_NOISE <= 1.2 for r in rel.values()) and zeros_kept and same
    return holds, (f"init_from_construction(noise={INIT_NOISE}): relative change " + ", ".join(
        f"{k} {r:.3f}" for k, r in rel.items()) + f"; zero tensors stay zero: {zeros_kept}; noise 0 = the export: {same}")


def _export(ctx: Context, slip=None) -> Outcome:
    """max |y(exported nn.MultiheadAttention) - y(built module)| and the same after folding back,
    against the rounding of the two forward passes. ``slip`` breaks the reloaded model (falsifier)."""
    B = ctx.pick(quick=2, full=32)
    rows, ok, worst, allowed = [], True, 0.0, math.inf
    for name, cons in _constructions(ctx):
        merged, mt = saved_and_reloaded(cons)
        if slip is not None:
            slip(mt)
        x = torch.randn(B, EX_N, EX_D, generator=ctx.generator(51, ctx.device), dtype=torch.float64,
                        device=ctx.device)
        t = torch.stack([torch.randperm(EX_N, generator=ctx.generator(52 + b, ctx.device), device=ctx.device)[:3]
                         .expand(EX_N, 3) for b in range(B)])  # distinct indices (the averaging head needs them)
        Z = cons.encode(x, t)
        with torch.no_grad():
            ref = cons.predict(x, t)
            outs = {"nn.MultiheadAttention": mt(Z), "reloaded merged": merged(Z), "folded back": from_multihead(mt)(Z)}
        scale = float(ref.abs().max()) + 1.0
        rnd = Rounding(n=2 * (EX_N + merged.D_e * merged.H + merged.m), scale=scale,
                       what="2 (N + H D_e + m) eps (|y|max + 1)")
        errs = {k: float((v.reshape(ref.shape) - ref).abs().max()) for k, v in outs.items()}
        ok = ok and all(rnd.within(e, 0.0) for e in errs.values()) and isinstance(mt.mha, torch.nn.MultiheadAttention)
        worst = max(worst, *errs.values())
        allowed = min(allowed, rnd.term)
        rows.append(f"{name}: " + ", ".join(f"{k} {e:.2g}" for k, e in errs.items()) + f" ({rnd.term:.2g} allowed)")
        if slip is None and not rows[1:]:  # the initialisation users train from, on the first construction
            init_ok, text = _init_noise(cons, ctx)
            ok &= init_ok
            rows.append(text)
            files_ok, text = _file_and_options(ctx)
            ok &= files_ok
            rows.append(text)
    return Outcome(measured=f"max |y_export - y_built| = {worst:.2g}", bound="<= rounding", holds=ok,
                   value=worst, limit=allowed,
                   detail=f"B={B}, N={EX_N}, saved and reloaded with weights_only=True; " + "; ".join(rows))


def _forgot_head_dim_scale(mt) -> None:
    """torch divides each head's logits by sqrt(head_dim): an exporter that does not pre-multiply the
    query projection by sqrt(D_e) attends too softly."""
    with torch.no_grad():
        mt.projection_weights()[0].div_(math.sqrt(mt.D_e))


def _heads_swapped(mt) -> None:
    """The key projection blocks of heads 0 and 1 exchanged (an off-by-one in the reshape)."""
    with torch.no_grad():
        Wk = mt.projection_weights()[1]
        D = mt.D_e
        if Wk.shape[0] >= 2 * D:
            Wk[:2 * D] = torch.cat([Wk[D:2 * D].clone(), Wk[:D].clone()])


def _export_falsifier(ctx: Context) -> Outcome:
    soft, swapped = _export(ctx, slip=_forgot_head_dim_scale), _export(ctx, slip=_heads_swapped)
    return Outcome(measured=f"no sqrt(D_e): {soft.measured}; heads swapped: {swapped.measured}", bound="<= rounding",
                   holds=soft.holds or swapped.holds, detail=f"{soft.detail} | {swapped.detail}")


register(Claim(
    id="export-roundtrip", ref_seed="Appendix A.1", ref_conference="Appendix A.1",
    statement="a saved construction reloaded (weights_only) into nn.MultiheadAttention, and folded back, "
              "gives the built module's outputs",
    check=_export, falsifier=_export_falsifier,
    falsifier_statement="an exporter that forgets torch's 1/sqrt(head_dim), or swaps two heads' key blocks, "
                        "must be caught",
))
