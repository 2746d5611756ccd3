"""The pure parts of the mutation runner: which tests a mutant runs, and the two scores.

A mutant of ``<package>/<module>.py`` runs the test files of ``tests/<package>/`` that import
that module (``import qstr.<package>.<module>``, ``from qstr.<package>.<module> import ...``,
``from qstr.<package> import <module>``) and the file mirroring it,
``tests/<package>/test_<module>.py``.
A row records one mutant's outcome: killed by verify, killed by the tests, survived, or neither (the
mutant could not be applied or the runner failed: no score counts it).
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Iterable, List

VERIFY, TESTS = "killed-by-verify", "killed-by-tests"
SURVIVED, INCOMPETENT = "survived", "incompetent"


def dotted_name(module: str) -> str:
    """``bounds/attention.py`` -> ``qstr.bounds.attention``."""
    return "qstr." + ".".join(Path(module).with_suffix("").parts)


def imports_module(source: str, dotted: str) -> bool:
    """Whether ``source`` imports the module ``dotted`` (or something from it), anywhere."""
    parent, _, leaf = dotted.rpartition(".")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            if any(a.name == dotted or a.name.startswith(dotted + ".") for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            name = node.module or ""
            if name == dotted or name.startswith(dotted + "."):
                return True
            if name == parent and any(a.name == leaf for a in node.names):
                return True
    return False


def select_tests(tests_root: Path, module: str) -> List[str]:
    """The test files (relative to the root above ``tests_root``) for a mutant of ``module``
    (``bounds/attention.py``): the mirror ``tests/bounds/test_attention.py`` and every
    ``tests/bounds/test_*.py`` that imports ``qstr.bounds.attention``. Sorted; empty when none."""
    package, stem = Path(module).parts[0], Path(module).stem
    folder, dotted = tests_root / package, dotted_name(module)
    chosen = [
        f
        for f in sorted(folder.glob("test_*.py"))
        if f.name == f"test_{stem}.py" or imports_module(f.read_text(), dotted)
    ]
    return [str(f.relative_to(tests_root.parent)) for f in chosen]


def score(killed: int, n: int) -> str:
    """``k/n (x%)``, or ``0/0 (-)`` before any mutant has run."""
    return f"{killed}/{n} ({100 * killed / n:.1f}%)" if n else "0/0 (-)"


def interval(killed: int, n: int) -> float:
    """Half-width, in points, of the normal 95% interval of killed/n."""
    if n == 0:
        return math.nan
    p = killed / n
    return 100 * 1.96 * math.sqrt(max(p * (1 - p), 1e-12) / n)


def tally(outcomes: Iterable[str]) -> dict:
    """Counts of the outcomes and the two scores' numerators over the scored mutants
    (``n``: killed or survived; incompetent ones are left out of both)."""
    c = {VERIFY: 0, TESTS: 0, SURVIVED: 0, INCOMPETENT: 0}
    for o in outcomes:
        c[o] += 1
    n = c[VERIFY] + c[TESTS] + c[SURVIVED]
    return {**c, "n": n, "verify": c[VERIFY], "either": c[VERIFY] + c[TESTS]}


def latest(rows: Iterable[dict]) -> dict:
    """{mutant id: its last row}: a resumed or re-run mutant counts once."""
    return {r["id"]: r for r in rows}
