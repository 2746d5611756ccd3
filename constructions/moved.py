"""Old paths of names that moved from ``qstr.constructions`` to ``qstr.bounds`` (issue 56): they
keep working, with a DeprecationWarning, and load ``qstr.bounds`` only when asked for, so that
constructions never imports bounds (docs/architecture.md)."""

from __future__ import annotations

import importlib
import warnings
from typing import Callable, Dict

__all__ = ["moved", "module_getattr"]


def moved(old: str, name: str, home: str, advice: str = "import it from there"):
    """``home.name``, loaded now, after a DeprecationWarning that ``old`` moved there (charged to
    the caller of the function that calls this one)."""
    warnings.warn(f"{old} moved to {home}.{name}; {advice}", DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(home), name)


def module_getattr(module: str, homes: Dict[str, str]) -> Callable[[str], object]:
    """The PEP 562 ``__getattr__`` of ``module`` serving each moved name of ``homes`` (name -> the
    ``qstr.bounds`` module it lives in now) through :func:`moved`."""

    def __getattr__(name: str):
        if name not in homes:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return moved(f"{module}.{name}", name, homes[name])

    return __getattr__
