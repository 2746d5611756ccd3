"""Constructed worst cases of Lemmas 13 and 15's steps on the built Lemma 11 Transformer
(docs/derivations/theorem4.md, section 3, "Pushed to the worst case"): prompts and parameter
changes along the top singular pairs of the built weights, where the step bounds are nearly
attained, and the factor each construction predicts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import torch

F64 = torch.float64
WORST_DELTA = 1e-5  # size of the rank-one W_QK change: small, so the softmax step is linear
A_DELTA = 1e-3  # size of the a change, relative to ||a||


@dataclass(frozen=True)
class WorstCase:
    """A prompt Z (one, B = 1), the change, and what the construction predicts for a step's
    ratio (``predicted``) with, by step, the factor that keeps it below 1 (``why``)."""

    Z: torch.Tensor
    r_z: torch.Tensor
    change: Dict[str, torch.Tensor]
    predicted: float
    why: Dict[str, str]


def _x_columns(cons) -> torch.Tensor:
    """W's columns reading the x block of each head: (m, H, d)."""
    m = cons.model
    W = m.W.detach().reshape(m.m, m.H, m.D_e)
    return W[:, :, cons.layout["x"]]


def _targets(cons, by_head: bool) -> torch.Tensor:
    """t (1, N, q): head h reads position (i + h) mod N, or with ``by_head`` a position k near i
    with k = h mod q (whose token is the one meant for head h)."""
    N, q = cons.N, cons.q
    i = torch.arange(N)[:, None]
    h = torch.arange(q)[None, :]
    t = (q * (i // q) + h) % N if by_head else (i + h) % N
    return t[None].to(torch.long).to(cons.model.W.device)


def antipodal_case(cons, r_x: float) -> tuple:
    """Lemma 15 and Lemma 13's attention step: the construction at alpha = 0 (uniform attention;
    returned as its module), tokens x_j = +-r_x v alternating, and a rank-one change of each head
    W^(h) += delta_h (z_0 / ||z_0||)(v, 0)^T. The keys' scores move by +-delta_h r_z r_x, so the
    softmax and value steps are nearly tight, and h - h' lies along v in each head's x block,
    with v the top right singular vector of G = (W_hx^T D a)_h (H x d) and delta_h = (G v)_h:
    Lemma 13's ||a'|| ||W'||_op bound loses ||G||_op / (||a'|| ||W'||_op) there."""
    model = cons.with_alpha(0.0).model
    dev, N = model.W.device, cons.N
    sign = torch.tensor([1.0, -1.0], dtype=F64, device=dev).repeat(N // 2 + 1)[:N]
    t = _targets(cons, by_head=False)
    with torch.no_grad():  # the relu pattern D at the uniform head output (mean x = 0 below)
        x0 = torch.zeros(1, N, cons.d, dtype=F64, device=dev)
        h = model.heads(cons.encode(x0, t))[0, 0].flatten()
        D = (model.W.detach() @ h + model.b.detach() > 0).to(F64)
        a = model.a.detach()
        G = torch.einsum("mhd,m->hd", _x_columns(cons), D * a)  # (H, d)
        U, S, Vh = torch.linalg.svd(G)
        v = Vh[0]
        x = sign[None, :, None] * r_x * v[None, None, :]
        Z = cons.encode(x, t)
        r_z = torch.linalg.vector_norm(Z, dim=-1).amax(1)
        u = Z[0, 0] / Z[0, 0].norm()
        w = torch.zeros(model.D_e, dtype=F64, device=dev)
        w[cons.layout["x"]] = v
        dW = torch.zeros_like(model.W_QK)
        for k, g in enumerate(U[:, 0] * WORST_DELTA):
            dW[k] = g * torch.outer(u, w)
        op = torch.linalg.matrix_norm(model.W.detach(), ord=2)
        out = float(S[0] / (a.norm() * op))
    lost = float((r_x / r_z[0]) ** 2)
    spread = f"(r_x / r_z)^2 = {lost:.3f}: the keys spread r_x along v, not r_z"
    why = {
        "heads": f"antipodal prompt, {spread}",
        "output": f"antipodal prompt, predicted {out * lost:.3f}: ||G||_op / (||a'|| ||W'||_op) "
        f"= {out:.3f} (the output net reads the heads' x blocks, not along its top singular "
        f"pair), {spread}",
    }
    case = WorstCase(Z, r_z, {"W_QK": dW}, out * lost, why)
    return model, case


def a_step_case(cons, r_x: float) -> WorstCase:
    """Lemma 13's a-step on the built module: head h attends to a key k = h mod H whose token is
    r_x v_h, (v_h) the top right singular vector of W's x columns split by head (the sign that
    the relu keeps more of), and a moves along relu(W h_i + b) at the best position i. The bound
    ||(W, b)||_F rho loses ||(W, b)||_op / ||(W, b)||_F (the built net has several singular
    values) and the head outputs' norm against r_z."""
    m = cons.model
    N = cons.N
    Wx = _x_columns(cons)
    t = _targets(cons, by_head=True)
    with torch.no_grad():
        s = torch.linalg.svd(Wx.reshape(m.m, -1))[2][0].reshape(m.H, cons.d)
        best = None
        for sgn in (1.0, -1.0):
            v = sgn * s / s.norm(dim=-1, keepdim=True).clamp_min(1e-300)
            x = torch.stack([v[k % m.H] for k in range(N)])[None] * r_x
            Z = cons.encode(x, t)
            r = torch.relu(m.heads(Z)[0].flatten(1) @ m.W.detach().T + m.b.detach())  # (N, m)
            i = int(r.norm(dim=1).argmax())
            if best is None or float(r[i].norm()) > float(best[1].norm()):
                best = (Z, r[i])
        Z, r = best
        r_z = torch.linalg.vector_norm(Z, dim=-1).amax(1)
        Wb = torch.cat([m.W.detach(), m.b.detach()[:, None]], 1)
        cap = float(torch.linalg.matrix_norm(Wb, ord=2) / Wb.norm())
        rho = (m.H * r_z[0] ** 2 + 1) ** 0.5
        got = float(r.norm() / (Wb.norm() * rho))
        da = A_DELTA * m.a.detach().norm() * r / r.norm()
    why = {"a": f"||(W,b)||_op / ||(W,b)||_F = {cap:.3f} caps the a-step on the built net"}
    return WorstCase(Z, r_z, {"a": da}, got, why)
