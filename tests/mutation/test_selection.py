"""mutation/selection.py: which tests a mutant runs, and the two scores' arithmetic."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "mutation"))  # mutation/ is a script directory, not a package

import selection as sel  # noqa: E402


def test_dotted_name():
    assert sel.dotted_name("bounds/attention.py") == "qstr.bounds.attention"
    assert sel.dotted_name("constructions/codes.py") == "qstr.constructions.codes"


@pytest.mark.parametrize(
    "source",
    [
        "import qstr.bounds.attention\n",
        "import qstr.bounds.attention as A\n",
        "from qstr.bounds.attention import lemma\n",
        "from qstr.bounds import attention\n",
        "from qstr.bounds import (\n    symbolic as sy,\n    attention,\n)\n",
        "def test_x():\n    from qstr.bounds.attention import lemma\n",
    ],
)
def test_imports_module_sees_every_import_form(source):
    assert sel.imports_module(source, "qstr.bounds.attention")


@pytest.mark.parametrize(
    "source",
    [
        "from qstr.bounds import attention_grid\n",
        "import qstr.bounds.attentionx\n",
        "from qstr.constructions import attention\n",
        "from qstr.constructions.attention import lemma\n",
        "# qstr.bounds.attention is tested elsewhere\nimport qstr.bounds\n",
        "from . import attention\n",
    ],
)
def test_imports_module_ignores_other_modules(source):
    assert not sel.imports_module(source, "qstr.bounds.attention")


def _write(root: Path, name: str, text: str) -> None:
    path = root / "tests" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_select_tests_takes_the_mirror_and_the_importers_of_the_package_only(tmp_path):
    _write(tmp_path, "bounds/test_attention.py", "import math\n")  # the mirror, importing nothing
    _write(tmp_path, "bounds/test_transformer.py", "from qstr.bounds import attention, packing\n")
    _write(tmp_path, "bounds/test_packing.py", "from qstr.bounds.packing import sample_ball\n")
    _write(tmp_path, "bounds/helpers.py", "import qstr.bounds.attention\n")  # not a test file
    _write(tmp_path, "verify/test_claims.py", "import qstr.bounds.attention\n")  # another package
    got = sel.select_tests(tmp_path / "tests", "bounds/attention.py")
    assert got == ["tests/bounds/test_attention.py", "tests/bounds/test_transformer.py"]
    assert sel.select_tests(tmp_path / "tests", "bounds/packing.py") == [
        "tests/bounds/test_packing.py",
        "tests/bounds/test_transformer.py",
    ]
    assert sel.select_tests(tmp_path / "tests", "bounds/search.py") == []


def test_select_tests_on_this_repository():
    got = sel.select_tests(ROOT / "tests", "constructions/attention.py")
    assert "tests/constructions/test_attention.py" in got
    assert all(f.startswith("tests/constructions/test_") for f in got)


def test_score_and_interval_on_values():
    assert sel.score(5, 6) == "5/6 (83.3%)"
    assert sel.score(0, 0) == "0/0 (-)"
    assert sel.score(30, 30) == "30/30 (100.0%)"
    assert sel.interval(15, 30) == pytest.approx(100 * 1.96 * (0.25 / 30) ** 0.5)
    assert sel.interval(30, 30) < 0.1


def test_tally_counts_both_scores_over_the_scored_mutants():
    outcomes = [sel.VERIFY] * 4 + [sel.TESTS] * 2 + [sel.SURVIVED] + [sel.INCOMPETENT] * 3
    t = sel.tally(outcomes)
    assert (t["n"], t["verify"], t["either"], t[sel.INCOMPETENT]) == (7, 4, 6, 3)
    assert sel.score(t["verify"], t["n"]) == "4/7 (57.1%)"
    assert sel.score(t["either"], t["n"]) == "6/7 (85.7%)"
    assert sel.tally([])["n"] == 0


def test_latest_keeps_one_row_per_mutant():
    rows = [
        {"id": "a", "outcome": sel.SURVIVED},
        {"id": "b", "outcome": sel.VERIFY},
        {"id": "a", "outcome": sel.TESTS},
    ]
    got = sel.latest(rows)
    assert sorted(got) == ["a", "b"] and got["a"]["outcome"] == sel.TESTS
