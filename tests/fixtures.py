"""Scaffolding the test modules share (issue 56): seeded generators, rotated codes, float64
vectors, labelled prompts, weight norms by hand, and what an old path warns (what a fresh
interpreter loads: tests/test_layers.py). The fixtures built from them (``book64``,
``transitions``) are in tests/conftest.py."""

from __future__ import annotations

import re
from typing import Callable, Union

import pytest
import torch

from qstr.constructions.codes import Codebook
from qstr.constructions.links import TwoLayerNet

F64 = torch.float64


def seeded(seed: int) -> torch.Generator:
    """A fresh CPU generator seeded ``seed``."""
    return torch.Generator().manual_seed(seed)


def rotated(book: Codebook, seed: Union[int, torch.Generator] = 0) -> Codebook:
    """``book``'s codes times a random orthogonal Q (float64): the same Gram matrix and coherence
    with irrational coordinates, so the products of the Prop 26 transition are approximate. Q is
    drawn from a fresh generator seeded ``seed``, or from ``seed`` itself when it is a generator
    (which then advances)."""
    gen = seed if isinstance(seed, torch.Generator) else seeded(seed)
    Q, _ = torch.linalg.qr(torch.randn(book.d_e, book.d_e, generator=gen, dtype=F64))
    return Codebook(book.omega.to(F64) @ Q, book.mu, "custom", {})


def t64(*v: float) -> torch.Tensor:
    """The values as a float64 tensor."""
    return torch.tensor(v, dtype=F64)


def general_prompts(n: int, N: int, d: int, g: torch.Generator):
    """n prompts of N Gaussian tokens in R^d with one random target each, a random unit u and the
    labels y = <x_t, u>: (x (n, N, d), t (n, N, 1), y (n, N), u (d,))."""
    x = torch.randn(n, N, d, generator=g, dtype=F64)
    t = torch.randint(N, (n, N, 1), generator=g)
    u = torch.randn(d, generator=g, dtype=F64)
    u = u / u.norm()
    y = (x[torch.arange(n)[:, None], t[..., 0]] * u).sum(-1)
    return x, t, y, u


def norms_by_hand(net: TwoLayerNet) -> dict:
    """A two-layer net's weight norms unit by unit (against ``weight_norms`` and Lemma 42's
    record): ||a||, ||W||_F, ||b||, r_a = ||a|| sqrt(m), r_w = ||(W, b)||_F / sqrt(m), path."""
    Wb = torch.cat([net.W, net.b[:, None]], dim=1)
    a, m = net.a, net.a.numel()
    return {
        "a": float(a.norm()),
        "W": float(net.W.norm()),
        "b": float(net.b.norm()),
        "r_a": float(a.norm()) * m**0.5,
        "r_w": float(Wb.norm()) / m**0.5,
        "path": sum(abs(float(a[i])) * float(Wb[i].norm()) for i in range(m)),
    }


def via_old_path(get: Callable[[], object], new_home: str):
    """``get()``, checked to warn exactly once, with a DeprecationWarning naming ``new_home``."""
    with pytest.warns(DeprecationWarning, match=re.escape(new_home)) as caught:
        value = get()
    assert len(caught) == 1, [str(w.message) for w in caught]
    return value
