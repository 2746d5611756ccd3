"""The record an attention head's builder attaches (:class:`Guarantee`: Lemma 11, the single
sparse-averaging head) and the scalar helpers both heads' closed forms share. Derivations:
docs/derivations/lemma11.md, docs/derivations/sparse-averaging.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Tuple

import torch

__all__ = ["Guarantee"]


@dataclass(frozen=True)
class Guarantee:
    """What a construction promises (all plain numbers).

    ``error_bound``: sup, over prompts whose tokens all satisfy ||x_j|| <= r_x, of
    |y_hat_i - g_net(x_{t_i})| (Lemma 11: against the Assumption 2 net; the end-to-end
    error against the link g adds ``eps_2nn``, see :attr:`end_to_end_bound`). For the
    sparse-averaging head it is the sup of the Euclidean error ||y_hat_i - mean_i||_2.
    ``alpha``: the attention scale; ``gap`` (Delta): the score gap between the target(s)
    and every other key; ``leak`` (delta): the bound on the softmax mass off the target(s);
    ``mu``: the measured coherence carried into the bound; ``c``: the encoding prefactor;
    ``N, q, d, d_e``: sizes (q = index slots of the encoding); ``H``: heads;
    ``lipschitz``: Lipschitz constant of the output net used in the bound
    (``TwoLayerNet.lipschitz`` = ||a|| ||W||_op for Lemma 11; 1 for the exact identity net
    of the averaging head); ``eps_2nn``: sup |g - g_net| on the r_x-ball (user supplied,
    0 for a teacher link); ``weight_norms``: Frobenius norms (``W_QK`` a tuple, one per
    head; ``W``, ``a``, ``b``); ``assumptions``: what the bound relies on, in words.
    """

    error_bound: float
    alpha: float
    gap: float
    leak: float
    mu: float
    r_x: float
    c: float
    N: int
    q: int
    d: int
    d_e: int
    lipschitz: float
    eps_2nn: float
    weight_norms: dict
    assumptions: Tuple[str, ...]
    H: int = 1
    kind: str = "lemma11"

    @property
    def end_to_end_bound(self) -> float:
        """error_bound + eps_2nn: the promised sup |y_hat_i - g(x_{t_i})| on the r_x-ball."""
        return self.error_bound + self.eps_2nn

    def as_dict(self) -> dict:
        """Plain floats / ints / strings / lists only
        (safe for ``torch.load(weights_only=True)``)."""
        norms = {}
        for k, v in self.weight_norms.items():
            norms[k] = [float(x) for x in v] if isinstance(v, (tuple, list)) else float(v)
        return {
            "error_bound": float(self.error_bound),
            "end_to_end_bound": float(self.end_to_end_bound),
            "alpha": float(self.alpha),
            "gap": float(self.gap),
            "leak": float(self.leak),
            "mu": float(self.mu),
            "r_x": float(self.r_x),
            "c": float(self.c),
            "N": int(self.N),
            "q": int(self.q),
            "d": int(self.d),
            "d_e": int(self.d_e),
            "H": int(self.H),
            "kind": str(self.kind),
            "lipschitz": float(self.lipschitz),
            "eps_2nn": float(self.eps_2nn),
            "weight_norms": norms,
            "assumptions": [str(s) for s in self.assumptions],
        }


def _logistic(z: float) -> float:
    """1 / (1 + e^{-z}) without overflow."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _real(name: str, value) -> float:
    """``value`` as a finite float; a one-line ValueError naming ``name`` otherwise."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def _weight_norms(model) -> dict:
    """Frobenius norms of a head's weights: W_QK per head, W, a, b."""
    with torch.no_grad():
        return {
            "W_QK": tuple(float(model.W_QK[h].norm()) for h in range(model.H)),
            "W": float(model.W.norm()),
            "a": float(model.a.norm()),
            "b": float(model.b.norm()),
        }
