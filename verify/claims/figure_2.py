"""Figure 2 (Eq. A.2): trained attention takes the block shape of Lemma 11's construction
(Appendix E; protocol in docs/experiments.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict

import torch

from qstr.constructions.codes import build_codebook
from qstr.constructions.encoding import transformer_encoding
from qstr.constructions.experiment_models import PracticalTransformer
from qstr.constructions.layout import token_layout
from qstr.constructions.links import make_link
from qstr.constructions.task import QSTR
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_least, fields_edited
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding
from qstr.verify.training import OnlineFit, fit_online

F2_D, F2_BLOCK, F2_DIAG = 4, 0.9, 3.0  # d; least share of the block; least diagonal share / chance

claim = register(
    Claim(
        "figure-2",
        Ref("Figure 2 (Eq. A.2)"),
        statement="trained attention takes Lemma 11's shape: W_Q^T W_K concentrates on the "
        "query-slot x key-position block, with a dominant diagonal",
        builds=(PracticalTransformer, fit_online),
        derivation="docs/experiments.md",
    )
)


@dataclass(frozen=True)
class Figure2Inputs:
    """W_Q^T W_K of one nn.MultiheadAttention head after training, the (query, key) block read."""

    merged_qk: torch.Tensor  # (1, D_e, D_e), query left
    d_e: int
    query: str
    key: str
    untrained: torch.Tensor  # the same matrix at initialisation
    training: str  # how it was trained, and its test MSE (Var y = 1)


@claim.inputs
def figure2_inputs(ctx: Context) -> Figure2Inputs:
    """Online AdamW on 1STR (linear link, q = 1, experimental codes, lr 1e-3, weight decay 0.2)."""
    N, steps = ctx.pick(quick=(16, 300), full=(32, 1500), gpu=(100, 3000))
    link = make_link("linear", 1, F2_D, generator=ctx.generator("figure-2/link"))
    task = QSTR(N=N, d=F2_D, link=link.to(ctx.device))
    book = build_codebook(
        N, kind="experimental", generator=ctx.generator("figure-2/codes"), dtype=torch.float32
    ).to(device=ctx.device)  # the same codes everywhere

    def batch(B, gen):
        p = task.sample(B, generator=gen, device=ctx.device, dtype=torch.float32)
        return transformer_encoding(p.x, p.t, book.omega), p.y

    init, f32 = ctx.generator("figure-2/init"), dict(dtype=torch.float32, device=ctx.device)
    model = PracticalTransformer(F2_D + 2 * book.d_e, 1, width=100, generator=init, **f32)
    before = model.merged_qk().detach().clone()
    fit = OnlineFit(steps, lr=1e-3, weight_decay=0.2)
    fit_online(model, batch, fit, generator=ctx.generator("figure-2/prompts", device=ctx.device))
    with torch.no_grad():
        x, y = batch(1024, ctx.generator("figure-2/test", device=ctx.device))
        mse = float(((model(x) - y) ** 2).mean())
    trained = f"N={N}, d={F2_D}, d_e={book.d_e}, {steps} AdamW steps; test MSE {mse:.3f}"
    after = model.merged_qk().detach().clone()
    return Figure2Inputs(after, book.d_e, "slot0", "pos", before, trained)


@claim.bounds_with
def block_shares(A: torch.Tensor, d_e: int, query: str = "slot0", key: str = "pos") -> Dict:
    """Share of ||A||_F^2 in the (query, key) block (rows: query), its diagonal's share of the
    block, and the shares of a matrix without structure (block / matrix size, 1 / d_e)."""
    lay = token_layout(F2_D, 1, d_e)
    M = A[0].detach().double()
    blk = M[lay[query], lay[key]]
    mass = float((blk**2).sum())
    return {
        "block": mass / float((M**2).sum()),
        "chance": d_e * d_e / lay.dim**2,
        "diag": float((torch.diagonal(blk) ** 2).sum()) / mass,
        "chance_diag": 1 / d_e,
    }


def _share_at_least(inp: Figure2Inputs, share: str, least: Callable[[Dict], float]) -> Verdict:
    """block_shares()[share] >= least(shares); shares of sums of D_e^2 squares, in float64 from
    the float32 weights."""
    b = block_shares(inp.merged_qk, inp.d_e, inp.query, inp.key)
    detail = (
        f"{inp.query} x {inp.key} block of W_Q^T W_K (query left), {inp.training} (Var y = 1); "
        f"chance shares: block {b['chance']:.3f}, diagonal {b['chance_diag']:.3f}"
    )
    dim = inp.merged_qk.shape[-1]
    rnd = Rounding(n=dim * dim, scale=1.0, what="D_e^2 eps (shares <= 1)")
    return at_least(b[share], least(b), rnd, detail=detail, dtype="float32")


@claim.check("block share >= 0.9", evidence="built")
def block_holds_mass(inp: Figure2Inputs) -> Verdict:
    """Figure 2 (Eq. A.2): the query-slot x key-position block holds >= 0.9 of ||W_QK||_F^2."""
    return _share_at_least(inp, "block", lambda b: F2_BLOCK)


@claim.check("diagonal >= 3 x chance", evidence="built")
def diagonal_dominates(inp: Figure2Inputs) -> Verdict:
    """Figure 2 (Eq. A.2): the block's diagonal holds >= 3 x its chance share 1 / d_e."""
    return _share_at_least(inp, "diag", lambda b: F2_DIAG * b["chance_diag"])


claim.fault(
    "the transposed block (key-left reading)",
    breaks=block_holds_mass,
    apply=fields_edited(query=lambda inp: inp.key, key=lambda inp: inp.query),
)
claim.fault(
    "the matrix before training",
    breaks=(block_holds_mass, diagonal_dominates),
    apply=fields_edited(merged_qk=lambda inp: inp.untrained),
)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: inp.training
)
