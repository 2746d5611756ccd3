"""Training the points: stacks, progress, and the rows appended as models finish (in this process,
or as Dask tasks: verify/experiments/cluster.py)."""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import replace
from typing import Dict, List, Optional, Sequence

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from qstr.constructions import validate
from qstr.verify.experiments import cluster
from qstr.verify.experiments.base import RunConfig, train_points, wide_console
from qstr.verify.experiments.points import Point, model_bytes, prompt_bytes
from qstr.verify.experiments.results import ResultsFile

__all__ = [  # RunConfig, train_points and wide_console live in base.py (cluster.py needs them too)
    "RunConfig",
    "default_jobs",
    "run_points",
    "stack_cost",
    "stacks_of",
    "start_order",
    "train_figure",
    "train_points",
    "wide_console",
]


class _Progress:
    """A rich progress bar (or nothing). Off a terminal (a log file, a pipe) rich shows the bar only
    at exit, so there every stack also prints a plain line at most every ``PLAIN_EVERY`` seconds."""

    PLAIN_EVERY = 30.0

    def __init__(self, enabled: bool, console=None):
        self.enabled = enabled
        self.console = console
        self.bar = None
        self.plain = False
        self._last = {}
        self._start = time.monotonic()

    def __enter__(self):
        if self.enabled:
            self.console = self.console or wide_console(stderr=True)
            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self.bar.__enter__()
            self.plain = not self.console.is_terminal
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def add(self, description: str, total: int):
        return self.bar.add_task(description, total=total) if self.bar is not None else None

    def update(self, task, **kw):
        if self.bar is not None and task is not None:
            self.bar.update(task, **kw)
            if self.plain and "description" in kw:
                self._plain_line(task)

    def _plain_line(self, task):
        now = time.monotonic()
        if now - self._last.get(task, -1e9) < self.PLAIN_EVERY:
            return
        self._last[task] = now
        t = self.bar.tasks[[x.id for x in self.bar.tasks].index(task)]
        m, sec = divmod(int(now - self._start), 60)
        self.log(
            f"[{m:d}:{sec:02d}] {t.description}: step {int(t.completed):,} of {int(t.total or 0):,}"
        )

    def log(self, text: str):
        if self.bar is not None:
            self.bar.console.print(text)


def stacks_of(points: Sequence[Point], *, device="cpu") -> List[List[Point]]:
    """Split points into stacks: one per :attr:`Point.stack_group` with equal check interval,
    step cap and test size. RNN stacks are also split by hidden size: every step streams each
    member's W_hh once per position, so a hidden state padded from 500 to 2,000 would cost 16x
    the bytes on any device. On a CPU they are split by N and q as well: the recurrence runs
    over the longest prompt of its stack, and on a CPU the padded steps cost real time (on a
    GPU they are free parallelism). On a CPU they hold one member each: a CPU stack costs the
    sum of its members (the batched products loop over them; two GRU 500 members at N = 13:
    26.5 s for 80 steps stacked, 13.0 + 14.2 s apart), and one member per stack lets parallel
    workers share the longest point. The stacks depend on the points and the device only, never
    on ``jobs`` or a scheduler, so neither changes a number (in float32 a member's numbers can
    change with the members beside it: docs/experiments.md)."""
    cpu = torch.device(device).type == "cpu"
    groups: Dict[tuple, List[Point]] = {}
    for p in points:
        key = p.stack_group + (p.check_every, p.max_steps, p.n_test)
        if p.model == "rnn":
            key += (p.rnn_hidden,) + ((p.N, p.q, p.seed) if cpu else ())
        groups.setdefault(key, []).append(p)
    return list(groups.values())


def stack_cost(pts: Sequence[Point]) -> float:
    """Rough multiply-adds per step of a stack
    (used only to order the stacks: :func:`start_order`)."""
    p, n = pts[0], max(q.N for q in pts)
    D = p.d + 5 * n
    per_position = {
        "rnn": 6 * p.rnn_hidden * (p.rnn_hidden + D),
        "transformer": p.q * (D * D + n * D) + p.width * D,
        "ffn": p.ffn_hidden[0] * (p.d + p.q * n) + math.prod(p.ffn_hidden[-2:]) / n,
    }[p.model]
    return len(pts) * n * per_position


def start_order(stacks: Sequence[Sequence[Point]], parallel: bool) -> List[Sequence[Point]]:
    """The order stacks start in. In parallel: longest first (by :func:`stack_cost`, for the
    makespan) with the cheapest one put ahead, so a first row lands within seconds; in one process:
    cheapest first (the total is the same and rows come soonest)."""
    order = sorted(stacks, key=stack_cost)
    if not parallel or len(order) < 2:
        return order
    return [order[0]] + order[1:][::-1]


def default_jobs(device) -> int:
    """Worker processes for :func:`run_points`: every CPU core on a CPU (each with one torch
    thread), one on a GPU."""
    if torch.device(device).type != "cpu":
        return 1
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )


def run_points(
    points: Sequence[Point], results: ResultsFile, cfg: Optional[RunConfig] = None
) -> Dict[str, dict]:
    """Train every point whose row is not yet in ``results`` (stacks by :func:`stacks_of`) and
    append one row per point as it finishes (``cfg``: default ``RunConfig()``). Returns
    {point_id: row} for all ``points``.

    With ``cfg.jobs > 1`` or a ``cfg.scheduler`` the stacks train as Dask tasks (longest first,
    :func:`start_order`); rows are still appended by this process as each member finishes.
    """
    cfg = RunConfig() if cfg is None else cfg
    todo = [p for p in points if p.point_id not in results]
    stacks = stacks_of(todo, device=cfg.device)
    jobs = default_jobs(cfg.device) if cfg.jobs is None else _checks_jobs(cfg.jobs)
    jobs = max(1, min(jobs, len(stacks))) if not cfg.local else 1
    scheduler = None if cfg.local else cfg.scheduler
    stacks = start_order(stacks, parallel=jobs > 1 or scheduler is not None)
    if scheduler is None:
        _check_memory(stacks, jobs, cfg)
    with _Progress(cfg.progress, cfg.console) as bar:
        if bar.bar is not None and len(todo) < len(points):
            bar.log(
                f"resuming: {len(points) - len(todo)} of {len(points)} points already in "
                f"{results.path}"
            )
        if bar.bar is not None and results.repaired:
            bar.log(
                f"note: the last line of {results.path} was incomplete (a write cut short) and "
                "was removed; its point trains again"
            )
        where = (
            f" (Dask at {scheduler})"
            if scheduler
            else (f" ({jobs} Dask worker processes)" if jobs > 1 else "")
        )
        overall = bar.add(f"{len(todo)} points to train" + where, len(todo))
        tasks = []
        for pts in stacks:
            p0 = pts[0]
            desc = f"{p0.figure} {p0.variant} {p0.model}" + (
                f" N={p0.N}" if len({p.N for p in pts}) == 1 else ""
            )
            tasks.append((bar.add(f"{desc} x{len(pts)}", p0.max_steps), desc))

        def report(kind, stack, *payload):
            task, desc = tasks[stack]
            if kind == "step":
                step, active, n = payload
                bar.update(task, completed=step, description=f"{desc} (active {active}/{n})")
            elif kind == "row":
                row = payload[0]
                results.append(row)
                bar.update(overall, advance=1)
                s = "not reached" if row["samples"] is None else f"{row['samples']:,} samples"
                bar.log(
                    f"{row['figure']} {row['variant']:6s} {row['model']:11s} N={row['N']:3d} "
                    f"q={row['q']} seed={row['seed']}: {s} "
                    f"(test MSE {row['test_mse']:.4f}, {row['steps']} steps)"
                )
            else:  # "done"
                bar.update(task, completed=stacks[stack][0].max_steps)

        if jobs == 1 and scheduler is None:
            for i, pts in enumerate(stacks):
                train_points(pts, cfg, report, stack=i)
                report("done", i)
        else:
            cluster.run_stacks(
                stacks, report, results, replace(cfg, jobs=jobs, scheduler=scheduler), log=bar.log
            )
    return {r["point_id"]: r for r in results.rows_for(points)}


def _check_memory(stacks: Sequence[Sequence[Point]], jobs: int, cfg: RunConfig) -> None:
    """Refuse before any member is built when the prompts and models (weights, gradients, AdamW's
    moments) of the ``jobs`` largest stacks (those that may train at once on this machine) cannot
    fit in its memory."""
    per = sorted(
        (sum(prompt_bytes(p, cfg.dtype) + model_bytes(p, cfg.dtype) for p in pts), len(pts))
        for pts in stacks
    )
    at_once = per[-jobs:] if per else []
    members = sum(n for _, n in at_once)
    validate.fits_in_memory(
        f"the prompts and models of {members} member{'s' * (members != 1)} training at once",
        sum(b for b, _ in at_once),
        cfg.device,
    )


def train_figure(figure: str, pts: Sequence[Point], out_dir: str, cfg: RunConfig) -> List[dict]:
    """Train (or resume) ``pts`` into ``out_dir/<figure>.jsonl`` with :func:`run_points`;
    returns the rows of ``pts`` in their order."""
    results = ResultsFile(os.path.join(out_dir, f"{figure}.jsonl"), figure)
    _retrain_lost_files(results, pts, out_dir)
    by_id = run_points(pts, results, cfg)
    return [by_id[p.point_id] for p in pts if p.point_id in by_id]


def _retrain_lost_files(results: ResultsFile, pts: Sequence[Point], out_dir: str) -> None:
    """Rows whose per-point file (Figure 2's ``matrix_file``) is no longer in ``out_dir`` are
    removed, with a note, so that their points train again and the file is written anew."""
    lost = [
        r
        for r in results.rows_for(pts)
        if "matrix_file" in r and not os.path.isfile(os.path.join(out_dir, r["matrix_file"]))
    ]
    if lost:
        print(
            f"qstr: note: {len(lost)} trained point(s) of {results.path} lost their file "
            f"({lost[0]['matrix_file']}{', ...' if len(lost) > 1 else ''}); they train again",
            file=sys.stderr,
        )
        results.drop(r["point_id"] for r in lost)


def _checks_jobs(jobs) -> int:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    return jobs
