"""Tests for verify/experiments/run.py: rows appended and resumed, stacks, jobs, progress (the
Dask engine of ``jobs > 1``: test_cluster.py)."""

import io
import json
import os
from dataclasses import replace

import pytest
import torch
from rich.console import Console

from qstr.verify.experiments import Execution, figure1, figure3, run_experiment
from qstr.verify.experiments.run import _Progress, stack_cost, stacks_of, start_order

ROW_KEYS = {
    "model",
    "variant",
    "N",
    "seed",
    "samples",
    "config",
    "wall_s",
    "device",
    "protocol",
    "point_id",
    "q",
    "steps",
    "test_mse",
    "threshold",
    "test_variant",
    "reached",
    "env",
}


@pytest.fixture
def tiny_figure1(tiny, tiny_grid):
    def run(out, protocol="paper", seeds=(0,)):
        return run_experiment(
            "figure1",
            out_dir=str(out),
            seeds=list(seeds),
            protocol=protocol,
            N_values=tiny_grid,
            overrides=tiny,
            execution=Execution(progress=False, dtype=torch.float64, threads=1),
        )

    return run


def lines(path):
    with open(path) as fh:
        return fh.read().splitlines()


def test_rows_resume_and_figures(tmp_path, tiny_figure1):
    rows = tiny_figure1(tmp_path, seeds=(0, 1))
    path = tmp_path / "figure1.jsonl"
    n = 3 * 3 * 2  # models x (N, variant) x seeds
    assert len(rows) == n and len(lines(path)) == n
    for r in rows:
        assert ROW_KEYS <= set(r)
        assert r["model"] in {"transformer", "rnn", "ffn"} and r["variant"] in {"1str", "simple"}
        assert r["protocol"] == "paper" and r["device"] == "cpu"
        assert r["samples"] is None or r["samples"] == r["steps"] * 64
        assert r["test_variant"] == r["variant"]
    for ext in ("png", "pdf"):
        assert os.path.getsize(tmp_path / f"figure1-paper.{ext}") > 1000
    summary = json.loads((tmp_path / "figure1-paper-summary.json").read_text())
    assert set(summary["fits"]) == {"1str", "simple"} and "hierarchy" in summary

    # rerun: nothing new
    before = lines(path)
    again = tiny_figure1(tmp_path, seeds=(0, 1))
    assert lines(path) == before
    assert [r["point_id"] for r in again] == [r["point_id"] for r in rows]

    # partial file (some rows lost, last line cut mid-write): only the missing rows are computed,
    # and they come out identical (each model's numbers do not depend on what it was stacked with)
    keep = before[:7]
    path.write_text("\n".join(keep) + "\n" + before[7][:25])
    redo = tiny_figure1(tmp_path, seeds=(0, 1))
    after = lines(path)
    assert after[:7] == keep and len(after) == n
    old = {json.loads(l)["point_id"]: json.loads(l) for l in before}
    for r in redo:
        o = old[r["point_id"]]
        assert (r["samples"], r["steps"]) == (o["samples"], o["steps"])
        assert r["test_mse"] == pytest.approx(o["test_mse"], abs=1e-9)


def test_cpu_rnn_stacks_hold_one_member_and_start_order():
    pts = figure1.points(quick=True, seeds=[0, 1])
    cpu = stacks_of(pts, device="cpu")
    rnn = [s for s in cpu if s[0].model == "rnn"]
    assert all(len(s) == 1 for s in rnn)  # one member per RNN stack on a CPU
    assert len(rnn) == 2 * (len(figure1.QUICK["1str"]) + len(figure1.QUICK["simple"]))
    assert sum(map(len, cpu)) == len(pts)
    gpu = stacks_of(pts, device="cuda")
    assert len(gpu) == 6  # (variant, model) on a GPU: padding is free parallelism there
    costs = [stack_cost(s) for s in start_order(cpu, parallel=True)]
    # the cheapest stack first (a row within seconds), then longest first (the makespan)
    assert (
        costs[0] == min(costs)
        and costs[1:] == sorted(costs[1:], reverse=True)
        and costs[1] > costs[-1]
    )
    alone = [stack_cost(s) for s in start_order(cpu, parallel=False)]
    assert alone == sorted(alone)  # one process: cheapest first, the same total


def test_rnn_stacks_split_by_hidden_size_on_every_device():
    """Figure 3's GRUs (hidden 500 q): one stack per q on a GPU, never padded to the widest."""
    pts = figure3.points(seeds=[0, 1])
    for device, members in (("cpu", 1), ("cuda", 2)):  # on a CPU one member per stack
        rnn = [s for s in stacks_of(pts, device=device) if s[0].model == "rnn"]
        assert sorted({s[0].rnn_hidden for s in rnn}) == [500, 1000, 1500, 2000]
        assert len(rnn) == 8 // members
        assert all(len({p.rnn_hidden for p in s}) == 1 and len(s) == members for s in rnn)


def test_parallel_jobs_give_the_rows_of_one_process(tmp_path, tiny, tiny_grid):
    """Two worker processes train the same stacks as one process: identical rows (float64)."""
    kw = dict(seeds=[0], N_values=tiny_grid, overrides=tiny)
    ex = Execution(progress=False, dtype=torch.float64, threads=1)
    one = run_experiment("figure1", out_dir=str(tmp_path / "one"), execution=ex, **kw)
    two = run_experiment(
        "figure1", out_dir=str(tmp_path / "two"), execution=replace(ex, jobs=2), **kw
    )
    key = lambda r: r["point_id"]  # noqa: E731
    assert [(r["samples"], r["steps"], r["test_mse"]) for r in sorted(one, key=key)] == [
        (r["samples"], r["steps"], r["test_mse"]) for r in sorted(two, key=key)
    ]
    assert len(lines(tmp_path / "two" / "figure1.jsonl")) == len(two) == 3 * 3


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True])
def test_bad_jobs_is_a_value_error(tmp_path, jobs, tiny, tiny_grid):
    with pytest.raises(ValueError, match="jobs"):
        run_experiment(
            "figure1",
            out_dir=str(tmp_path),
            seeds=[0],
            N_values=tiny_grid,
            overrides=tiny,
            execution=Execution(progress=False, jobs=jobs),
        )


def test_progress_off_a_terminal_prints_plain_lines_as_it_goes():
    buf = io.StringIO()
    with _Progress(True, Console(file=buf, width=110)) as bar:
        assert bar.plain
        task = bar.add("figure1 1STR gru N=6 x5", 1000)
        bar.update(task, completed=10, description="figure1 1STR gru N=6 (active 5/5)")
        bar.update(
            task, completed=20, description="figure1 1STR gru N=6 (active 5/5)"
        )  # within 30 s: no line
        written = buf.getvalue()
    assert written.count("step 10 of 1,000") == 1 and "step 20 of" not in written


def test_members_whose_prompts_and_models_cannot_fit_are_refused_before_any_is_built(
    tmp_path, tiny, tiny_grid, monkeypatch
):
    from qstr.constructions import validate  # noqa: PLC0415
    from qstr.verify.experiments import figure1  # noqa: PLC0415
    from qstr.verify.experiments import run as run_module  # noqa: PLC0415

    built = []
    monkeypatch.setattr(validate, "available_memory", lambda device: 1000)
    monkeypatch.setattr(run_module, "train_points", lambda *a, **k: built.append(a))
    pts = figure1.points(quick=True, seeds=2, overrides=tiny, N_values=tiny_grid)
    with pytest.raises(ValueError, match=r"prompts and models of \d+ members training at once"):
        run_module.train_figure("figure1", pts, str(tmp_path), run_module.RunConfig(progress=False))
    assert built == []


def test_the_memory_check_counts_the_models_not_only_the_prompts(tmp_path, monkeypatch):
    """Figure 3's q = 4 RNNs (GRU 2000): the prompts of both members fit in the memory offered,
    one member's model (weights, gradients, AdamW's moments: 16 bytes a parameter) does not."""
    from qstr.constructions import validate  # noqa: PLC0415
    from qstr.verify.experiments import figure3  # noqa: PLC0415
    from qstr.verify.experiments import run as run_module  # noqa: PLC0415
    from qstr.verify.experiments.points import model_bytes, prompt_bytes  # noqa: PLC0415

    pts = [p for p in figure3.points(seeds=2) if p.model == "rnn" and p.q == 4]
    prompts = sum(prompt_bytes(p) for p in pts)
    models = sum(model_bytes(p) for p in pts)
    assert models > 10 * prompts
    monkeypatch.setattr(validate, "available_memory", lambda device: prompts)
    monkeypatch.setattr(run_module, "train_points", lambda *a, **k: pytest.fail("trained"))
    cfg = run_module.RunConfig(progress=False, jobs=1)
    with pytest.raises(ValueError, match=r"prompts and models of \d+ members? training at once"):
        run_module.train_figure("figure3", pts, str(tmp_path), cfg)
