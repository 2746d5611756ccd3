"""Every Python block of the README runs as written (a user copies them first); the pages the
README's longer parts moved to (issue 56) keep what the README's tests held: dotted names import,
relative links resolve."""

import importlib
import linecache
import re
from pathlib import Path

import torch

from qstr.constructions.export import load_multihead
from qstr.verify.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# the pages README.md's longer parts moved to (issue 56), read with it
MOVED = [
    ROOT / "docs" / name
    for name in ("commands.md", "claims-index.md", "findings.md", "modules.md", "reproduce.md")
] + [ROOT / "benchmarks" / "README.md"]


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def _compiled(source: str, name: str):
    """The block compiled under its own name, its lines registered with linecache: tools that read a
    function's source (hypothesis keys its examples by it) see the block, not the lines of the file
    it came from."""
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    return compile(source, name, "exec")


def test_readme_has_the_blocks_tested_here():
    assert len(_python_blocks()) == 2


def test_readme_python_example_runs(capsys):
    exec(_compiled(_python_blocks()[0], "<README.md, python block 1>"), {})
    printed = capsys.readouterr().out.split()
    bound, alpha, mse, trained = (float(v) for v in printed[:4])
    assert bound <= 0.01 and alpha > 0 and mse < 0.01 and trained < 0.01


def test_readme_property_test_example_runs():
    scope = {}
    exec(_compiled(_python_blocks()[1], "<README.md, python block 2>"), scope)
    tests = [f for name, f in scope.items() if name.startswith("test_") and callable(f)]
    assert tests
    for test in tests:
        test()  # hypothesis runs the property over its examples


def test_formats_hand_rebuild_matches_load_multihead(tmp_path, monkeypatch):
    """docs/formats.md's plain-torch rebuild of a `qstr construct transformer` file gives the same
    outputs."""
    assert (
        main(
            [
                "construct",
                "transformer",
                "--N",
                "16",
                "--d",
                "2",
                "--q",
                "2",
                "--out",
                str(tmp_path / "c.pt"),
            ]
        )
        == 0
    )
    text = (Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    sd = torch.load(tmp_path / "c.pt", weights_only=True)
    Z = torch.randn(3, 16, sd["mha_config"]["D_e"], dtype=sd["W_QK"].dtype)
    monkeypatch.chdir(tmp_path)
    scope = {"Z": Z}
    exec(_compiled(block, "<docs/formats.md, python block>"), scope)
    with torch.no_grad():
        assert torch.allclose(scope["y_hat"], load_multihead(tmp_path / "c.pt")(Z), atol=1e-12)


def test_every_dotted_name_in_the_readme_prose_imports():
    """`qstr.a.b.c` in backquotes is a module, or an attribute of one (in the README and the pages
    its parts moved to)."""
    text = "\n".join(p.read_text() for p in [README, *MOVED])
    names = set(re.findall(r"`(qstr(?:\.[A-Za-z_]\w*)+)", text))
    assert len(names) >= 4
    for name in sorted(names):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
                break
            except ImportError:
                continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)  # AttributeError names what does not import


def test_the_readme_commands_print_what_it_says(capsys):
    """Each quick `qstr ...` block (not the set-up blocks) runs as written, and the plain block
    after it holds lines the command prints; the count of all claims is the registry's."""
    import shlex  # noqa: PLC0415

    import qstr.verify.claims as paper  # noqa: PLC0415

    text = README.read_text()
    pairs = re.findall(r"```bash\n(qstr [^\n]*)\n```\n\n[^`]*```\n(.*?)```", text, re.S)
    assert pairs, "the README shows a qstr command and what it prints"
    for command, shown in pairs:
        assert main(shlex.split(command)[1:]) == 0
        out = capsys.readouterr().out
        for line in shown.strip().splitlines():
            assert line in out, (command, line)
    n = len(paper.select("quick"))
    assert f"all {n} claims: `{n}/{n} claims hold with every fault caught`" in text


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_and_its_pages_link_to_what_exists():
    """Every relative link of the README and of the pages its parts moved to names a file or folder
    that exists and, with #anchor, a heading of that page (the generated claims block too)."""
    checked = 0
    for page in [README, *MOVED]:
        text = page.read_text()
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), (page.name, target)
            if anchor:
                headings = re.findall(r"^#+ (.*)$", dest.read_text(), re.M)
                assert anchor in {_slug(h) for h in headings}, (page.name, target)
            checked += 1
    assert checked >= 10
