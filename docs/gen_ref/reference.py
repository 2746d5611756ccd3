"""The API reference's pages, one per public module of qstr.constructions, qstr.bounds and
qstr.verify, generated from the source tree at every ``mkdocs build`` (mkdocs-gen-files)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The installed package of each source folder (pyproject.toml, [tool.setuptools] package-dir).
PACKAGES = {"constructions": "qstr.constructions", "bounds": "qstr.bounds", "verify": "qstr.verify"}

# Packages whose modules are declarations, not an API: their package page only.
DECLARATIONS = ("qstr.verify.claims",)

# Where the README sits once on the site: the home page.
HOME = "index.md"

# The source tree as griffe (mkdocstrings) reads it: qstr/<package> links to each folder, since
# griffe takes a folder's name for its package's (mkdocs.yml, the python handler's paths).
SOURCE_TREE = ROOT / "build" / "api-src"


def _module_name(package: str, relative: Path) -> str:
    parts = relative.with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((package, *parts))


def _is_public(relative: Path) -> bool:
    """No part private (``_x``, ``__main__``, ``__pycache__``), a package's __init__ aside."""
    return not any(part.startswith("_") and part != "__init__.py" for part in relative.parts)


def reference_modules(root: Path = ROOT) -> list[str]:
    """Every module the reference has a page for, by dotted name: the public modules and
    packages of the three folders (no ``_`` part), sorted; a declaration package's page only."""
    names = set()
    for folder, package in PACKAGES.items():
        for path in (root / folder).rglob("*.py"):
            relative = path.relative_to(root / folder)
            name = _module_name(package, relative)
            if not _is_public(relative) or not (path.parent / "__init__.py").exists():
                continue
            if any(name.startswith(decl + ".") for decl in DECLARATIONS):
                continue
            names.add(name)
    return sorted(names)


def page_path(module: str) -> str:
    """The reference page of ``module`` in the site's docs, named by its dotted name
    (reference/qstr.bounds.attention.md): a module and a package never share a page (the module
    qstr.verify.index and the package qstr.verify's index.md would)."""
    return f"reference/{module}.md"


def home_page(readme: str) -> str:
    """The README as the site's home page: its links into docs/ made relative to docs/, its
    links to other files of the repository shown as code (they are not part of the site)."""

    def link(match: re.Match) -> str:
        bang, text, target = match.groups()
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            return match.group(0)
        if target.startswith("docs/") and not target.endswith("/"):
            return f"{bang}[{text}]({target.removeprefix('docs/')})"
        return f"{text} (`{target}`)"

    return re.sub(r"(!?)\[([^\]]+)\]\(([^)\s]+)\)", link, readme)


def examples_page(files: list[Path]) -> str:
    """The Examples page: every file of docs/examples/, shown whole (pymdownx.snippets)."""
    sections = [
        f"## `{path.name}`\n\n```python\n--8<-- \"examples/{path.name}\"\n```\n"
        for path in files
        if path.suffix == ".py"
    ]
    return "# Examples\n\n" + "\n".join(sections)


def link_source_tree(tree: Path = SOURCE_TREE) -> None:
    """Make ``tree``/qstr/<package> a link to each source folder (build/ is not committed: the
    hook on_startup calls this before every build, docs/gen_ref/hooks.py); qstr/__init__.py
    makes it a regular package, which griffe takes before any other ``qstr`` on sys.path (the
    console script .venv/bin/qstr is one)."""
    (tree / "qstr").mkdir(parents=True, exist_ok=True)
    (tree / "qstr" / "__init__.py").touch()
    for folder, package in PACKAGES.items():
        link = tree / "qstr" / package.split(".")[1]
        if not link.is_symlink():
            link.symlink_to(ROOT / folder, target_is_directory=True)


def write_pages() -> None:
    """Write every reference page, the reference's literate nav and the home page."""
    import mkdocs_gen_files  # noqa: PLC0415 - present only in a docs build (the docs extra)

    nav = mkdocs_gen_files.Nav()
    for module in reference_modules():
        path = page_path(module)
        nav[tuple(module.split(".")[1:])] = str(Path(path).relative_to("reference"))
        with mkdocs_gen_files.open(path, "w") as page:
            page.write(f"---\ntitle: {module}\n---\n\n::: {module}\n")
        mkdocs_gen_files.set_edit_path(path, Path("docs", "gen_ref", "reference.py"))
    with mkdocs_gen_files.open("reference/SUMMARY.md", "w") as summary:
        summary.writelines(nav.build_literate_nav())
    with mkdocs_gen_files.open("examples.md", "w") as examples:
        examples.write(examples_page(sorted((ROOT / "docs" / "examples").iterdir())))
    with mkdocs_gen_files.open(HOME, "w") as home:
        home.write(home_page((ROOT / "README.md").read_text(encoding="utf-8")))


# mkdocs-gen-files runs this file with runpy.run_path (run name "<run_path>"); a test imports it
# for reference_modules and page_path without writing anything.
if __name__ == "<run_path>":
    write_pages()
