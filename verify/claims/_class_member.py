"""Theorem 7's claim (verify/claims/thm_7.py): the exact RNN built in the class the bound is
computed over, its prompts, the mistakes its faults plant, and what it shares with Lemmas 29-30
(verify/claims/lemma_29_30.py): the 40-digit c_l and A, rank-one members, singular-pair changes
(docs/derivations/rnn-lower-bounds.md, section 4, pieces 1 and 5; constructions/exact_rnn.py)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Any, List, Tuple

import mpmath as mp
import torch

from qstr.bounds.attention import lemma12_radius
from qstr.bounds.theorem7 import Layer, Theorem7Params, prop28_layers
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.exact_rnn import exact_rnn
from qstr.constructions.links import make_link
from qstr.constructions.task import gather_tokens
from qstr.verify.adversarial import clip_to_ball
from qstr.verify.claim import Context

F64 = torch.float64
MEMBER_N, MEMBER_Q, MEMBER_n, MEMBER_B = 256, 2, 1000, 8


@dataclass(frozen=True, eq=False)
class ClassMember:
    """The exact RNN at (n, N) = (1000, 256), q = 2, on the RS-Hadamard codes of N and the teacher
    link's Assumption 2 net, built at the class's r_x = lemma12_radius(d, n, N); simple-qSTR
    prompts whose targets sit at the first, last and random positions, tokens in the r_x-ball
    (the targets' on its sphere), their encodings and g at them."""

    params: Theorem7Params  # the class: the link's (m_g, r_a, r_w), the codes' d_e
    n: int
    N: int
    r_x: float
    module: Any  # DeepTransitionBiRNN
    Z: torch.Tensor
    target: torch.Tensor  # (B, N): g(x_{t_1}, x_{t_2}) at every position

    def linears(self, net: str) -> List[torch.nn.Linear]:
        return [m for m in getattr(self.module, net) if isinstance(m, torch.nn.Linear)]


def _prompts(N: int, d: int, r_x: float, ctx: Context) -> Tuple[torch.Tensor, torch.Tensor]:
    gen = ctx.generator("thm-7/member")
    t = torch.randint(0, N, (MEMBER_B, MEMBER_Q), generator=gen)
    t[0], t[1] = torch.tensor([0, N - 1]), torch.tensor([N - 1, 0])
    t = t[:, None, :].expand(MEMBER_B, N, MEMBER_Q).contiguous()
    x = clip_to_ball(torch.randn(MEMBER_B, N, d, generator=gen, dtype=F64), r_x)
    at = torch.arange(MEMBER_B)[:, None], t[:, 0, :]
    x[at] = x[at] / x[at].norm(dim=-1, keepdim=True) * r_x
    return x, t


def class_member(params: Theorem7Params, ctx: Context) -> ClassMember:
    """The exact RNN of Theorem 7's class for ``params``' d, mu, C_x at q = 2 (a q <-> q^2 slip
    shows), N = 256, n = 1000."""
    N, d = MEMBER_N, params.d
    book = rs_hadamard_codebook(N, dtype=F64)
    link = make_link("teacher", MEMBER_Q, d, generator=ctx.generator("thm-7/link"))
    net = link.two_layer_net()
    P = replace(
        params, q=MEMBER_Q, m_g=net.m, r_a=net.r_a, r_w=net.r_w, d_e=int(book.omega.shape[1])
    )
    r_x = lemma12_radius(d, MEMBER_n, N, P.C_x)
    module = exact_rnn(book, d, net, r_x=r_x, mu=P.mu)
    x, t = _prompts(N, d, r_x, ctx)
    with torch.no_grad():
        target = link(gather_tokens(x, t))
    return ClassMember(P, MEMBER_n, N, r_x, module, rnn_encoding(x, t, book.omega[:N]), target)


def frobenius(lin: torch.nn.Linear) -> float:
    """||[W b]||_F of a linear layer (b = 0 without a bias)."""
    b2 = 0.0 if lin.bias is None else float(lin.bias.detach().pow(2).sum())
    return math.sqrt(float(lin.weight.detach().pow(2).sum()) + b2)


def gate_without_bias(N: int, params: Theorem7Params, r_x: float) -> tuple:
    """The class with the gate rows' radius 2 / (1 - mu)^2 each: the bias (1 + mu) / (1 - mu) of
    g_l = relu((s_l - mu) / (1 - mu)) left out of ||[W b]||_F."""
    trans, out = prop28_layers(N, params, r_x)
    q, mu = params.q, params.mu
    slip = (2.0 + (1.0 + mu) ** 2) / (1.0 - mu) ** 2 - 2.0 / (1.0 - mu) ** 2
    return _shrunk(trans, 1, q * slip), _shrunk(out, 1, q * slip)


def r_x_once(N: int, params: Theorem7Params, r_x: float) -> tuple:
    """The class with layer 3's rows at 2 + r_x^2 each: relu(+-x_k + r_x g_l - r_x) counted with
    one r_x (the weight on g_l, not the bias)."""
    trans, out = prop28_layers(N, params, r_x)
    slip = 2 * params.q * params.d * r_x * r_x
    return _shrunk(trans, 2, slip), _shrunk(out, 2, slip)


def _shrunk(layers: list, k: int, less: float) -> list:
    L = layers[k]
    return [
        *layers[:k],
        Layer(L.fan_in, L.width, L.bias, math.sqrt(L.radius**2 - less)),
        *layers[k + 1 :],
    ]


def gate_without_minus_one(member: ClassMember) -> ClassMember:
    """A copy of the member whose gate reads s_l + 1 (the -1 of s_l = sum |omega + omega'| / sqrt
    d_e - 1 left out of every gate's bias): the gates of non-targets open."""
    module = copy.deepcopy(member.module)
    q, d, mu = member.params.q, member.params.d, member.params.mu
    with torch.no_grad():
        for net in ("f_fwd", "f_bwd", "f_y"):
            gate = [m for m in getattr(module, net) if isinstance(m, torch.nn.Linear)][1]
            gate.bias[2 * d : 2 * d + q] += 1.0 / (1.0 - mu)
    return replace(member, module=module)


def sensitivities_mp(radii, biased, r_in) -> list:
    """Lemma 30's c_l in mpmath (docs/derivations/rnn-lower-bounds.md section 4, item 5), written
    from the page, not from ``layer_sensitivities``: a_0 = r_in, a_l = R_l sqrt(a_{l-1}^2 + 1)
    (R_l a_{l-1} without a bias), c_l = prod_{k > l} R_k sqrt(a_{l-1}^2 + 1) (or a_{l-1})."""
    R = [mp.mpf(r) for r in radii]
    feeds, a = [], mp.mpf(r_in)
    for Rl, bias in zip(R, biased, strict=True):
        feeds.append(mp.sqrt(a * a + 1) if bias else a)
        a = Rl * feeds[-1]
    return [mp.fprod(R[l + 1 :]) * feeds[l] for l in range(len(R))]


def net_constants_mp(radii2, biased, r_in):
    """(Lambda, ||c||, b) of a net with squared layer radii ``radii2`` on inputs of norm <= r_in,
    in mpmath (docs/derivations/rnn-lower-bounds.md section 4, items 3 and 5): c_l from
    :func:`sensitivities_mp`, Lambda = prod R_l, b: the output bound at input 0 via R_l (b + 1)."""
    R = [mp.sqrt(r2) for r2 in radii2]
    c2 = mp.fsum(c * c for c in sensitivities_mp(R, biased, r_in))
    b = mp.mpf(0)
    for Rl, bias in zip(R, biased, strict=True):
        b = Rl * (b + 1) if bias else Rl * b
    return mp.fprod(R), mp.sqrt(c2), b


def lipschitz_mp(transition, output, N, lip_h=0):
    """Lemma 29's A = sqrt(A_y^2 + (S Lam_y A_h)^2) in mpmath (rnn-lower-bounds.md section 4,
    item 5) from each net's (radii, biases, input radius), by :func:`net_constants_mp`;
    S = sum_{j=0}^{N-2} (1 + lip_h)^j, summed term by term (N - 1 at lip_h = 0)."""
    (tR, tB, r_z), (oR, oB, r_y) = transition, output
    _, A_h, _ = net_constants_mp([mp.mpf(R) ** 2 for R in tR], tB, r_z)
    Lam, A_y, _ = net_constants_mp([mp.mpf(R) ** 2 for R in oR], oB, r_y)
    if lip_h == 0 or N > 10**5:  # the closed form where the sum is too long to add up
        S = mp.mpf(N - 1) if lip_h == 0 else mp.expm1((N - 1) * mp.log1p(mp.mpf(lip_h))) / lip_h
    else:
        S = mp.fsum((1 + mp.mpf(lip_h)) ** j for j in range(N - 1))
    return mp.sqrt(A_y**2 + (S * Lam * A_h) ** 2)


def fro(params: dict, w: str, b) -> float:
    """||[W b]||_F of the layer (weight name ``w``, bias name ``b`` or None) in ``params``."""
    return float(torch.cat([params[w].flatten()] + ([params[b]] if b else [])).detach().norm())


def rank_one_member(params: dict, layers, u: torch.Tensor) -> dict:
    """A member of the class with the net's radii R_l (``params``' ||[W_l b_l]||_F), largest at
    ``u``: each layer maps the previous one's single active unit onto unit 0 with [W b] along
    (a_{l-1}, 1), so unit 0 carries a_l = R_l sqrt(a_{l-1}^2 + 1) (R_L a_{L-1} unbiased)."""
    out, a, v = {}, float(u.norm()), u / u.norm()
    for w, b in layers:
        R = fro(params, w, b)
        W = torch.zeros_like(params[w])
        if b is None:
            W[0] = R * v
            out[w], a = W, R * a
            continue
        s = R / math.sqrt(a * a + 1.0)
        W[0], bias = s * a * v, torch.zeros_like(params[b])
        bias[0] = s
        out[w], out[b], a = W, bias, R * math.sqrt(a * a + 1.0)
        v = torch.zeros(W.shape[0], dtype=W.dtype, device=W.device)
        v[0] = 1.0
    return out


def built_constants(member: ClassMember) -> dict:
    """Theorem 7's record fields read from the built member's weights: each layer's ||[W b]||_F
    (g_net's hidden layer: 2 ||(W_g, b_g)||_F, its Assumption 2 radius 2 sqrt(m_g) r_w, with W_g
    read from the layer's carried block), R_Theta^2 = sum over both transitions and f_y, r_x from
    layer 3's bias -r_x, r_h from the module, d_e from the transition's fan-in, and A by
    :func:`lipschitz_mp` at r_z = sqrt(r_x^2 + q + 1), r_y = sqrt(2 r_h^2 + r_z^2) (40 digits)."""
    q, d = member.params.q, member.params.d
    qd = q * d

    def radii(net: str):
        lins = member.linears(net)
        R = [frobenius(lin) for lin in lins]
        if net == "f_y":
            hidden = lins[3]
            W_g = hidden.weight.detach()[:, 2 * qd : 3 * qd]
            R[3] = 2.0 * math.sqrt(float(W_g.pow(2).sum() + hidden.bias.detach().pow(2).sum()))
        return R, [lin.bias is not None for lin in lins]

    (fR, fB), (bR, _), (oR, oB) = radii("f_fwd"), radii("f_bwd"), radii("f_y")
    theta2 = sum(R * R for R in fR + bR + oR)
    first = member.linears("f_fwd")[0]
    r_x = -float(member.linears("f_fwd")[2].bias.detach().min())
    r_h = float(member.module.r_h)
    with mp.workdps(40):
        r_z = mp.sqrt(mp.mpf(r_x) ** 2 + q + 1)
        r_y = mp.sqrt(2 * mp.mpf(r_h) ** 2 + r_z**2)
        A = lipschitz_mp((fR, fB, r_z), (oR, oB, r_y), member.N)
    return {
        "radius": math.sqrt(theta2),
        "theta_star_norm2": theta2,
        "lipschitz": float(A),
        "r_x": r_x,
        "r_h": r_h,
        "d_e": (first.weight.shape[1] - qd - d) // (q + 1),
    }


def mlp(params: dict, layers, u):
    """W_L relu(... relu(W_1 u + b_1) ...) of the layers named (weight, bias or None) in params."""
    for i, (w, b) in enumerate(layers):
        u = u @ params[w].T + (params[b] if b else 0)
        if i < len(layers) - 1:
            u = torch.relu(u)
    return u


def singular_change(module, layers, pair, u, size: float) -> dict:
    """The change of one layer along the top right singular vector of d f(u) / d [W b] at the row
    of u where its top singular value is largest (the first-order worst change of that layer, a
    layer whose output is locally flat everywhere giving none), Frobenius norm ``size`` x the
    layer's own. Per row, d f_k / d [W b] = delta_k (a, 1)^T, delta_k = d f_k / d (W a + b): one
    backward pass per output."""
    params = {k: p.detach() for k, p in module.named_parameters()}
    at = layers.index(tuple(pair))
    x = u
    for i, (w, b) in enumerate(layers):
        pre = x @ params[w].T + (params[b] if b else 0)
        if i == at:
            a_in, pre = x, pre.detach().requires_grad_(True)
            z = pre
        x = torch.relu(pre) if i < len(layers) - 1 else pre
    delta = torch.stack(
        [torch.autograd.grad(x[:, k].sum(), z, retain_graph=True)[0] for k in range(x.shape[1])], 1
    )  # (rows, out, width)
    J = (delta[..., None] * a_in[:, None, None, :]).flatten(2)
    if pair[1] is not None:
        J = torch.cat([J, delta], -1)
    row = int(torch.linalg.matrix_norm(J, ord=2).argmax())
    v = torch.linalg.svd(J[row], full_matrices=False)[2][0]
    names = [n for n in pair if n is not None]
    scale = size * float(torch.cat([params[n].flatten() for n in names]).norm())
    out, start = {}, 0
    for n in names:
        k = params[n].numel()
        out[n] = (scale * v[start : start + k]).reshape(params[n].shape)
        start += k
    return out


def _linears(seq) -> list:
    return [m for m in seq if isinstance(m, torch.nn.Linear)]


def reading_h(module, lip_h: float, r_h: float):
    """A member of the paper's class built from ``module`` (a DeepTransitionBiRNN whose transitions
    do not read h): each transition becomes f(h, z) + lip_h h, exactly lip_h-Lipschitz in h (the
    class's constraint at lip_h = 1/N, reconstructed: rnn-lower-bounds.md, section 4, item 5).
    h is carried by 2 d_h more units per hidden layer: relu(+-h) in layer 1 (its h columns), the
    identity on them in layers 2-3, and lip_h (u+ - u-) added by layer 4; f_y as built; states
    projected onto the r_h-ball."""
    from qstr.constructions.paper_models import DeepTransitionBiRNN  # noqa: PLC0415

    d_h, D = module.d_h, module.D_in
    out = DeepTransitionBiRNN(
        D,
        d_h,
        transition_widths=tuple(w + 2 * d_h for w in module.transition_widths),
        output_widths=module.output_widths,
        r_h=r_h,
        dtype=F64,
        generator=torch.Generator(),
    ).to(module.f_y[0].weight.device)
    eye = torch.eye(d_h, dtype=F64, device=out.f_y[0].weight.device)
    zero = lambda *s: torch.zeros(*s, dtype=F64, device=eye.device)  # noqa: E731
    with torch.no_grad():
        for net in ("f_fwd", "f_bwd"):
            old, new = _linears(getattr(module, net)), _linears(getattr(out, net))
            carry_in = torch.cat(
                [torch.cat([eye, zero(d_h, D)], 1), torch.cat([-eye, zero(d_h, D)], 1)]
            )
            new[0].weight.copy_(torch.cat([old[0].weight, carry_in]))
            new[0].bias.copy_(torch.cat([old[0].bias, zero(2 * d_h)]))
            for k in (1, 2):
                new[k].weight.copy_(
                    torch.block_diag(
                        old[k].weight, torch.eye(2 * d_h, dtype=F64, device=eye.device)
                    )
                )
                new[k].bias.copy_(torch.cat([old[k].bias, zero(2 * d_h)]))
            new[3].weight.copy_(torch.cat([old[3].weight, lip_h * eye, -lip_h * eye], 1))
        for a, b in zip(_linears(out.f_y), _linears(module.f_y), strict=True):
            a.weight.copy_(b.weight)
            if a.bias is not None:
                a.bias.copy_(b.bias)
    return out
