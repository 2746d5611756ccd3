"""The "Does it reproduce?" table of the README and docs/experiments.md, generated from the
verdicts (verify/experiments/verdicts.py) of the committed summaries in ``SOURCES``: run
``python -m qstr.verify.experiments.verdict_table`` and paste its output between
``<!-- verdicts:begin -->`` and ``<!-- verdicts:end -->``; a test holds both files to it."""

from __future__ import annotations

import json
import os

# (summary file under docs/figures, what the rows are): the runs the table is computed from
SOURCES = (
    ("figure1-paper-h100-tf32-v2-summary.json", "5 seeds, H100, weight decay 0.1 (the paper's)"),
    ("figure1-paper-h200-tf32-v2-wd0.01-summary.json", "5 seeds, H200, weight decay 0.01"),
    ("figure2-paper-cpu-summary.json", "5 seeds, CPU"),
    ("figure3-paper-h100-tf32-v2-summary.json", "5 seeds, H100"),
    ("figure3-paper-h200-tf32-v2-20seeds-summary.json", "20 seeds, H200"),
)


def table(folder: str = os.path.join("docs", "figures"), sources=SOURCES) -> str:
    """The "Does it reproduce?" table (markdown) from the committed summaries' verdicts."""
    lines = [
        "| figure | the paper says | runs | rule | numbers | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for name, runs in sources:
        with open(os.path.join(folder, name), encoding="utf-8") as fh:
            summary = json.load(fh)
        for v in summary["verdicts"]:
            verdict = f"**{v['verdict']}**"
            if v["protocol_choice"]:
                verdict += f" ({v['protocol_choice']})"
            cells = [v["figure"], v["statement"], f"{runs}: `{name}`", v["rule"], v["numbers"]]
            lines.append("| " + " | ".join(cells + [verdict]) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table(), end="")
