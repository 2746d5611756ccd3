"""Claims about the paper's experiments (Appendix E, protocol in docs/experiments.md): Figure 2,
trained attention takes the block shape of Lemma 11's construction (Equation A.2), and Figure 1's
models compute what they are documented to."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Callable, Dict

import torch

from qstr.constructions.codes import build_codebook
from qstr.constructions.encoding import transformer_encoding
from qstr.constructions.experiment_models import PracticalRNN, PracticalTransformer, build_practical
from qstr.constructions.layout import token_layout
from qstr.constructions.links import make_link
from qstr.constructions.published_models import EncodedFFN
from qstr.constructions.task import QSTR
from qstr.verify.claim import Check, Claim, Context, Fault, Ref, Verdict, at_least, at_most
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding
from qstr.verify.training import OnlineFit, fit_online

F2_D, F2_BLOCK, F2_DIAG = 4, 0.9, 3.0  # d; least share of the block; least diagonal share / chance


@dataclass(frozen=True)
class Figure2Inputs:
    """W_Q^T W_K of one nn.MultiheadAttention head after training, the (query, key) block read."""

    merged_qk: torch.Tensor  # (1, D_e, D_e), query left
    d_e: int
    query: str
    key: str
    untrained: torch.Tensor  # the same matrix at initialisation
    N: int
    steps: int
    mse: float


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

    model = PracticalTransformer(
        F2_D + 2 * book.d_e,
        1,
        width=100,
        generator=ctx.generator("figure-2/init"),
        dtype=torch.float32,
        device=ctx.device,
    )
    before = model.merged_qk().detach().clone()
    fit_online(
        model,
        batch,
        OnlineFit(steps, lr=1e-3, weight_decay=0.2),
        generator=ctx.generator("figure-2/prompts", device=ctx.device),
    )
    with torch.no_grad():
        x, y = batch(1024, ctx.generator("figure-2/test", device=ctx.device))
        mse = float(((model(x) - y) ** 2).mean())
    return Figure2Inputs(
        model.merged_qk().detach().clone(), book.d_e, "slot0", "pos", before, N, steps, mse
    )


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


def _shares_rounding(inp: Figure2Inputs) -> Rounding:
    """Shares of sums of D_e^2 squares, in float64 from the float32 weights."""
    dim = inp.merged_qk.shape[-1]
    return Rounding(n=dim * dim, scale=1.0, what="D_e^2 eps (shares <= 1)")


def _where(inp: Figure2Inputs, b: Dict) -> str:
    return (
        f"{inp.query} x {inp.key} block of W_Q^T W_K (query left), N={inp.N}, d={F2_D}, "
        f"d_e={inp.d_e}, {inp.steps} AdamW steps; test MSE {inp.mse:.3f} (Var y = 1); "
        f"chance shares: block {b['chance']:.3f}, diagonal {b['chance_diag']:.3f}"
    )


def block_holds_mass(inp: Figure2Inputs, ctx: Context) -> Verdict:
    """Figure 2 (Eq. A.2): the query-slot x key-position block holds >= 0.9 of ||W_QK||_F^2."""
    b = block_shares(inp.merged_qk, inp.d_e, inp.query, inp.key)
    return at_least(
        b["block"], F2_BLOCK, _shares_rounding(inp), detail=_where(inp, b), dtype="float32"
    )


def diagonal_dominates(inp: Figure2Inputs, ctx: Context) -> Verdict:
    """Figure 2 (Eq. A.2): the block's diagonal holds >= 3 x its chance share 1 / d_e."""
    b = block_shares(inp.merged_qk, inp.d_e, inp.query, inp.key)
    return at_least(
        b["diag"],
        F2_DIAG * b["chance_diag"],
        _shares_rounding(inp),
        detail=_where(inp, b),
        dtype="float32",
    )


def _transposed(inp: Figure2Inputs, ctx: Context) -> Figure2Inputs:
    """The key-left reading of W_Q^T W_K: the position x slot block."""
    return replace(inp, query=inp.key, key=inp.query)


def _untrained(inp: Figure2Inputs, ctx: Context) -> Figure2Inputs:
    """The matrix before training."""
    return replace(inp, merged_qk=inp.untrained)


BLOCK, DIAG = "block share >= 0.9", "diagonal >= 3 x chance"

register(
    Claim(
        id="figure-2",
        ref=Ref("Figure 2 (Eq. A.2)", "Figure 2 (Eq. A.2)"),
        statement="trained attention takes Lemma 11's shape: W_Q^T W_K concentrates on the "
        "query-slot x key-position block, with a dominant diagonal",
        inputs=figure2_inputs,
        checks=[Check(BLOCK, block_holds_mass), Check(DIAG, diagonal_dominates)],
        faults=[
            Fault("the transposed block (key-left reading)", _transposed, breaks=(BLOCK,)),
            Fault("the matrix before training", _untrained, breaks=(BLOCK, DIAG)),
        ],
        builds=(PracticalTransformer, fit_online),
        bounds=(block_shares,),
        derivation="docs/experiments.md",
    )
)


# ------------------------------------------------------------ the experiment models (Appendix E)

EM_N, EM_D, EM_Q, EM_DE = 6, 2, 2, 4  # prompt length, token dim, slots, code width: D_e = 14
EM_H, EM_REACH = 16, 1e-6  # hidden size of the GRU that is run; least reach of the other end
F64 = torch.float64


def gru_step(gi, gh, h: torch.Tensor) -> torch.Tensor:
    """One GRU step from the input and hidden gate pre-activations (r, u, n chunks):
    r, u = sigmoid(.), n = tanh(W_n z + b_n + r (U_n h + c_n)), h' = (1 - u) n + u h."""
    r, u = torch.sigmoid(gi[0] + gh[0]), torch.sigmoid(gi[1] + gh[1])
    return (1 - u) * torch.tanh(gi[2] + r * gh[2]) + u * h


def merged_qk(Wq: torch.Tensor, Wk: torch.Tensor, q: int, D: int) -> torch.Tensor:
    """A_h = Q_h^T K_h / sqrt(D_e), Q_h the sum of head h's q query tiles (Appendix A.1)."""
    Q = Wq.reshape(q, D, q, D).sum(2)
    return Q.transpose(1, 2) @ Wk.reshape(q, D, D) / math.sqrt(D)


def vec_tokens(Z: torch.Tensor) -> torch.Tensor:
    """vec(z_1, ..., z_N): the tokens one after another, (B, N D_e)."""
    return torch.cat(list(Z.unbind(1)), -1)


@dataclass(frozen=True)
class ModelsInputs:
    """Figure 1's Transformer, a bidirectional GRU, the encoded FFN (float64) and tokens Z; the
    published equations they are compared with (GRU step, merged W_QK, vec of the tokens)."""

    transformer: PracticalTransformer
    rnn: PracticalRNN
    encoded: EncodedFFN
    Z: torch.Tensor
    gru_step: Callable  # h' from the gate pre-activations
    merged_qk: Callable[[torch.Tensor, torch.Tensor, int, int], torch.Tensor]  # A_h, (q, D, D)
    vec: Callable[[torch.Tensor], torch.Tensor]  # (B, N, D_e) -> (B, N D_e)


def models_inputs(ctx: Context) -> ModelsInputs:
    """The models at N = 6, d = 2, q = 2, d_e = 4 (D_e = 14); the GRU at hidden 16."""
    N, d, q, d_e = EM_N, EM_D, EM_Q, EM_DE
    D_e = d + (q + 1) * d_e
    gen = lambda name: ctx.generator(f"experiment-models/{name}")  # noqa: E731
    tr = build_practical(
        "transformer", N=N, d=d, q=q, d_e=d_e, generator=gen("transformer"), dtype=F64
    )
    rnn = build_practical(
        "rnn", N=N, d=d, q=q, d_e=d_e, hidden=EM_H, generator=gen("rnn"), dtype=F64
    )
    encoded = EncodedFFN(N, D_e, generator=gen("encoded"), dtype=F64)
    Z = torch.randn(2, N, D_e, generator=gen("Z"), dtype=F64)
    return ModelsInputs(tr, rnn, encoded, Z, gru_step, merged_qk, vec_tokens)


def gru_reference(
    rnn: torch.nn.GRU, readout: torch.nn.Linear, Z: torch.Tensor, step: Callable = gru_step
) -> torch.Tensor:
    """y_i = readout(h_fwd_i, h_bwd_i), both directions having read z_i, h' = step(gates, h)."""

    def run(sfx, order):
        W, U = getattr(rnn, "weight_ih_l0" + sfx), getattr(rnn, "weight_hh_l0" + sfx)
        b, c = getattr(rnn, "bias_ih_l0" + sfx), getattr(rnn, "bias_hh_l0" + sfx)
        h, out = Z.new_zeros(Z.shape[0], rnn.hidden_size), [None] * Z.shape[1]
        for i in order:
            h = step((Z[:, i] @ W.T + b).chunk(3, -1), (h @ U.T + c).chunk(3, -1), h)
            out[i] = h
        return torch.stack(out, 1)

    N = Z.shape[1]
    both = torch.cat([run("", range(N)), run("_reverse", range(N - 1, -1, -1))], -1)
    return (both @ readout.weight.T + readout.bias).squeeze(-1)


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


def _rounding(n: int, y: torch.Tensor, what: str) -> Rounding:
    return Rounding(n=n, scale=float(y.abs().max()) + 1.0, what=what)


def gru_matches_equations(inp: ModelsInputs, ctx: Context) -> Verdict:
    """Figure 1's bidirectional GRU computes the GRU equations in both directions."""
    rnn = inp.rnn
    with torch.no_grad():
        ref = gru_reference(rnn.rnn, rnn.readout, inp.Z, inp.gru_step)
        gap = _gap(rnn(inp.Z), ref)
    rnd = _rounding(inp.Z.shape[1] * (rnn.D_in + 2 * EM_H), ref, "N (D_in + 2H) eps (|y|max + 1)")
    return at_most(gap, 0.0, rnd, detail=f"hidden {EM_H}, N={inp.Z.shape[1]}")


def gru_reaches_both_ends(inp: ModelsInputs, ctx: Context) -> Verdict:
    """Bidirectional: y_1 changes when z_N does and y_N when z_1 does (the smaller change)."""
    Zl, Zf = inp.Z.clone(), inp.Z.clone()
    Zl[:, -1] += 1.0
    Zf[:, 0] += 1.0
    with torch.no_grad():
        y = inp.rnn(inp.Z)
        first, last = _gap(inp.rnn(Zl)[:, 0], y[:, 0]), _gap(inp.rnn(Zf)[:, -1], y[:, -1])
    return at_least(
        min(first, last),
        EM_REACH,
        detail=f"|dy_1| when z_N moves {first:.3g}, |dy_N| when z_1 moves {last:.3g}",
    )


def attention_is_softmax(inp: ModelsInputs, ctx: Context) -> Verdict:
    """The Transformer's attention weights are softmax_j(z_i^T A_h z_j), A_h = Q_h^T K_h / sqrt(D_e)
    (Appendix A.1), with A_h computed here from the projection weights."""
    tr = inp.transformer
    Wq, Wk, _ = tr.projection_weights()
    D = tr.D_e
    with torch.no_grad():
        A = inp.merged_qk(Wq, Wk, tr.q, D)
        ref = torch.softmax(torch.einsum("bid,hde,bje->bhij", inp.Z, A, inp.Z), -1)
        gap = _gap(tr.attention(inp.Z), ref)
    rnd = Rounding(n=2 * tr.q * D + inp.Z.shape[1], scale=1.0, what="(2 q D_e + N) eps")
    return at_most(gap, 0.0, rnd, detail=f"q={tr.q} heads, D_e={D}")


def encoded_ffn_is_mlp(inp: ModelsInputs, ctx: Context) -> Verdict:
    """The encoded FFN is the published MLP on vec(z_1, ..., z_N), layer by layer."""
    net = inp.encoded.net
    with torch.no_grad():
        u = inp.vec(inp.Z)
        lins = [m for m in net if isinstance(m, torch.nn.Linear)]
        for L in lins[:-1]:
            u = torch.relu(u @ L.weight.T + L.bias)
        ref = u @ lins[-1].weight.T + lins[-1].bias
        gap = _gap(inp.encoded(inp.Z).reshape(ref.shape), ref)
    n = sum(L.in_features for L in lins) + len(lins)
    return at_most(
        gap,
        0.0,
        _rounding(n, ref, "(sum of fan-ins + layers) eps (|y|max + 1)"),
        detail=f"widths {[L.out_features for L in lins]}",
    )


def _unidirectional(inp: ModelsInputs, ctx: Context) -> ModelsInputs:
    """A GRU whose backward direction is silenced: y_1 no longer sees z_N."""
    rnn = copy.deepcopy(inp.rnn)
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(rnn.rnn, name + "_reverse").zero_()
    return replace(inp, rnn=rnn)


def _update_swapped(inp: ModelsInputs, ctx: Context) -> ModelsInputs:
    """The GRU equations ported with the other update convention: h' = u n + (1 - u) h."""

    def step(gi, gh, h):
        r, u = torch.sigmoid(gi[0] + gh[0]), torch.sigmoid(gi[1] + gh[1])
        return u * torch.tanh(gi[2] + r * gh[2]) + (1 - u) * h

    return replace(inp, gru_step=step)


def _gates_in_keras_order(inp: ModelsInputs, ctx: Context) -> ModelsInputs:
    """torch's gate chunks (r, u, n) read in Keras's order (u, r, n)."""
    return replace(
        inp, gru_step=lambda gi, gh, h: gru_step((gi[1], gi[0], gi[2]), (gh[1], gh[0], gh[2]), h)
    )


def _unscaled(inp: ModelsInputs, ctx: Context) -> ModelsInputs:
    """Logits z_i^T Q^T K z_j without the 1/sqrt(D_e) of scaled dot-product attention."""
    return replace(inp, merged_qk=lambda Wq, Wk, q, D: merged_qk(Wq, Wk, q, D) * math.sqrt(D))


def _keys_queries_swapped(inp: ModelsInputs, ctx: Context) -> ModelsInputs:
    """Queries read from the key weights and keys from the query's: A_h transposed."""
    return replace(inp, merged_qk=lambda Wq, Wk, q, D: merged_qk(Wq, Wk, q, D).transpose(1, 2))


def _vec_by_coordinates(inp: ModelsInputs, ctx: Context) -> ModelsInputs:
    """vec taken column by column (coordinate-major) where the FFN reads token by token."""
    return replace(inp, vec=lambda Z: Z.transpose(1, 2).flatten(1))


GRU, REACH = "GRU = its equations", "GRU reaches both ends"
ATTENTION, ENCODED = "attention = softmax(z^T A z)", "encoded FFN = MLP(vec z)"

register(
    Claim(
        id="experiment-models",
        ref=Ref("Appendix E (Figure 1)", "Appendix E (Figure 1)"),
        statement="the experiments' Transformer, bidirectional GRU and FFNs have the documented sizes "
        "(parameter counts = closed form) and compute what they are documented to (GRU "
        "equations, softmax(z^T W_QK z), MLP of vec z)",
        inputs=models_inputs,
        checks=[
            Check(GRU, gru_matches_equations),
            Check(REACH, gru_reaches_both_ends),
            Check(ATTENTION, attention_is_softmax),
            Check(ENCODED, encoded_ffn_is_mlp),
        ],
        faults=[
            Fault("backward GRU silenced (unidirectional)", _unidirectional, breaks=(REACH,)),
            Fault(
                "GRU update convention swapped: h' = u n + (1 - u) h",
                _update_swapped,
                breaks=(GRU,),
            ),
            Fault(
                "GRU gates read in Keras's order (u, r, n)", _gates_in_keras_order, breaks=(GRU,)
            ),
            Fault("attention logits without 1/sqrt(D_e)", _unscaled, breaks=(ATTENTION,)),
            Fault("keys and queries swapped", _keys_queries_swapped, breaks=(ATTENTION,)),
            Fault(
                "tokens read coordinate-major (vec of Z^T)", _vec_by_coordinates, breaks=(ENCODED,)
            ),
        ],
        builds=(build_practical, EncodedFFN),
        bounds=(gru_reference, gru_step, merged_qk, vec_tokens),
        derivation="docs/experiments.md",
    )
)
