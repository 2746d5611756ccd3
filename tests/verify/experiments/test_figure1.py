"""Tests for verify/experiments/figure1.py: the grid, the published-protocol labels, the summary."""

import json
import math

import pytest
import torch

from qstr.verify.experiments import Execution, figure1, run_experiment


def test_grid_matches_the_paper():
    pts = figure1.points(seeds=None)
    assert sorted({p.N for p in pts if p.variant == "1str"}) == [2, 4, 6, 8, 10, 12]
    assert sorted({p.N for p in pts if p.variant == "simple"}) == [25, 27, 29, 31, 33]
    assert {p.seed for p in pts} == set(range(5)) and len(pts) == 3 * 5 * 11
    one = [p for p in pts if p.model == "ffn" and p.N == 12][0]
    assert one.ffn_hidden == (120, 1000) and one.threshold == 0.7 and one.check_every == 10
    assert (
        one.n_test == 10_000
        and one.lr == 1e-3
        and one.config["d_e"] == math.floor(5 * math.log(12))
    )
    s = [p for p in pts if p.variant == "simple"][0]
    assert (s.threshold, s.check_every) == (0.02, 100)


def test_published_rows_are_labelled(tmp_path, tiny):
    rows = run_experiment(
        "figure1",
        out_dir=str(tmp_path),
        seeds=[0],
        protocol="published",
        N_values={"1str": [2], "simple": [3]},
        overrides=tiny,
        execution=Execution(progress=False, dtype=torch.float64, threads=1),
    )
    assert {r["protocol"] for r in rows} == {"published"}
    assert {r["test_variant"] for r in rows} == {"simple"}
    assert (tmp_path / "figure1-published.png").exists()
    s = json.loads((tmp_path / "figure1-published-summary.json").read_text())
    assert "PUBLISHED" in s["label"]


@pytest.mark.gpu
def test_tiny_figure1_cuda(tmp_path, tiny):
    rows = run_experiment(
        "figure1",
        out_dir=str(tmp_path),
        seeds=[0],
        N_values={"1str": [2, 4], "simple": [3]},
        overrides=tiny,
        execution=Execution(device="cuda", progress=False),
    )
    assert {r["device"] for r in rows} == {"cuda"} and len(rows) == 9


def _row(model, variant, N, seed, samples):
    return {
        "model": model,
        "variant": variant,
        "N": N,
        "seed": seed,
        "samples": samples,
        "reached": samples is not None,
    }


def test_figure1_summary_orders_models_and_gives_ratios():
    rows = [
        _row(m, "simple", N, s, v * N)
        for m, v in (("transformer", 100), ("rnn", 150), ("ffn", 600))
        for N in (5, 9)
        for s in (0, 1)
    ]
    h = figure1.summarize(rows, protocol="paper", quick=True)["hierarchy"]["simple"]
    assert h["N"] == 9 and h["order_fewest_first"] == ["transformer", "rnn", "ffn"]
    assert h["ratio_to_transformer"] == pytest.approx({"rnn": 1.5, "ffn": 6.0})
    assert h["not_reached_by_all"] == []


def test_the_quick_title_counts_the_seeds_the_rows_have():
    from qstr.verify.experiments import figure1  # noqa: PLC0415

    cfg = {"n_test": 1000, "weight_decay": 0.1}
    rows = [{"seed": s, "quick": True, "config": cfg} for s in (0, 1, 2)]
    assert figure1.title(rows, "paper").endswith(
        "[quick: smaller N grid, 3 seeds, 1,000 test prompts]"
    )
    assert "1 seed," in figure1.title(rows[:1], "paper")
