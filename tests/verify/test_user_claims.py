"""The worked example of docs/claims.md (a user's claim: Lemma 11 on their own codebook) runs with
`qstr verify --claims`, holds, and its fault is caught; the page quotes the example as it is."""

import json
import os
import re
import sys
from pathlib import Path

import pytest

# the paper's claims registered before any test copies the registry
import qstr.verify.claims  # noqa: F401
from qstr.verify import registry
from qstr.verify.claim import Context
from qstr.verify.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "my_codebook_claims.py"


def test_the_worked_example_runs_beside_the_papers_claims(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    out = tmp_path / "v.json"
    assert (
        main(
            [
                "verify",
                "--claims",
                str(EXAMPLE),
                "--only",
                "my-lemma-11",
                "lemma-40",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    mine, paper = json.loads(out.read_text())
    assert mine["id"] == "my-lemma-11" and paper["id"] == "lemma-40" and mine["passed"]
    worst, guarantee = mine["checks"]
    assert 0 < worst["measured"] <= worst["bound"] == guarantee["measured"] <= 0.05
    (fault,) = mine["faults"]
    assert fault["caught"] and fault["checks"][0]["measured"] > worst["bound"]
    assert "2/2 claims hold" in capsys.readouterr().out
    # --only-claims: the module's claims alone; without --claims, or beside --only, refused
    assert main(["verify", "--claims", str(EXAMPLE), "--only-claims", "--json", str(out)]) == 0
    assert [r["id"] for r in json.loads(out.read_text())] == ["my-lemma-11"]
    assert main(["verify", "--only-claims"]) == 2
    assert "--only-claims runs the claims of --claims MODULE" in capsys.readouterr().err


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "claims.md").read_text(), re.S)


def test_the_page_quotes_the_whole_example():
    assert _python_blocks()[0] == EXAMPLE.read_text()


@pytest.mark.parametrize("index", [0, 1])
def test_every_python_block_of_the_page_runs_as_printed(index, monkeypatch):
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    before = set(registry.REGISTRY)
    exec(
        compile(_python_blocks()[index], f"<docs/claims.md, python block {index + 1}>", "exec"), {}
    )
    (new,) = [c for cid, c in registry.REGISTRY.items() if cid not in before]
    result = registry.run_claim(new.require_complete(), Context())
    assert result.passed and all(f.caught for f in result.faults), result.error


def test_claims_in_worker_processes_give_the_records_of_one(tmp_path, monkeypatch):
    """--jobs 2: the workers load the user's module too, and every record's measured values and
    verdicts are those of the one-process run (each claim seeds its own draws by name)."""
    ids = ["my-lemma-11", "lemma-40", "lemma-12", "data-model"]
    runs, paper = [], dict(registry.REGISTRY)
    for jobs in ("1", "2"):
        monkeypatch.setattr(
            registry, "REGISTRY", dict(paper)
        )  # the user's module loaded once a run
        out = tmp_path / f"v{jobs}.json"
        argv = ["verify", "--claims", str(EXAMPLE), "--only", *ids, "--jobs", jobs]
        assert main([*argv, "--json", str(out)]) == 0
        runs.append(json.loads(out.read_text()))
    one, two = runs
    assert [r["id"] for r in two] == ids  # table order, whichever worker finished first

    def values(records):
        return [
            (c["name"], c["measured"], c["bound"], c["holds"]) for r in records for c in r["checks"]
        ]

    assert values(two) == values(one)


def test_more_jobs_than_cores_is_one_line(capsys):
    assert main(["verify", "--only", "lemma-12", "--jobs", str((os.cpu_count() or 1) + 1)]) == 2
    assert "this machine has" in capsys.readouterr().err


def test_a_module_that_raises_at_import_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "path", list(sys.path))
    bad = tmp_path / "qstr_test_raising.py"
    bad.write_text("raise RuntimeError('not today')\n")
    assert main(["verify", "--claims", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "RuntimeError: not today" in err


def test_the_same_module_given_twice_runs_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    monkeypatch.setattr(sys, "path", list(sys.path))
    argv = ["verify", "--claims", str(EXAMPLE), str(EXAMPLE), "--only", "my-lemma-11"]
    assert main(argv) == 0
    assert "1/1 claims hold" in capsys.readouterr().out
