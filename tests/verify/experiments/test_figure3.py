"""Tests for verify/experiments/figure3.py: the grid and a tiny run."""

import json

from qstr.verify.experiments import Execution, figure3, run_experiment
from qstr.verify.experiments.points import MODELS


def test_grid_matches_the_paper():
    f3 = figure3.points()
    assert {p.q for p in f3} == {1, 2, 3, 4} and {p.N for p in f3} == {7}
    assert {(p.lr, p.threshold, p.link) for p in f3} == {(1e-4, 0.88, "hermite")}
    assert {p.rnn_hidden for p in f3 if p.q == 3} == {1500}


def test_tiny_figure3(tmp_path, tiny):
    rows = run_experiment(
        "figure3",
        out_dir=str(tmp_path),
        seeds=[0],
        q_values=[1, 2],
        overrides=dict(tiny, threshold=1.5, lr=1e-2),
        execution=Execution(progress=False, threads=1),
    )
    assert sorted({(r["model"], r["q"]) for r in rows}) == sorted(
        (m, q) for m in MODELS for q in (1, 2)
    )
    assert {r["variant"] for r in rows} == {"qstr"}
    s = json.loads((tmp_path / "figure3-paper-summary.json").read_text())
    assert set(s["gap"]) == {"1", "2"}
    assert (tmp_path / "figure3-paper.png").exists()
