"""Scaffolding the test modules share (issue 56): seeded generators and rotated codes. The
fixtures built from them (``book64``, ``transitions``) are in tests/conftest.py."""

from __future__ import annotations

from typing import Union

import torch

from qstr.constructions.codes import Codebook

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
