"""Which mutants sit in argument handling: the checks of bad input that the unit tests own,
not a claim.

A mutant is *argument handling* when its position lies in
- the test of an ``if`` (or ``elif``) whose body only raises (``if q > N: raise ValueError(...)``),
  and the iterable of a ``for`` whose body is only such checks
  (``for k in keys: if k not in cfg: raise ...``),
- a ``raise`` statement or an ``assert`` (the message and its numbers),
- the arguments of a call to ``qstr.constructions.validate`` (``positive_int("N", N, minimum=2)``),
- a ``def`` line outside its default values (``*`` keyword-only markers).
Everything else (arithmetic, defaults, branches that compute) is the mathematics the claims
must catch.
The rule is syntactic, so no one classifies a survivor by hand after seeing it survive.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import List, Tuple

Span = Tuple[Tuple[int, int], Tuple[int, int]]  # ((line, col), (end line, end col)), lines from 1


def _span(node: ast.AST) -> Span:
    return (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)


def _validator_names(tree: ast.Module) -> set:
    """Names bound to the validate module or imported from it."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("validate"):
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and any(a.name == "validate" for a in node.names):
            names |= {a.asname or a.name for a in node.names if a.name == "validate"}
    return names


def _is_validator_call(node: ast.Call, names: set) -> bool:
    f = node.func
    if isinstance(f, ast.Name):
        return f.id in names
    return (
        isinstance(f, ast.Attribute)
        and isinstance(f.value, ast.Name)
        and f.value.id == "validate"
        and "validate" in names
    )


def _signature(node) -> Tuple[Span, List[Span]]:
    """The def line(s) up to the body, and the default values inside it
    (defaults are behaviour, not checks)."""
    whole = (node.lineno, node.col_offset), (node.body[0].lineno, 0)
    defaults = [d for d in node.args.defaults + node.args.kw_defaults if d is not None]
    return whole, [_span(d) for d in defaults]


def _is_check(node: ast.AST) -> bool:
    """An ``if`` whose body only raises."""
    return (
        isinstance(node, ast.If)
        and bool(node.body)
        and all(isinstance(s, ast.Raise) for s in node.body)
    )


@lru_cache(maxsize=None)
def argument_spans(source: str) -> Tuple[List[Span], List[Span]]:
    """(spans that are argument handling, holes inside them that are not) of one module's source."""
    tree = ast.parse(source)
    names = _validator_names(tree)
    spans, holes = [], []
    for node in ast.walk(tree):
        if _is_check(node):
            spans.append(_span(node.test))
        elif isinstance(node, ast.For) and not node.orelse and all(_is_check(s) for s in node.body):
            spans.append(_span(node.iter))
        elif isinstance(node, (ast.Raise, ast.Assert)):
            spans.append(_span(node))
        elif isinstance(node, ast.Call) and _is_validator_call(node, names):
            spans.append(_span(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            whole, defaults = _signature(node)
            spans.append(whole)
            holes.extend(defaults)
    return spans, holes


def _inside(pos: Tuple[int, int], span: Span) -> bool:
    return span[0] <= pos < span[1]


def is_argument_handling(path: Path, pos: Tuple[int, int]) -> bool:
    """Whether the mutant starting at ``pos`` = (line from 1, column from 0) of ``path`` is
    argument handling."""
    spans, holes = argument_spans(Path(path).read_text())
    return any(_inside(pos, s) for s in spans) and not any(_inside(pos, h) for h in holes)
