"""Appendix E (Figure 1): the experiments' Transformer, bidirectional GRU and FFNs, built at their
defaults, have the documented sizes and compute the published equations (docs/experiments.md)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Callable, Dict, Tuple

import torch

from qstr.constructions.experiment_models import (
    PracticalFFN,
    PracticalRNN,
    PracticalTransformer,
    build_practical,
)
from qstr.constructions.published_models import BiasedTransformer, EncodedFFN
from qstr.verify.claim import (
    Claim,
    Context,
    Ref,
    Verdict,
    at_least,
    at_most,
    edited,
    exact,
    replaced,
    worst,
)
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

EM_N, EM_D, EM_Q, EM_DE, EM_B = 6, 2, 2, 4, 2  # prompt length, d, q, d_e (D_e = 14), prompts
EM_NR = 4  # the GRU's prompt length: at hidden 500 q = 1000 a step reads 3M weights a direction
# Appendix E's sizes, as docs/experiments.md gives them: the Transformer's ReLU width, the GRU's
# hidden size per head (500 q per direction), the FFNs' hidden widths
APPENDIX_E_WIDTH, APPENDIX_E_GRU_PER_HEAD, APPENDIX_E_FFN = 100, 500, (1000, 1000)
# a one-directional GRU moves y_1 by exactly 0 when z_N moves; this floor stands 1e7 above
# float64 rounding of y (~1e-13): the check is qualitative, its ratio no slack of a paper bound
EM_REACH = 1e-6
F64 = torch.float64

claim = register(
    Claim(
        "experiment-models",
        Ref("Appendix E (Figure 1)"),
        statement="the experiments' Transformer, bidirectional GRU and FFNs, built at their "
        "defaults (width 100, GRU hidden 500 q, FFN (1000, 1000), the published code's biased "
        "Transformer), have the documented sizes (parameter counts = closed form) and compute "
        "what they are documented to (GRU equations, softmax(z^T W_QK z) with the library's "
        "merged_qk, the biased attention, MLP of vec z, the FFN's one-hot t)",
        builds=(build_practical, BiasedTransformer, EncodedFFN),
        derivation="docs/experiments.md",
    )
)


def _D_e(q: int) -> int:
    return EM_D + (q + 1) * EM_DE


@claim.bounds_with
def closed_form_counts(N: int, d: int, q: int, d_e: int) -> Dict[str, int]:
    """Parameters of each model at Appendix E's sizes, counted weight by weight: attention W_Q
    (qD x qD), W_K, W_V (qD x D), out-projection (qD x qD), ReLU layer, readout; GRU: 3 gates of
    H (D + H) weights and 2 x 3H biases a direction, readout from 2H; MLPs with biases."""
    D, W, H = d + (q + 1) * d_e, APPENDIX_E_WIDTH, APPENDIX_E_GRU_PER_HEAD * q
    E = q * D
    attention = E * E + E * D + E * D + E * E
    head = (E * W + W) + (W * 1 + 1)

    def mlp(widths):
        return sum(a * b + b for a, b in zip(widths[:-1], widths[1:], strict=True))

    return {
        "transformer": attention + head,
        "biased transformer": attention + (3 * E + E) + head,
        "GRU": 2 * (3 * H * D + 3 * H * H + 3 * H + 3 * H) + (2 * H + 1),
        "FFN on onehot(t)": mlp((N * d + N * q * N, *APPENDIX_E_FFN, N)),
        "encoded FFN": mlp((N * D, *APPENDIX_E_FFN, N)),
    }


@claim.bounds_with
def gru_step(gi, gh, h: torch.Tensor) -> torch.Tensor:
    """One GRU step from the input and hidden gate pre-activations (r, u, n chunks):
    r, u = sigmoid(.), n = tanh(W_n z + b_n + r (U_n h + c_n)), h' = (1 - u) n + u h."""
    r, u = torch.sigmoid(gi[0] + gh[0]), torch.sigmoid(gi[1] + gh[1])
    return (1 - u) * torch.tanh(gi[2] + r * gh[2]) + u * h


@claim.bounds_with
def vec_tokens(Z: torch.Tensor) -> torch.Tensor:
    """vec(z_1, ..., z_N): the tokens one after another, (B, N D_e)."""
    return torch.cat(list(Z.unbind(1)), -1)


@claim.bounds_with
def onehot_tuples(t: torch.Tensor, N: int) -> torch.Tensor:
    """vec(onehot(t)): for position i, then slot k, the indicator of t_ik in [N]; (B, N q N)."""
    return torch.eye(N, dtype=F64)[t].flatten(1)


@claim.bounds_with
def transformer_equations(tr: PracticalTransformer, Z: torch.Tensor, head_dim=None, biases=True):
    """y_i = a^T relu(W o_i + b) + c, o_i = W_O concat_h(sum_j softmax_j(<q_hi, k_hj> / sqrt(D_e))
    v_hj) + b_O, q_hi = (W_Q rows of h)(z_i, ..., z_i) + b_Q,h, k_hj = W_K,h z_j + b_K,h, v_hj =
    W_V,h z_j + b_V,h (Figure 1; the biases are the published code's, absent from the plain one)."""
    mha, D, q = tr.mha, tr.D_e, tr.q
    Wq, Wk, Wv = tr.projection_weights()
    b = mha.in_proj_bias if biases and mha.in_proj_bias is not None else Z.new_zeros(3 * q * D)
    bq, bk, bv = b.split(q * D)
    bo = mha.out_proj.bias if biases and mha.out_proj.bias is not None else 0.0

    def heads(u: torch.Tensor) -> torch.Tensor:  # (B, N, q D) -> (B, N, q, D)
        return u.unflatten(-1, (q, D))

    Qz = heads(torch.cat([Z] * q, -1) @ Wq.T + bq)
    K, V = heads(Z @ Wk.T + bk), heads(Z @ Wv.T + bv)
    logits = torch.einsum("bihd,bjhd->bhij", Qz, K) / math.sqrt(head_dim or D)
    o = torch.einsum("bhij,bjhd->bihd", torch.softmax(logits, -1), V).flatten(-2)
    hidden = torch.relu((o @ mha.out_proj.weight.T + bo) @ tr.hidden.weight.T + tr.hidden.bias)
    return (hidden @ tr.readout.weight.T + tr.readout.bias).squeeze(-1)


@dataclass(frozen=True)
class ModelsInputs:
    """Figure 1's models built at their defaults (float64): the Transformer at q = 2 and q = 1
    (torch stacks the projections there), the published biased one (its biases drawn nonzero),
    the GRU, the one-hot FFN and the encoded FFN; tokens Z and the prompts (x, t) they encode;
    the published equations they are compared with."""

    transformer: PracticalTransformer
    transformer_q1: PracticalTransformer
    biased: BiasedTransformer
    rnn: PracticalRNN
    ffn: PracticalFFN
    encoded: EncodedFFN
    Z: torch.Tensor  # (B, N, D_e) at q = 2
    Z1: torch.Tensor  # (B, N, D_e) at q = 1
    Zr: torch.Tensor  # (B, EM_NR, D_e) at q = 2, the GRU's (its cost grows with N)
    x: torch.Tensor  # (B, N, d)
    t: torch.Tensor  # (B, N, q)
    gru_step: Callable = gru_step  # h' from the gate pre-activations
    equations: Callable = transformer_equations  # (transformer, Z) -> y
    vec: Callable[[torch.Tensor], torch.Tensor] = vec_tokens  # (B, N, D_e) -> (B, N D_e)
    onehot: Callable[[torch.Tensor, int], torch.Tensor] = onehot_tuples  # (B, N, q) -> (B, NqN)


def _counted(inp: ModelsInputs) -> Tuple[Tuple[str, torch.nn.Module, int], ...]:
    """(closed form's name, module, q) for each model whose parameters are counted."""
    return (
        ("transformer", inp.transformer, EM_Q),
        ("transformer", inp.transformer_q1, 1),
        ("biased transformer", inp.biased, EM_Q),
        ("GRU", inp.rnn, EM_Q),
        ("FFN on onehot(t)", inp.ffn, EM_Q),
        ("encoded FFN", inp.encoded, EM_Q),
    )


@claim.inputs
def models_inputs(ctx: Context) -> ModelsInputs:
    """The models at N = 6, d = 2, q = 2 (and 1), d_e = 4 (D_e = 14), Appendix E's defaults (no
    width or hidden size given): the GRU at hidden 500 q = 1000."""
    sizes, D = dict(N=EM_N, d=EM_D, d_e=EM_DE), _D_e(EM_Q)

    def gen(name: str) -> torch.Generator:
        return ctx.generator(f"experiment-models/{name}")

    tr = build_practical("transformer", q=EM_Q, **sizes, generator=gen("transformer"), dtype=F64)
    tr1 = build_practical("transformer", q=1, **sizes, generator=gen("transformer1"), dtype=F64)
    biased = BiasedTransformer(D, EM_Q, generator=gen("biased"), dtype=F64)
    with torch.no_grad():  # they start at 0, where the equations' bias terms would go unseen
        for b in (biased.mha.in_proj_bias, biased.mha.out_proj.bias):
            b.copy_(torch.randn(b.shape, generator=gen("biases"), dtype=F64))
    rnn = build_practical("rnn", q=EM_Q, **sizes, generator=gen("rnn"), dtype=F64)
    ffn = build_practical("ffn", q=EM_Q, **sizes, generator=gen("ffn"), dtype=F64)
    encoded = EncodedFFN(EM_N, D, generator=gen("encoded"), dtype=F64)
    Z = torch.randn(EM_B, EM_N, D, generator=gen("Z"), dtype=F64)
    Z1 = torch.randn(EM_B, EM_N, _D_e(1), generator=gen("Z1"), dtype=F64)
    Zr = torch.randn(EM_B, EM_NR, D, generator=gen("Zr"), dtype=F64)
    x = torch.randn(EM_B, EM_N, EM_D, generator=gen("x"), dtype=F64)
    t = torch.randint(EM_N, (EM_B, EM_N, EM_Q), generator=gen("t"))
    return ModelsInputs(tr, tr1, biased, rnn, ffn, encoded, Z, Z1, Zr, x, t)


@claim.check("parameter counts = closed form", evidence="built")
def counts_are_closed_form(inp: ModelsInputs) -> Verdict:
    """Each model built at Appendix E's defaults has the parameters counted weight by weight."""
    cases = []
    for name, module, q in _counted(inp):
        closed = closed_form_counts(EM_N, EM_D, q, EM_DE)[name]
        n = sum(p.numel() for p in module.parameters())
        cases.append((f"{name} (q={q})", exact(n, closed, detail=f"{n:,} parameters")))
    return worst(cases)


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
    """Figure 1's bidirectional GRU, at its default hidden size, computes the GRU equations in both
    directions."""
    rnn = inp.rnn
    H = rnn.rnn.hidden_size
    with torch.no_grad():
        ref = gru_reference(rnn.rnn, rnn.readout, inp.Zr, inp.gru_step)
        gap = _gap(rnn(inp.Zr), ref)
    rnd = _rounding(inp.Zr.shape[1] * (rnn.D_in + 2 * H), ref, "N (D_in + 2H) eps (|y|max + 1)")
    return at_most(gap, 0.0, rnd, detail=f"hidden {H}, N={inp.Zr.shape[1]}")


@claim.check("GRU reaches both ends", evidence="built")
def gru_reaches_both_ends(inp: ModelsInputs) -> Verdict:
    """Bidirectional: y_1 changes when z_N does and y_N when z_1 does (the smaller change)."""
    Zl, Zf = inp.Zr.clone(), inp.Zr.clone()
    Zl[:, -1] += 1.0
    Zf[:, 0] += 1.0
    with torch.no_grad():  # one batch: the GRU's cost is its weights' reads, step by step
        y, yl, yf = inp.rnn(torch.cat([inp.Zr, Zl, Zf])).chunk(3)
        first, last = _gap(yl[:, 0], y[:, 0]), _gap(yf[:, -1], y[:, -1])
    detail = (
        f"|dy_1| when z_N moves {first:.3g}, |dy_N| when z_1 moves {last:.3g}; qualitative "
        f"(a one-directional GRU gives exactly 0), the floor {EM_REACH:g} stands above rounding"
    )
    return at_least(min(first, last), EM_REACH, detail=detail)


@claim.check("attention = softmax(z^T A z)", evidence="built")
def attention_is_softmax(inp: ModelsInputs) -> Verdict:
    """The Transformer's attention weights are softmax_j(z_i^T A_h z_j) with A_h the library's
    ``merged_qk()`` (Appendix A.1: Q_h^T K_h / sqrt(D_e), query on the left), at q = 2 and 1."""
    cases = []
    for tr, Z in ((inp.transformer, inp.Z), (inp.transformer_q1, inp.Z1)):
        with torch.no_grad():
            A = tr.merged_qk()
            ref = torch.softmax(torch.einsum("bid,hde,bje->bhij", Z, A, Z), -1)
            gap = _gap(tr.attention(Z), ref)
        rnd = Rounding(n=2 * tr.q * tr.D_e + Z.shape[1], scale=1.0, what="(2 q D_e + N) eps")
        cases.append((f"q={tr.q}", at_most(gap, 0.0, rnd, detail=f"D_e={tr.D_e}")))
    return worst(cases)


@claim.check("Transformers = their equations", evidence="built")
def transformers_match_equations(inp: ModelsInputs) -> Verdict:
    """The plain Transformer (q = 2, 1) and the published biased one compute Figure 1's
    equations: biased multi-head attention, out-projection, ReLU layer, readout."""
    cases = []
    for name, tr, Z in (
        ("plain q=2", inp.transformer, inp.Z),
        ("plain q=1", inp.transformer_q1, inp.Z1),
        ("biased q=2", inp.biased, inp.Z),
    ):
        with torch.no_grad():
            ref = inp.equations(tr, Z)
            gap = _gap(tr(Z), ref)
        n = 2 * tr.q * tr.D_e + Z.shape[1] + 2 * tr.width
        rnd = _rounding(n, ref, "(2 q D_e + N + 2 width) eps (|y|max + 1)")
        cases.append((name, at_most(gap, 0.0, rnd, detail=f"width {tr.width}")))
    return worst(cases)


def _mlp_reference(net: torch.nn.Sequential, u: torch.Tensor) -> Tuple[torch.Tensor, int]:
    """The MLP layer by layer (ReLU between linear maps), and its sum of fan-ins + layers."""
    lins = [m for m in net if isinstance(m, torch.nn.Linear)]
    for L in lins[:-1]:
        u = torch.relu(u @ L.weight.T + L.bias)
    return u @ lins[-1].weight.T + lins[-1].bias, sum(L.in_features for L in lins) + len(lins)


@claim.check("encoded FFN = MLP(vec z)", evidence="built")
def encoded_ffn_is_mlp(inp: ModelsInputs) -> Verdict:
    """The encoded FFN is the published MLP on vec(z_1, ..., z_N), layer by layer."""
    with torch.no_grad():
        ref, n = _mlp_reference(inp.encoded.net, inp.vec(inp.Z))
        gap = _gap(inp.encoded(inp.Z).reshape(ref.shape), ref)
    rnd = _rounding(n, ref, "(sum of fan-ins + layers) eps (|y|max + 1)")
    return at_most(gap, 0.0, rnd, detail=f"hidden {inp.encoded.hidden}")


@claim.check("FFN = MLP(vec x, onehot t)", evidence="built")
def ffn_reads_onehot_t(inp: ModelsInputs) -> Verdict:
    """The FFN on t's encoding (Theorem 6's input) is the MLP on concat(vec x, vec onehot(t)), t
    one-hot over [N] position by position, slot by slot."""
    B = inp.x.shape[0]
    with torch.no_grad():
        u = torch.cat([inp.x.reshape(B, -1), inp.onehot(inp.t, EM_N)], -1)
        ref, n = _mlp_reference(inp.ffn.net, u)
        gap = _gap(inp.ffn(inp.x, inp.t), ref)
    rnd = _rounding(n, ref, "(sum of fan-ins + layers) eps (|y|max + 1)")
    return at_most(
        gap, 0.0, rnd, detail=f"hidden {inp.ffn.hidden}, t of shape {tuple(inp.t.shape)}"
    )


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


def merged_qk_slipped(slip: Callable[[torch.Tensor], torch.Tensor]):
    """A copy of the Transformer whose ``merged_qk()`` returns ``slip`` of the library's."""

    def apply(tr: PracticalTransformer) -> PracticalTransformer:
        tr = copy.deepcopy(tr)
        honest = tr.merged_qk
        tr.merged_qk = lambda: slip(honest())
        return tr

    return apply


def _rebuilt(kind: str, **kw) -> Callable[[torch.nn.Module], torch.nn.Module]:
    """The model rebuilt with another size (a default slipped)."""
    sizes = dict(N=EM_N, d=EM_D, q=EM_Q, d_e=EM_DE, dtype=F64)
    return lambda _: build_practical(kind, **sizes, **kw)


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
    "merged_qk without 1/sqrt(D_e)",
    breaks=attention_is_softmax,
    apply=edited(transformer=merged_qk_slipped(lambda A: A * math.sqrt(A.shape[-1]))),
)
# queries read from the key weights and keys from the query's: A_h transposed
claim.fault(
    "merged_qk transposed (keys and queries swapped)",
    breaks=attention_is_softmax,
    apply=edited(transformer=merged_qk_slipped(lambda A: A.transpose(1, 2))),
)
claim.fault(
    "the published Transformer read with the unbiased equations",
    breaks=transformers_match_equations,
    apply=replaced(equations=lambda tr, Z: transformer_equations(tr, Z, biases=False)),
)
claim.fault(
    "logits over sqrt(q D_e) (the embedding width, not the head's)",
    breaks=transformers_match_equations,
    apply=replaced(equations=lambda tr, Z: transformer_equations(tr, Z, head_dim=tr.q * tr.D_e)),
)
# vec taken column by column (coordinate-major) where the FFN reads token by token
claim.fault(
    "tokens read coordinate-major (vec of Z^T)",
    breaks=encoded_ffn_is_mlp,
    apply=replaced(vec=lambda Z: Z.transpose(1, 2).flatten(1)),
)
claim.fault(
    "one-hot t laid out slot by slot (slot-major)",
    breaks=ffn_reads_onehot_t,
    apply=replaced(onehot=lambda t, N: onehot_tuples(t.transpose(1, 2), N)),
)
claim.fault(
    "GRU at hidden 500 (the q of 500 q forgotten)",
    breaks=counts_are_closed_form,
    apply=edited(rnn=_rebuilt("rnn", hidden=APPENDIX_E_GRU_PER_HEAD)),
)
claim.fault(
    "FFN at one hidden layer of 1000 (VecFFN's default)",
    breaks=counts_are_closed_form,
    apply=edited(ffn=_rebuilt("ffn", hidden=APPENDIX_E_FFN[:1])),
)
claim.fault(
    "the published Transformer without its attention biases",
    breaks=counts_are_closed_form,
    apply=edited(biased=lambda b: PracticalTransformer(b.D_e, b.q, dtype=F64)),
)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        f"N = 6, d = 2, q = 2 (the Transformer also q = 1), d_e = 4, encodings "
        f"{tuple(inp.Z.shape)}; the models at their defaults: width {inp.transformer.width}, GRU "
        f"hidden {inp.rnn.hidden_size}, FFNs {inp.ffn.hidden} and {inp.encoded.hidden}"
    )
)
