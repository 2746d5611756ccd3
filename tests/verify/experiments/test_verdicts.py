"""verify/experiments/verdicts.py and verdict_table.py: the rules, the committed summaries'
verdicts recomputed from their rows, and the README's and docs/experiments.md's tables."""

import json
import math
import os
from functools import lru_cache

import numpy as np
import pytest

from qstr.verify.experiments import analysis, verdicts
from qstr.verify.experiments.results import ResultsFile
from qstr.verify.experiments.verdict_table import table
from tests.numbers import assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
FIGURES = os.path.join(ROOT, "docs", "figures")


def _row(model, N, seed, samples, wd=0.1, variant="1str", threshold=0.7):
    step = None if samples is None else samples // 64
    return {
        "model": model,
        "variant": variant,
        "N": N,
        "q": 1,
        "seed": seed,
        "samples": samples,
        "steps": step or 100_000,
        "threshold": threshold,
        "curve": [[1, 0.99], [step or 100_000, threshold if step else 0.5]],
        "config": {"max_steps": 100_000, "batch_size": 64, "weight_decay": wd},
    }


def _rows(ratio_of_N, wd=0.1, seeds=6, tf=lambda N: 10_000, spread=0.05, variant="1str"):
    """Transformer at tf(N) samples, RNN and FFN at tf(N) x ratio_of_N(N, model), each times a
    factor exp(spread z) drawn per run (a seed links nothing across N)."""
    rng = np.random.default_rng(3)
    rows = []
    for s in range(seeds):
        for N in (2, 4, 6, 8):
            t = tf(N) * math.exp(spread * rng.standard_normal())
            rows.append(_row("transformer", N, s, round(t / 64) * 64, wd, variant))
            for m in ("rnn", "ffn"):
                v = tf(N) * ratio_of_N(N, m) * math.exp(spread * rng.standard_normal())
                rows.append(_row(m, N, s, round(v / 64) * 64, wd, variant))
    return rows


def _one(rows, figure="1"):
    cs = verdicts.claims(rows, figure)
    verdicts.with_holm([cs])
    return [verdicts.judge(c) for c in cs]


def test_growing_gaps_and_a_flat_transformer_reproduce_the_1str_panel():
    (v,) = _one(_rows(lambda N, m: N**2, tf=lambda N: 10_000 * N**0.3))
    assert (
        v["verdict"] == verdicts.REPRODUCED and "Transformer a = 0.33 [0.27, 0.39]" in v["numbers"]
    )


def test_a_growing_transformer_is_not_flat():
    (v,) = _one(_rows(lambda N, m: N**2, tf=lambda N: 10_000 * N**1.5))
    assert v["verdict"] == verdicts.NOT_REPRODUCED


def test_a_flat_ratio_is_not_shown_to_grow_or_inconclusive_by_power():
    """A flat ratio with little noise: power at 1.5x growth is high, so "not reproduced"; with
    much noise and 3 seeds the power is low, so "inconclusive"."""
    rows = [r for r in _rows(lambda N, m: 3.0, spread=0.05) if r["model"] != "rnn"]
    t = verdicts.growth(rows, "ffn", "transformer", "N", n_perm=2000)
    assert t["power_least"] > 0.99 and t["p"] > 0.05
    assert verdicts.decide(t, t["p"])[0] == verdicts.NOT_REPRODUCED
    rows = [r for r in _rows(lambda N, m: 3.0, spread=1.0, seeds=5) if r["model"] != "rnn"]
    t = verdicts.growth(rows, "ffn", "transformer", "N", n_perm=2000)
    assert t["power_least"] < 0.8 and t["p"] > 0.05
    assert verdicts.decide(t, t["p"]) == (
        verdicts.INCONCLUSIVE,
        f"power {t['power_least']:.2f} at 1.5x growth",
    )
    # a growing ratio that stays below 1 (the other model better throughout): no gap grows
    rows = [r for r in _rows(lambda N, m: N / 20) if r["model"] != "rnn"]
    t = verdicts.growth(rows, "ffn", "transformer", "N", n_perm=2000)
    assert t["p"] < 0.01 and verdicts.decide(t, t["p"])[0] == verdicts.NOT_REPRODUCED
    # the noncentral t: power at 0 is the level, at a large effect 1
    assert_close(analysis.t_power(0.0, 1.0, 10), 0.05, rel_tol=1e-9)
    assert analysis.t_power(3.0, 1.0, 10) > 0.999


def _simple(rnn_growth, ffn_growth):
    """Simple-1STR rows: RNN / Transformer = 3 N^rnn_growth / 2, FFN's at 6 N^ffn_growth / 2."""
    ratio = {"rnn": lambda N: 3 * (N / 2) ** rnn_growth, "ffn": lambda N: 6 * (N / 2) ** ffn_growth}
    return _rows(lambda N, m: ratio[m](N), variant="simple", spread=0.05)


def test_the_comparative_claim_with_a_known_answer():
    """The RNN's growth milder than the FFN's (both growing): reproduced, the RNN / Transformer
    growth a finding beside it; the same growth for both: not reproduced."""
    ffn, close = _one(_simple(0.8, 2.5))
    assert ffn["verdict"] == close["verdict"] == verdicts.REPRODUCED
    assert "finding beside the verdict: RNN / Transformer" in close["numbers"]
    _, same = _one(_simple(2.0, 2.0))
    assert same["verdict"] == verdicts.NOT_REPRODUCED


def test_censoring_on_both_sides():
    """FFN runs capped at the largest N (right) and RNN runs reached at the first check at the
    smallest (left): each log ratio a one-sided bound, Gehan's scores keep them; all FFN runs
    capped: inconclusive."""
    rows = _simple(0.8, 2.5)
    for r in rows:
        if r["model"] == "ffn" and r["N"] == 8:
            r["samples"] = None
        if r["model"] == "rnn" and r["N"] == 2:
            r["curve"] = [[r["steps"], 0.01]]
    ffn, close = _one(rows)
    assert ffn["verdict"] == verdicts.REPRODUCED and "25% censored: grows" in ffn["numbers"]
    # RNN / Transformer: left-censored at the smallest N can only hide growth, so it still grows
    assert "RNN / Transformer" in close["numbers"] and "25% censored: grows" in close["numbers"]
    # FFN / RNN: bounded below at both ends (capped FFN, left-censored RNN), and still decided:
    # the capped ratios lie certainly above those at N = 4, 6
    assert close["verdict"] == verdicts.REPRODUCED and "50% censored: grows" in close["numbers"]
    for r in rows:
        if r["model"] == "ffn":
            r["samples"] = None
    ffn, _ = _one(rows)
    assert ffn["verdict"] == verdicts.INCONCLUSIVE and "100% of the log ratios" in ffn["numbers"]


def test_gehan_scores_and_holm():
    lo = np.array([0.0, 1.0, 2.0, 1.5])
    hi = np.array([0.0, 1.0, 2.0, np.inf])  # the last: censored above 1.5
    assert analysis.gehan_scores(lo, hi).tolist() == [-3.0, -1.0, 2.0, 2.0]
    # three tests, two sharing their data (family "a"): m = 2, the repeat takes a's multiplier
    got = analysis.holm([0.01, 0.02, 0.04], ["a", "a", "b"])
    assert_close(got, [0.02, 0.04, 0.04], rel_tol=1e-12)
    assert_close(
        analysis.holm([0.01, 0.02, 0.04], ["a", "b", "c"]), [0.03, 0.04, 0.04], rel_tol=1e-12
    )


def test_thresholds_rebuild_from_the_curves():
    r = _row("ffn", 4, 0, None)
    r["curve"] = [[10, 0.5], [20, 0.1], [40, 0.03], [100_000, 0.025]]
    r["threshold"] = 0.02
    assert [verdicts.at_threshold([r], t)[0]["samples"] for t in (0.02, 0.025, 0.05, 0.2)] == [
        None,
        6_400_000,
        2560,
        1280,
    ]


def test_another_weight_decay_is_a_stated_protocol_choice():
    rows = _rows(lambda N, m: N**2, wd=0.01, tf=lambda N: 10_000 * N**0.3)
    got = verdicts.with_choice(_one(rows), verdicts.weight_decay_choice(rows))
    assert got[0]["verdict"] == verdicts.UNDER_CHOICE
    assert got[0]["protocol_choice"] == "weight decay 0.01 (the paper's: 0.1)"
    assert verdicts.weight_decay_choice(_rows(lambda N, m: N)) is None


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


FIGURE_SUMMARIES = (
    "figure1-paper-h100-tf32-v2",
    "figure1-paper-h200-tf32-v2",
    "figure1-paper-h200-tf32-v2-wd0.01",
    "figure1-paper-h200-tf32",
    "figure2-paper-cpu",
    "figure3-paper-h100-tf32-v2",
    "figure3-paper-h200-tf32-v2-20seeds",
    "figure3-paper-h200-tf32",
)


@pytest.mark.parametrize("stem", FIGURE_SUMMARIES)
def test_the_committed_verdicts_recompute_from_their_rows(stem):
    summary = _summary(stem + "-summary.json")
    rows = ResultsFile(os.path.join(FIGURES, stem + ".jsonl"), None).rows
    if summary["figure"] == "figure1":
        got = verdicts.with_choice(
            verdicts.figure1_verdicts(rows), verdicts.weight_decay_choice(rows)
        )
    elif summary["figure"] == "figure3":
        got = verdicts.with_choice(
            verdicts.figure3_verdicts(rows), verdicts.weight_decay_choice(rows)
        )
    else:
        got = verdicts.figure2_verdicts(
            {
                "block_mass": {r["seed"]: r["block_mass"] for r in rows},
                "code_mu": {r["seed"]: r["code_mu"] for r in rows},
                "chance_block_mass": rows[0]["block_stats"][0]["chance_block_mass"],
            }
        )
    assert_close(got, summary["verdicts"], rel_tol=VERDICTS_REL_TOL, what=stem)


@lru_cache(maxsize=1)
def _table():
    return table(FIGURES)


@pytest.mark.parametrize("doc", ["README.md", os.path.join("docs", "experiments.md")])
def test_the_docs_tables_are_the_committed_rows_table(doc):
    with open(os.path.join(ROOT, doc), encoding="utf-8") as fh:
        text = fh.read()
    begin, end = "<!-- verdicts:begin -->\n", "<!-- verdicts:end -->"
    block = text[text.index(begin) + len(begin) : text.index(end)]
    # recomputed from the rows at run time: its numbers at VERDICTS_REL_TOL, the rest exactly
    assert_close(
        _table(),
        block,
        rel_tol=VERDICTS_REL_TOL,
        what=f"{doc} (regenerate with python -m qstr.verify.experiments.verdict_table)",
    )


def test_the_table_verdicts_the_issue_55_cases():
    """The table's verdicts on the committed rows: Figure 3 at 5 seeds inconclusive (power
    about 0.3), the simple-1STR comparative claim reproduced at the published threshold."""
    text = _table()
    fig3 = [line for line in text.splitlines() if "figure3-paper-h100-tf32-v2`" in line]
    assert len(fig3) == 1 and "**inconclusive**" in fig3[0]
    close = [line for line in text.splitlines() if "much milder" in line]
    assert len(close) == 3 and all("**reproduced" in line for line in close)


def test_exponents_only_where_a_power_law_fits_and_the_range_is_2x():
    """A power law over N = 2..8 gets its exponent; the same rows at N = 6, 8 (1.33x) an end
    ratio, a lower bound when the runs at N = 8 are capped; N^2 log-squared data no exponent."""
    rows = _rows(lambda N, m: N**2, tf=lambda N: 10_000 * N**0.3)
    assert "a" in verdicts.shape(rows, "rnn")
    short = [r for r in rows if r["N"] >= 6]
    sh = verdicts.shape(short, "rnn")
    assert "a" not in sh and sh["bound"] is None
    assert_close(sh["ratio"], (8 / 6) ** 2.3, rel_tol=0.05)
    for r in short:
        if r["model"] == "rnn" and r["N"] == 8:
            r["samples"] = None
    assert verdicts.shape(short, "rnn")["bound"] == "a lower bound"
    bent = _rows(lambda N, m: math.exp(math.log(N) ** 2), tf=lambda N: 10_000, spread=0.02)
    sh = verdicts.shape(bent, "ffn")
    assert "a" not in sh and sh["lof"]["p"] < 1e-6
