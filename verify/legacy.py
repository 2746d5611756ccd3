"""Transitional: claims still written as one check and one falsifier program, run through the
declared form (one check "check", one fault "falsifier"). Removed once every claim is declared."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from qstr.verify.claim import (
    PROFILES,
    Check,
    Claim as Declared,
    Context,
    Fault,
    Number,
    Ref,
    Verdict,
)
from qstr.verify.registry import register  # noqa: F401  (the legacy modules import it from here)


@dataclass(frozen=True)
class Outcome:
    measured: Number
    bound: Number
    holds: bool
    detail: str = ""
    dtype: str = "float64"
    value: Optional[float] = None
    limit: Optional[float] = None


class LegacyContext(Context):
    """The old integer salts, so the legacy claims' numbers do not move."""

    def generator(self, salt=0, device: Optional[str] = None) -> torch.Generator:
        g = torch.Generator(device=device or "cpu")
        g.manual_seed((self.seed * 1_000_003 + salt) % 2**64)
        return g


_FALSIFY = object()


def _legacy(ctx: Context) -> LegacyContext:
    return LegacyContext(profile=ctx.profile, device=ctx.device, seed=ctx.seed, threads=ctx.threads)


def Claim(
    id: str,
    ref_seed: str,
    ref_conference: str,
    statement: str,
    check: Callable,  # noqa: N802
    falsifier: Callable,
    falsifier_statement: str,
    profiles: Sequence[str] = PROFILES,
) -> Declared:
    def run(inputs, ctx):
        out = (falsifier if inputs is _FALSIFY else check)(_legacy(ctx))
        return Verdict(out.measured, out.bound, bool(out.holds), "", 0.0, out.detail, out.dtype)

    return Declared(
        id=id,
        ref=Ref(ref_seed, ref_conference),
        statement=statement,
        inputs=lambda ctx: None,
        checks=[Check("check", run)],
        faults=[Fault(falsifier_statement, lambda inputs, ctx: _FALSIFY, ("check",))],
        profiles=profiles,
    )
