"""Prop 8's generalising slot-memory RNN: an exact bidirectional RNN for general 1STR (q = 1) that
stores every token in its own state block, the RNN the interpolating networks of Theorem 9 compete
with.

Weights only, from given parameters (r_x, r_h, mu): Prop 8's quantities (the state radius
r_h = sqrt(N - 1) r_x, the Lipschitz constant, the parameter norm) are
``qstr.bounds.interpolation.slot_memory``'s. Derivation: docs/derivations/interpolation.md.
"""

from __future__ import annotations

import torch

from qstr.constructions import validate
from qstr.constructions.codes import coherence
from qstr.constructions.mlp import MLPWeights
from qstr.constructions.paper_models import DeepTransitionBiRNN

__all__ = ["slot_memory_rnn"]


def _float64_codes(omega) -> torch.Tensor:
    """omega checked as N >= 2 finite float64 codes (N, d_e)."""
    if not isinstance(omega, torch.Tensor) or omega.dtype != torch.float64:
        raise ValueError("omega must be a float64 torch.Tensor of shape (N, d_e)")
    validate.shape("omega", omega, (None, None))
    validate.finite_tensor("omega", omega)
    if omega.shape[0] < 2:
        raise ValueError(f"omega must hold N >= 2 codes, got {omega.shape[0]}")
    return omega


def slot_memory_rnn(
    omega: torch.Tensor,
    u: torch.Tensor,
    *,
    r_x: float,
    r_h: float,
    mu: float,
) -> DeepTransitionBiRNN:
    """An exact generalising RNN for general 1STR (q = 1): every token stored in its own state
    block.

    omega: (N, d_e) float64 unit codes; u: (d,) unit vector of the link; ``mu`` >= the codes'
    coherence (``constructions.codes.coherence``), < 1: the gates' threshold; ``r_x``: the token
    radius the gadgets are exact for; ``r_h``: the state projection radius. RNN encoding z_i = (x_i,
    omega_i, omega_{t_i}) (D_in = d + 2 d_e). Prop 8's quantities, with the radius r_h =
    sqrt(N - 1) r_x the states stay within, are ``qstr.bounds.interpolation.slot_memory``'s
    (docs/derivations/interpolation.md).

    Transition (both directions, 3 linear layers, does not read h):
      layer 1: relu(x), relu(-x); gate g_k = relu((<omega_k, omega_i> - mu) / (1 - mu)) = 1[i = k]
      layer 2: relu(+-x_c + r_x g_k - r_x) for every block k, coordinate c  (= relu(+-x_c) 1[i = k])
      layer 3: block k <- difference: x_i placed in block i, zeros elsewhere (|x_c| <= r_x)
    so h_fwd_i = sum_{k < i} x_k e_k and h_bwd_i = sum_{k > i} x_k e_k (block i is empty).
    Output f_y (4 linear layers) on (h_fwd, h_bwd, z_i), with s_k = <u, block_k(h_fwd + h_bwd)>,
    xi = <u, x_i>, g_k = 1[i = k], g'_k = 1[t_i = k]:
      layer 1: relu(+-s_k), relu(+-xi), g_k, g'_k
      layer 2: relu(+-s_k) passed, e_k^+- = relu(+-xi + r_x g_k - r_x) (= xi 1[i = k] split),
               g'_k passed
      layer 3: relu(+-(s_k + e_k) + r_x g'_k - r_x)
      layer 4: y = sum_k (difference) = s_{t_i} + xi 1[t_i = i] = <u, x_{t_i}>.
    """
    measured = coherence(_float64_codes(omega))
    N, d_e = omega.shape
    if not torch.allclose(
        omega.norm(dim=1), torch.ones(N, dtype=torch.float64, device=omega.device), atol=1e-12
    ):
        raise ValueError("omega must have unit-norm rows")
    if not isinstance(u, torch.Tensor) or u.dtype != torch.float64 or u.dim() != 1:
        raise ValueError("u must be a float64 torch.Tensor of shape (d,)")
    validate.finite_tensor("u", u)
    if abs(float(u.norm()) - 1.0) > 1e-12:
        raise ValueError("u must have unit norm")
    d = u.shape[0]
    r_x = validate.positive_float("r_x", r_x)
    r_h = validate.positive_float("r_h", r_h)
    mu = validate.positive_float("mu", mu, allow_zero=True)
    if mu < measured - 1e-12:
        raise ValueError(f"mu = {mu} is below the codebook's coherence {measured:.6g}")
    if not mu < 1.0:
        raise ValueError(
            f"mu must be < 1 (the gates need <omega_i, omega_k> <= mu < 1 for i != k), got {mu}"
        )
    dev, f64 = omega.device, torch.float64
    d_h = N * d
    D_in = d + 2 * d_e
    xs, ps, ts = slice(0, d), slice(d, d + d_e), slice(d + d_e, d + 2 * d_e)
    model = DeepTransitionBiRNN(
        D_in,
        d_h,
        transition_widths=(2 * d + N, 2 * N * d),
        output_widths=(4 * N + 2, 5 * N, 2 * N),
        r_h=r_h,
        dtype=f64,
        device=dev,
    )
    inv = 1.0 / (1.0 - mu)
    # ---- transition: input (h, z), h first
    off = d_h
    W1 = torch.zeros(2 * d + N, d_h + D_in, dtype=f64, device=dev)
    b1 = torch.zeros(2 * d + N, dtype=f64, device=dev)
    eye_d = torch.eye(d, dtype=f64, device=dev)
    W1[:d, off + xs.start : off + xs.stop] = eye_d
    W1[d : 2 * d, off + xs.start : off + xs.stop] = -eye_d
    W1[2 * d :, off + ps.start : off + ps.stop] = omega * inv
    b1[2 * d :] = -mu * inv
    W2 = torch.zeros(2 * N * d, 2 * d + N, dtype=f64, device=dev)
    b2 = torch.full((2 * N * d,), -r_x, dtype=f64, device=dev)
    W3 = torch.zeros(d_h, 2 * N * d, dtype=f64, device=dev)
    for k in range(N):
        for c in range(d):
            row = 2 * (k * d + c)
            W2[row, c], W2[row, d + c], W2[row, 2 * d + k] = 1.0, -1.0, r_x  # +x_c gated
            up = row + 1  # -x_c gated
            W2[up, c], W2[up, d + c], W2[up, 2 * d + k] = -1.0, 1.0, r_x
            W3[k * d + c, row], W3[k * d + c, row + 1] = 1.0, -1.0
    for f in (model.f_fwd, model.f_bwd):
        MLPWeights(((W1, b1), (W2, b2), (W3, None))).load_into(f)
    # ---- output: input (h_fwd, h_bwd, z)
    zoff = 2 * d_h
    U_blocks = torch.zeros(N, d_h, dtype=f64, device=dev)  # s_k = <u, block_k>
    for k in range(N):
        U_blocks[k, k * d : (k + 1) * d] = u
    m1 = 4 * N + 2
    V1 = torch.zeros(m1, 2 * d_h + D_in, dtype=f64, device=dev)
    c1 = torch.zeros(m1, dtype=f64, device=dev)
    V1[:N, :d_h], V1[:N, d_h : 2 * d_h] = U_blocks, U_blocks  # relu(s_k)
    V1[N : 2 * N, :d_h], V1[N : 2 * N, d_h : 2 * d_h] = -U_blocks, -U_blocks  # relu(-s_k)
    V1[2 * N, zoff + xs.start : zoff + xs.stop] = u  # relu(xi)
    V1[2 * N + 1, zoff + xs.start : zoff + xs.stop] = -u  # relu(-xi)
    V1[2 * N + 2 : 3 * N + 2, zoff + ps.start : zoff + ps.stop] = omega * inv  # g_k = 1[i = k]
    V1[3 * N + 2 :, zoff + ts.start : zoff + ts.stop] = omega * inv  # g'_k = 1[t_i = k]
    c1[2 * N + 2 :] = -mu * inv
    m2 = 5 * N
    V2 = torch.zeros(m2, m1, dtype=f64, device=dev)
    c2 = torch.zeros(m2, dtype=f64, device=dev)
    for k in range(N):
        V2[k, k], V2[k, N + k] = 1.0, -1.0  # relu(s_k)
        V2[N + k, k], V2[N + k, N + k] = -1.0, 1.0  # relu(-s_k)
        V2[2 * N + k, 2 * N], V2[2 * N + k, 2 * N + 1], V2[2 * N + k, 2 * N + 2 + k] = (
            1.0,
            -1.0,
            r_x,
        )  # e_k^+
        V2[3 * N + k, 2 * N], V2[3 * N + k, 2 * N + 1], V2[3 * N + k, 2 * N + 2 + k] = (
            -1.0,
            1.0,
            r_x,
        )  # e_k^-
        c2[2 * N + k] = c2[3 * N + k] = -r_x
        V2[4 * N + k, 3 * N + 2 + k] = 1.0  # g'_k passed (>= 0)
    m3 = 2 * N
    V3 = torch.zeros(m3, m2, dtype=f64, device=dev)
    c3 = torch.full((m3,), -r_x, dtype=f64, device=dev)
    V4 = torch.zeros(1, m3, dtype=f64, device=dev)
    for k in range(N):
        # a_k = s_k + e_k = (relu(s)-relu(-s)) + (e^+ - e^-)
        for sign, row in ((1.0, 2 * k), (-1.0, 2 * k + 1)):
            V3[row, k], V3[row, N + k] = sign, -sign
            V3[row, 2 * N + k], V3[row, 3 * N + k] = sign, -sign
            V3[row, 4 * N + k] = r_x
        V4[0, 2 * k], V4[0, 2 * k + 1] = 1.0, -1.0
    MLPWeights(((V1, c1), (V2, c2), (V3, c3), (V4, None))).load_into(model.f_y)
    return model
