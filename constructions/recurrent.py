"""The RNN of Prop 28 (Section 5 / Appendix B): the bidirectional RNN for simple-qSTR on the
Prop 26 transition (``qstr.constructions.transition``, re-exported here), its prefix-sum scan,
and its state dict, in named blocks.

Weights only, from given parameters (the transition, the output net, r_h): what the weights are,
never what a proposition promises. The transition chosen from eps, Cor 27's radius and the
certified eps are ``qstr.bounds.transition.prop28_rnn``, which attaches ``RNNGuarantee`` as
``.guarantee``. Derivation: docs/derivations/rnn-transition.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import torch

from qstr.constructions import validate
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.mlp import MLPWeights
from qstr.constructions.paper_models import DeepTransitionBiRNN
from qstr.constructions.transition import Transition, code_stats, codes_of, transition_weights

__all__ = [
    "codes_of",
    "code_stats",
    "Transition",
    "transition_weights",
    "projected_prefix",
    "RNNStates",
    "RNNConstruction",
    "rnn_tokens",
    "rnn_weights",
    "rnn_state",
    "module_from_state",
]

F64 = torch.float64
_CHUNK_ELEMENTS = 1 << 20  # elements of one chunk's largest intermediate

# ----------------------------------------------------------------------------- scan


def projected_prefix(
    F: torch.Tensor, r_h: float, *, reverse: bool = False, chunk: int = 4096
) -> tuple[torch.Tensor, int]:
    """States of h_{i+1} = P(h_i + F_i), h_1 = 0 (``reverse``: h_N = 0, h_{i-1} = P(h_i + F_i)).

    F: (B, N, D) transition outputs. Returns (H (B, N, D), n_active): H[:, 0] = 0 (``reverse``:
    H[:, -1] = 0), and the number of steps at which the projection was active. Each chunk is
    first computed as h_start + cumsum(F_chunk); when every partial sum has norm <= r_h the
    projection is the identity on that chunk and the cumsum *is* the recurrence (validity of
    the scan); otherwise the chunk is redone by the literal projected loop.
    """
    validate.shape("F", F, (None, None, None))
    r_h = float(r_h)
    if not (r_h > 0):
        raise ValueError(f"r_h must be > 0 or math.inf, got {r_h}")
    chunk = validate.positive_int("chunk", chunk)
    if reverse:
        H, n = projected_prefix(F.flip(1), r_h, chunk=chunk)
        return H.flip(1), n
    B, N, D = F.shape
    H = F.new_zeros(B, N, D)
    h = F.new_zeros(B, D)
    active = 0
    for s in range(0, N - 1, chunk):
        e = min(s + chunk, N - 1)
        cand = h[:, None] + torch.cumsum(F[:, s:e], dim=1)
        if r_h == math.inf or bool((torch.linalg.vector_norm(cand, dim=-1) <= r_h).all()):
            H[:, s + 1 : e + 1] = cand
            h = cand[:, -1]
            continue
        for i in range(s, e):  # the literal projected recurrence on this chunk
            v = h + F[:, i]
            norm = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
            active += int((norm > r_h).sum())
            h = v * torch.clamp(r_h / norm, max=1.0)
            H[:, i + 1] = h
    return H, active


# ------------------------------------------------------------------------------ RNN


@dataclass
class RNNStates:
    """h_fwd, h_bwd: (B, N, q d) paper convention (h_fwd_i before reading z_i); direct = f(z_i);
    projection_active: number of (batch, step) pairs where P was not the identity."""

    h_fwd: torch.Tensor
    h_bwd: torch.Tensor
    direct: torch.Tensor
    projection_active: int


class RNNConstruction:
    """The Prop 28 bidirectional RNN for simple-qSTR: codes, transition, output net g_net, state
    projection radius r_h.

    Build with :func:`rnn_weights` (given transition and r_h), or with
    ``qstr.bounds.transition.prop28_rnn``, which picks them from eps and attaches its
    ``RNNGuarantee`` as ``guarantee`` (None otherwise). ``states(x, t)`` evaluates by the scan;
    ``module()`` returns a ``DeepTransitionBiRNN`` holding the same weights (literal loop);
    ``predict(x, t)`` is the fast end-to-end output; :func:`rnn_state` the plain state dict.
    """

    def __init__(self, omega: torch.Tensor, transition: Transition, g_net: TwoLayerNet, r_h: float):
        self.omega = omega
        self.transition = transition
        self.g_net = g_net
        self.r_h = r_h
        self._output = None
        self._g_net_moved: Optional[TwoLayerNet] = None
        self.guarantee: Any = None

    # ---------------------------------------------------------------- sizes
    @property
    def N(self) -> int:
        return int(self.omega.shape[0])

    @property
    def d(self) -> int:
        return self.transition.d

    @property
    def q(self) -> int:
        return self.transition.q

    @property
    def d_e(self) -> int:
        return self.transition.d_e

    @property
    def output_widths(self) -> tuple:
        w1, w2, w3 = self.transition.widths
        p = 2 * self.transition.d_h
        return (w1 + p, w2 + p, w3 + p, self.g_net.m)

    # ---------------------------------------------------------------- inputs
    def _check_prompts(self, x: torch.Tensor, t: torch.Tensor):
        validate.finite_tensor("x", x)
        validate.shape("x", x, (None, None, self.d))
        B, N, _ = x.shape
        if N > self.N:
            raise ValueError(f"x has N = {N} positions but the codebook has {self.N} codes")
        if x.dtype not in validate.FLOAT_DTYPES:
            raise ValueError(f"x must be float32 or float64, got {x.dtype}")
        if not isinstance(t, torch.Tensor) or t.dtype != torch.long:
            raise ValueError("t must be a torch.long tensor of shape (B, N, q) or (B, q)")
        if t.dim() == 2:
            validate.shape("t", t, (B, self.q))
            t = t[:, None, :].expand(B, N, self.q)
        validate.shape("t", t, (B, N, self.q))
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= N):
            raise ValueError(f"t entries must lie in [0, N) = [0, {N})")
        if t.device != x.device:
            raise ValueError(f"t ({t.device}) and x ({x.device}) must be on the same device")
        return x, t

    def encode(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Z = rnn_encoding(x, t, omega): (B, N, D_in) on x's device and dtype."""
        x, t = self._check_prompts(x, t)
        return rnn_encoding(x, t, self.omega[: x.shape[1]].to(dtype=x.dtype, device=x.device))

    # ---------------------------------------------------------------- scan
    def transition_outputs(
        self, x: torch.Tensor, t: torch.Tensor, *, rectify: bool = True, chunk: Optional[int] = None
    ) -> torch.Tensor:
        """f(z_i) for every position (closed form, chunked over positions): (B, N, q d)."""
        x, t = self._check_prompts(x, t)
        B, N, _ = x.shape
        tr = self.transition
        omega = self.omega.to(dtype=x.dtype, device=x.device)
        if chunk is None:  # bound the largest intermediate (B, chunk, q, d_e) per chunk
            per_pos = B * tr.q * max(tr.d_e, tr.d)
            budget = _CHUNK_ELEMENTS * (16 if x.device.type == "cuda" else 1)
            chunk = max(1, budget // max(per_pos, 1))
        chunk = validate.positive_int("chunk", chunk)
        # Codes over the alphabet {0, +-R} have exact Lemma 22 products on every codeword pair
        # (tr.exact_products), so there s_hat = <omega_i, omega_t> and a matmul computes it;
        # otherwise the closed form of the interpolants is evaluated.
        exact = tr.exact_products
        simple = bool((t == t[:, :1]).all())
        t_codes = omega[t[:, 0]] if simple else None  # (B, q, d_e)
        out = x.new_empty(B, N, tr.d_h)
        for s in range(0, N, chunk):
            e = min(s + chunk, N)
            pos = omega[s:e]
            if exact and simple:
                s_hat = torch.einsum("nj,bqj->bnq", pos, t_codes)
            elif exact:
                s_hat = torch.einsum("nj,bnqj->bnq", pos, omega[t[:, s:e]])
            else:
                slots = (
                    t_codes[:, None].expand(B, e - s, tr.q, tr.d_e) if simple else omega[t[:, s:e]]
                )
                s_hat = tr.inner_products(pos, slots)
            out[:, s:e] = tr.from_inner_products(x[:, s:e], s_hat, rectify=rectify)
        return out

    def states(
        self,
        x: torch.Tensor,
        t: torch.Tensor,
        *,
        rectify: bool = True,
        r_h: Optional[float] = None,
        chunk: int = 4096,
    ) -> RNNStates:
        """(h_fwd, h_bwd) by the parallel scan (exclusive prefix sums, checked, see
        :func:`projected_prefix`)."""
        F = self.transition_outputs(x, t, rectify=rectify)
        r_h = self.r_h if r_h is None else r_h
        h_fwd, a1 = projected_prefix(F, r_h, chunk=chunk)
        h_bwd, a2 = projected_prefix(F, r_h, reverse=True, chunk=chunk)
        return RNNStates(h_fwd, h_bwd, F, a1 + a2)

    def predict(
        self, x: torch.Tensor, t: torch.Tensor, *, output_gate: bool = True, **kw
    ) -> torch.Tensor:
        """y_hat_i = g_net(h_fwd_i + h_bwd_i + f(z_i)) (Prop 28), by the scan: (B, N)."""
        st = self.states(x, t, **kw)
        v = st.h_fwd + st.h_bwd + (st.direct if output_gate else 0)
        return self._g_net_on(v.device)(v.reshape(*v.shape[:-1], self.q, self.d))

    def _g_net_on(self, device) -> TwoLayerNet:
        """g_net (kept float64 on the CPU) moved once to ``device`` and cached there."""
        if not validate.same_device(self.g_net.device, device):
            if self._g_net_moved is None or not validate.same_device(
                self._g_net_moved.device, device
            ):
                self._g_net_moved = self.g_net.to(device=device)
            return self._g_net_moved
        return self.g_net

    # ---------------------------------------------------------------- dense output net
    @property
    def output_layers(self) -> MLPWeights:
        """The five layers of f_y on (h_fwd, h_bwd, z) (``MLPWeights``), float64 CPU.

        Derivation: docs/derivations/rnn-transition.md, section 6.
        """
        if self._output is None:
            self._output = self._build_output()
        return self._output

    def _build_output(self) -> MLPWeights:
        tr = self.transition
        L = tr.layers
        qd, D_in = tr.d_h, tr.D_in
        n_in = 2 * qd + D_in
        eye = torch.eye(qd, dtype=F64)
        w1, w2, w3 = tr.widths
        # layer 1: transition layer 1 on z; v+ = relu(h_f + h_b), v- = relu(-(h_f + h_b))
        W1 = torch.zeros(w1 + 2 * qd, n_in, dtype=F64)
        W1[:w1, 2 * qd :] = L[0].W[:, qd:]
        W1[w1 : w1 + qd, :qd], W1[w1 : w1 + qd, qd : 2 * qd] = eye, eye
        W1[w1 + qd :, :qd], W1[w1 + qd :, qd : 2 * qd] = -eye, -eye
        b1 = torch.cat([L[0].b, torch.zeros(2 * qd, dtype=F64)])

        def carry(W, b, w_prev):  # block-diag(W, [[I, -I], [-I, I]])
            out = torch.zeros(W.shape[0] + 2 * qd, w_prev + 2 * qd, dtype=F64)
            out[: W.shape[0], :w_prev] = W
            out[W.shape[0] :, w_prev:] = torch.cat(
                [torch.cat([eye, -eye], 1), torch.cat([-eye, eye], 1)]
            )
            return out, torch.cat([b, torch.zeros(2 * qd, dtype=F64)])

        W2, b2 = carry(L[1].W, L[1].b, w1)
        W3, b3 = carry(L[2].W, L[2].b, w2)
        W_g = self.g_net.W.to(F64).cpu()
        W4 = W_g @ torch.cat([L[3].W, eye, -eye], dim=1)  # g's first layer on f(z_i) + h_f + h_b
        b4 = self.g_net.b.to(F64).cpu().clone()
        W5 = self.g_net.a.to(F64).cpu()[None, :].clone()
        return MLPWeights(((W1, b1), (W2, b2), (W3, b3), (W4, b4), (W5, None)))

    def module(self, *, dtype=torch.float64, device=None):
        """A ``constructions.paper_models.DeepTransitionBiRNN`` with these weights (the literal
        recurrence)."""
        tr = self.transition
        m = DeepTransitionBiRNN(
            tr.D_in,
            tr.d_h,
            transition_widths=tr.widths,
            output_widths=self.output_widths,
            r_h=self.r_h,
            dtype=dtype,
            device=device,
        )
        tr.layers.load_into(m.f_fwd)
        tr.layers.load_into(m.f_bwd)
        self.output_layers.load_into(m.f_y)
        return m

    def targets(self, x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cor 27 targets for simple prompts: block l of h_fwd_i is x_{t_l} 1[t_l < i], of h_bwd_i
        x_{t_l} 1[t_l > i]."""
        x, t = self._check_prompts(x, t)
        B, N, d = x.shape
        t0 = t[:, 0]  # (B, q): simple-qSTR
        if not bool((t == t0[:, None]).all()):
            raise ValueError("targets are defined for simple-qSTR prompts (t_i = t for every i)")
        xt = x[torch.arange(B, device=x.device)[:, None], t0]  # (B, q, d)
        i = torch.arange(N, device=x.device)[None, :, None]  # 0-based position
        before = (t0[:, None, :] < i).to(x.dtype)[..., None]  # (B, N, q, 1)
        after = (t0[:, None, :] > i).to(x.dtype)[..., None]
        return (before * xt[:, None]).flatten(2), (after * xt[:, None]).flatten(2)


def rnn_tokens(g_net: TwoLayerNet, d: int, q: Optional[int] = None) -> int:
    """The number q of tokens of dimension d the Assumption 2 net ``g_net`` reads (its W has
    q d columns); checked against ``q`` when given."""
    d = validate.positive_int("d", d)
    if not isinstance(g_net, TwoLayerNet):
        raise ValueError(
            f"g_net must be a constructions.links.TwoLayerNet, got {type(g_net).__name__}"
        )
    if g_net.W.dim() != 2 or g_net.W.shape[1] % d:
        raise ValueError(
            f"g_net.W must have q d columns (d = {d}), got shape {tuple(g_net.W.shape)}"
        )
    q_net = g_net.W.shape[1] // d
    q = q_net if q is None else validate.positive_int("q", q)
    if q != q_net:
        raise ValueError(
            f"q = {q} does not match g_net, which reads {q_net} tokens of dimension {d}"
        )
    return q


def rnn_weights(
    omega, transition: Transition, g_net: TwoLayerNet, *, r_h: float
) -> RNNConstruction:
    """The Prop 28 RNN's weights from given parts: the codes ``omega`` (Codebook or (N, d_e)
    tensor) of the N positions, the Prop 26 ``transition`` built for them, the Assumption 2 net
    ``g_net`` on vec(x_{t_1..q}) in R^{q d}, and the state projection radius ``r_h``.

    No guarantee is attached: ``qstr.bounds.transition.prop28_rnn`` picks the transition from eps
    and r_h >= Cor 27's radius, and attaches ``RNNGuarantee`` (docs/derivations/rnn-transition.md).
    """
    if not isinstance(transition, Transition):
        raise ValueError(f"transition must be a Transition, got {type(transition).__name__}")
    q = rnn_tokens(g_net, transition.d, transition.q)
    om, _ = codes_of(omega)
    N = om.shape[0]
    if q > N:
        raise ValueError(f"q must satisfy 1 <= q <= N = {N}, got {q}")
    if om.shape[1] != transition.d_e:
        raise ValueError(
            f"omega has d_e = {om.shape[1]} but the transition was built for {transition.d_e}"
        )
    r_h = float(r_h)
    if not r_h > 0:
        raise ValueError(f"r_h must be > 0, got {r_h}")
    net = TwoLayerNet(
        a=g_net.a.detach().to(F64).cpu(),
        W=g_net.W.detach().to(F64).cpu(),
        b=g_net.b.detach().to(F64).cpu(),
    )
    return RNNConstruction(om.detach().to(F64), transition, net, r_h)


# ---------------------------------------------------------------------- state dicts


def rnn_state(construction: RNNConstruction) -> dict:
    """Plain dict for ``torch.save`` / ``torch.load(weights_only=True)``.

    Keys (exactly): ``config`` {N, d, q, d_e, eps (certified state eps), r_h, r_x}, ``omega``
    (N, d_e), ``forward_transition`` and ``backward_transition`` (four dicts ``{"W", "b"}``,
    the last ``{"W"}``: f(u) = W4 relu(W3 relu(W2 relu(W1 u + b1) + b2) + b3), u = (h, z),
    h in R^{q d}, h <- P_{r_h}(h + f(u)); the two lists share their tensors), and ``output``
    (the five layers of f_y on (h_fwd, h_bwd, z)). All tensors float64 on the CPU. The config's
    eps and r_x are those of the transition's attached guarantee
    (``qstr.bounds.transition.prop28_rnn``).
    """
    if not isinstance(construction, RNNConstruction):
        raise ValueError(
            f"construction must be an RNNConstruction, got {type(construction).__name__}"
        )
    c = construction
    g = c.transition.guarantee
    if g is None:
        raise ValueError(
            "the transition carries no guarantee (eps, r_x of the file's config): build the RNN "
            "with qstr.bounds.transition.prop28_rnn"
        )
    layers = c.transition.layers.as_dicts()
    return {
        "config": {
            "N": c.N,
            "d": c.d,
            "q": c.q,
            "d_e": c.d_e,
            "eps": float(g.eps),
            "r_h": float(c.r_h),
            "r_x": float(g.r_x),
        },
        "omega": c.omega.cpu(),
        "forward_transition": layers,
        "backward_transition": [dict(L) for L in layers],
        "output": c.output_layers.as_dicts(),
    }


def module_from_state(state: dict, *, dtype=torch.float64, device=None):
    """A ``DeepTransitionBiRNN`` from an :func:`rnn_state` dict (e.g. after ``torch.load``)."""
    try:
        cfg = state["config"]
        fwd, bwd, out = state["forward_transition"], state["backward_transition"], state["output"]
        d, q, d_e = int(cfg["d"]), int(cfg["q"]), int(cfg["d_e"])
    except (KeyError, TypeError):
        raise ValueError(
            "state must be a dict from rnn_state with config, omega, forward_transition, "
            "backward_transition and output"
        ) from None
    D_in, d_h = d + (q + 1) * d_e, q * d
    fwd, bwd, out = (MLPWeights.from_dicts(layers) for layers in (fwd, bwd, out))
    m = DeepTransitionBiRNN(
        D_in,
        d_h,
        transition_widths=fwd.widths,
        output_widths=out.widths,
        r_h=float(cfg["r_h"]),
        dtype=dtype,
        device=device,
    )
    for seq, layers in ((m.f_fwd, fwd), (m.f_bwd, bwd), (m.f_y, out)):
        layers.load_into(seq)
    return m
