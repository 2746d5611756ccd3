"""verify.experiments: protocol, JSON rows, resume, fits and tiny end-to-end runs."""
import dataclasses
import json
import math
import os

import pytest
import torch

from qstr.verify.experiments import run_experiment
from qstr.verify.experiments import figure1, figure2, figure3
from qstr.verify.experiments.analysis import fit_exponent
from qstr.verify.experiments.points import MODELS, Point, build_member
from qstr.verify.experiments.run import stack_cost, stacks_of

# tiny models so that a whole "figure" trains in seconds
TINY = {"width": 8, "rnn_hidden": 8, "ffn_hidden": (8, 8), "n_test": 64, "max_steps": 30}
TINY_GRID = {"1str": [2, 3], "simple": [3]}
ROW_KEYS = {"model", "variant", "N", "seed", "samples", "config", "wall_s", "device", "protocol", "point_id",
            "q", "steps", "test_mse", "threshold", "test_variant", "reached", "env"}


def tiny_figure1(out, protocol="paper", seeds=(0,)):
    return run_experiment("figure1", out_dir=str(out), seeds=list(seeds), protocol=protocol, progress=False,
                          dtype=torch.float64, N_values=TINY_GRID, overrides=TINY, threads=1, jobs=1)


def lines(path):
    with open(path) as fh:
        return fh.read().splitlines()


# ---------------------------------------------------------------------------- protocol


@pytest.mark.parametrize("protocol,variant,test_simple", [
    ("paper", "1str", False), ("paper", "simple", True), ("published", "1str", True), ("published", "simple", True),
])
def test_test_prompts_follow_training_variant(protocol, variant, test_simple):
    """Paper: test prompts from the training variant. Published code: always simple prompts."""
    p = Point(figure="figure1", protocol=protocol, model="transformer", variant=variant, N=6, q=1, seed=0,
              n_test=50, width=8)
    m = build_member(p)
    t = m.test[1]
    constant = bool((t == t[:, :1]).all())
    assert constant == test_simple
    assert p.test_variant == ("simple" if test_simple else variant)
    x, tt, _ = m.stream.draw(50)  # training prompts are the training variant in both protocols
    assert bool((tt == tt[:, :1]).all()) == (variant == "simple")
    assert m.c == (1.0 if protocol == "published" else math.sqrt(10))


def test_published_protocol_choices():
    pts = figure1.points(protocol="published", seeds=[0, 1])
    assert {p.weight_decay for p in pts} == {0.01}
    assert {p.weight_decay for p in figure1.points(seeds=[0])} == {0.1}
    a, b = (build_member(Point(figure="figure1", protocol="published", model="ffn", variant="1str", N=4, q=1,
                               seed=s, n_test=8, ffn_hidden=(8, 8))) for s in (0, 1))
    assert torch.equal(a.omega, b.omega)  # one codebook per N for all seeds, as the published code
    from qstr.constructions.models import EncodedFFN

    assert isinstance(a.model, EncodedFFN)
    c, d = (build_member(Point(figure="figure1", protocol="paper", model="ffn", variant="1str", N=4, q=1,
                               seed=s, n_test=8, ffn_hidden=(8, 8))) for s in (0, 1))
    assert not torch.equal(c.omega, d.omega)


def test_figure_grids_match_the_paper():
    pts = figure1.points(seeds=None)
    assert sorted({p.N for p in pts if p.variant == "1str"}) == [2, 4, 6, 8, 10, 12]
    assert sorted({p.N for p in pts if p.variant == "simple"}) == [25, 27, 29, 31, 33]
    assert {p.seed for p in pts} == set(range(5)) and len(pts) == 3 * 5 * 11
    one = [p for p in pts if p.model == "ffn" and p.N == 12][0]
    assert one.ffn_hidden == (120, 1000) and one.threshold == 0.7 and one.check_every == 10
    assert one.n_test == 10_000 and one.lr == 1e-3 and one.config["d_e"] == math.floor(5 * math.log(12))
    s = [p for p in pts if p.variant == "simple"][0]
    assert (s.threshold, s.check_every) == (0.02, 100)
    f3 = figure3.points()
    assert {p.q for p in f3} == {1, 2, 3, 4} and {p.N for p in f3} == {7}
    assert {(p.lr, p.threshold, p.link) for p in f3} == {(1e-4, 0.88, "hermite")}
    assert {p.rnn_hidden for p in f3 if p.q == 3} == {1500}
    f2 = figure2.points()
    assert [(p.N, p.n_train, p.weight_decay) for p in f2] == [(100, 50_000, 0.2)]


# ------------------------------------------------------------------------ rows and resume


def test_rows_resume_and_figures(tmp_path):
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


def test_published_rows_are_labelled(tmp_path):
    rows = run_experiment("figure1", out_dir=str(tmp_path), seeds=[0], protocol="published", progress=False,
                          N_values={"1str": [2], "simple": [3]}, overrides=TINY, dtype=torch.float64, threads=1, jobs=1)
    assert {r["protocol"] for r in rows} == {"published"}
    assert {r["test_variant"] for r in rows} == {"simple"}
    assert (tmp_path / "figure1-published.png").exists()
    s = json.loads((tmp_path / "figure1-published-summary.json").read_text())
    assert "PUBLISHED" in s["label"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="experiment"):
        run_experiment("figure9", out_dir="unused")
    with pytest.raises(ValueError, match="protocol"):
        run_experiment("figure1", out_dir="unused", protocol="mine")
    with pytest.raises(ValueError, match="overrides"):
        figure1.points(overrides={"N": 3})
    with pytest.raises(ValueError, match="seeds"):
        figure1.points(seeds=[])


# ------------------------------------------------------------------------------ fits


def test_fitted_exponent_on_synthetic_data():
    g = torch.Generator().manual_seed(0)
    Ns = [2, 4, 6, 8, 10, 12] * 5
    samples = [50 * n ** 1.5 * math.exp(0.1 * float(torch.randn(1, generator=g))) for n in Ns]
    fit = fit_exponent(Ns, samples)
    assert fit["a"] == pytest.approx(1.5, abs=0.1)
    assert fit["ci"][0] < 1.5 < fit["ci"][1] and fit["ci"][1] - fit["ci"][0] < 0.3
    assert fit["censored"] == 0 and fit["n"] == 30
    flat = fit_exponent(Ns, [1000.0 * math.exp(0.05 * i % 3) for i in range(30)])
    assert abs(flat["a"]) < 0.2
    cens = fit_exponent([2, 4, 8], [10.0, None, 40.0])
    assert cens["censored"] == 1 and cens["a"] == pytest.approx(1.0)
    assert math.isnan(fit_exponent([2, 2], [5.0, 6.0])["a"])


# ------------------------------------------------------------------------- tiny figures


def test_tiny_figure2(tmp_path):
    rows = run_experiment("figure2", out_dir=str(tmp_path), progress=False, N=12, n_train=256, epochs=2,
                          overrides={"width": 8, "n_test": 32}, threads=1, jobs=1)
    (r,) = rows
    assert 0 <= r["block_mass"] <= 1 and r["model"] == "transformer" and r["N"] == 12
    st = r["block_stats"][0]
    assert st["chance_block_mass"] == pytest.approx(12 ** 2 / (10 + 2 * 12) ** 2)
    assert sum(st["mass_by_block"].values()) == pytest.approx(1.0)
    assert st["mass_by_block"]["slot0|pos"] == pytest.approx(r["block_mass"])
    saved = torch.load(tmp_path / r["matrix_file"])
    assert saved["merged_qk"].shape == (1, 34, 34)
    for ext in ("png", "pdf"):
        assert (tmp_path / f"figure2-paper.{ext}").exists()


def test_block_stats_on_the_lemma11_matrix():
    from qstr.constructions.layout import token_layout

    d, q, d_e = 10, 1, 5
    lay = token_layout(d, q, d_e)
    A = torch.zeros(1, lay.dim, lay.dim)
    A[0, lay["slot0"], lay["pos"]] = 3 * torch.eye(d_e)
    st = figure2.block_stats(A, d, q, d_e)
    assert st["block_mass"] == pytest.approx(1.0) and st["heads"][0]["diag_mass"] == pytest.approx(1.0)


def test_tiny_figure3(tmp_path):
    rows = run_experiment("figure3", out_dir=str(tmp_path), seeds=[0], progress=False, q_values=[1, 2],
                          overrides=dict(TINY, threshold=1.5, lr=1e-2), threads=1, jobs=1)
    assert sorted({(r["model"], r["q"]) for r in rows}) == sorted((m, q) for m in MODELS for q in (1, 2))
    assert {r["variant"] for r in rows} == {"qstr"}
    s = json.loads((tmp_path / "figure3-paper-summary.json").read_text())
    assert set(s["gap"]) == {"1", "2"}
    assert (tmp_path / "figure3-paper.png").exists()


@pytest.mark.gpu
def test_tiny_figure1_cuda(tmp_path):
    rows = run_experiment("figure1", out_dir=str(tmp_path), seeds=[0], device="cuda", progress=False,
                          N_values={"1str": [2, 4], "simple": [3]}, overrides=TINY)
    assert {r["device"] for r in rows} == {"cuda"} and len(rows) == 9


def _row(model, variant, N, seed, samples):
    return {"model": model, "variant": variant, "N": N, "seed": seed, "samples": samples, "reached": samples is not None}


def test_figure1_summary_orders_models_and_gives_ratios():
    rows = [_row(m, "simple", N, s, v * N) for m, v in (("transformer", 100), ("rnn", 150), ("ffn", 600))
            for N in (5, 9) for s in (0, 1)]
    h = figure1.summarize(rows, protocol="paper", quick=True)["hierarchy"]["simple"]
    assert h["N"] == 9 and h["order_fewest_first"] == ["transformer", "rnn", "ffn"]
    assert h["ratio_to_transformer"] == pytest.approx({"rnn": 1.5, "ffn": 6.0})
    assert h["not_reached_by_all"] == []


# ------------------------------------------------------------------- parallel stacks


def test_cpu_rnn_stacks_split_by_N_and_longest_first():
    pts = figure1.points(quick=True, seeds=[0, 1])
    cpu = stacks_of(pts, device="cpu")
    rnn = [s for s in cpu if s[0].model == "rnn"]
    assert all(len({p.N for p in s}) == 1 for s in rnn)  # one N per RNN stack on a CPU
    assert len(rnn) == len(figure1.QUICK["1str"]) + len(figure1.QUICK["simple"])
    assert sum(map(len, cpu)) == len(pts)
    gpu = stacks_of(pts, device="cuda")
    assert len(gpu) == 6  # (variant, model) on a GPU: padding is free parallelism there
    costs = [stack_cost(s) for s in sorted(cpu, key=stack_cost, reverse=True)]
    assert costs == sorted(costs, reverse=True) and costs[0] > costs[-1]


def test_parallel_jobs_give_the_rows_of_one_process(tmp_path):
    """Two worker processes train the same stacks as one process: identical rows (float64)."""
    kw = dict(seeds=[0], progress=False, dtype=torch.float64, N_values=TINY_GRID, overrides=TINY, threads=1)
    one = run_experiment("figure1", out_dir=str(tmp_path / "one"), jobs=1, **kw)
    two = run_experiment("figure1", out_dir=str(tmp_path / "two"), jobs=2, **kw)
    key = lambda r: r["point_id"]  # noqa: E731
    assert [(r["samples"], r["steps"], r["test_mse"]) for r in sorted(one, key=key)] == \
           [(r["samples"], r["steps"], r["test_mse"]) for r in sorted(two, key=key)]
    assert len(lines(tmp_path / "two" / "figure1.jsonl")) == len(two) == 3 * 3


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True])
def test_bad_jobs_is_a_value_error(tmp_path, jobs):
    with pytest.raises(ValueError, match="jobs"):
        run_experiment("figure1", out_dir=str(tmp_path), seeds=[0], progress=False, N_values=TINY_GRID,
                       overrides=TINY, jobs=jobs)


def test_matmul_option_keeps_float32_ids_and_separates_tf32_rows(tmp_path):
    """The float32 default leaves point ids as they were; tf32 points get their own ids and
    stacks; tf32 is refused off CUDA with one clear error."""
    from qstr.verify.experiments import figure1, run_experiment

    p = figure1.points(quick=True, seeds=1)[0]
    assert "matmul" not in p.config
    t = dataclasses.replace(p, matmul="tf32")
    assert t.point_id != p.point_id and t.stack_group != p.stack_group and t.config["matmul"] == "tf32"
    with pytest.raises(ValueError, match="matmul"):
        dataclasses.replace(p, matmul="bf16")
    with pytest.raises(ValueError, match="needs device='cuda'"):
        run_experiment("figure1", out_dir=str(tmp_path), quick=True, matmul="tf32", progress=False)


def test_progress_off_a_terminal_prints_plain_lines_as_it_goes():
    import io

    from rich.console import Console

    from qstr.verify.experiments.run import _Progress

    buf = io.StringIO()
    with _Progress(True, Console(file=buf, width=110)) as bar:
        assert bar.plain
        task = bar.add("figure1 1STR gru N=6 x5", 1000)
        bar.update(task, completed=10, description="figure1 1STR gru N=6 (active 5/5)")
        bar.update(task, completed=20, description="figure1 1STR gru N=6 (active 5/5)")  # within 30 s: no line
        written = buf.getvalue()
    assert written.count("step 10 of 1,000") == 1 and "step 20 of" not in written


def test_workers_stop_when_the_parent_is_killed(tmp_path):
    """After ``kill -9`` of the process that owns the pool, its workers exit on their own."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        "import multiprocessing, os, sys, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from qstr.verify.experiments.run import _init_worker\n"
        "if __name__ == '__main__':\n"
        "    ctx = multiprocessing.get_context('spawn')\n"
        "    pool = ProcessPoolExecutor(2, mp_context=ctx, initializer=_init_worker, initargs=(ctx.Queue(), 1, os.getpid()))\n"
        "    futures = [pool.submit(time.sleep, 120) for _ in range(2)]\n"
        "    time.sleep(3)\n"
        "    print(' '.join(str(p.pid) for p in multiprocessing.active_children()), flush=True)\n"
        "    time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert pids
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()

    def alive(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        with open(f"/proc/{pid}/stat") as fh:  # a zombie waiting for init to reap it counts as gone
            return fh.read().split(") ")[1][0] != "Z"

    deadline = time.time() + 15
    while any(alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.2)
    left = [p for p in pids if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"workers {left} outlived their parent"
