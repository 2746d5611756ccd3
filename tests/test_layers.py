"""The one-way layering of the packages (constructions -> bounds -> verify), checked on imports."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest


def _modules_after(stmt: str) -> set:
    """The project modules loaded by ``stmt`` in a fresh interpreter."""
    code = f"{stmt}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    return {m[len("qstr.") :] for m in out if m.startswith("qstr.")}


def test_registry_does_not_import_the_claims():
    loaded = _modules_after("import qstr.verify.registry")
    assert not any(m.startswith("verify.claims") for m in loaded), sorted(loaded)


@pytest.mark.parametrize(
    "stmt",
    [
        "import qstr.verify.training",
        "import qstr.constructions.paper_models",
        "import qstr.constructions.experiment_models",
        "import qstr.constructions.published_models",
        "import qstr.bounds.transformer",
    ],
)
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
