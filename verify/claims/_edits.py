"""Faults' edits written on one case: the ``@each`` decorator under ``@claim.fault``."""

from __future__ import annotations

import inspect
from typing import Callable, Optional

from qstr.verify.claim import fields_edited, mapped


def each(cases: str = "cases", field: Optional[str] = None) -> Callable:
    """Decorator under ``@claim.fault``: ``edit(case)`` becomes the fault's edit of every element of
    the inputs' tuple ``cases`` (``mapped``), or with ``field`` gives that field's new value in each
    (``mapped`` of ``fields_edited``), so the fault is declared where its edit is written. An
    ``edit(case, ctx)`` of the whole case is given the run's context."""

    def declare(edit: Callable) -> Callable:
        if field is None and len(inspect.signature(edit).parameters) == 2:
            return lambda inp, ctx: mapped(cases, lambda case: edit(case, ctx))(inp)
        return mapped(cases, edit if field is None else fields_edited(**{field: edit}))

    return declare
