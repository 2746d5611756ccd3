"""The exact four-layer RNN for simple-qSTR on codes with entries +-1/sqrt(d_e): the class
Theorem 7's bound is computed over, built as weights (docs/derivations/rnn-lower-bounds.md,
section 4, piece 1; the layer table is ``qstr.bounds.theorem7.prop28_layers``).

Where Lemmas 22-25 interpolate each product omega_ij omega_{t_l}j (constructions/transition.py),
this transition reads the inner product exactly: on the alphabet {+-1/sqrt(d_e)},
|omega_ij + omega_{t_l}j| is 2/sqrt(d_e) where the signs agree and 0 where they differ, so
s_l = (1/sqrt(d_e)) sum_j |omega_ij + omega_{t_l}j| - 1 = <omega_i, omega_{t_l}>.

Transition (input u = (h, z), z = (x | pos | slot0 .. slot{q-1}); h is not read):
  1. relu(+-x); relu(+-(omega_ij + omega_{t_l}j))
  2. relu(+-(x+ - x-)) = relu(+-x); g_l = relu((s_l - mu) / (1 - mu)), 1 at i = t_l, else 0
  3. relu(+-x_k + r_x g_l - r_x): relu(+-x_k) where g_l = 1, 0 where g_l = 0 and |x_k| <= r_x
  4. the difference: block l is x_i 1[t_l = i], exactly, for ||x_i|| <= r_x
The output net runs layers 1-3 on z beside a pass-through of h_fwd + h_bwd, adds the two, and
applies g_net: y_hat_i = g_net(h_fwd_i + h_bwd_i + x_i 1[t = i]) = g(x_{t_1}, ..., x_{t_q}).
"""

from __future__ import annotations

import math

import torch

from qstr.constructions import validate
from qstr.constructions.codes import coherence
from qstr.constructions.layout import token_layout
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.mlp import MLPWeights
from qstr.constructions.paper_models import DeepTransitionBiRNN
from qstr.constructions.recurrent import rnn_tokens
from qstr.constructions.transition import codes_of

__all__ = ["exact_rnn", "exact_transition_layers", "exact_output_layers"]

F64 = torch.float64


def _alphabet_codes(omega) -> torch.Tensor:
    """The codes as an (N, d_e) float64 tensor; ValueError unless every entry is +-1/sqrt(d_e)."""
    om = codes_of(omega)[0].detach().to(F64).cpu()
    unit = 1.0 / math.sqrt(om.shape[1])
    if not bool(torch.isclose(om.abs(), torch.tensor(unit, dtype=F64), rtol=1e-12).all()):
        raise ValueError("the exact RNN needs codes with every entry +-1/sqrt(d_e)")
    return om


def _first_three(d: int, q: int, d_e: int, mu: float, r_x: float) -> list:
    """Layers 1-3 of the transition on z alone: (W, b) pairs, rows as the module docstring."""
    L = token_layout(d, q, d_e)
    W1 = torch.zeros(2 * d + 2 * q * d_e, L.dim, dtype=F64)
    x = torch.arange(L["x"].start, L["x"].stop)
    W1[torch.arange(d), x], W1[d + torch.arange(d), x] = 1.0, -1.0
    pos = torch.arange(L["pos"].start, L["pos"].stop)
    for l in range(q):
        rows = 2 * d + 2 * l * d_e + torch.arange(d_e)
        slot = torch.arange(L.slot(l).start, L.slot(l).stop)
        for sign, r in ((1.0, rows), (-1.0, rows + d_e)):
            W1[r, pos], W1[r, slot] = sign, sign
    W2 = torch.zeros(2 * d + q, W1.shape[0], dtype=F64)
    b2 = torch.zeros(2 * d + q, dtype=F64)
    eye = torch.eye(d, dtype=F64)
    W2[:d, :d], W2[:d, d : 2 * d] = eye, -eye
    W2[d : 2 * d, :d], W2[d : 2 * d, d : 2 * d] = -eye, eye
    for l in range(q):
        cols = slice(2 * d + 2 * l * d_e, 2 * d + 2 * (l + 1) * d_e)
        W2[2 * d + l, cols] = 1.0 / (math.sqrt(d_e) * (1.0 - mu))
        b2[2 * d + l] = -(1.0 + mu) / (1.0 - mu)
    W3 = torch.zeros(2 * q * d, 2 * d + q, dtype=F64)
    for l in range(q):
        for k in range(d):
            for sign, row in ((1.0, 2 * (l * d + k)), (-1.0, 2 * (l * d + k) + 1)):
                W3[row, k], W3[row, d + k], W3[row, 2 * d + l] = sign, -sign, r_x
    b3 = torch.full((2 * q * d,), -r_x, dtype=F64)
    return [(W1, torch.zeros(W1.shape[0], dtype=F64)), (W2, b2), (W3, b3)]


def _difference(q: int, d: int) -> torch.Tensor:
    """Layer 4: row l d + k is relu(x_k ...) - relu(-x_k ...) of block l."""
    W4 = torch.zeros(q * d, 2 * q * d, dtype=F64)
    m = torch.arange(q * d)
    W4[m, 2 * m], W4[m, 2 * m + 1] = 1.0, -1.0
    return W4


def _sizes(d, q, d_e, mu, r_x) -> tuple:
    """The layers' arguments checked: sizes integers >= 1, mu in (0, 1), r_x > 0."""
    d, q, d_e = (validate.positive_int(k, v) for k, v in (("d", d), ("q", q), ("d_e", d_e)))
    return d, q, d_e, validate.probability("mu", mu), validate.positive_float("r_x", r_x)


def exact_transition_layers(d: int, q: int, d_e: int, *, mu: float, r_x: float) -> MLPWeights:
    """Prop 26's transition as Theorem 7's class has it (docs/derivations/rnn-lower-bounds.md,
    section 4): input (h, z) with h's q d columns zero, output x_i 1[t_l = i] per block l."""
    d, q, d_e, mu, r_x = _sizes(d, q, d_e, mu, r_x)
    first = _first_three(d, q, d_e, mu, r_x)
    W1, b1 = first[0]
    W1h = torch.cat([torch.zeros(W1.shape[0], q * d, dtype=F64), W1], dim=1)
    return MLPWeights([(W1h, b1), *first[1:], (_difference(q, d), None)])


def exact_output_layers(
    g_net: TwoLayerNet, d: int, q: int, d_e: int, *, mu: float, r_x: float
) -> MLPWeights:
    """Prop 28's output net f_y on (h_fwd, h_bwd, z) as Theorem 7's class has it (rnn-lower-
    bounds.md, section 4): layers 1-3 of the transition on z beside relu(+-(h_fwd + h_bwd))
    carried through, then g_net's W on [direct+, direct-, pass+, pass-] x [I, -I, I, -I], then
    g_net's a."""
    if not isinstance(g_net, TwoLayerNet):
        raise ValueError(f"g_net must be a TwoLayerNet, got {type(g_net).__name__}")
    d, q, d_e, mu, r_x = _sizes(d, q, d_e, mu, r_x)
    if g_net.W.shape[1] != q * d:
        raise ValueError(f"g_net must read q d = {q * d} inputs, got {g_net.W.shape[1]}")
    first = _first_three(d, q, d_e, mu, r_x)
    qd, eye = q * d, torch.eye(q * d, dtype=F64)
    (W1, b1), (W2, b2), (W3, b3) = first
    P1 = torch.zeros(2 * qd, 2 * qd + W1.shape[1], dtype=F64)
    P1[:qd, :qd], P1[:qd, qd : 2 * qd] = eye, eye
    P1[qd:, :qd], P1[qd:, qd : 2 * qd] = -eye, -eye
    Z1 = torch.cat([torch.zeros(W1.shape[0], 2 * qd, dtype=F64), W1], dim=1)
    swap = torch.cat([torch.cat([eye, -eye], 1), torch.cat([-eye, eye], 1)])  # relu(+-(u+ - u-))
    layer1 = (torch.cat([Z1, P1]), torch.cat([b1, torch.zeros(2 * qd, dtype=F64)]))
    layer2 = (torch.block_diag(W2, swap), torch.cat([b2, torch.zeros(2 * qd, dtype=F64)]))
    layer3 = (torch.block_diag(W3, swap), torch.cat([b3, torch.zeros(2 * qd, dtype=F64)]))
    W_g = g_net.W.detach().to(F64).cpu()
    direct = W_g @ _difference(q, d)  # (m_g, 2 q d): the transition's difference, then W_g
    carried = torch.cat([W_g, -W_g], dim=1)
    layer4 = (torch.cat([direct, carried], dim=1), g_net.b.detach().to(F64).cpu())
    layer5 = (g_net.a.detach().to(F64).cpu()[None, :], None)
    return MLPWeights([layer1, layer2, layer3, layer4, layer5])


def exact_rnn(omega, d: int, g_net: TwoLayerNet, *, r_x: float, mu: float) -> DeepTransitionBiRNN:
    """The exact four-layer RNN of Theorem 7's class (float64, CPU) for the codes ``omega`` (entries
    +-1/sqrt(d_e), coherence <= ``mu`` < 1), tokens in R^d and the Assumption 2 net ``g_net`` on
    R^{q d}: y_hat_i = g(x_{t_1}, ..., x_{t_q}) exactly on simple-qSTR prompts with every
    ||x_j|| <= r_x, fed ``rnn_encoding(x, t, omega)``; r_h = sqrt(q) r_x
    (docs/derivations/rnn-lower-bounds.md, section 4)."""
    om = _alphabet_codes(omega)
    q = rnn_tokens(g_net, d)
    mu = validate.probability("mu", mu)
    measured = codes_of(omega)[1]
    measured = coherence(om) if measured is None else measured
    if measured > mu:
        raise ValueError(f"the codes' coherence {measured:.6g} exceeds mu = {mu}")
    d_e = om.shape[1]
    trans = exact_transition_layers(d, q, d_e, mu=mu, r_x=r_x)
    out = exact_output_layers(g_net, d, q, d_e, mu=mu, r_x=r_x)
    m = DeepTransitionBiRNN(
        d + (q + 1) * d_e,
        q * d,
        transition_widths=trans.widths,
        output_widths=out.widths,
        r_h=math.sqrt(q) * r_x,
        dtype=F64,
        generator=torch.Generator(),  # its init is overwritten: the global stream stays untouched
    )
    trans.load_into(m.f_fwd)
    trans.load_into(m.f_bwd)
    out.load_into(m.f_y)
    return m
