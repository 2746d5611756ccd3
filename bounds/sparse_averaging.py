"""The single sparse-averaging head (remark after Prop 3): the coherence below which it separates
the q keys of a set from the others. Derivation: docs/derivations/sparse-averaging.md."""

from __future__ import annotations

from qstr.constructions import validate

__all__ = ["separation_limit"]


def separation_limit(q: int) -> float:
    """1 / (2q - 1) (remark after Prop 3): the single averaging head separates in-set from
    out-of-set keys only for mu below it (in-set scores >= A(1 - (q-1) mu) beat out-of-set
    scores <= A q mu); ``sparse_average_head`` refuses codes at or above it."""
    q = validate.positive_int("q", q)
    return 1.0 / (2 * q - 1)
