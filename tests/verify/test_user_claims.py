"""The worked example of docs/claims.md (a user's claim: Lemma 11 on their own codebook) runs with
`qstr verify --claims`, holds, and its fault is caught; the page quotes the example as it is."""

import json
from pathlib import Path

from qstr.verify import registry
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


def test_the_page_quotes_the_example_as_it_is():
    page = (ROOT / "docs" / "claims.md").read_text()
    block = page.split("```python\n")[1].split("```")[0]
    source = EXAMPLE.read_text()
    quoted = [line.strip() for line in block.splitlines() if line.strip() and "..." not in line]
    missing = [line for line in quoted if line.split("  #")[0].strip() not in source]
    assert not missing, missing
