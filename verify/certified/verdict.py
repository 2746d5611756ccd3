"""A certified computation as a check's verdict (docs/claims.md, "Certified checks";
docs/derivations/certified.md): the enclosures decide where they can, never a silent pass."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

from qstr.verify.ball import CERTIFIED, VIOLATED, Certified
from qstr.verify.verdict import Verdict, at_most


def certified(rec: Certified, fallback: Optional[Callable[[], Verdict]] = None) -> Verdict:
    """measured <= bound from ``rec``: holds when the measured enclosure lies below the bound's,
    fails when it lies above; where they straddle, the float64 ``fallback``'s verdict, said to be
    the fallback (no fallback: fails)."""
    balls = dict(
        enclosure=(rec.measured.lower, rec.measured.upper),
        bound_enclosure=(rec.bound.lower, rec.bound.upper),
    )
    if rec.status in (CERTIFIED, VIOLATED):
        v = at_most(rec.measured.upper, rec.bound.lower, detail=rec.line())
        return replace(v, holds=rec.status == CERTIFIED, certified=True, **balls)
    if fallback is None:
        v = at_most(rec.measured.upper, rec.bound.lower, detail=f"{rec.line()}; no fallback")
        return replace(v, holds=False, certified=False, **balls)
    v = fallback()
    detail = f"{rec.line()}; the float64 check decides: {v.detail}"
    return replace(v, detail=detail, certified=False, **balls)
