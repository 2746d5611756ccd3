"""verify/experiments/verdicts.py and verdict_table.py: the rules, the committed summaries'
verdicts recomputed from their rows, and the README's and docs/experiments.md's tables."""

import json
import os

import pytest

from qstr.verify.experiments import verdicts
from qstr.verify.experiments.results import ResultsFile
from qstr.verify.experiments.verdict_table import SOURCES, table
from tests.numbers import assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
FIGURES = os.path.join(ROOT, "docs", "figures")


def _row(model, N, seed, samples, wd=0.1):
    return {
        "model": model,
        "variant": "1str",
        "N": N,
        "q": 1,
        "seed": seed,
        "samples": samples,
        "config": {"max_steps": 1000, "batch_size": 64, "weight_decay": wd},
    }


def _rows(ratio_of_N, wd=0.1, seeds=6):
    """Transformer at 1000 samples; RNN and FFN at 1000 x ratio_of_N(N) x (1 + seed / 100)."""
    rows = []
    for s in range(seeds):
        for N in (2, 4, 6, 8):
            rows.append(_row("transformer", N, s, 1000, wd))
            for m in ("rnn", "ffn"):
                rows.append(_row(m, N, s, round(1000 * ratio_of_N(N) * (1 + s / 100)), wd))
    return rows


def _fits(a, lo, hi):
    return {"1str": {"transformer": {"censored_fit": {"a": a, "ci": [lo, hi]}}}}


def test_growing_gaps_and_a_flat_transformer_reproduce_the_1str_panel():
    (v,) = verdicts.figure1_verdicts(_rows(lambda N: N**2), _fits(0.1, -0.1, 0.3))
    assert v["verdict"] == verdicts.REPRODUCED and "p = " in v["numbers"]


def test_flat_gaps_or_a_growing_transformer_do_not():
    (flat,) = verdicts.figure1_verdicts(_rows(lambda N: 3.0), _fits(0.1, -0.1, 0.3))
    assert flat["verdict"] == verdicts.NOT_REPRODUCED
    (steep,) = verdicts.figure1_verdicts(_rows(lambda N: N**2), _fits(1.5, 1.2, 1.8))
    assert steep["verdict"] == verdicts.NOT_REPRODUCED


def test_capped_runs_count_at_their_cap_and_are_said():
    rows = _rows(lambda N: N**2)
    for r in rows:
        if r["model"] == "ffn" and r["N"] == 8:
            r["samples"] = None  # stopped at the cap 64,000
    (v,) = verdicts.figure1_verdicts(rows, _fits(0.1, -0.1, 0.3))
    assert "6 runs at their cap" in v["numbers"] and v["verdict"] == verdicts.REPRODUCED


def test_another_weight_decay_is_a_stated_protocol_choice():
    rows = _rows(lambda N: N**2, wd=0.01)
    got = verdicts.with_choice(
        verdicts.figure1_verdicts(rows, _fits(0.1, -0.1, 0.3)), verdicts.weight_decay_choice(rows)
    )
    assert got[0]["verdict"] == verdicts.UNDER_CHOICE
    assert got[0]["protocol_choice"] == "weight decay 0.01 (the paper's: 0.1)"
    assert verdicts.weight_decay_choice(_rows(lambda N: N)) is None


@pytest.mark.parametrize(
    "block, mu, want",
    [
        ([0.95, 0.99], [0.4, 0.5], verdicts.REPRODUCED),
        ([0.95, 0.99], [0.4, 0.7], verdicts.UNDER_CHOICE),
        ([0.85, 0.99], [0.4, 0.5], verdicts.NOT_REPRODUCED),
    ],
)
def test_figure2_needs_the_block_in_every_seed_and_names_codes_outside_assumption_3(
    block, mu, want
):
    summary = {
        "block_mass": dict(enumerate(block)),
        "code_mu": dict(enumerate(mu)),
        "chance_block_mass": 0.17,
    }
    (v,) = verdicts.figure2_verdicts(summary)
    assert v["verdict"] == want
    assert (v["protocol_choice"] is not None) == (want == verdicts.UNDER_CHOICE)


def _summary(name):
    with open(os.path.join(FIGURES, name), encoding="utf-8") as fh:
        return json.load(fh)


# The verdicts' numbers (gap ratios, intervals and trend tests recomputed from the committed rows,
# printed to 2-4 digits) against the committed ones. Measured (issue 52): 0 in the lock's venv
# (torch 2.13.0), the newest (torch 2.14.1), and under OpenBLAS/MKL code paths of other CPUs; the
# same fits' unrounded numbers move up to 5.3e-11 (test_cli's SUMMARY_REL_TOL), so 1e-9 as there.
# A number printed to 2-4 digits moves only where a 1e-11 change crosses its rounding; such a
# flip fails here, named, and is a change of the printed table to look at, not noise to absorb.
VERDICTS_REL_TOL = 1e-9


@pytest.mark.parametrize("name", [n for n, _ in SOURCES])
def test_the_committed_verdicts_recompute_from_their_rows(name):
    summary = _summary(name)
    rows = ResultsFile(os.path.join(FIGURES, name.replace("-summary.json", ".jsonl")), None).rows
    if summary["figure"] == "figure1":
        got = verdicts.figure1_verdicts(rows, summary["fits"])
        got = verdicts.with_choice(got, verdicts.weight_decay_choice(rows))
    elif summary["figure"] == "figure3":
        paired = {f"{m}/transformer": verdicts.gap_trend(rows, m, "q") for m in ("rnn", "ffn")}
        got = verdicts.with_choice(
            verdicts.figure3_verdicts({"paired": paired}), verdicts.weight_decay_choice(rows)
        )
    else:
        got = verdicts.figure2_verdicts(
            {
                "block_mass": {r["seed"]: r["block_mass"] for r in rows},
                "code_mu": {r["seed"]: r["code_mu"] for r in rows},
                "chance_block_mass": rows[0]["block_stats"][0]["chance_block_mass"],
            }
        )
    assert_close(got, summary["verdicts"], rel_tol=VERDICTS_REL_TOL, what=name)


@pytest.mark.parametrize("doc", ["README.md", os.path.join("docs", "experiments.md")])
def test_the_docs_tables_are_the_committed_summaries_table(doc):
    with open(os.path.join(ROOT, doc), encoding="utf-8") as fh:
        text = fh.read()
    begin, end = "<!-- verdicts:begin -->\n", "<!-- verdicts:end -->"
    block = text[text.index(begin) + len(begin) : text.index(end)]
    assert block == table(FIGURES), (
        f"{doc}: regenerate with python -m qstr.verify.experiments.verdict_table"
    )
