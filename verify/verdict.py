"""What one check found: a ``Verdict`` (measured, bound, holds, the rounding term) and the
constructors that decide it (``at_most``, ``at_least``, ``close``, ``exact``), with ``worst``, the
worst case over many (docs/claims.md, "Checks"; the rounding terms: docs/derivations/rounding.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Optional, Tuple, Union

from qstr.verify.rounding import Rounding, dtype_name

Number = Union[float, int, str]


@dataclass(frozen=True)
class Verdict:
    """What one check measured against what the paper promises.

    ``holds`` is decided by the constructor (``at_most``, ``at_least``, ``close``, ``exact``);
    ``rounding`` is the floating-point term added to the bound (docs/derivations/rounding.md);
    ``tol`` is a two-sided check's tolerance (``close``); ``vacuous``: the bound says nothing on
    these inputs (a width lower bound below 1, a probability bound above 1), so the check's
    status is ``vacuous``, never a bare ``holds`` (docs/claims.md, "Status"); ``enclosure``,
    ``bound_enclosure`` and ``certified``: a certified check's balls (docs/claims.md,
    "Certified checks")."""

    measured: Number
    bound: Number
    holds: bool
    relation: str = "<="
    rounding: float = 0.0
    detail: str = ""
    dtype: str = "float64"
    tol: float = 0.0
    vacuous: bool = False
    # a certified check (evidence "certified", docs/derivations/certified.md): the enclosures of
    # the measured value and of the bound as [lower, upper]; ``certified`` True when they decide
    # the verdict, False when they straddle and the verdict is the float64 fallback's
    enclosure: Optional[Tuple[float, float]] = None
    bound_enclosure: Optional[Tuple[float, float]] = None
    certified: Optional[bool] = None
    # the (label, verdict) cases a ``worst`` was taken over, each case's own (pytest items
    # report them); () for a single measurement
    cases: Tuple[Tuple[str, "Verdict"], ...] = field(default=(), repr=False, compare=False)

    @property
    def shown_bound(self) -> str:
        """The bound as the table shows it: relation, value, and the rounding term if any."""
        bound = _fmt(self.bound)
        extra = f" + {self.rounding:.2g}" if self.rounding else ""
        return f"{self.relation} {bound}{extra}" if self.relation else f"{bound}{extra}"

    @property
    def slack(self) -> float:
        """How far from failing, relative to the bound: (bound + term - measured) / (|bound| +
        term) for <=, the mirror for >=, (tol + term - |measured - target|) / (tol + term) for
        a two-sided check; +-1 for an exact one. Negative exactly when the check fails."""
        if self.relation == "==" or not isinstance(self.measured, (int, float)):
            return 1.0 if self.holds else -1.0
        m, b, r = float(self.measured), float(self.bound), self.rounding
        if not math.isfinite(m):
            return -math.inf
        if self.relation == "<=":
            room, scale = b + r - m, abs(b) + r
        elif self.relation == ">=":
            room, scale = m - b + r, abs(b) + r
        else:
            room, scale = self.tol + r - abs(m - b), self.tol + r
        return room / scale if scale > 0 else (0.0 if room >= 0 else -math.inf)

    @property
    def ratio(self) -> Optional[float]:
        """How near the bound the measurement comes, 1 at equality: measured / bound for <=,
        bound / measured for >=, where the bound is positive and the measurement nonnegative;
        None otherwise (a two-sided or exact check, a sign condition such as margin >= 0)."""
        if self.relation not in ("<=", ">=") or not isinstance(self.measured, (int, float)):
            return None
        m, b = float(self.measured), float(self.bound)
        if not (b > 0 and m >= 0 and math.isfinite(m) and math.isfinite(b)):
            return None
        if self.relation == "<=":
            return m / b
        return b / m if m > 0 else None

    @property
    def status(self) -> str:
        """'holds', 'fails', or 'vacuous' (holds, on inputs where the bound says nothing)."""
        if not self.holds:
            return "fails"
        return "vacuous" if self.vacuous else "holds"

    def labelled(self, label: str) -> "Verdict":
        """The verdict with ``label`` (the case it comes from) at the front of its detail."""
        return replace(self, detail=_detail(label, self.detail))


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
    vacuous: bool = False,
) -> Verdict:
    """measured <= bound + rounding term (``vacuous``: the bound says nothing on these inputs)."""
    term, what, dtype = _rounding(rounding, dtype)
    m, b = float(measured), float(bound)
    ok = bool(m <= b + term)
    return Verdict(m, b, ok, "<=", term, _detail(detail, what), dtype, vacuous=bool(vacuous))


def at_least(
    measured: float,
    bound: float,
    rounding: Union[Rounding, float, None] = None,
    detail: str = "",
    dtype: Optional[str] = None,
    vacuous: bool = False,
) -> Verdict:
    """measured >= bound - rounding term (``vacuous``: the bound says nothing on these inputs)."""
    term, what, dtype = _rounding(rounding, dtype)
    m, b = float(measured), float(bound)
    ok = bool(m >= b - term)
    return Verdict(m, b, ok, ">=", term, _detail(detail, what), dtype, vacuous=bool(vacuous))


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
    relation = f"= (+- {tol:.2g})" if tol else "="
    return Verdict(m, t, bool(ok), relation, term, _detail(detail, what), dtype, float(tol))


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


def worst(
    cases: Iterable[Tuple[str, Verdict]],
    key: Optional[Callable[[Verdict], float]] = None,
) -> Verdict:
    """The worst case of a check over many: of ``(label, verdict)`` pairs, the verdict with the
    least ``slack``, its label at the front of its detail.

    The result fails exactly when some case fails: when one does, only the failing cases are
    ranked. ``key`` ranks by another measure (the largest ``key(verdict)``: e.g. ``by_measured``,
    ``by_ratio``), among the failing cases if any, else among all."""
    cases = list(cases)
    if not cases:
        raise ValueError("worst needs at least one (label, verdict) case")
    pool = [c for c in cases if not c[1].holds] or cases
    if key is None:
        label, verdict = min(pool, key=lambda c: c[1].slack)
    else:
        label, verdict = max(pool, key=lambda c: key(c[1]))
    flat = tuple(
        (_detail(lab, inner) if inner else lab, v)
        for lab, case in cases
        for inner, v in (case.cases or (("", case),))
    )
    return replace(verdict.labelled(f"worst {label}" if label else ""), cases=flat)


def by_measured(v: Verdict) -> float:
    """``worst``'s key: the case with the largest measured value."""
    return v.measured


def by_ratio(v: Verdict) -> float:
    """``worst``'s key: the case with the largest measured / bound."""
    return v.measured / v.bound
