"""The records of a claim's run: each check's verdict, each fault's, and the claim's row
(``qstr verify --json``: docs/formats.md). Built by ``qstr.verify.runner``, printed by
``qstr.verify.report``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import List, Optional, Tuple

from qstr.verify.claim import UNDECLARED
from qstr.verify.verdict import Number, Verdict

TIMED_OUT = "timed out after"  # how the error of a claim past its --timeout begins


@dataclass
class CheckResult:
    """One check's verdict as recorded (``--json``: docs/formats.md)."""

    name: str
    measured: Number
    bound: Number
    relation: str
    holds: bool
    rounding: float = 0.0
    detail: str = ""
    dtype: str = "float64"
    error: str = ""
    seconds: float = 0.0
    evidence: str = UNDECLARED  # what the check rests on (claim.EVIDENCE)
    vacuous: bool = False  # holds, on inputs where the bound says nothing (Verdict.vacuous)
    ratio: Optional[float] = None  # measured / bound (<=) or bound / measured (>=): Verdict.ratio
    slack: Optional[float] = None  # Verdict.slack: (room to the bound) / |bound|
    enclosure: Optional[Tuple[float, float]] = None  # a certified check's [lower, upper]
    bound_enclosure: Optional[Tuple[float, float]] = None  # ... and its bound's
    certified: Optional[bool] = None  # True: the balls decide; False: the float64 fallback did

    @property
    def status(self) -> str:
        """'holds', 'fails' or 'vacuous' (Verdict.status); 'crashed' when the check raised."""
        if self.error:
            return "crashed"
        return "fails" if not self.holds else ("vacuous" if self.vacuous else "holds")

    @property
    def shown_bound(self) -> str:
        return Verdict(
            self.measured, self.bound, self.holds, self.relation, self.rounding
        ).shown_bound


@dataclass
class FaultResult:
    """One fault: the checks it must break and what they measured on the broken inputs."""

    name: str
    breaks: Tuple[str, ...]
    caught: bool
    checks: List[CheckResult] = field(default_factory=list)
    error: str = ""
    refused: str = ""  # the refusal the fault declares (Fault.refuses), when a builder raised it


@dataclass
class Result:
    """One claim's row: its headline check, every check and fault, and what the run checked."""

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
    error: str = ""
    measured_value: Optional[float] = None
    bound_value: Optional[float] = None
    checks: List[CheckResult] = field(default_factory=list)
    faults: List[FaultResult] = field(default_factory=list)
    evidence: str = ""  # the checks' evidence mix, e.g. "built 6, formula 3" (claim.evidence_mix)
    scope: str = ""  # what the run checked: sizes, widths, forms (@claim.scope_with)
    vacuity: str = ""  # sample-complexity results: where the explicit statement is vacuous
    vacuous: bool = False  # ... at every size the claim checked
    marks: Tuple[str, ...] = ()  # the claim's marks (Claim(marks=...)): recorded only when some

    @property
    def passed(self) -> bool:
        return self.holds and self.falsifier_caught

    @property
    def failed_checks(self) -> List[CheckResult]:
        return [c for c in self.checks if not c.holds]

    @property
    def missed_faults(self) -> List[FaultResult]:
        return [f for f in self.faults if not f.caught]

    def record(self) -> dict:
        """The claim as ``--json`` writes it (docs/formats.md): each check with its status."""
        out = asdict(self) | {"passed": self.passed}
        if not self.marks:  # a claim without marks is recorded as before marks existed
            del out["marks"]
        pairs = list(zip(out["checks"], self.checks, strict=True))
        pairs += [
            p
            for rf, f in zip(out["faults"], self.faults, strict=True)
            for p in zip(rf["checks"], f.checks, strict=True)
        ]
        for rec, c in pairs:
            rec["status"] = c.status
            if c.certified is None:  # a float check is recorded as before certified checks
                for key in ("enclosure", "bound_enclosure", "certified"):
                    del rec[key]
        return out
