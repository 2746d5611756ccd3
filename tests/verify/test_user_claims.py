"""The worked example of docs/claims.md (a user's claim: Lemma 11 on their own codebook) runs with
`qstr verify --claims`, holds, and its fault is caught; the page quotes the example as it is."""

import json
import re
from pathlib import Path

import pytest

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
