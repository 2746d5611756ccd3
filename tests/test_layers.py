"""The one-way layering of the packages (constructions -> bounds -> verify), checked on imports."""

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest


# Statements run in turn in one fresh interpreter, each charged with the project modules it adds.
# In a group a statement forbids no module an earlier one may load (all of verify is forbidden to
# the first four, the claims to the registry), so a forbidden module that an earlier statement
# loaded fails that earlier statement's test: the tests fail together exactly when they would
# one interpreter each. Training may load verify, so it runs alone.
GROUPS = (
    (
        "import qstr.constructions.paper_models",
        "import qstr.constructions.experiment_models",
        "import qstr.constructions.published_models",
        "import qstr.bounds.transformer",
        "import qstr.verify.registry",
    ),
    ("import qstr.verify.training",),
)
_RUN = """
import json, sys
seen, added = set(sys.modules), {}
for stmt in json.loads(sys.argv[1]):
    exec(stmt)
    added[stmt] = sorted(set(sys.modules) - seen)
    seen = set(sys.modules)
print(json.dumps(added))
"""


@functools.lru_cache(maxsize=None)
def _added_in(group: tuple) -> dict:
    """Each statement of ``group``: the project modules it loads that none before it loaded."""
    out = subprocess.run(
        [sys.executable, "-c", _RUN, json.dumps(group)], capture_output=True, text=True, check=True
    ).stdout
    added = json.loads(out).items()
    return {k: {m[len("qstr.") :] for m in v if m.startswith("qstr.")} for k, v in added}


def _modules_after(stmt: str) -> set:
    """The project modules ``stmt`` loads in a fresh interpreter, beyond those its group's earlier
    statements loaded."""
    return _added_in(next(g for g in GROUPS if stmt in g))[stmt]


def test_registry_does_not_import_the_claims():
    loaded = _modules_after("import qstr.verify.registry")
    assert not any(m.startswith("verify.claims") for m in loaded), sorted(loaded)


@pytest.mark.parametrize("stmt", [s for g in GROUPS for s in g if "registry" not in s])
def test_lower_layers_do_not_reach_up(stmt):
    """Training uses constructions and bounds only; constructions and bounds never load verify."""
    loaded = _modules_after(stmt)
    allowed = {"verify", "verify.training"} if "training" in stmt else set()
    above = {
        m
        for m in loaded
        if m.split(".")[0] == "verify" and m not in allowed and not m.startswith("verify.training.")
    }
    assert not above, sorted(above)


def test_a_group_charges_each_statement_with_what_it_adds():
    """The grouping itself: the first statement's modules are its own, a later statement is not
    charged with modules an earlier one loaded, and the registry adds the verify modules."""
    first, *_, registry = GROUPS[0]
    added = _added_in(GROUPS[0])
    assert "constructions.paper_models" in added[first]
    assert all("constructions.paper_models" not in added[s] for s in GROUPS[0][1:])
    assert "verify.registry" in added[registry] and "verify" in added[registry]


def test_one_installed_name():
    """The packages import as qstr.constructions / qstr.bounds / qstr.verify, not as top-level
    names."""
    import qstr.verify.cli  # noqa: PLC0415 - the test is about this import

    assert qstr.verify.cli.__name__ == "qstr.verify.cli"
    code = (
        "import importlib.util, sys; sys.path = [p for p in sys.path if p not in ('', '.')]; "
        "print([n for n in ('constructions', 'bounds', 'verify') if importlib.util.find_spec(n)])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
    ).stdout
    assert out.strip() == "[]", out


LAYERS = ("constructions", "bounds", "verify")


def _qstr_imports():
    """(importing package, imported module, imported names) for every ``qstr.`` import in the
    source, including imports inside functions."""
    root = Path(__file__).resolve().parents[1]
    for pkg in LAYERS:
        for path in sorted((root / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.module
                    and node.module.startswith("qstr.")
                ):
                    yield pkg, path.name, node.module, [a.name for a in node.names]
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.name.startswith("qstr."):
                            yield pkg, path.name, a.name, []


def test_no_import_runs_up_the_layers_even_inside_functions():
    """constructions imports neither bounds nor verify; bounds never imports verify."""
    up = [
        (pkg, f, mod)
        for pkg, f, mod, _ in _qstr_imports()
        if LAYERS.index(mod.split(".")[1]) > LAYERS.index(pkg)
    ]
    assert not up, up


def test_no_private_name_crosses_a_package():
    """A module or name starting with '_' is only imported inside its own top-level package."""
    crossing = []
    for pkg, f, mod, names in _qstr_imports():
        if mod.split(".")[1] == pkg:
            continue
        private = [p for p in mod.split(".") if p.startswith("_")] + [
            n for n in names if n.startswith("_")
        ]
        if private:
            crossing.append((pkg, f, mod, private))
    assert not crossing, crossing
