"""Claims about the paper's experiments (Appendix E): Figure 2, trained attention takes the block shape of
Lemma 11's construction (Equation A.2). Protocol: docs/experiments.md."""
from __future__ import annotations

import functools

import torch

from qstr.constructions.codes import build_codebook
from qstr.constructions.encoding import transformer_encoding
from qstr.constructions.layout import token_layout
from qstr.constructions.links import make_link
from qstr.constructions.models import PracticalTransformer
from qstr.constructions.task import QSTR
from qstr.verify.registry import Claim, Context, Outcome, register
from qstr.verify.training import fit_online

F2_D, F2_BLOCK, F2_DIAG = 4, 0.9, 3.0  # d; least share of the block; least diagonal share / chance


def _f2_sizes(ctx: Context):
    """(N, online AdamW steps of 64 fresh prompts)."""
    return ctx.pick(quick=(16, 300), full=(32, 1500), gpu=(100, 3000))


@functools.lru_cache(maxsize=2)
def _trained(ctx: Context):
    """W_Q^T W_K of a one-head nn.MultiheadAttention (Figure 1's Transformer) before and after online AdamW
    on 1STR (linear link, q = 1, experimental codes, lr 1e-3, weight decay 0.2), and the code width d_e."""
    N, steps = _f2_sizes(ctx)
    task = QSTR(N=N, d=F2_D, link=make_link("linear", 1, F2_D, generator=ctx.generator(200)).to(ctx.device))
    book = build_codebook(N, kind="experimental", generator=ctx.generator(201), dtype=torch.float32,
                          device=ctx.device)

    def batch(B, gen):
        p = task.sample(B, generator=gen, device=ctx.device, dtype=torch.float32)
        return transformer_encoding(p.x, p.t, book.omega), p.y

    model = PracticalTransformer(F2_D + 2 * book.d_e, 1, width=100, generator=ctx.generator(202),
                                 dtype=torch.float32, device=ctx.device)
    before = model.merged_qk().detach().clone()
    fit_online(model, batch, steps=steps, lr=1e-3, weight_decay=0.2, generator=ctx.generator(203, ctx.device))
    with torch.no_grad():
        x, y = batch(1024, ctx.generator(204, ctx.device))
        mse = float(((model(x) - y) ** 2).mean())
    return before, model.merged_qk().detach().clone(), book.d_e, mse


def _blocks(A: torch.Tensor, d_e: int, query: str = "slot0", key: str = "pos") -> dict:
    """Share of ||A||_F^2 in the (query, key) block (rows: query), its diagonal's share of the block, and the
    shares of a matrix without structure (block size / matrix size, 1 / d_e)."""
    lay = token_layout(F2_D, 1, d_e)
    M = A[0].detach().double()
    blk = M[lay[query], lay[key]]
    mass = float((blk ** 2).sum())
    return {"block": mass / float((M ** 2).sum()), "chance": d_e * d_e / lay.dim ** 2,
            "diag": float((torch.diagonal(blk) ** 2).sum()) / mass, "chance_diag": 1 / d_e}


def _figure2(ctx: Context, which: str = "trained", query: str = "slot0", key: str = "pos") -> Outcome:
    """The (query, key) block holds >= F2_BLOCK of the mass and its diagonal >= F2_DIAG x chance."""
    before, after, d_e, mse = _trained(ctx)
    b = _blocks(after if which == "trained" else before, d_e, query, key)
    N, steps = _f2_sizes(ctx)
    holds = b["block"] >= F2_BLOCK and b["diag"] >= F2_DIAG * b["chance_diag"]
    return Outcome(measured=f"{query} x {key} block {b['block']:.3f} (chance {b['chance']:.3f}), "
                            f"diagonal {b['diag']:.3f} (chance {b['chance_diag']:.3f})",
                   bound=f"block >= {F2_BLOCK}, diagonal >= {F2_DIAG:g} x chance", holds=bool(holds),
                   value=b["block"], limit=F2_BLOCK, dtype="float32",
                   detail=f"{which} W_Q^T W_K (query left) of one nn.MultiheadAttention head, N={N}, d={F2_D}, "
                          f"d_e={d_e}, {steps} AdamW steps of 64 fresh 1STR prompts; test MSE {mse:.3f} (Var y = 1); "
                          f"holds means value >= limit; shares of float32 sums, no rounding term (margins >= 1e-2, eps 1.2e-7)")


def _figure2_falsifier(ctx: Context) -> Outcome:
    """The same test on the transposed block (a key-left reading of W_Q^T W_K), and on the untrained matrix."""
    transposed, untrained = _figure2(ctx, query="pos", key="slot0"), _figure2(ctx, which="untrained")
    return Outcome(measured=f"transposed: {transposed.measured}; untrained: {untrained.measured}",
                   bound=transposed.bound, holds=transposed.holds or untrained.holds,
                   detail=f"{transposed.detail} | {untrained.detail}", dtype="float32")


register(Claim(
    id="figure-2", ref_seed="Figure 2 (Eq. A.2)", ref_conference="Figure 2 (Eq. A.2)",
    statement="trained attention takes Lemma 11's shape: W_Q^T W_K concentrates on the query-slot x key-position "
              "block, with a dominant diagonal",
    check=_figure2, falsifier=_figure2_falsifier,
    falsifier_statement="the transposed block (key-left reading), and the matrix before training, must fail the "
                        "same test",
))
