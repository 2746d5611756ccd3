"""Tests for verify/index.py: docs/claims-index.md's claims table is the one generated from the
registry, and `qstr verify --list` names each claim's numberings, checks, faults, functions and
derivation."""

from pathlib import Path

from qstr.verify.claims import all_claims
from qstr.verify.cli import main
from qstr.verify.index import markdown, not_claims_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_claims_index_table_is_generated_from_the_registry():
    readme = (ROOT / "docs" / "claims-index.md").read_text()
    block = readme.split("<!-- claims:begin -->\n")[1].split("<!-- claims:end -->")[0].strip()
    want = markdown(list(all_claims().values())) + "\n\n" + not_claims_markdown()
    assert block == want, "run: python -m qstr.verify.index"


def test_list_prints_the_index(capsys):
    assert main(["verify", "--list", "--only", "lemma-40"]) == 0
    out = capsys.readouterr().out
    c = all_claims()["lemma-40"]
    for text in (
        c.id,
        str(c.ref),
        c.statement,
        c.derivation,
        *(k.name for k in c.checks),
        *(f.name for f in c.faults),
        "qstr.bounds.gaussian.conditional_sqnorm_variance",
        "family z-scores [monte-carlo]",
        "rests on:   monte-carlo 2",
    ):
        assert text in out, text


def test_list_needs_no_gpu(capsys):
    assert main(["verify", "--list", "--profile", "gpu", "--device", "cuda"]) == 0
    assert "lemma-11" in capsys.readouterr().out


def test_list_says_which_results_are_no_claim_and_why(capsys):
    assert main(["verify", "--list"]) == 0
    out = capsys.readouterr().out
    assert "not claims of their own:" in out and "Lemma 18 and Cor 19: Dudley" in out
