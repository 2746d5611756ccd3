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
    # constructions/ builds without bounds/; an old name of a moved bound loads its new home
    (
        "from qstr.constructions.relu import gate_gadget, product_gadget\n"
        "product_gadget(1.0, 5), gate_gadget(1.0, 4)",
        "import qstr.constructions.attention",
        "from qstr.constructions.codes import padded_rs_hadamard_codebook\n"
        "padded_rs_hadamard_codebook(16)",
        "import qstr.constructions.codes as c\nc.build_codebook",
    ),
)
BUILDS = GROUPS[2]
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


@pytest.mark.parametrize("stmt", BUILDS[:-1])
def test_constructions_build_without_loading_bounds(stmt):
    """Importing constructions/ and building gadgets and codebooks loads no bounds/ module: the
    bounds that used to live there moved (docs/architecture.md)."""
    assert not any(m.startswith("bounds") for m in _modules_after(stmt)), stmt


def test_an_old_name_of_a_moved_bound_loads_its_new_home():
    """``qstr.constructions.codes.build_codebook`` (a name served from bounds/codebooks.py) loads
    that module and its package, nothing else of bounds/."""
    added = _modules_after(BUILDS[-1])
    assert {m for m in added if m.startswith("bounds")} == {"bounds", "bounds.codebooks"}


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


def _module_name(package_root: Path, pkg: str, path: Path) -> str:
    """'qstr.verify.claims.lemma_11' of verify/claims/lemma_11.py ('qstr.verify' of its
    __init__.py)."""
    parts = ["qstr", pkg, *path.relative_to(package_root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:``: imports for annotations only, never run, so no dependency."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and getattr(test, "id", getattr(test, "attr", "")) == (
        "TYPE_CHECKING"
    )


def _imports_in(node: ast.AST, inside: bool = False):
    """(import node, whether it sits inside a function) for every import below ``node``:
    module level, function and class bodies, ``if`` and ``try`` blocks alike."""
    for child in ast.iter_child_nodes(node):
        if _type_checking(child):
            continue
        deeper = inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, deeper
        yield from _imports_in(child, deeper)


def _imported(node, module: str, is_package: bool, modules) -> list:
    """The project modules an import statement in ``module`` names (``from P import m`` names the
    module P.m when there is one, else P; a relative import resolved against ``module``)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            here = module.split(".") if is_package else module.split(".")[:-1]
            here = here[: len(here) - node.level + 1]
            base = ".".join(here + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    found = []
    for name in names:
        while name and name not in modules:  # a name inside a module: the module
            name = name.rpartition(".")[0]
        if name and name != module:
            found.append(name)
    return found


def _import_graph(root: Path, packages=LAYERS):
    """(module -> the project modules it imports, module -> how many of its imports sit inside
    functions), over every module of ``packages`` under ``root``, wherever an import sits."""
    files = {
        _module_name(root / pkg, pkg, path): path
        for pkg in packages
        for path in sorted((root / pkg).rglob("*.py"))
    }
    graph, in_functions = {m: set() for m in files}, {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, inside in _imports_in(tree):
            targets = _imported(node, module, path.name == "__init__.py", files)
            graph[module].update(targets)
            if inside and targets:
                in_functions[module] = in_functions.get(module, 0) + 1  # statements
    return graph, in_functions


def _cycle(graph) -> list:
    """One import cycle of ``graph`` as [a, b, ..., a] (depth first), or [] when there is none."""
    state, path = {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = "done"
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


@functools.lru_cache(maxsize=None)
def _project_graph():
    return _import_graph(Path(__file__).resolve().parents[1])


def test_the_import_graph_counts_imports_inside_functions_and_finds_a_cycle(tmp_path):
    """The graph itself, on a made-up package: an import inside a function is an arrow, one under
    ``if TYPE_CHECKING`` is not, and a cycle through a function body is found and named."""
    pkg = tmp_path / "verify"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def late():\n    from qstr.verify import high\n")
    (pkg / "high.py").write_text("from . import low\n")
    (pkg / "hint.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import qstr.verify.high\n"
    )
    graph, in_functions = _import_graph(tmp_path, ("verify",))
    assert graph["qstr.verify.low"] == {"qstr.verify.high"}
    assert graph["qstr.verify.high"] == {"qstr.verify.low"} and graph["qstr.verify.hint"] == set()
    assert in_functions == {"qstr.verify.low": 1}
    assert _cycle(graph) == ["qstr.verify.high", "qstr.verify.low", "qstr.verify.high"]
    (pkg / "low.py").write_text("def late():\n    import qstr.verify.hint\n")
    assert _cycle(_import_graph(tmp_path, ("verify",))[0]) == []


def test_no_import_cycle_among_verify_modules_even_inside_functions():
    """No chain of imports, counting those inside functions, leads from a verify module back to
    itself (the claims import the registry, so the registry and the runner never import them)."""
    graph, _ = _project_graph()
    verify = {m: {t for t in ts if t.startswith("qstr.verify")} for m, ts in graph.items()}
    cycle = _cycle({m: ts for m, ts in verify.items() if m.startswith("qstr.verify")})
    assert not cycle, " -> ".join(cycle)


def test_no_import_cycle_between_packages():
    """constructions, bounds and verify import one another one way only, counting imports inside
    functions."""
    graph, _ = _project_graph()
    packages = {}
    for module, targets in graph.items():
        home = module.split(".")[1]
        packages.setdefault(home, set()).update(
            t.split(".")[1] for t in targets if t.split(".")[1] != home
        )
    cycle = _cycle(packages)
    assert not cycle, " -> ".join(cycle)


# the modules that declare, record and run claims: none reaches the paper's claims through any
# chain of imports (qstr.verify.catalog imports them, and hands them on)
RUNNING = ("registry", "claim", "verdict", "results", "runner", "pool", "report")


# the modules at the top, the only ones outside verify/claims/ that import the paper's claims
TOP = ("qstr.verify.catalog", "qstr.verify.pytest_plugin", "qstr.verify.cli")


def test_only_the_top_imports_the_papers_claims():
    """Outside verify/claims/, only the catalog, the CLI and the pytest plugin import the paper's
    claims (``python -m qstr.verify.index`` asks the catalog)."""
    graph, _ = _project_graph()
    importers = sorted(
        m
        for m, targets in graph.items()
        if not m.startswith("qstr.verify.claims")
        and any(t.startswith("qstr.verify.claims") for t in targets)
    )
    assert "qstr.verify.catalog" in importers
    assert not [m for m in importers if not any(m == t or m.startswith(t + ".") for t in TOP)], (
        importers
    )


@pytest.mark.parametrize("name", RUNNING)
def test_the_registry_and_the_runner_never_reach_the_claims(name):
    graph, _ = _project_graph()
    seen, todo = set(), [f"qstr.verify.{name}"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    claims = sorted(m for m in seen if m.startswith("qstr.verify.claims"))
    assert not claims, claims


# The functions a claim declares in ``bounds=`` that stay in constructions/, each with its reason:
# a construction calls it (constructions never imports bounds, so it cannot move up), or it
# computes what the built weights or codes are, not what a theorem promises (issue 56).
DECLARED_BOUNDS_IN_CONSTRUCTIONS = {
    "qstr.constructions.coherence.coherence": "the exact coherence of the codes built",
    "qstr.constructions.coherence.coherence_report": "the exact coherence of the codes built",
    "qstr.constructions.rs_hadamard.rs_hadamard_coherence": "the exact coherence of the codes",
}


def _declared_bounds() -> dict:
    """'module.name' of every function a registered claim declares in ``bounds=`` -> claim ids."""
    import qstr.verify.claims  # noqa: F401, PLC0415 - registers the paper's claims
    from qstr.verify.registry import REGISTRY  # noqa: PLC0415 - after the claims register

    declared: dict = {}
    for claim in REGISTRY.values():
        for fn in claim.bounds:
            where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
            declared.setdefault(where, []).append(claim.id)
    return declared


def test_declared_bounds_are_computed_in_bounds():
    """Every function a claim declares in ``bounds=`` lives in a ``qstr.bounds`` module, or in
    ``qstr.verify`` (a claim's own independent evaluation), never in ``qstr.constructions``
    except the named ones above; and each named one is still declared and still there."""
    declared = _declared_bounds()
    elsewhere = {
        where: ids
        for where, ids in declared.items()
        if not where.startswith(("qstr.bounds.", "qstr.verify."))
        and where not in DECLARED_BOUNDS_IN_CONSTRUCTIONS
    }
    assert not elsewhere, elsewhere
    stale = sorted(set(DECLARED_BOUNDS_IN_CONSTRUCTIONS) - set(declared))
    assert not stale, stale


def test_moved_bounds_keep_their_old_import_path():
    """A bound moved from constructions/ to bounds/ still imports from its old module, as the same
    function, with a DeprecationWarning naming its new home; importing the old module loads no
    ``qstr.bounds`` module (the alias loads it only when asked)."""
    code = (
        "import sys, warnings\n"
        "import qstr.constructions.lipschitz as old\n"
        "assert not [m for m in sys.modules if m.startswith('qstr.bounds')], 'bounds loaded'\n"
        "for name, home in old._MOVED_TO_BOUNDS.items():\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        fn = getattr(old, name)\n"
        "    assert fn.__module__ == home and home.startswith('qstr.bounds.'), (name, home)\n"
        "    assert [w.category for w in caught] == [DeprecationWarning], caught\n"
        "    assert f'{home}.{name}' in str(caught[0].message), caught[0].message\n"
        "    assert name not in vars(old), name\n"
        "print(sorted(old._MOVED_TO_BOUNDS))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['net_lipschitz_bound']", out


_FIRST = """
import importlib, pkgutil, sys
import numpy, scipy.stats, sympy, torch  # third-party modules stay loaded: only the order counts
import qstr.bounds, qstr.constructions
names = [
    m.name for p in (qstr.constructions, qstr.bounds)
    for m in pkgutil.iter_modules(p.__path__, p.__name__ + ".")
]
failed = []
for name in names:
    for loaded in [m for m in sys.modules if m.startswith(("qstr.constructions.", "qstr.bounds."))]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print(len(names))
print(*failed, sep="\\n")
"""


def test_every_module_imports_first():
    """Each module of constructions/ and bounds/ imports when it is the first of the project's a
    program loads: a cycle that works in one order only (a module split by content whose old home
    re-exports from modules that import it back) fails here. One interpreter, the project's
    modules dropped before each import (2 to 3 s where one interpreter each took 2.5 s a module)."""
    out = subprocess.run(
        [sys.executable, "-c", _FIRST], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert int(out[0]) >= 45 and out[1:] == [""], out
