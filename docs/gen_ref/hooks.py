"""mkdocs hooks (mkdocs.yml, hooks): the source tree griffe reads is linked before the build
starts; the docs pages' links to the README lead to the site's home page, which is the README
(docs/gen_ref/reference.py writes it)."""

import importlib.util
import posixpath
import re
from pathlib import Path

README = "../README.md"


def _reference():
    spec = importlib.util.spec_from_file_location(
        "gen_ref_reference", Path(__file__).parent / "reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on_startup(**kwargs):
    """mkdocs event, before the plugins read their config: the python handler keeps only the
    search paths that exist then, so build/api-src is made here (a fresh checkout lacks it)."""
    _reference().link_source_tree()


def readme_to_home(markdown: str, src_uri: str) -> str:
    """``markdown`` of the page at ``src_uri`` (relative to docs/) with every link to the README
    (../README.md from docs/, ../../README.md from docs/derivations/ ...) pointing at index.md."""
    folder = posixpath.dirname(src_uri)

    def link(match: re.Match) -> str:
        target, anchor = match.group(2), match.group(3) or ""
        if posixpath.normpath(posixpath.join(folder, target)) != README:
            return match.group(0)
        home = posixpath.relpath("index.md", folder or ".")
        return f"{match.group(1)}({home}{anchor})"

    return re.sub(r"(\[[^\]]*\])\(([^)#\s]+\.md)(#[^)\s]*)?\)", link, markdown)


def on_page_markdown(markdown, page, **kwargs):
    """mkdocs event: each page's markdown before it is rendered."""
    return readme_to_home(markdown, page.file.src_uri)
