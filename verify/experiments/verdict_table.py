"""The "Does it reproduce?" table of the README and docs/experiments.md, computed from the
committed rows in ``SOURCES`` by the rules of verify/experiments/verdicts.py, Holm over the
table's tests, every verdict recomputed at the thresholds of ``verdicts.SWEEP``: run
``python -m qstr.verify.experiments.verdict_table`` and paste its output between
``<!-- verdicts:begin -->`` and ``<!-- verdicts:end -->``; a test holds both files to it."""

from __future__ import annotations

import json
import os
from typing import List

from qstr.verify.experiments import verdicts
from qstr.verify.experiments.results import ResultsFile

# (rows under docs/figures without .jsonl, what the rows are): one card, one protocol each
SOURCES = (
    ("figure1-paper-h100-tf32-v2", "5 seeds, H100, weight decay 0.1 (the paper's)"),
    ("figure1-paper-h200-tf32-v2", "5 seeds, H200, weight decay 0.1 (the control)"),
    ("figure1-paper-h200-tf32-v2-wd0.01", "5 seeds, H200, weight decay 0.01"),
    ("figure2-paper-cpu", "5 seeds, CPU"),
    ("figure3-paper-h100-tf32-v2", "5 seeds, H100"),
    ("figure3-paper-h200-tf32-v2-20seeds", "20 seeds, H200"),
)
VARIANT = {"1, 1STR": "1str", "1, simple-1STR": "simple", "3": "qstr"}


def _rows(folder: str, stem: str) -> List[dict]:
    """The committed rows of one source."""
    return ResultsFile(os.path.join(folder, stem + ".jsonl"), None).rows


def verdict_sweep(folder: str, sources=SOURCES) -> List[List[dict]]:
    """For each threshold index i of verdicts.SWEEP: every source's verdicts (figures 1 and 3)
    with the rows rebuilt at that threshold, Holm over all of them (shared prompts once)."""
    out = []
    rows = {s: _rows(folder, s) for s, _ in sources if not s.startswith("figure2")}
    for i in range(len(verdicts.SWEEP["1str"])):
        sets = []
        for stem, r in rows.items():
            at = [
                row
                for v, ts in verdicts.SWEEP.items()
                for row in verdicts.at_threshold([x for x in r if x["variant"] == v], ts[i])
            ]
            sets.append(verdicts.claims(at, "3" if stem.startswith("figure3") else "1"))
        verdicts.with_holm(sets)
        out.append(
            [
                verdicts.with_choice(
                    [verdicts.judge(c) for c in cs], verdicts.weight_decay_choice(rows[stem])
                )
                for cs, stem in zip(sets, rows, strict=True)
            ]
        )
    return out


def _range(figure: str, got: List[str]) -> str:
    """The published threshold and where the sweep keeps or changes its verdict."""
    ts = verdicts.SWEEP[VARIANT[figure]]
    same = [f"{t:g}" for t, v in zip(ts, got, strict=True) if v == got[0]]
    other = [f"{v} at {t:g}" for t, v in zip(ts, got, strict=True) if v != got[0]]
    said = f"{ts[0]:g} (the published code's); holds at {', '.join(same)}"
    return said + (f"; {'; '.join(other)}" if other else "")


def table(folder: str = os.path.join("docs", "figures"), sources=SOURCES) -> str:
    """The "Does it reproduce?" table (markdown) from the committed rows."""
    lines = [
        "| figure | the paper says | runs | rule | numbers (at the published threshold) "
        "| verdict | threshold: source, sweep |",
        "|---|---|---|---|---|---|---|",
    ]
    sweep = verdict_sweep(folder, sources)
    k = 0
    for stem, runs in sources:
        if stem.startswith("figure2"):
            with open(os.path.join(folder, stem + "-summary.json"), encoding="utf-8") as fh:
                vs, ranges = verdicts.figure2_verdicts(json.load(fh)), ["-"]
        else:
            vs = sweep[0][k]
            ranges = [
                _range(v["figure"], [s[k][j]["verdict"] for s in sweep]) for j, v in enumerate(vs)
            ]
            k += 1
        for v, rng in zip(vs, ranges, strict=True):
            verdict = f"**{v['verdict']}**"
            if v["protocol_choice"]:
                verdict += f" ({v['protocol_choice']})"
            cells = [v["figure"], v["statement"], f"{runs}: `{stem}`", v["rule"], v["numbers"]]
            lines.append("| " + " | ".join(cells + [verdict, rng]) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table(), end="")
