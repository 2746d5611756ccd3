"""verify/claims/ is read top to bottom: one module per claim, listed once in table order by the
package, none importing another, none over 600 lines (docs/claims.md)."""

import ast
from pathlib import Path

import qstr.verify.claims as claims_pkg
from qstr.verify.claim import EVIDENCE
from qstr.verify.claims import all_claims

CLAIMS = Path(claims_pkg.__file__).resolve().parent
MODULES = sorted(p.stem for p in CLAIMS.glob("*.py") if not p.stem.startswith("_"))


def _imported(path: Path) -> set:
    """The qstr.verify.claims modules a source file imports (at any depth)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "qstr.verify.claims":
                names |= {a.name for a in node.names}
            elif node.module.startswith("qstr.verify.claims."):
                names.add(node.module.rsplit(".", 1)[1])
        elif isinstance(node, ast.Import):
            names |= {
                a.name.rsplit(".", 1)[1]
                for a in node.names
                if a.name.startswith("qstr.verify.claims.")
            }
    return names


def _listed() -> list:
    """The claim modules in the order verify/claims/__init__.py imports them."""
    tree = ast.parse((CLAIMS / "__init__.py").read_text())
    return [
        a.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "qstr.verify.claims"
        for a in node.names
    ]


def test_the_package_lists_every_claim_module_once():
    listed = _listed()
    assert sorted(listed) == MODULES and len(set(listed)) == len(listed), listed


def test_no_claim_module_imports_another():
    crossing = {m: sorted(_imported(CLAIMS / f"{m}.py") & set(MODULES)) for m in MODULES}
    assert not any(crossing.values()), {m: c for m, c in crossing.items() if c}


def test_table_order_is_the_listed_module_order():
    home = [c.inputs_function.__module__.rsplit(".", 1)[1] for c in all_claims().values()]
    firsts = list(dict.fromkeys(home))
    assert firsts == _listed(), firsts


def test_no_claim_module_is_over_600_lines():
    long = {
        m: n for m in MODULES if (n := len((CLAIMS / f"{m}.py").read_text().splitlines())) > 600
    }
    assert not long, long


def test_faults_name_their_targets_by_check_objects():
    """No string literal inside a ``breaks=`` argument: targets are the check objects."""
    strings = []
    for path in CLAIMS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            for kw in getattr(node, "keywords", ()):
                if kw.arg == "breaks":
                    strings += [
                        f"{path.name}:{n.lineno}"
                        for n in ast.walk(kw.value)
                        if isinstance(n, ast.Constant) and isinstance(n.value, str)
                    ]
    assert not strings, strings


def test_every_check_says_what_it_rests_on():
    """Every built-in check declares its evidence (built, exact, monte-carlo, formula)."""
    undeclared = [
        f"{c.id}: {k.name}"
        for c in all_claims().values()
        for k in c.checks
        if k.evidence not in EVIDENCE
    ]
    assert not undeclared, undeclared


def test_every_claim_says_what_a_run_checked():
    """Every built-in claim declares its scope line (@claim.scope_with)."""
    assert not [c.id for c in all_claims().values() if c.scope is None]
