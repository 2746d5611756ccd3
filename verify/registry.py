"""The claim registry: every claim of the paper the toolkit checks, with its falsifier.

A ``Claim`` states one inequality of the paper. Its ``check`` measures both sides on honest
inputs and returns an ``Outcome``; its ``falsifier`` runs the *same* check on a deliberately
broken input (alpha too small, a wrong rank, a coherent codebook, ...) and must report
``holds=False``. A claim passes only when the check holds *and* the falsifier is caught:
a check that cannot fail is itself a failed claim.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import asdict, dataclass
from typing import Callable, Dict, Optional, Sequence, Union

import torch

from qstr.constructions import validate
from qstr.verify.threads import cpu_threads

PROFILES = ("quick", "full", "gpu")
Number = Union[float, int, str]


@dataclass(frozen=True)
class Outcome:
    """What a check measured: ``measured`` and ``bound`` are shown side by side in the table."""

    measured: Number
    bound: Number
    holds: bool
    detail: str = ""
    dtype: str = "float64"  # the dtype the check computes in ("float32+float64" when it mixes them)
    value: Optional[float] = None  # ``measured`` as a number a program can compare (None: not one number)
    limit: Optional[float] = None  # ``bound`` as a number; holds means value <= limit unless the detail says


@dataclass(frozen=True)
class Context:
    """Where and how big a check runs. ``pick`` chooses a size by profile."""

    profile: str = "quick"
    device: str = "cpu"
    seed: int = 0
    threads: Optional[int] = 1  # CPU intra-op threads while a claim runs (None: leave torch's setting)

    def __post_init__(self):
        object.__setattr__(self, "seed", validate.seed("seed", self.seed))

    def pick(self, quick, full=None, gpu=None):
        full = quick if full is None else full
        return {"quick": quick, "full": full, "gpu": full if gpu is None else gpu}[self.profile]

    def generator(self, salt: int = 0, device: Optional[str] = None) -> torch.Generator:
        """A fresh generator seeded by (seed, salt): the same seed gives the same numbers."""
        g = torch.Generator(device=device or "cpu")
        g.manual_seed((self.seed * 1_000_003 + salt) % 2**64)  # any seed in [0, 2**63 - 1]
        return g


@dataclass(frozen=True)
class Claim:
    id: str
    ref_seed: str
    ref_conference: str
    statement: str
    check: Callable[[Context], Outcome]
    falsifier: Callable[[Context], Outcome]
    falsifier_statement: str
    profiles: Sequence[str] = PROFILES


@dataclass
class Result:
    id: str
    ref_seed: str
    ref_conference: str
    statement: str
    measured: Number
    bound: Number
    holds: bool
    falsifier_caught: bool
    profile: str
    device: str
    seconds: float
    seed: int
    dtype: str = "float64"
    detail: str = ""
    falsifier: str = ""
    falsifier_measured: Number = ""
    falsifier_detail: str = ""
    error: str = ""
    measured_value: Optional[float] = None
    bound_value: Optional[float] = None

    @property
    def passed(self) -> bool:
        return self.holds and self.falsifier_caught

    def record(self) -> dict:
        return asdict(self) | {"passed": self.passed}


REGISTRY: Dict[str, Claim] = {}


def register(claim: Claim) -> Claim:
    if claim.id in REGISTRY:
        raise ValueError(f"claim id {claim.id!r} registered twice")
    REGISTRY[claim.id] = claim
    return claim


def _guarded(fn: Callable[[Context], Outcome], ctx: Context):
    """Run a check; an exception becomes a failed outcome with the error recorded."""
    try:
        return fn(ctx), ""
    except Exception as exc:  # noqa: BLE001 - a crashing check is a failing check, reported
        tail = traceback.format_exc(limit=3).strip().splitlines()[-1]
        return Outcome("error", "", False, str(exc)), tail


def run_claim(claim: Claim, ctx: Context) -> Result:
    start = time.perf_counter()
    with cpu_threads(ctx.threads):
        out, err = _guarded(claim.check, ctx)
        fals, ferr = _guarded(claim.falsifier, ctx)
    caught = not fals.holds and not ferr  # a falsifier that crashes has caught nothing
    return Result(
        id=claim.id, ref_seed=claim.ref_seed, ref_conference=claim.ref_conference,
        statement=claim.statement, measured=out.measured, bound=out.bound, holds=out.holds and not err,
        falsifier_caught=caught, profile=ctx.profile, device=ctx.device, dtype=out.dtype,
        seconds=round(time.perf_counter() - start, 3), seed=ctx.seed, detail=out.detail,
        falsifier=claim.falsifier_statement, falsifier_measured=fals.measured, falsifier_detail=fals.detail,
        error="; ".join(e for e in (err, ferr) if e), measured_value=out.value, bound_value=out.limit,
    )
