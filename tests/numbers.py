"""Numbers computed at run time against committed ones (issue 52): a committed summary, a docs
page's JUnit properties or a README table holds numbers that another environment (another torch,
numpy or scipy) computes a few units in the last place apart, so such a test compares the parsed
numbers at a stated relative tolerance and everything else exactly. Exactness stays the rule
within one run (two runs of the same environment compare with ==, not here).

``assert_close(got, want, rel_tol=...)`` walks two JSON-like values (dicts, lists, tuples,
numbers, strings, None, bools): numbers compare with math.isclose, strings as texts whose numbers
compare so and whose other characters must be equal, the rest with ==. A mismatch names its path
(``$.fits.1str.rnn.a``, ``$[3]``, ``$.numbers#2`` for a text's third number) and both values.
"""

from __future__ import annotations

import math
import re

# a number standing alone: not a part of a word (h200, tf32, 1STR stay text), sign included only
# where nothing word-like precedes it (0.65-0.91 is two numbers, 0.65 and 0.91, on both sides)
NUMBER = re.compile(
    r"(?<![\w.])(?:[-+](?=[\d.]))?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])"
    r"|(?<![\w.])[-+]?(?:nan|inf)(?![\w.])"
)


def split_numbers(text: str) -> tuple[list[str], list[float]]:
    """The text around the numbers (one more piece than numbers) and the numbers, parsed."""
    pieces, numbers, at = [], [], 0
    for m in NUMBER.finditer(text):
        pieces.append(text[at : m.start()])
        numbers.append(float(m.group()))
        at = m.end()
    pieces.append(text[at:])
    return pieces, numbers


def _is_number(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _relative(a: float, b: float) -> float:
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


class _Walk:
    def __init__(self, rel_tol: float, abs_tol: float):
        self.rel_tol, self.abs_tol = rel_tol, abs_tol
        self.problems: list[str] = []
        self.largest = (0.0, None)  # (largest relative difference seen, where)
        self.count = 0  # numbers compared

    def number(self, path, a, b):
        self.count += 1
        d = _relative(float(a), float(b))
        if d > self.largest[0]:
            self.largest = (d, path)
        both_nan = math.isnan(a) and math.isnan(b)
        if not both_nan and not math.isclose(a, b, rel_tol=self.rel_tol, abs_tol=self.abs_tol):
            self.problems.append(f"{path}: {a!r} != {b!r} (relative difference {d:.3g})")

    def text(self, path, a: str, b: str):
        (pa, na), (pb, nb) = split_numbers(a), split_numbers(b)
        if pa != pb:
            self.problems.append(f"{path}: {a!r} != {b!r} (beyond their numbers)")
            return
        for i, (x, y) in enumerate(zip(na, nb, strict=True)):
            self.number(f"{path}#{i}", x, y)

    def walk(self, path, a, b):
        if _is_number(a) and _is_number(b):
            self.number(path, a, b)
        elif isinstance(a, str) and isinstance(b, str):
            self.text(path, a, b)
        elif isinstance(a, dict) and isinstance(b, dict):
            if a.keys() != b.keys():
                self.problems.append(
                    f"{path}: keys only in got {sorted(a.keys() - b.keys(), key=str)}, "
                    f"only in want {sorted(b.keys() - a.keys(), key=str)}"
                )
            for k in a.keys() & b.keys():
                self.walk(f"{path}.{k}", a[k], b[k])
        elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
            if len(a) != len(b):
                self.problems.append(f"{path}: {len(a)} items != {len(b)} items")
            for i, (x, y) in enumerate(zip(a, b, strict=False)):
                self.walk(f"{path}[{i}]", x, y)
        elif a != b or type(a) is not type(b):
            self.problems.append(f"{path}: {a!r} != {b!r}")


def assert_close(got, want, *, rel_tol: float, abs_tol: float = 0.0, what: str = "") -> None:
    """got (computed now) matches want (committed): numbers within rel_tol (or abs_tol near 0),
    all else equal. Prints the largest relative difference seen (pytest -s shows it), which is
    how each caller's tolerance was measured."""
    w = _Walk(rel_tol, abs_tol)
    w.walk("$", got, want)
    d, where = w.largest
    print(f"{what or 'compared'}: {w.count} numbers, largest relative difference {d:.3g} ({where})")
    assert not w.problems, (
        f"{what}: {len(w.problems)} mismatch(es) at rel_tol={rel_tol:g}, abs_tol={abs_tol:g}:\n"
        + "\n".join(w.problems[:20])
    )
