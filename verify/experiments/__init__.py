"""The paper's experiments (Appendix E: Figures 1-3), runnable and resumable with
``run_experiment``; ``protocol="published"`` reproduces the published code's choices. Protocols,
outputs, quick mode: docs/experiments.md."""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass, fields, replace
from typing import List, Optional, Union

import torch

from qstr.constructions import validate
from qstr.verify.experiments import bounds_figure, figure1, figure2, figure3
from qstr.verify.experiments.analysis import fit_exponent
from qstr.verify.experiments.base import RunConfig
from qstr.verify.experiments.cluster import check_scheduler
from qstr.verify.experiments.lock import folder_lock
from qstr.verify.experiments.points import MATMUL, PROTOCOLS, Point, Protocol
from qstr.verify.experiments.results import ROW_KEYS, ResultsFile, figure_stem
from qstr.verify.experiments.run import train_figure
from qstr.verify.files import check_target
from qstr.verify.threads import cpu_threads

__all__ = [
    "run_experiment",
    "summarize_rows",
    "Execution",
    "EXPERIMENTS",
    "PROTOCOLS",
    "Point",
    "Protocol",
    "fit_exponent",
]

EXPERIMENTS = ("figure1", "figure2", "figure3")


_MODULES = {"figure1": figure1, "figure2": figure2, "figure3": figure3}


def _module(name: str):
    if name not in _MODULES:
        raise ValueError(f"experiment must be one of {', '.join(EXPERIMENTS)}, got {name!r}")
    return _MODULES[name]


@dataclass(frozen=True)
class Execution:
    """Where and how ``run_experiment`` trains, never what it trains. The numbers depend on the
    device (its own random streams) and the dtype, which every row records; ``matmul="tf32"``
    enters every ``point_id``, so its rows never mix with float32 rows; ``jobs``, ``scheduler``,
    ``threads`` and ``progress`` change no number.

    device: ``"cpu"`` or ``"cuda"``; all data, models and generators live there.
    dtype: the models' float type (float32).
    jobs: stacks trained at once, as Dask tasks on a local cluster of ``jobs`` spawned worker
        processes with one torch thread each (rows are still appended by the caller as each model
        finishes); ``None``: every CPU core on a CPU, 1 on a GPU (``qstr reproduce``'s default).
        The default 1 trains in this process, without Dask: worker processes re-import the
        calling script, so a script that asks for ``jobs > 1`` must call ``run_experiment`` under
        ``if __name__ == "__main__":``.
    scheduler: the address of a running Dask scheduler (``"tcp://HOST:8786"``): the stacks train
        on its workers, whatever ``jobs`` says (docs/cluster.md).
    threads: torch CPU threads for the run (restored after) when ``jobs`` is 1. Default: 1 for
        quick CPU runs (these small models gain little from more, and lose a lot on a busy
        machine), torch's setting otherwise.
    matmul: ``"float32"`` or ``"tf32"`` (float32 products on TF32 tensor cores; CUDA only).
    progress: a rich progress bar and a printed summary.
    """

    device: Union[str, torch.device] = "cpu"
    dtype: torch.dtype = torch.float32
    jobs: Optional[int] = 1
    scheduler: Optional[str] = None
    threads: Optional[int] = None
    matmul: str = "float32"
    progress: bool = True


def _checked(ex: Execution) -> torch.device:
    """The device of ``ex``, every field checked before any training."""
    if not isinstance(ex, Execution):
        raise ValueError(f"execution must be an Execution, got {type(ex).__name__}")
    try:
        dev = torch.device(ex.device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {ex.device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={ex.device!r}: CUDA is not available on this machine (use device='cpu')"
        )
    if ex.threads is not None:
        validate.positive_int("threads", ex.threads)
    if ex.jobs is not None:
        jobs, cores = validate.positive_int("jobs", ex.jobs), os.cpu_count() or 1
        if ex.scheduler is None and jobs > cores:  # a scheduler's workers take any number
            raise ValueError(f"jobs={jobs}: this machine has {cores} CPU cores")
    validate.float_dtype("dtype", ex.dtype)
    if ex.matmul not in MATMUL:
        raise ValueError(f"matmul must be one of {', '.join(MATMUL)}, got {ex.matmul!r}")
    if ex.matmul == "tf32" and dev.type != "cuda":
        raise ValueError(
            "matmul='tf32' needs device='cuda' (TF32 is a tensor-core mode of NVIDIA GPUs)"
        )
    if ex.scheduler is not None:
        check_scheduler(ex.scheduler)
    return dev


def _check_options(mod, options: dict) -> None:
    """Refuse keywords the figure's ``points`` does not take (an ``Execution`` field: say so)."""
    taken = set(inspect.signature(mod.points).parameters) - {"quick", "seeds", "protocol"}
    for key in options:
        if key in {f.name for f in fields(Execution)}:
            raise ValueError(f"{key}= is a field of Execution: pass execution=Execution({key}=...)")
        if key not in taken:
            raise ValueError(
                f"{mod.__name__.rsplit('.', 1)[-1]} takes no option {key!r}; its "
                f"options: {', '.join(sorted(taken))}"
            )


def _results_folder(out_dir: str, name: str) -> str:
    """``out_dir``, created if missing, refused in one line when it cannot be (a name too long, a
    file in the way) or when its rows file ``<name>.jsonl`` cannot be written (a folder there)."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--out {out_dir}: cannot create it ({exc.strerror or exc})") from None
    check_target("--out", os.path.join(out_dir, f"{name}.jsonl"))
    return out_dir


def run_experiment(
    name: str,
    *,
    out_dir: str,
    quick: bool = False,
    seeds=None,
    protocol: str = "paper",
    execution: Optional[Execution] = None,
    **options,
) -> List[dict]:
    """Run (or resume) one experiment and return its rows (one dict per trained model).

    Parameters
    ----------
    name: ``"figure1"``, ``"figure2"`` or ``"figure3"``.
    out_dir: results directory. Rows are appended to ``<out_dir>/<name>.jsonl`` as each model
        finishes; rows already there (same configuration) are not recomputed. Figures
        ``<name>-<protocol>[-quick].png/.pdf`` and ``...-summary.json`` are (re)written.
    quick: the scaled-down version (minutes on a CPU); see docs/experiments.md, "Quick mode".
    seeds: ``None`` (5 seeds; 2 in quick mode; Figure 2: seed 0), a count, or a list.
    protocol: ``"paper"`` or ``"published"``.
    execution: where and how it trains (:class:`Execution`: device, dtype, worker processes or a
        Dask scheduler, threads, matmul, progress); default ``Execution()``, this process on the
        CPU. Numbers depend on the device (different random streams), never on ``jobs`` or
        the scheduler (docs/experiments.md, "Randomness").
    options: passed to the module's ``points`` (e.g. ``max_samples``, ``q_values``, and
        ``overrides`` for any hyper-parameter of every point, such as ``{"n_test": 500}``).

    Each row has ``model`` in {transformer, rnn, ffn}, ``variant`` in {1str, simple} (``qstr``
    in Figure 3), ``N``, ``q``, ``seed``, ``samples`` (None when the threshold was not reached),
    ``steps``, ``test_mse``, ``config`` (every hyper-parameter), ``wall_s``, ``device``,
    ``protocol`` and ``point_id`` (the resume key).
    """
    # an unknown experiment, and an option it does not take, are refused before anything else
    _check_options(_module(name), options)
    if not isinstance(out_dir, (str, os.PathLike)) or not os.fspath(out_dir):
        raise ValueError(f"out_dir must be a folder path (str or os.PathLike), got {out_dir!r}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    ex = Execution() if execution is None else execution
    dev = _checked(ex)
    out_dir = _results_folder(os.fspath(out_dir), name)  # made only once the rest is checked
    if ex.matmul == "tf32":
        options["overrides"] = {**(options.get("overrides") or {}), "matmul": "tf32"}
    threads = 1 if ex.threads is None and quick and dev.type == "cpu" else ex.threads
    cfg = RunConfig(
        device=dev, dtype=ex.dtype, progress=ex.progress, jobs=ex.jobs, scheduler=ex.scheduler
    )
    with cpu_threads(threads):
        return _run_figure(
            name, cfg, out_dir, dict(quick=quick, seeds=seeds, protocol=protocol), options
        )


def _run_figure(name: str, cfg, out_dir: str, which: dict, options: dict) -> List[dict]:
    """Every figure's run: its points (``which``: quick, seeds, protocol; ``options``), trained or
    resumed into ``out_dir/<name>.jsonl``, then its report (summary, figure, printout). A figure
    whose rows need the trained models (``row_fields``: Figure 2) trains in this process."""
    mod = _module(name)
    pts = mod.points(**which, **options)
    stem = figure_stem(out_dir, name, which["protocol"], which["quick"])
    if hasattr(mod, "row_fields"):
        cfg = replace(cfg, return_models=True, row_extra=mod.row_fields(stem))
    with folder_lock(out_dir) as lock:
        if lock.taken_over and cfg.progress:
            print(
                f"qstr: note: {out_dir}'s last run ({lock.taken_over}) ended without releasing "
                "it; taking it over",
                file=sys.stderr,
            )
        rows = train_figure(name, pts, out_dir, cfg)
        mod.report(rows, stem, protocol=which["protocol"], quick=which["quick"], cfg=cfg)
    return rows


def summarize_rows(name: str, rows_path: str, *, stem: Optional[str] = None, progress: bool = True):
    """Recompute a figure's summary and plots from its rows, training nothing:
    ``<stem>-summary.json`` and ``<stem>.png/.pdf`` (``stem``: the rows' path without ``.jsonl``),
    the summary printed when ``progress``. ``name="bounds"`` reads Figure 1's rows and draws the
    paper's explicit bounds beside them (stem: the rows' stem + ``-bounds``). The rows must be one
    figure's, of one protocol and one of quick or paper size. Returns the stem."""
    figure = "figure1" if name == "bounds" else name
    if name != "bounds":
        _module(name)  # an unknown figure is refused before any file is read
    if not os.path.isfile(rows_path):
        raise ValueError(f"{rows_path}: no such rows file")
    rows = ResultsFile(rows_path, figure, read_only=True).rows
    if not rows:
        raise ValueError(f"{rows_path} holds no rows")
    for number, row in enumerate(rows, 1):
        missing = [k for k in ROW_KEYS + ("point_id", "config") if k not in row]
        if missing:
            raise ValueError(
                f"{rows_path}, row {number}: not a row of qstr reproduce (no {missing[0]!r})"
            )
    kinds = {(r["protocol"], bool(r["quick"])) for r in rows}
    if len(kinds) != 1:
        raise ValueError(f"{rows_path} mixes protocols or sizes: {sorted(kinds)}")
    ((protocol, quick),) = kinds
    base = rows_path[: -len(".jsonl")] if rows_path.endswith(".jsonl") else rows_path
    if name == "bounds":
        stem = stem or base + "-bounds"
        bounds_figure.report(rows, stem)
        return stem
    stem = stem or base
    folder = os.path.dirname(stem)  # Figure 2's plots read the trained matrices from there
    missing = [r["matrix_file"] for r in rows if "matrix_file" in r]
    missing = [f for f in missing if not os.path.isfile(os.path.join(folder, f))]
    if missing:
        raise ValueError(
            f"{name}'s plots need the trained matrices beside the stem: {missing[0]} is not in "
            f"{folder or '.'}"
        )
    _module(name).report(
        rows, stem, protocol=protocol, quick=quick, cfg=RunConfig(progress=progress)
    )
    return stem
