"""Figure 3 at the quick size: why the gap between the Transformer and the RNN / FFN does not grow
with q there (docs/experiments.md, "Figure 3: one change at a time").

Each change alters one thing against the quick control (q = 1, 2, 3; N = 7; the same seeds, so
the same prompts), and the models it cannot affect are not retrained. Rows go to
``OUT/figure3-study.jsonl`` as each model finishes (a change enters every point id), so an
interrupted study resumes where it stopped; the summary is ``OUT/figure3-study-summary.json``.

    python studies/figure3_gap.py OUT [--jobs 1] [--seeds 2] [--control-seeds 4] [--only NAME]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
from typing import Callable, Dict, List, Optional, Sequence

from qstr.verify.experiments import figure3
from qstr.verify.experiments.points import MODELS, Point
from qstr.verify.experiments.results import ResultsFile
from qstr.verify.experiments.run import RunConfig, run_points
from qstr.verify.threads import cpu_threads

QS = (1, 2, 3)


@dataclasses.dataclass(frozen=True)
class Change:
    """One change against the control: ``overrides`` of every point's fields, or ``per_point``
    (a point -> the changed point), applied to the ``models`` it can affect."""

    name: str
    why: str
    overrides: Optional[dict] = None
    per_point: Optional[Callable[[Point], Point]] = None
    models: Sequence[str] = MODELS


CHANGES = (
    Change("control", "the quick protocol as shipped"),
    Change(
        "threshold 0.5",
        "each q must explain half the label's variance, not 12%: at q >= 2 "
        "no longer reachable by part of one component",
        overrides={"threshold": 0.5},
    ),
    Change("lr 1e-3", "ten times the learning rate 1e-4", overrides={"lr": 1e-3}),
    Change(
        "10,000 test prompts",
        "the paper's test-set size instead of 1,000",
        overrides={"n_test": 10_000},
    ),
    Change(
        "GRU 4x wider",
        "hidden 256 q instead of 64 q (the paper: 500 q)",
        per_point=lambda p: dataclasses.replace(p, rnn_hidden=256 * p.q),
        models=("rnn",),
    ),
    Change(
        "FFN second layer 1000",
        "the paper's FFN widths (N d q, 1000) instead of (N d q, 256)",
        per_point=lambda p: dataclasses.replace(p, ffn_hidden=(p.ffn_hidden[0], 1000)),
        models=("ffn",),
    ),
)


def change_points(change: Change, seeds: Sequence[int]) -> List[Point]:
    """The quick Figure 3 points of ``change``'s models at ``seeds``, changed."""
    pts = figure3.points(
        quick=True,
        seeds=list(seeds),
        q_values=list(QS),
        overrides=change.overrides,
        models=tuple(change.models),
    )
    return [change.per_point(p) for p in pts] if change.per_point else pts


def ratio_interval(
    num: List[float], den: List[float], n_boot: int = 4000, seed: int = 0
) -> List[float]:
    """95% bootstrap interval of mean(num) / mean(den), seeds resampled within each model."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_boot):
        a = [rng.choice(num) for _ in num]
        b = [rng.choice(den) for _ in den]
        out.append(sum(a) / len(a) / (sum(b) / len(b)))
    out.sort()
    return [out[int(0.025 * n_boot)], out[int(0.975 * n_boot) - 1]]


def summarize(rows_by_change: Dict[str, List[dict]], control: List[dict]) -> dict:
    """Per change and q: mean samples per model (the control's rows for models it leaves alone,
    at the change's seeds), runs reached, and the ratios to the Transformer with intervals."""
    out = {}
    for name, rows in rows_by_change.items():
        seeds = sorted({r["seed"] for r in rows})
        changed = {r["model"] for r in rows}
        use = rows + [r for r in control if r["model"] not in changed and r["seed"] in seeds]
        per_q = {}
        for q in QS:
            got = {
                m: [r["samples"] for r in use if r["model"] == m and r["q"] == q] for m in MODELS
            }
            reached = {m: [s for s in v if s is not None] for m, v in got.items()}
            entry = {
                m: {
                    "mean": (sum(v) / len(v)) if v else None,
                    "reached": len(v),
                    "runs": len(got[m]),
                }
                for m, v in reached.items()
            }
            for m in ("rnn", "ffn"):
                if reached[m] and reached["transformer"]:
                    entry[f"{m}/transformer"] = {
                        "ratio": entry[m]["mean"] / entry["transformer"]["mean"],
                        "ci": ratio_interval(reached[m], reached["transformer"]),
                    }
            per_q[str(q)] = entry
        out[name] = {"seeds": seeds, "per_q": per_q}
    return out


def print_table(summary: dict) -> None:
    for name, s in summary.items():
        print(f"\n{name} (seeds {s['seeds']})")
        print("q | Transformer | RNN | FFN | RNN/TF [95%] | FFN/TF [95%]")
        for q, e in s["per_q"].items():

            def mean(m, e=e):
                v = e[m]
                miss = "" if v["reached"] == v["runs"] else f" ({v['runs'] - v['reached']} cap)"
                return ("-" if v["mean"] is None else f"{v['mean']:,.0f}") + miss

            def ratio(key, e=e):
                r = e.get(key)
                return (
                    "-" if r is None else (f"{r['ratio']:.2f} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]")
                )

            print(
                f"{q} | {mean('transformer')} | {mean('rnn')} | {mean('ffn')} | "
                f"{ratio('rnn/transformer')} | {ratio('ffn/transformer')}"
            )


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seeds", type=int, default=2, help="seeds of each change (0..S-1)")
    ap.add_argument("--control-seeds", type=int, default=4)
    ap.add_argument("--only", default=None, help="comma-separated change names")
    a = ap.parse_args(argv)
    names = {c.name for c in CHANGES}
    only = set(a.only.split(",")) if a.only else names
    if only - names:
        print(f"error: --only: unknown changes {sorted(only - names)}", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    results = ResultsFile(os.path.join(a.out, "figure3-study.jsonl"), "figure3")
    cfg = RunConfig(progress=True, jobs=a.jobs)
    rows_by_change = {}
    with cpu_threads(1):
        for change in CHANGES:
            if change.name not in only and change.name != "control":
                continue
            seeds = range(a.control_seeds if change.name == "control" else a.seeds)
            pts = change_points(change, seeds)
            by_id = run_points(pts, results, cfg)
            rows_by_change[change.name] = [by_id[p.point_id] for p in pts]
    summary = summarize(rows_by_change, rows_by_change["control"])
    with open(os.path.join(a.out, "figure3-study-summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print_table(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
