"""The import path a name reports when a module was split by content (issue 56) and the old module
stays the public place the name is imported from: its ``__module__``, the path the claims' index
(``qstr verify --list``), reprs and pickles show."""

from __future__ import annotations

import inspect

__all__ = ["report_public_path"]


def report_public_path(module: str, *objects) -> None:
    """Set ``__module__`` of each function or class to ``module``, and of a class's own functions
    (methods, class and static methods, property getters) too; their code stays where it is."""
    for obj in objects:
        obj.__module__ = module
        if inspect.isclass(obj):
            for member in vars(obj).values():
                function = getattr(member, "__func__", getattr(member, "fget", member))
                if inspect.isfunction(function):
                    function.__module__ = module
