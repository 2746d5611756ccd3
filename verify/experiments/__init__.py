"""The paper's experiments (Appendix E: Figures 1-3), runnable and resumable with
``run_experiment``; ``protocol="published"`` reproduces the published code's choices. Protocols,
outputs, quick mode: docs/experiments.md."""

from __future__ import annotations

from dataclasses import replace
from typing import List, Optional

import torch

from qstr.verify.threads import cpu_threads
from qstr.verify.experiments.analysis import fit_exponent  # noqa: F401  (re-exported)
from qstr.verify.experiments.points import MATMUL, PROTOCOLS, Point, Protocol  # noqa: F401  (re-exported)

__all__ = ["run_experiment", "EXPERIMENTS", "PROTOCOLS", "Point", "Protocol", "fit_exponent"]

EXPERIMENTS = ("figure1", "figure2", "figure3")


def _module(name: str):
    if name == "figure1":
        from qstr.verify.experiments import figure1 as m
    elif name == "figure2":
        from qstr.verify.experiments import figure2 as m
    elif name == "figure3":
        from qstr.verify.experiments import figure3 as m
    else:
        raise ValueError(f"experiment must be one of {', '.join(EXPERIMENTS)}, got {name!r}")
    return m


def run_experiment(name: str, *, out_dir: str, quick: bool = False, device="cpu", seeds=None,
                   protocol: str = "paper", progress: bool = True, threads: Optional[int] = None,
                   dtype=torch.float32, jobs: Optional[int] = 1, matmul: str = "float32",
                   scheduler: Optional[str] = None, **options) -> List[dict]:
    """Run (or resume) one experiment and return its rows (one dict per trained model).

    Parameters
    ----------
    name: ``"figure1"``, ``"figure2"`` or ``"figure3"``.
    out_dir: results directory. Rows are appended to ``<out_dir>/<name>.jsonl`` as each model
        finishes; rows already there (same configuration) are not recomputed. Figures
        ``<name>-<protocol>[-quick].png/.pdf`` and ``...-summary.json`` are (re)written.
    quick: the scaled-down version (minutes on a CPU); see docs/experiments.md, "Quick mode".
    device: ``"cpu"`` or ``"cuda"``; all data, models and generators live there. Numbers
        depend on the device (different random streams), never on the stacking.
    seeds: ``None`` (5 seeds; 2 in quick mode; Figure 2: seed 0), a count, or a list.
    protocol: ``"paper"`` or ``"published"``.
    progress: rich progress bar and a printed summary.
    threads: torch CPU threads for the run (restored after) when ``jobs`` is 1. Default: 1 for
        quick CPU runs (these small models gain little from more, and lose a lot on a busy
        machine), torch's setting otherwise.
    jobs: stacks trained at once, as Dask tasks on a local cluster of ``jobs`` spawned worker
        processes with one torch thread each (rows are still appended here as each model
        finishes); ``None``: every CPU core on a CPU, 1 on a GPU (``qstr reproduce``'s default).
        The default 1 trains in this process, without Dask: worker processes re-import the
        calling script, so a script that asks for ``jobs > 1`` must call this under
        ``if __name__ == "__main__":``. The numbers do not depend on it.
    scheduler: the address of a running Dask scheduler (``"tcp://HOST:8786"``): the stacks
        train on its workers, whatever ``jobs`` says (docs/cluster.md); like ``qstr reproduce
        --scheduler``.
    matmul: ``"float32"`` (default) or ``"tf32"``: float32 matrix products on TF32 tensor cores
        (CUDA only; faster, and its rows are kept apart from float32 rows: it enters ``point_id``).
    options: passed to the module's ``points`` (e.g. ``max_samples``, ``n_test``, ``q_values``).

    Each row has ``model`` in {transformer, rnn, ffn}, ``variant`` in {1str, simple} (``qstr``
    in Figure 3), ``N``, ``q``, ``seed``, ``samples`` (None when the threshold was not reached),
    ``steps``, ``test_mse``, ``config`` (every hyper-parameter), ``wall_s``, ``device``,
    ``protocol`` and ``point_id`` (the resume key).
    """
    _module(name)  # an unknown experiment is refused before anything else
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r}: CUDA is not available on this machine (use device='cpu')"
        )
    if matmul not in MATMUL:
        raise ValueError(f"matmul must be one of {', '.join(MATMUL)}, got {matmul!r}")
    if matmul == "tf32":
        if dev.type != "cuda":
            raise ValueError(
                "matmul='tf32' needs device='cuda' (TF32 is a tensor-core mode of NVIDIA GPUs)"
            )
        options["overrides"] = {**(options.get("overrides") or {}), "matmul": "tf32"}
    if scheduler is not None:
        from qstr.verify.experiments.cluster import check_scheduler

        check_scheduler(scheduler)
    if threads is None and quick and dev.type == "cpu":
        threads = 1
    from qstr.verify.experiments.run import RunConfig

    cfg = RunConfig(device=dev, dtype=dtype, progress=progress, jobs=jobs, scheduler=scheduler)
    with cpu_threads(threads):
        return _run_figure(name, cfg, out_dir, dict(quick=quick, seeds=seeds, protocol=protocol),
                           options)


def _run_figure(name: str, cfg, out_dir: str, which: dict, options: dict) -> List[dict]:
    """Every figure's run: its points (``which``: quick, seeds, protocol; ``options``), trained or
    resumed into ``out_dir/<name>.jsonl``, then its report (summary, figure, printout). A figure
    whose rows need the trained models (``row_fields``: Figure 2) trains in this process."""
    from qstr.verify.experiments.results import figure_stem
    from qstr.verify.experiments.run import train_figure

    mod = _module(name)
    pts = mod.points(**which, **options)
    stem = figure_stem(out_dir, name, which["protocol"], which["quick"])
    if hasattr(mod, "row_fields"):
        cfg = replace(cfg, return_models=True, row_extra=mod.row_fields(stem))
    rows = train_figure(name, pts, out_dir, cfg)
    mod.report(rows, stem, protocol=which["protocol"], quick=which["quick"], cfg=cfg)
    return rows
