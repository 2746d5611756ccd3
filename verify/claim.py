"""How a claim is declared: statement, references, named checks, named faults (docs/claims.md).

A claim builds its honest ``inputs`` once (the objects users get: built modules, saved files,
codebooks, prompts, the bound functions it compares against). Each ``Check`` maps the inputs to
a ``Verdict`` (measured, bound, holds, rounding term). Each ``Fault`` transforms the inputs (a
weight scaled, a block dropped, a coherent codebook, a bound function substituted) and names the
checks it ``breaks``: the runner runs exactly those checks on the broken inputs, and the claim
passes only when every check holds on the honest inputs and every fault makes its targets fail.
``Verdict`` and its constructors live in ``qstr.verify.verdict`` and are re-exported here, where
claims import them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import torch

from qstr.constructions import validate
from qstr.verify.verdict import (  # noqa: F401 - re-exported: claims import them from here
    Number,
    Verdict,
    at_least,
    at_most,
    by_measured,
    by_ratio,
    close,
    exact,
    worst,
)

PROFILES = ("quick", "full", "gpu")


@dataclass(frozen=True)
class Context:
    """Where and how big a claim runs: ``pick`` a size by profile, ``generator`` a seed by name."""

    profile: str = "quick"
    device: str = "cpu"
    seed: int = 0
    threads: Optional[int] = (
        1  # CPU intra-op threads while a claim runs (None: leave torch's setting)
    )
    # run only the checks resting on this evidence, and the faults that break only them
    # (``qstr verify --certified``: "certified"); None runs every check of the profile
    evidence: Optional[str] = None

    def __post_init__(self):
        object.__setattr__(self, "seed", validate.seed("seed", self.seed))
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {self.profile!r}")
        if self.evidence is not None and self.evidence not in EVIDENCE:
            raise ValueError(
                f"evidence must be one of {', '.join(EVIDENCE)} or None, got {self.evidence!r}"
            )

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


def _takes_context(fn: Callable) -> bool:
    """Whether ``fn(inputs, ctx)`` asks for the context: a second positional parameter."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: inputs only
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    return sum(p.kind in positional for p in params) >= 2


def _call(fn: Callable, inputs: Any, ctx: Optional[Context]) -> Any:
    """``fn(inputs, ctx)`` when ``fn`` asks for the context (``Context()`` if none is given),
    else ``fn(inputs)``."""
    if _takes_context(fn):
        return fn(inputs, ctx if ctx is not None else Context())
    return fn(inputs)


@dataclass(frozen=True)
class Vacuity:
    """Where a sample-complexity statement is vacuous at its explicit constants: ``everywhere``
    when it is vacuous at every size the claim checked; ``line`` says where and from which N (or
    n) it is not, with the numbers."""

    everywhere: bool
    line: str


EVIDENCE = {
    "built": "measured on the object users get: a built module, a saved file, an exported "
    "standard module, a trained net",
    "exact": "exhaustive search or exact arithmetic (integers, rationals, sympy)",
    "monte-carlo": "a random sample against a closed form or bound, at a stated confidence",
    "formula": "a closed form against an independent derivation (sympy, 40 digits, a second "
    "derivation), or a property of a formula",
    "certified": "ball arithmetic (arb) on the built object's float64 weights read exactly: the "
    "measured value's enclosure lies below the bound's (docs/derivations/certified.md)",
}
UNDECLARED = "undeclared"  # a check that does not say what it rests on (user claims may)


@dataclass(frozen=True)
class Check:
    """A named check: ``fn(inputs)`` (or ``fn(inputs, ctx)``) measures one statement and returns
    a ``Verdict``; ``run(inputs, ctx)`` calls it with the context only when it asks for one.
    ``evidence``: what it rests on, one of :data:`EVIDENCE` (docs/claims.md); ``agreement``: it
    compares two computations of one value within a tolerance (a pin, module = scan), not a
    measurement with a paper's bound, so it has no measured/bound ratio."""

    name: str
    fn: Callable[..., Verdict]
    statement: str = ""
    profiles: Sequence[str] = PROFILES  # where it runs (e.g. training only in full and gpu)
    evidence: str = UNDECLARED
    agreement: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a check needs a non-empty string name, got {self.name!r}")
        if self.evidence not in EVIDENCE and self.evidence != UNDECLARED:
            raise ValueError(
                f"check {self.name!r}: evidence must be one of {', '.join(EVIDENCE)}, "
                f"got {self.evidence!r}"
            )
        object.__setattr__(self, "profiles", tuple(self.profiles))

    def run(self, inputs: Any, ctx: Optional[Context] = None) -> Verdict:
        """The verdict on ``inputs`` (the default ``Context()`` when the check asks for one)."""
        return _call(self.fn, inputs, ctx)

    __call__ = run


def _check_name(target: Union[Check, str]) -> str:
    return target.name if isinstance(target, Check) else target


@dataclass(frozen=True)
class Fault:
    """A named fault: ``fn(inputs)`` (or ``fn(inputs, ctx)``) returns broken inputs (a new
    object; the honest ones are left as they are), on which every check it ``breaks`` must fail.

    ``breaks`` takes the ``Check`` objects (or their names); it keeps their names."""

    name: str
    fn: Callable[..., Any]
    breaks: Tuple[str, ...]
    profiles: Sequence[str] = PROFILES  # where it runs: within every target's profiles
    # an exception type the builders must raise on these inputs: raising it counts as caught
    refuses: Optional[type] = None
    # the targets given as Check objects (a claim refuses one that is not its own)
    target_checks: Tuple[Check, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self):
        raw = self.breaks
        targets = (raw,) if isinstance(raw, (str, Check)) else tuple(raw)
        object.__setattr__(self, "breaks", tuple(_check_name(t) for t in targets))
        checks = tuple(t for t in targets if isinstance(t, Check))
        object.__setattr__(self, "target_checks", checks)
        object.__setattr__(self, "profiles", tuple(self.profiles))
        if not targets:
            raise ValueError(
                f"fault {self.name!r} breaks no check: name the checks it must make fail"
            )
        if self.refuses is not None and not (
            isinstance(self.refuses, type) and issubclass(self.refuses, Exception)
        ):
            raise ValueError(
                f"fault {self.name!r}: refuses must be an exception type, got {self.refuses!r}"
            )

    def refused(self, exc: BaseException) -> bool:
        """``exc`` is the refusal this fault declares (``refuses``)."""
        return self.refuses is not None and isinstance(exc, self.refuses)

    def apply(self, inputs: Any, ctx: Optional[Context] = None) -> Any:
        """The broken inputs (the default ``Context()`` when the fault asks for one)."""
        return _call(self.fn, inputs, ctx)

    __call__ = apply


# ---------------------------------------------------------------- the common faults


def replaced(**changes: Any) -> Callable[[Any], Any]:
    """A fault's edit: the inputs with fields replaced by the given values (a bound function
    substituted, a record swapped): ``replaced(risk_floor=slipped_floor)``."""

    def apply(inputs):
        return dataclasses.replace(inputs, **changes)

    return apply


def edited(**edits: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A fault's edit: each named field of the inputs replaced by ``edit(old value)``."""

    def apply(inputs):
        return dataclasses.replace(
            inputs, **{name: edit(getattr(inputs, name)) for name, edit in edits.items()}
        )

    return apply


def mapped(field: str, edit: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A fault's edit over cases: the tuple ``inputs.<field>`` with ``edit`` applied to each."""

    def apply(inputs):
        cases = tuple(edit(case) for case in getattr(inputs, field))
        return dataclasses.replace(inputs, **{field: cases})

    return apply


def fields_edited(**edits: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """An edit of one record (a guarantee, a case): each named field replaced by ``edit(record)``
    (the whole record, so a slip can read its other fields). Compose with ``mapped``."""

    def apply(record):
        return dataclasses.replace(record, **{name: f(record) for name, f in edits.items()})

    return apply


def each(cases: str = "cases", field: Optional[str] = None) -> Callable[[Callable], Callable]:
    """Decorator under ``@claim.fault`` for an edit written on one case: ``edit(case)`` becomes the
    edit of every element of the inputs' tuple ``cases`` (``mapped``), or, with ``field``, gives
    that field's new value from each case (``mapped`` of ``fields_edited``). An ``edit(case, ctx)``
    of the whole case is given the run's context."""

    def declare(edit: Callable) -> Callable:
        if field is None and _takes_context(edit):
            return lambda inputs, ctx: mapped(cases, lambda case: edit(case, ctx))(inputs)
        return mapped(cases, edit if field is None else fields_edited(**{field: edit}))

    return declare


@dataclass(frozen=True)
class Ref:
    """Where the claim is in the paper: the arXiv v1 numbering and the conference version's
    (the same when not given)."""

    seed: str
    conference: str = ""

    def __post_init__(self):
        object.__setattr__(self, "conference", self.conference or self.seed)

    def __str__(self) -> str:
        return self.seed if self.seed == self.conference else f"{self.seed} / {self.conference}"


@dataclass(frozen=True)
class Declaration:
    """What a claim declares about itself: its id, where it is in the paper, its statement, the
    functions that build its object and evaluate its bound, its derivation page, the profiles it
    runs in and its marks (pytest mark names, e.g. ``("slow",)``). Validated on creation."""

    id: str
    ref: Ref
    statement: str
    builds: Tuple[Callable, ...] = ()
    bounds: Tuple[Callable, ...] = ()
    derivation: str = ""
    profiles: Tuple[str, ...] = PROFILES
    marks: Tuple[str, ...] = ()

    def __post_init__(self):
        if not self.id or not isinstance(self.id, str):
            raise ValueError(f"a claim needs a non-empty string id, got {self.id!r}")
        if not isinstance(self.ref, Ref):
            raise ValueError(
                f"claim {self.id!r}: ref must be a Ref(seed, conference), got {self.ref!r}"
            )
        for name in ("builds", "bounds", "profiles"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        marks = (self.marks,) if isinstance(self.marks, str) else tuple(self.marks)
        bad = [m for m in marks if not (isinstance(m, str) and m.isidentifier())]
        if bad:
            raise ValueError(
                f"claim {self.id!r}: marks must be pytest mark names (Python identifiers), "
                f"got {bad}"
            )
        object.__setattr__(self, "marks", marks)
        _known_profiles(self.id, self.profiles)


DECLARED = tuple(f.name for f in dataclasses.fields(Declaration))  # Claim's keyword fields


class Claim:
    """A statement of the paper checked on the objects users get (docs/claims.md).

    Declared at the top of its module and filled where its parts are written: ``@claim.inputs``
    on the function of the ``Context`` that builds the honest inputs, ``@claim.check(name)`` on
    each check, ``@claim.fault(name, breaks=(check, ...))`` on each fault (or ``claim.fault(name,
    breaks=..., apply=replaced(...))``). ``builds`` and ``bounds`` are the functions that build its
    object and evaluate its bound; ``derivation`` is its page of docs/derivations; ``profiles``
    where it runs; ``marks`` its pytest marks: the fields of its ``Declaration`` (after ``id``,
    ``ref`` and ``statement``, by keyword). Checks, faults and inputs may also be given whole to
    the constructor."""

    def __init__(
        self,
        id: str,
        ref: Ref,
        statement: str,
        inputs: Optional[Callable[[Context], Any]] = None,
        checks: Sequence[Check] = (),
        faults: Sequence[Fault] = (),
        **declared: Any,
    ):
        unknown = sorted(set(declared) - set(DECLARED))
        if unknown:
            raise TypeError(
                f"Claim() has no field {unknown[0]!r}; its fields: {', '.join(DECLARED)}"
            )
        self.declaration = Declaration(id, ref, statement, **declared)
        self._inputs: Optional[Callable[[Context], Any]] = None
        self.vacuity: Optional[Callable[[Any], Vacuity]] = None  # @claim.vacuity_with
        self.scope: Optional[Callable[[Any], str]] = None  # @claim.scope_with
        self.checks: Tuple[Check, ...] = ()
        self.faults: Tuple[Fault, ...] = ()
        if inputs is not None:
            self.inputs(inputs)
        for c in checks:
            self._add_check(c)
        for f in faults:
            self._add_fault(f)
        if checks or faults:
            self.require_complete()

    # the declared fields, read from the declaration
    id = property(lambda self: self.declaration.id)
    ref = property(lambda self: self.declaration.ref)
    statement = property(lambda self: self.declaration.statement)
    builds = property(lambda self: self.declaration.builds)
    bounds = property(lambda self: self.declaration.bounds)
    derivation = property(lambda self: self.declaration.derivation)
    profiles = property(lambda self: self.declaration.profiles)
    marks = property(lambda self: self.declaration.marks)

    def __repr__(self) -> str:
        return f"Claim({self.id!r}, {len(self.checks)} checks, {len(self.faults)} faults)"

    # ------------------------------------------------------------ declaring

    def inputs(self, fn_or_ctx):
        """Decorating ``fn(ctx)``: it builds the honest inputs (returned unchanged). Called with a
        ``Context``: the honest inputs for that run."""
        if isinstance(fn_or_ctx, Context):
            if self._inputs is None:
                raise ValueError(f"claim {self.id!r} declares no inputs (@claim.inputs)")
            return self._inputs(fn_or_ctx)
        if not callable(fn_or_ctx):
            raise ValueError(f"claim {self.id!r}: inputs must be a function of the Context")
        if self._inputs is not None:
            raise ValueError(f"claim {self.id!r} declares its inputs twice")
        self._inputs = fn_or_ctx
        return fn_or_ctx

    @property
    def inputs_function(self) -> Optional[Callable[[Context], Any]]:
        """The function that builds the honest inputs (where the claim's source lives)."""
        return self._inputs

    def builds_with(self, fn: Callable) -> Callable:
        """Decorator: ``fn`` is one of the functions that build the claim's object (listed by
        ``qstr verify --list``); returned unchanged."""
        self.declaration = replace(self.declaration, builds=self.builds + (fn,))
        return fn

    def scope_with(self, fn: Callable[[Any], str]) -> Callable:
        """Decorator: ``fn(inputs)`` is the one line saying what the run checked: the sizes,
        widths, codes and forms (docs/claims.md, "Scope"); returned unchanged."""
        if self.scope is not None:
            raise ValueError(f"claim {self.id!r} declares its scope twice")
        self.scope = fn
        return fn

    def vacuity_with(self, fn: Callable[[Any], "Vacuity"]) -> Callable:
        """Decorator: ``fn(inputs)`` says where the claim's explicit statement is vacuous (a
        sample-complexity result: docs/claims.md, "Vacuity"); returned unchanged."""
        if self.vacuity is not None:
            raise ValueError(f"claim {self.id!r} declares its vacuity twice")
        self.vacuity = fn
        return fn

    def bounds_with(self, fn: Callable) -> Callable:
        """Decorator: ``fn`` is one of the functions that evaluate the claim's bound (listed by
        ``qstr verify --list``); returned unchanged."""
        self.declaration = replace(self.declaration, bounds=self.bounds + (fn,))
        return fn

    def check(
        self,
        name: str,
        statement: str = "",
        profiles: Sequence[str] = PROFILES,
        evidence: str = UNDECLARED,
        agreement: bool = False,
    ):
        """Decorator: ``fn`` becomes the claim's check ``name`` resting on ``evidence`` (one of
        :data:`EVIDENCE`; ``agreement``: two computations of one value within a tolerance, no
        measured/bound ratio); the ``Check`` is returned, and it is callable, so ``fn(inputs)``
        still works."""

        def declare(fn: Callable[..., Verdict]) -> Check:
            doc = statement or (fn.__doc__ or "")
            return self._add_check(Check(name, fn, doc, profiles, evidence, bool(agreement)))

        return declare

    def fault(
        self,
        name: str,
        *,
        breaks: Union[Check, str, Sequence[Union[Check, str]]],
        apply: Optional[Callable[..., Any]] = None,
        profiles: Sequence[str] = PROFILES,
        refuses: Optional[type] = None,
    ):
        """The fault ``name`` that must make each check in ``breaks`` fail: with ``apply``, declared
        at once (and returned); without, a decorator for the function that breaks the inputs.
        ``refuses``: an exception type (e.g. ValueError) a builder must raise on the broken inputs,
        in ``apply`` or in a target check; raising it counts as caught. Everything after ``name`` is
        keyword-only, so a fault reads the same wherever it is declared."""

        def declare(fn: Callable[..., Any]) -> Fault:
            return self._add_fault(Fault(name, fn, breaks, profiles, refuses))

        return declare if apply is None else declare(apply)

    def _add_check(self, check: Check) -> Check:
        if not isinstance(check, Check):
            raise ValueError(f"claim {self.id!r}: a check must be a Check, got {check!r}")
        if any(c.name == check.name for c in self.checks):
            raise ValueError(f"claim {self.id!r}: two checks named {check.name!r}")
        _known_profiles(self.id, check.profiles)
        self.checks += (check,)
        return check

    def _add_fault(self, fault: Fault) -> Fault:
        if not isinstance(fault, Fault):
            raise ValueError(f"claim {self.id!r}: a fault must be a Fault, got {fault!r}")
        if any(f.name == fault.name for f in self.faults):
            raise ValueError(f"claim {self.id!r}: fault names repeat: {fault.name!r}")
        _known_profiles(self.id, fault.profiles)
        names = [c.name for c in self.checks]
        unknown = [b for b in fault.breaks if b not in names]
        if unknown:
            raise ValueError(
                f"claim {self.id!r}: fault {fault.name!r} breaks unknown check(s) {unknown}; "
                f"checks: {names}"
            )
        foreign = [c.name for c in fault.target_checks if not any(c is k for k in self.checks)]
        if foreign:
            raise ValueError(
                f"claim {self.id!r}: fault {fault.name!r} breaks check(s) {foreign} of another "
                f"claim (name the Check objects this claim declares)"
            )
        idle = {
            b for b in fault.breaks for p in fault.profiles if p not in self.check_named(b).profiles
        }
        if idle:
            raise ValueError(
                f"claim {self.id!r}: fault {fault.name!r} runs in profiles where its "
                f"check(s) {sorted(idle)} do not"
            )
        self.faults += (fault,)
        return fault

    def require_complete(self) -> "Claim":
        """Inputs declared, at least one check and at least one fault (else ``ValueError``)."""
        if self._inputs is None:
            raise ValueError(f"claim {self.id!r} declares no inputs (@claim.inputs)")
        if not self.checks:
            raise ValueError(f"claim {self.id!r} needs at least one check")
        if not self.faults:
            raise ValueError(
                f"claim {self.id!r} declares no fault: a check that cannot fail is a defect"
            )
        return self

    # ------------------------------------------------------------ reading

    def checks_in(self, profile: str, evidence: Optional[str] = None) -> Tuple[Check, ...]:
        """The checks that run in ``profile`` (only those resting on ``evidence``, if given)."""
        return tuple(
            c for c in self.checks if profile in c.profiles and evidence in (None, c.evidence)
        )

    def faults_in(self, profile: str, evidence: Optional[str] = None) -> Tuple[Fault, ...]:
        """The faults that run in ``profile`` (with ``evidence``: those whose every target is a
        check resting on it)."""
        kept = {c.name for c in self.checks_in(profile, evidence)}
        return tuple(
            f
            for f in self.faults
            if profile in f.profiles and (evidence is None or set(f.breaks) <= kept)
        )

    def fault_named(self, name: str) -> Fault:
        """The fault called ``name``."""
        for f in self.faults:
            if f.name == name:
                return f
        raise ValueError(
            f"claim {self.id!r} has no fault {name!r}; its faults: "
            f"{', '.join(f.name for f in self.faults)}"
        )

    def check_named(self, name: str) -> Check:
        """The check called ``name``."""
        for c in self.checks:
            if c.name == name:
                return c
        raise ValueError(
            f"claim {self.id!r} has no check {name!r}; its checks: "
            f"{', '.join(c.name for c in self.checks)}"
        )


def _known_profiles(claim_id: str, profiles: Sequence[str]) -> None:
    bad = [p for p in profiles if p not in PROFILES]
    if bad:
        raise ValueError(
            f"claim {claim_id!r}: unknown profile(s) {bad}; profiles: {', '.join(PROFILES)}"
        )


def evidence_mix(kinds: Sequence[str]) -> str:
    """'built 6, formula 3' (in EVIDENCE's order, undeclared last); 'formula only' when every
    check rests on formulas."""
    order = list(EVIDENCE) + [UNDECLARED]
    counts = {k: sum(1 for x in kinds if x == k) for k in order}
    if kinds and counts["formula"] == len(kinds):
        return "formula only"
    return ", ".join(f"{k} {n}" for k, n in counts.items() if n)
