"""How a claim is declared: statement, references, named checks, named faults (docs/claims.md).

A claim builds its honest ``inputs`` once (the objects users get: built modules, saved files,
codebooks, prompts, the bound functions it compares against). Each ``Check`` maps the inputs to
a ``Verdict`` (measured, bound, holds, rounding term). Each ``Fault`` transforms the inputs (a
weight scaled, a block dropped, a coherent codebook, a bound function substituted) and names the
checks it ``breaks``: the registry runs exactly those checks on the broken inputs, and the claim
passes only when every check holds on the honest inputs and every fault makes its targets fail.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import torch

from qstr.constructions import validate
from qstr.verify.rounding import Rounding, dtype_name

PROFILES = ("quick", "full", "gpu")
Number = Union[float, int, str]


@dataclass(frozen=True)
class Context:
    """Where and how big a claim runs: ``pick`` a size by profile, ``generator`` a seed by name."""

    profile: str = "quick"
    device: str = "cpu"
    seed: int = 0
    threads: Optional[int] = (
        1  # CPU intra-op threads while a claim runs (None: leave torch's setting)
    )

    def __post_init__(self):
        object.__setattr__(self, "seed", validate.seed("seed", self.seed))
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {self.profile!r}")

    def pick(self, quick, full=None, gpu=None):
        """The size for this profile: ``full`` defaults to ``quick``, ``gpu`` to ``full``."""
        full = quick if full is None else full
        return {"quick": quick, "full": full, "gpu": full if gpu is None else gpu}[self.profile]

    def seed_of(self, name: str, *index: int) -> int:
        """A 63-bit seed drawn from (run seed, name, index): adding a draw moves no other draw."""
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"a generator is named by a non-empty string such as 'thm-6/min-norm', got {name!r}"
            )
        key = "/".join([str(self.seed), name, *(str(int(i)) for i in index)])
        return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little") >> 1

    def generator(self, name: str, *index: int, device: Optional[str] = None) -> torch.Generator:
        """A fresh generator seeded from (seed, name, index), on ``device`` (default the CPU)."""
        g = torch.Generator(device=device or "cpu")
        g.manual_seed(self.seed_of(name, *index))
        return g


@dataclass(frozen=True)
class Verdict:
    """What one check measured against what the paper promises.

    ``holds`` is decided by the constructor (``at_most``, ``at_least``, ``close``, ``exact``);
    ``rounding`` is the floating-point term added to the bound (docs/derivations/rounding.md)."""

    measured: Number
    bound: Number
    holds: bool
    relation: str = "<="
    rounding: float = 0.0
    detail: str = ""
    dtype: str = "float64"

    @property
    def shown_bound(self) -> str:
        """The bound as the table shows it: relation, value, and the rounding term if any."""
        bound = _fmt(self.bound)
        extra = f" + {self.rounding:.2g}" if self.rounding else ""
        return f"{self.relation} {bound}{extra}" if self.relation else f"{bound}{extra}"


def _fmt(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _rounding(
    rounding: Union[Rounding, float, None], dtype: Optional[str]
) -> Tuple[float, str, str]:
    """(term, its description, dtype) of a ``Rounding``, a bare term, or none."""
    if isinstance(rounding, Rounding):
        return rounding.term, str(rounding), dtype or dtype_name(rounding.dtype)
    return float(rounding or 0.0), "", dtype or "float64"


def _detail(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def at_most(
    measured: float,
    bound: float,
    rounding: Union[Rounding, float, None] = None,
    detail: str = "",
    dtype: Optional[str] = None,
) -> Verdict:
    """measured <= bound + rounding term."""
    term, what, dtype = _rounding(rounding, dtype)
    m, b = float(measured), float(bound)
    return Verdict(m, b, bool(m <= b + term), "<=", term, _detail(detail, what), dtype)


def at_least(
    measured: float,
    bound: float,
    rounding: Union[Rounding, float, None] = None,
    detail: str = "",
    dtype: Optional[str] = None,
) -> Verdict:
    """measured >= bound - rounding term."""
    term, what, dtype = _rounding(rounding, dtype)
    m, b = float(measured), float(bound)
    return Verdict(m, b, bool(m >= b - term), ">=", term, _detail(detail, what), dtype)


def close(
    measured: float,
    target: float,
    tol: float = 0.0,
    rounding: Union[Rounding, float, None] = None,
    detail: str = "",
    dtype: Optional[str] = None,
) -> Verdict:
    """|measured - target| <= tol + rounding term: an attained value, checked from both sides."""
    term, what, dtype = _rounding(rounding, dtype)
    m, t = float(measured), float(target)
    ok = math.isfinite(m) and abs(m - t) <= float(tol) + term
    return Verdict(
        m, t, bool(ok), f"= (+- {tol:.2g})" if tol else "=", term, _detail(detail, what), dtype
    )


def exact(measured: Any, expected: Any, detail: str = "", dtype: str = "exact") -> Verdict:
    """measured == expected with no tolerance (integers, sympy expressions, counts, structure)."""
    return Verdict(
        _shown(measured), _shown(expected), bool(measured == expected), "==", 0.0, detail, dtype
    )


def _shown(value: Any) -> Number:
    return (
        value
        if isinstance(value, (int, float, str)) and not isinstance(value, bool)
        else str(value)
    )


@dataclass(frozen=True)
class Check:
    """A named check: ``run(inputs, ctx)`` measures one statement and returns a ``Verdict``."""

    name: str
    run: Callable[[Any, Context], Verdict]
    statement: str = ""
    profiles: Sequence[str] = PROFILES  # where it runs (e.g. training only in full and gpu)


@dataclass(frozen=True)
class Fault:
    """A named fault: ``apply(inputs, ctx)`` returns broken inputs (a new object; the honest ones
    are left as they are), on which every check named in ``breaks`` must fail."""

    name: str
    apply: Callable[[Any, Context], Any]
    breaks: Tuple[str, ...]
    profiles: Sequence[str] = PROFILES  # where it runs: within every target's profiles

    def __post_init__(self):
        breaks = (self.breaks,) if isinstance(self.breaks, str) else tuple(self.breaks)
        object.__setattr__(self, "breaks", breaks)
        object.__setattr__(self, "profiles", tuple(self.profiles))
        if not breaks:
            raise ValueError(
                f"fault {self.name!r} breaks no check: name the checks it must make fail"
            )


@dataclass(frozen=True)
class Ref:
    """Where the claim is in the paper: the arXiv v1 numbering and the conference version's."""

    seed: str
    conference: str = ""

    def __post_init__(self):
        object.__setattr__(self, "conference", self.conference or self.seed)

    def __str__(self) -> str:
        return self.seed if self.seed == self.conference else f"{self.seed} / {self.conference}"


@dataclass(frozen=True)
class Claim:
    """A statement of the paper checked on the objects users get.

    ``inputs(ctx)`` builds the honest inputs; ``builds`` and ``bounds`` are the functions that build
    its object and evaluate its bound; ``derivation`` is the page of docs/derivations it follows."""

    id: str
    ref: Ref
    statement: str
    inputs: Callable[[Context], Any]
    checks: Sequence[Check]
    faults: Sequence[Fault]
    builds: Sequence[Callable] = ()
    bounds: Sequence[Callable] = ()
    derivation: str = ""
    profiles: Sequence[str] = PROFILES

    def __post_init__(self):
        for name in ("checks", "faults", "builds", "bounds", "profiles"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        _require_declared(self)

    def checks_in(self, profile: str) -> Tuple[Check, ...]:
        """The checks that run in ``profile``."""
        return tuple(c for c in self.checks if profile in c.profiles)

    def faults_in(self, profile: str) -> Tuple[Fault, ...]:
        """The faults that run in ``profile``."""
        return tuple(f for f in self.faults if profile in f.profiles)

    def fault(self, name: str) -> Fault:
        """The fault called ``name``."""
        for f in self.faults:
            if f.name == name:
                return f
        raise ValueError(
            f"claim {self.id!r} has no fault {name!r}; its faults: "
            f"{', '.join(f.name for f in self.faults)}"
        )

    def check(self, name: str) -> Check:
        """The check called ``name``."""
        for c in self.checks:
            if c.name == name:
                return c
        raise ValueError(
            f"claim {self.id!r} has no check {name!r}; its checks: "
            f"{', '.join(c.name for c in self.checks)}"
        )


def _require_declared(claim: Claim) -> None:
    """Checks named uniquely, at least one fault, and each fault targets checks of the claim."""
    if not claim.id or not isinstance(claim.id, str):
        raise ValueError(f"a claim needs a non-empty string id, got {claim.id!r}")
    if not isinstance(claim.ref, Ref):
        raise ValueError(
            f"claim {claim.id!r}: ref must be a Ref(seed, conference), got {claim.ref!r}"
        )
    names = [c.name for c in claim.checks]
    if not names or len(set(names)) != len(names):
        raise ValueError(
            f"claim {claim.id!r} needs at least one check, each with its own name; got {names}"
        )
    if not claim.faults:
        raise ValueError(
            f"claim {claim.id!r} declares no fault: a check that cannot fail is a defect"
        )
    faults = [f.name for f in claim.faults]
    if len(set(faults)) != len(faults):
        raise ValueError(f"claim {claim.id!r}: fault names repeat: {faults}")
    for f in claim.faults:
        unknown = [b for b in f.breaks if b not in names]
        if unknown:
            raise ValueError(
                f"claim {claim.id!r}: fault {f.name!r} breaks unknown check(s) {unknown}; "
                f"checks: {names}"
            )
        idle = {b for b in f.breaks for p in f.profiles if p not in claim.check(b).profiles}
        if idle:
            raise ValueError(
                f"claim {claim.id!r}: fault {f.name!r} runs in profiles where its "
                f"check(s) {sorted(idle)} do not"
            )
    parts = (claim, *claim.checks, *claim.faults)
    bad = [p for c in parts for p in c.profiles if p not in PROFILES]
    if bad:
        raise ValueError(
            f"claim {claim.id!r}: unknown profile(s) {bad}; profiles: {', '.join(PROFILES)}"
        )
