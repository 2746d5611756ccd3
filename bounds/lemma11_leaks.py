"""Lemma 11's head, target by target: the off-target softmax mass itself (not a bound on it),
and the target where it is largest (the same-target prompt's). Derivation:
docs/derivations/lemma11.md."""

from __future__ import annotations

import torch

from qstr.constructions import validate
from qstr.constructions.attention import Construction

__all__ = ["target_leaks", "worst_target"]


def target_leaks(construction: Construction, *, chunk: int = 1024) -> torch.Tensor:
    """The off-target softmax mass of a Lemma 11 head at each target, computed in the codes'
    dtype from the closed form (not bounded): (N,) tensor.

    leak[t] = sum_{j != t} e^{A (G_tj - G_tt)} / (1 + sum_{j != t} e^{A (G_tj - G_tt)}),
    A = alpha c^2, G the Gram matrix of the codes. It does not depend on the tokens or the
    head, and max_t leak[t] <= construction.guarantee.leak (the coherence-only bound). For an
    affine net the worst error over prompts whose slots all read one target is 2 r_x max_t
    leak[t] ||sum_h w_h|| (``lemma11_adversarial_prompt``); over every prompt it can be
    larger at q >= 2 (``qstr.verify.adversarial.lemma11_worst_case``; docs/derivations/lemma11.md).
    O(chunk N) memory.
    """
    if not isinstance(construction, Construction) or construction.kind != "lemma11":
        raise ValueError("construction must be a Lemma 11 Construction (kind='lemma11')")
    chunk = validate.positive_int("chunk", chunk)
    omega = construction.omega
    A = construction.alpha * construction.c**2
    N = omega.shape[0]
    out = []
    for s in range(0, N, chunk):
        G = omega[s : s + chunk] @ omega.T  # (c, N)
        rows = torch.arange(G.shape[0], device=G.device)
        self_ip = G[rows, rows + s].clone()
        E = torch.exp(A * (G - self_ip[:, None]))
        E[rows, rows + s] = 0
        X = E.sum(dim=1)
        out.append(X / (1 + X))
    return torch.cat(out)


def worst_target(construction: Construction) -> int:
    """argmax_t leak[t] (:func:`target_leaks`): the target of the worst same-target prompt
    (``lemma11_adversarial_prompt(construction, v, target=worst_target(construction))``)."""
    return int(target_leaks(construction).argmax())
