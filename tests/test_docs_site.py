"""The API reference site (mkdocs.yml, docs/gen_ref/): every public ``qstr`` name the docs, the
examples and the README use has an entry in the reference, every docs page is in the nav. Nothing
here builds the site (``mkdocs build --strict`` runs in .ci/run); only the config test needs
mkdocs (the docs extra)."""

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import re
import warnings
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_ref = _load("gen_ref_reference", DOCS / "gen_ref" / "reference.py")
hooks = _load("gen_ref_hooks", DOCS / "gen_ref" / "hooks.py")

# Dotted words in the docs that are not Python names, each with where and why.
NOT_NAMES = {
    "qstr.bounds.recurrent.X": "docs/architecture.md: X stands for any of the re-exported names",
    "qstr.verify.claims.lemma_34.lemma": "docs/claims.md: pytest's JUnit classname "
    "qstr.verify.claims.lemma_34.lemma-34 (module and claim id), cut at the hyphen",
}

_DOTTED = re.compile(r"\bqstr(?:\.[A-Za-z_]\w*)+")
_FROM_IMPORT = re.compile(r"from\s+(qstr(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n]*)")
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_INLINE = re.compile(r"`([^`\n]+)`")
_PYTHON_FENCES = ("", "python", "py", "pycon")


def _names_in_code(code: str) -> set[str]:
    """The qstr names a piece of code uses: ``from M import a, b as c`` gives M.a and M.b;
    every dotted ``qstr.x.y`` word gives itself."""
    names = set(_DOTTED.findall(code))
    for module, imported in _FROM_IMPORT.findall(code):
        uncommented = " ".join(line.split("#")[0] for line in imported.splitlines())
        for item in uncommented.strip("() ").split(","):
            word = item.split(" as ")[0].strip()
            if word.isidentifier():
                names.add(f"{module}.{word}")
    return names


def _names_in_markdown(text: str, whole: bool) -> set[str]:
    """The names in a page's Python code blocks and, where ``whole``, its inline code too."""
    names = set()
    for language, code in _FENCE.findall(text):
        if language in _PYTHON_FENCES:
            names |= _names_in_code(code)
    if whole:
        for span in _INLINE.findall(_FENCE.sub("", text)):
            names |= _names_in_code(span)
    return names


def used_names() -> dict[str, str]:
    """Every public qstr name the docs pages, docs/examples and the README's code blocks use,
    with the first file that uses it."""
    sources = [(path, True) for path in sorted(DOCS.rglob("*.md"))]
    sources.append((ROOT / "README.md", False))
    found = {}
    for path, whole in sources:
        for name in _names_in_markdown(path.read_text(encoding="utf-8"), whole):
            found.setdefault(name, str(path.relative_to(ROOT)))
    for path in sorted((DOCS / "examples").glob("*.py")):
        for name in _names_in_code(path.read_text(encoding="utf-8")):
            found.setdefault(name, str(path.relative_to(ROOT)))
    return {
        name: where
        for name, where in found.items()
        if not any(part.startswith("_") for part in name.split("."))
    }


def _split_module(name: str) -> tuple[str, list[str]]:
    """The longest importable module prefix of ``name`` and the attribute path after it."""
    parts = name.split(".")
    for cut in range(len(parts), 1, -1):
        module = ".".join(parts[:cut])
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if not (error.name and module.startswith(error.name)):
                raise
            continue
        return module, parts[cut:]
    raise AssertionError(f"{name}: no module of it imports")


def _defined_at(module: str, name: str) -> tuple[str, str]:
    """Where ``module.name`` is written: follows ``from M import name [as alias]`` in the
    module's source to the module that defines it (def, class or assignment)."""
    tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if (alias.asname or alias.name) == name and node.module.startswith("qstr."):
                    return _defined_at(node.module, alias.name)
        targets = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            targets = [node.name]
        elif isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target.id]
        if name in targets:
            return module, name
    # a module __getattr__: a moved name's old path (docs/architecture.md names a few, saying
    # they still import with a DeprecationWarning); the entry is at the new path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        obj = getattr(importlib.import_module(module), name)
    return getattr(obj, "__module__", module), getattr(obj, "__qualname__", name)


def reference_anchor(name: str) -> str:
    """The dotted path under which the reference shows ``name``: a module's page, or the
    object's entry on the page of the module that defines it (inherited members on their
    class's). AssertionError when no page shows it."""
    module, attributes = _split_module(name)
    if attributes:
        module, first = _defined_at(module, attributes[0])
        owner = getattr(importlib.import_module(module), first.split(".")[0])
        path = [first]
        for attribute in attributes[1:]:
            assert inspect.isclass(owner), f"{name}: {attribute} is not a class member"
            holder = next((c for c in owner.__mro__ if attribute in vars(c)), None)
            assert holder is not None, f"{name}: no class defines {attribute}"
            if holder is not owner:
                module, path = holder.__module__, [holder.__qualname__]
            path.append(attribute)
            owner = getattr(owner, attribute)
        anchor = ".".join((module, *path))
    else:
        anchor = module
    pages = gen_ref.reference_modules()
    assert module in pages, f"{name}: shown as {anchor}, but {module} has no reference page"
    assert not any(part.startswith("_") for part in anchor.split(".")), (
        f"{name}: shown as {anchor}, a private name the reference leaves out"
    )
    return anchor


def test_used_names_have_reference_entries():
    names = used_names()
    assert len(names) >= 30, sorted(names)  # the docs use dozens: the collection works
    missing = []
    for name, where in sorted(names.items()):
        if name in NOT_NAMES:
            continue
        try:
            reference_anchor(name)
        except (AssertionError, AttributeError) as error:
            missing.append(f"{where}: {error}")
    assert not missing, "\n".join(missing)


def test_not_names_are_still_in_the_docs():
    names = used_names()
    assert set(NOT_NAMES) <= set(names), set(NOT_NAMES) - set(names)


def test_name_collection():
    code = "from qstr.verify.claim import (\n    Claim,  # c\n    at_most as am,\n)\nqstr.bounds.x"
    assert _names_in_code(code) == {
        "qstr.verify.claim",
        "qstr.verify.claim.Claim",
        "qstr.verify.claim.at_most",
        "qstr.bounds.x",
    }
    text = "`qstr.a.b` and\n```python\nimport qstr.c\n```\n```xml\nqstr.d\n```\n"
    assert _names_in_markdown(text, whole=True) == {"qstr.a.b", "qstr.c"}
    assert _names_in_markdown(text, whole=False) == {"qstr.c"}


def test_anchor_follows_reexports_and_inheritance():
    # bounds/recurrent.py re-exports the transition's functions from bounds/transition.py
    # (docs/architecture.md): the entry is on the defining module's page.
    reexported = next(
        alias.name
        for node in ast.parse((ROOT / "bounds" / "recurrent.py").read_text()).body
        if isinstance(node, ast.ImportFrom) and node.module == "qstr.bounds.transition"
        for alias in node.names
    )
    assert reference_anchor(f"qstr.bounds.recurrent.{reexported}") == (
        f"qstr.bounds.transition.{reexported}"
    )
    assert reference_anchor("qstr.bounds.attention") == "qstr.bounds.attention"
    with pytest.raises(AssertionError, match="private"):
        reference_anchor("qstr.verify.cli._seed")
    with pytest.raises(AssertionError, match="no reference page"):
        reference_anchor("qstr.verify.claims.lemma_11")


def test_reference_covers_every_public_module():
    listed = set(gen_ref.reference_modules())
    imported = set()
    for package in gen_ref.PACKAGES.values():
        root = importlib.import_module(package)
        imported.add(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=package + "."):
            parts = info.name.split(".")
            declaration = any(info.name.startswith(d + ".") for d in gen_ref.DECLARATIONS)
            if not declaration and not any(p.startswith("_") for p in parts):
                imported.add(info.name)
    assert listed == imported
    assert "qstr.verify.claims" in listed
    assert "qstr.verify.claims.lemma_11" not in listed


def test_page_paths():
    assert gen_ref.page_path("qstr.bounds.attention") == "reference/qstr.bounds.attention.md"
    # a package and its module named index: two pages
    assert gen_ref.page_path("qstr.verify") != gen_ref.page_path("qstr.verify.index")


def test_home_page_links():
    readme = (
        "See [the claims](docs/claims.md#x), ![fig](docs/figures/a.png), [b](benchmarks/README.md),"
        " [d](docs/derivations/) and [web](https://example.org)."
    )
    assert gen_ref.home_page(readme) == (
        "See [the claims](claims.md#x), ![fig](figures/a.png), b (`benchmarks/README.md`),"
        " d (`docs/derivations/`) and [web](https://example.org)."
    )


def test_readme_links_lead_home():
    assert hooks.readme_to_home("[R](../README.md)", "modules.md") == "[R](index.md)"
    assert hooks.readme_to_home("[R](../../README.md#a)", "derivations/x.md") == (
        "[R](../index.md#a)"
    )
    assert hooks.readme_to_home("[C](claims.md)", "modules.md") == "[C](claims.md)"


def _nav_pages(entries) -> set[str]:
    pages = set()
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages |= _nav_pages(value) if isinstance(value, list) else {value}
    return pages


def test_every_docs_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_pages(config["nav"])
    folders = {entry for entry in nav if entry.endswith("/")}  # every page under it
    pages = {
        str(path.relative_to(DOCS))
        for path in DOCS.rglob("*.md")
        if not any(str(path.relative_to(DOCS)).startswith(folder) for folder in folders)
    }
    assert pages <= nav, sorted(pages - nav)
    generated = {"index.md", "examples.md", "reference/"}
    assert nav - pages == generated | {"derivations/"}


def test_config_loads():
    config_module = pytest.importorskip("mkdocs.config", reason="mkdocs: the docs extra")
    config = config_module.load_config(str(ROOT / "mkdocs.yml"))
    assert config["strict"] is True
    assert {"gen-files", "literate-nav", "mkdocstrings"} <= set(config["plugins"])


def test_roles_become_links(tmp_path):
    griffe = pytest.importorskip("griffe", reason="griffe: the docs extra")
    roles = _load("gen_ref_roles", DOCS / "gen_ref" / "roles.py")
    gen_ref.link_source_tree(tmp_path)
    module = griffe.GriffeLoader(search_paths=[str(tmp_path)]).load("qstr.bounds.attention")
    lemma11 = module["lemma11"]
    # Guarantee is re-exported: the link goes to the defining module (bounds/guarantee.py)
    assert roles.with_links(lemma11, "see :class:`Guarantee`.") == (
        "see [`Guarantee`][qstr.bounds.guarantee.Guarantee]."
    )
    assert roles.with_links(lemma11, ":func:`~qstr.bounds.attention.lemma11_leak`") == (
        "[`lemma11_leak`][qstr.bounds.attention.lemma11_leak]"
    )
    # private, outside the reference, or not a name here: code, never a dangling link
    assert roles.with_links(lemma11, ":func:`_private` :class:`torch.Tensor`") == (
        "`_private` `torch.Tensor`"
    )
    assert roles.with_links(lemma11, ":meth:`no_such_name`") == "`no_such_name`"
