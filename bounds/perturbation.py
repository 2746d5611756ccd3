"""Lemmas 13 and 15 (Appendix A.1), as reconstructed in docs/derivations/theorem4.md, section 3:
how far the one-layer Transformer of Appendix A.1 moves when its parameters move, on a prompt
whose encoded tokens all have ||z_j|| <= r_z. Theorem 4's covering (Prop 17, ``theorem4_bound``)
uses the same constants.

Every function takes floats or tensors (per-prompt radii broadcast).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "score_change_bound",
    "softmax_l1_bound",
    "head_change_bound",
    "attention_lipschitz",
    "state_radius",
    "Lemma13Terms",
    "lemma13_terms",
]


def score_change_bound(r_z, dW_fro):
    """Lemma 15, the scores' step: |z_i^T (W - W') z_j| <= ||z_i|| ||W - W'||_op ||z_j||
    <= r_z^2 ||W - W'||_F (one head)."""
    return r_z * r_z * dW_fro


def softmax_l1_bound(ds_inf):
    """Lemma 15, the softmax's step: ||softmax(s) - softmax(s')||_1 <= ||s - s'||_inf, constant 1
    (Edelman et al. state 2);
    tight at two keys with equal scores moved apart (docs/derivations/theorem4.md, section 3)."""
    return ds_inf


def head_change_bound(r_z, dA_l1):
    """Lemma 15, the values' step: ||sum_j (A_ij - A'_ij) z_j|| <= r_z ||A_i. - A'_i.||_1 (Lemma 39
    with the rows' l1 norm)."""
    return r_z * dA_l1


def attention_lipschitz(r_z):
    """Lemma 15: ||h_i - h'_i|| <= r_z^3 (sum_h ||W^(h) - W'^(h)||_F^2)^{1/2}, the three steps
    above composed (r_z from the values, 1 from the softmax, r_z^2 from the scores)."""
    return r_z * r_z * r_z


def state_radius(r_z, H: int):
    """Lemma 13's rho = sqrt(H r_z^2 + 1) >= ||(h_i, 1)||: each head output is a convex
    combination of the z_j, and the 1 carries the bias."""
    return (H * r_z * r_z + 1) ** 0.5


@dataclass(frozen=True)
class Lemma13Terms:
    """Lemma 13's triangle inequality, one block of parameters at a time: ``a`` (a -> a'),
    ``Wb`` ((W, b) -> (W', b')), ``attention`` (W^(.) -> W'^(.)); ``total`` their sum."""

    a: torch.Tensor
    Wb: torch.Tensor
    attention: torch.Tensor

    @property
    def total(self) -> torch.Tensor:
        return self.a + self.Wb + self.attention


def _Wb(model) -> torch.Tensor:
    return torch.cat([model.W.detach().flatten(), model.b.detach()])


def lemma13_terms(model, other, r_z) -> Lemma13Terms:
    """Lemma 13 for two ``MergedAttention`` modules Theta (``model``) and Theta' (``other``), one
    output: |f_Theta(X)_i - f_Theta'(X)_i| <= ||a - a'|| ||(W, b)||_F rho
    + ||a'|| rho ||(W - W', b - b')||_F + ||a'|| ||W'||_op r_z^3 ||W^(.) - W'^(.)||_F,
    rho = :func:`state_radius`; the three terms, per radius r_z."""
    rho = state_radius(r_z, model.H)
    a, a_p = model.a.detach(), other.a.detach()
    d_qk = torch.linalg.vector_norm(model.W_QK.detach() - other.W_QK.detach())
    op = torch.linalg.matrix_norm(other.W.detach(), ord=2)
    return Lemma13Terms(
        torch.linalg.vector_norm(a - a_p) * torch.linalg.vector_norm(_Wb(model)) * rho,
        torch.linalg.vector_norm(a_p) * rho * torch.linalg.vector_norm(_Wb(model) - _Wb(other)),
        torch.linalg.vector_norm(a_p) * op * attention_lipschitz(r_z) * d_qk,
    )
