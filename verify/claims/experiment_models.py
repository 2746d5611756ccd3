"""Appendix E (Figure 1): the experiments' Transformer, bidirectional GRU and encoded FFN compute
the published equations (protocol in docs/experiments.md)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Callable

import torch

from qstr.constructions.experiment_models import PracticalRNN, PracticalTransformer, build_practical
from qstr.constructions.published_models import EncodedFFN
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_least, at_most, edited, replaced
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

EM_N, EM_D, EM_Q, EM_DE = 6, 2, 2, 4  # prompt length, token dim, slots, code width: D_e = 14
EM_H, EM_REACH = 16, 1e-6  # hidden size of the GRU that is run; least reach of the other end
F64 = torch.float64

claim = register(
    Claim(
        "experiment-models",
        Ref("Appendix E (Figure 1)"),
        statement="the experiments' Transformer, bidirectional GRU and FFNs have the documented "
        "sizes (parameter counts = closed form) and compute what they are documented to (GRU "
        "equations, softmax(z^T W_QK z), MLP of vec z)",
        builds=(build_practical, EncodedFFN),
        derivation="docs/experiments.md",
    )
)


@claim.bounds_with
def gru_step(gi, gh, h: torch.Tensor) -> torch.Tensor:
    """One GRU step from the input and hidden gate pre-activations (r, u, n chunks):
    r, u = sigmoid(.), n = tanh(W_n z + b_n + r (U_n h + c_n)), h' = (1 - u) n + u h."""
    r, u = torch.sigmoid(gi[0] + gh[0]), torch.sigmoid(gi[1] + gh[1])
    return (1 - u) * torch.tanh(gi[2] + r * gh[2]) + u * h


@claim.bounds_with
def merged_qk(Wq: torch.Tensor, Wk: torch.Tensor, q: int, D: int) -> torch.Tensor:
    """A_h = Q_h^T K_h / sqrt(D_e), Q_h the sum of head h's q query tiles (Appendix A.1)."""
    Q = Wq.reshape(q, D, q, D).sum(2)
    return Q.transpose(1, 2) @ Wk.reshape(q, D, D) / math.sqrt(D)


@claim.bounds_with
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
    gru_step: Callable = gru_step  # h' from the gate pre-activations
    merged_qk: Callable[[torch.Tensor, torch.Tensor, int, int], torch.Tensor] = merged_qk
    vec: Callable[[torch.Tensor], torch.Tensor] = vec_tokens  # (B, N, D_e) -> (B, N D_e)


@claim.inputs
def models_inputs(ctx: Context) -> ModelsInputs:
    """The models at N = 6, d = 2, q = 2, d_e = 4 (D_e = 14); the GRU at hidden 16."""
    sizes, D_e = dict(N=EM_N, d=EM_D, q=EM_Q, d_e=EM_DE), EM_D + (EM_Q + 1) * EM_DE

    def gen(name: str) -> torch.Generator:
        return ctx.generator(f"experiment-models/{name}")

    tr = build_practical("transformer", **sizes, generator=gen("transformer"), dtype=F64)
    rnn = build_practical("rnn", **sizes, hidden=EM_H, generator=gen("rnn"), dtype=F64)
    encoded = EncodedFFN(EM_N, D_e, generator=gen("encoded"), dtype=F64)
    return ModelsInputs(tr, rnn, encoded, torch.randn(2, EM_N, D_e, generator=gen("Z"), dtype=F64))


@claim.bounds_with
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


@claim.check("GRU = its equations", evidence="built")
def gru_matches_equations(inp: ModelsInputs) -> Verdict:
    """Figure 1's bidirectional GRU computes the GRU equations in both directions."""
    rnn = inp.rnn
    with torch.no_grad():
        ref = gru_reference(rnn.rnn, rnn.readout, inp.Z, inp.gru_step)
        gap = _gap(rnn(inp.Z), ref)
    rnd = _rounding(inp.Z.shape[1] * (rnn.D_in + 2 * EM_H), ref, "N (D_in + 2H) eps (|y|max + 1)")
    return at_most(gap, 0.0, rnd, detail=f"hidden {EM_H}, N={inp.Z.shape[1]}")


@claim.check("GRU reaches both ends", evidence="built")
def gru_reaches_both_ends(inp: ModelsInputs) -> Verdict:
    """Bidirectional: y_1 changes when z_N does and y_N when z_1 does (the smaller change)."""
    Zl, Zf = inp.Z.clone(), inp.Z.clone()
    Zl[:, -1] += 1.0
    Zf[:, 0] += 1.0
    with torch.no_grad():
        y = inp.rnn(inp.Z)
        first, last = _gap(inp.rnn(Zl)[:, 0], y[:, 0]), _gap(inp.rnn(Zf)[:, -1], y[:, -1])
    detail = f"|dy_1| when z_N moves {first:.3g}, |dy_N| when z_1 moves {last:.3g}"
    return at_least(min(first, last), EM_REACH, detail=detail)


@claim.check("attention = softmax(z^T A z)", evidence="built")
def attention_is_softmax(inp: ModelsInputs) -> Verdict:
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


@claim.check("encoded FFN = MLP(vec z)", evidence="built")
def encoded_ffn_is_mlp(inp: ModelsInputs) -> Verdict:
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
    rnd = _rounding(n, ref, "(sum of fan-ins + layers) eps (|y|max + 1)")
    return at_most(gap, 0.0, rnd, detail=f"widths {[L.out_features for L in lins]}")


def backward_silenced(rnn: PracticalRNN) -> PracticalRNN:
    """A copy of the GRU whose backward direction is silenced: y_1 no longer sees z_N."""
    rnn = copy.deepcopy(rnn)
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(rnn.rnn, name + "_reverse").zero_()
    return rnn


def update_swapped(gi, gh, h: torch.Tensor) -> torch.Tensor:
    """The GRU equations ported with the other update convention: h' = u n + (1 - u) h."""
    r, u = torch.sigmoid(gi[0] + gh[0]), torch.sigmoid(gi[1] + gh[1])
    return u * torch.tanh(gi[2] + r * gh[2]) + (1 - u) * h


claim.fault(
    "backward GRU silenced (unidirectional)",
    breaks=gru_reaches_both_ends,
    apply=edited(rnn=backward_silenced),
)
claim.fault(
    "GRU update convention swapped: h' = u n + (1 - u) h",
    breaks=gru_matches_equations,
    apply=replaced(gru_step=update_swapped),
)
claim.fault(
    "GRU gates read in Keras's order (u, r, n)",
    breaks=gru_matches_equations,
    apply=replaced(
        gru_step=lambda gi, gh, h: gru_step((gi[1], gi[0], gi[2]), (gh[1], gh[0], gh[2]), h)
    ),
)
claim.fault(
    "attention logits without 1/sqrt(D_e)",
    breaks=attention_is_softmax,
    apply=replaced(merged_qk=lambda Wq, Wk, q, D: merged_qk(Wq, Wk, q, D) * math.sqrt(D)),
)
# queries read from the key weights and keys from the query's: A_h transposed
claim.fault(
    "keys and queries swapped",
    breaks=attention_is_softmax,
    apply=replaced(merged_qk=lambda Wq, Wk, q, D: merged_qk(Wq, Wk, q, D).transpose(1, 2)),
)
# vec taken column by column (coordinate-major) where the FFN reads token by token
claim.fault(
    "tokens read coordinate-major (vec of Z^T)",
    breaks=encoded_ffn_is_mlp,
    apply=replaced(vec=lambda Z: Z.transpose(1, 2).flatten(1)),
)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: f"N = 6, d = 2, q = 2, encodings {tuple(inp.Z.shape)}; the GRU at hidden 16"
)
