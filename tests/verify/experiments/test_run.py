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
from qstr.verify.experiments import run as run_module
from qstr.verify.experiments.base import RunConfig
from qstr.verify.experiments.results import ResultsFile
from qstr.verify.threads import cpu_threads
from qstr.verify.experiments.run import _Progress, run_points, stack_cost, stacks_of, start_order

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


def _numbers(rows):
    return sorted((r["point_id"], r["samples"], r["steps"], r["test_mse"]) for r in rows)


def test_stacks_at_once_in_threads_give_the_rows_of_one_after_another(tmp_path, tiny, tiny_grid):
    """``streams=2`` trains two stacks at a time in threads (on a CPU without CUDA streams): the
    rows of one stack after another (float64), each point once in the file. One torch thread:
    with more, a CPU reduction's split depends on the threads busy beside it."""
    pts = figure1.points(seeds=[0, 1], N_values=tiny_grid, overrides=tiny)
    cfg = RunConfig(dtype=torch.float64, progress=False)
    with cpu_threads(1):
        one = run_points(pts, ResultsFile(str(tmp_path / "one.jsonl"), "figure1"), cfg)
        at_once = ResultsFile(str(tmp_path / "two.jsonl"), "figure1")
        two = run_points(pts, at_once, replace(cfg, streams=2))
    assert len(stacks_of(pts)) > 2
    assert _numbers(one.values()) == _numbers(two.values())
    ids = [json.loads(line)["point_id"] for line in lines(tmp_path / "two.jsonl")]
    assert sorted(ids) == sorted(p.point_id for p in pts)


def test_a_failing_stack_among_threads_raises_and_starts_no_more(tmp_path, tiny, monkeypatch):
    """The first error of a stack trained in a thread is raised; stacks not yet started stay
    untrained (their rows absent), so a rerun resumes them."""
    pts = figure1.points(seeds=[0, 1, 2], N_values={"1str": [2], "simple": [3]}, overrides=tiny)
    started = []

    def failing(stack_pts, cfg, report, stack=0):
        started.append(stack)
        if len(started) == 1:
            raise RuntimeError("stack failed")

    monkeypatch.setattr(run_module, "train_points", failing)
    results = ResultsFile(str(tmp_path / "r.jsonl"), "figure1")
    cfg = RunConfig(dtype=torch.float64, progress=False, streams=2)
    with pytest.raises(RuntimeError, match="stack failed"):
        run_points(pts, results, cfg)
    assert 1 <= len(started) < len(stacks_of(pts))


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(streams=0), "streams must be a positive integer"),
        (dict(streams=True), "streams must be a positive integer"),
        (dict(streams=2), "needs device='cuda'"),
    ],
)
def test_bad_streams_is_a_value_error(tmp_path, kw, match, tiny, tiny_grid):
    with pytest.raises(ValueError, match=match):
        run_experiment(
            "figure1",
            out_dir=str(tmp_path),
            seeds=[0],
            N_values=tiny_grid,
            overrides=tiny,
            execution=Execution(progress=False, **kw),
        )
    assert not (tmp_path / "figure1.jsonl").exists()


@pytest.mark.gpu
def test_stacks_on_cuda_streams_give_the_rows_of_one_after_another(tmp_path, tiny, tiny_grid):
    """Two stacks at a time on their own CUDA streams (graphs recorded while another stack runs):
    the rows of one stack after another, float64 on CUDA."""
    kw = dict(seeds=[0, 1], N_values=tiny_grid, overrides=tiny)
    ex = Execution(device="cuda", progress=False, dtype=torch.float64)
    one = run_experiment("figure1", out_dir=str(tmp_path / "one"), execution=ex, **kw)
    two = run_experiment(
        "figure1", out_dir=str(tmp_path / "two"), execution=replace(ex, streams=2), **kw
    )
    assert _numbers(one) == _numbers(two)
    with pytest.raises(ValueError, match="jobs=1 and no scheduler"):
        run_experiment(
            "figure1", out_dir=str(tmp_path / "x"), execution=replace(ex, streams=2, jobs=2), **kw
        )
