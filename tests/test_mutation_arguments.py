"""mutation/arguments.py: which mutants count as argument handling (the unit tests' job) and which
as the mathematics (the claims' job)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "mutation_arguments", ROOT / "mutation" / "arguments.py"
)
arguments = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(arguments)

SOURCE = '''\
from qstr.constructions import validate
from qstr.constructions.validate import positive_int


def f(N, q=2, *, eps=0.1):
    N = positive_int("N", N, minimum=2)
    eps = validate.positive_float("eps", eps)
    if q > N // 2:
        raise ValueError(f"q must be <= {N // 2}")
    if q > 1:
        q = q - 1
    assert N >= 2
    return N * eps / q


def g(cfg):
    for k in ("a", "b"):
        if k not in cfg:
            raise ValueError(k)
    for k in ("a", "b"):
        cfg[k] = 2 * cfg[k]
    return cfg
'''


def _find(path, line_no, token, nth=0):
    """(line, column) of the nth occurrence of token on a line."""
    line = path.read_text().splitlines()[line_no - 1]
    col = -1
    for _ in range(nth + 1):
        col = line.index(token, col + 1)
    return line_no, col


def test_argument_checks_are_classified_and_the_mathematics_is_not(tmp_path):
    p = tmp_path / "m.py"
    p.write_text(SOURCE)
    arg = lambda line, token, nth=0: arguments.is_argument_handling(p, _find(p, line, token, nth))  # noqa: E731
    assert arg(6, "2")  # a validate call's minimum
    assert arg(7, '"eps"')  # validate.positive_float's arguments
    assert arg(8, ">")  # if ...: raise  -> its test
    assert arg(8, "//")
    assert arg(9, "//")  # the message's number
    assert arg(5, "*")  # the keyword-only marker
    assert arg(12, ">=")  # an assert
    assert not arg(5, "2")  # a default value is behaviour
    assert not arg(5, "0.1")
    assert not arg(10, ">")  # an if that computes
    assert not arg(11, "-")
    assert not arg(13, "*")  # the result
    assert not arg(13, "/")
    assert arg(17, "(")  # the keys a for loop of checks walks
    assert not arg(20, "(")  # a for loop that computes
    assert not arg(21, "*")


def test_every_module_of_the_mutated_packages_parses():
    for pkg in ("constructions", "bounds"):
        for f in (ROOT / pkg).glob("*.py"):
            spans, holes = arguments.argument_spans(f.read_text())
            assert all(s[0] < s[1] for s in spans + holes), f
