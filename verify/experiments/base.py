"""What run.py, cluster.py and the figure modules share: a run's :class:`RunConfig`, the one-stack
trainer :func:`train_points` (in this process or in a Dask task) and the log console."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence

import torch
from rich.console import Console

from qstr.verify.experiments.points import Point, build_member
from qstr.verify.experiments.results import row_of
from qstr.verify.training import StackOptions, stack_key, train_stack


@dataclass(frozen=True)
class RunConfig:
    """How a run trains (its points say what): built once by ``run_experiment`` and carried
    unchanged to every stack, in this process or on Dask workers.

    ``jobs``: stacks trained at once as Dask tasks on a local cluster of that many single-threaded
    worker processes (``None``: :func:`default_jobs`); ``scheduler``: a running Dask scheduler's
    address (tcp://HOST:PORT) instead, whatever ``jobs`` says (verify/experiments/cluster.py).
    ``row_extra(point, result) -> dict`` adds fields to a row (Figure 2's block mass); it and
    ``return_models`` need the trained models, so they train in this process. ``train_kw``:
    keywords for ``train_stack`` over the points' own (tests and benchmarks)."""

    device: torch.device = torch.device("cpu")
    dtype: torch.dtype = torch.float32
    progress: bool = True
    console: Any = None
    jobs: Optional[int] = 1
    scheduler: Optional[str] = None
    return_models: bool = False
    row_extra: Optional[Callable] = None
    train_kw: Optional[dict] = None

    @property
    def local(self) -> bool:
        """The rows need the trained models: every stack trains in this process."""
        return self.return_models or self.row_extra is not None


def wide_console(**kw):
    """A rich Console; 110 columns when not writing to a terminal (logs), not rich's 80."""
    c = Console(**kw)
    if not c.is_terminal and c.width < 110:
        c = Console(width=110, **kw)
    return c


def train_points(
    pts: Sequence[Point], cfg: RunConfig, report: Callable[..., None], stack: int = 0
) -> None:
    """Build and train the members of one stack; ``report`` receives ``("step", stack, step,
    active, n)`` every 10 steps and ``("row", stack, row)`` as each member finishes."""
    device, dtype = cfg.device, cfg.dtype
    members = [build_member(p, device=device, dtype=dtype) for p in pts]
    infos = {m.tag.point_id: m.info for m in members}
    sub: Dict[tuple, list] = {}
    for m in members:
        sub.setdefault(stack_key(m), []).append(m)
    for ms in sub.values():
        _train_substack(ms, cfg, report, stack, infos)


def _train_substack(
    ms: list, cfg: RunConfig, report: Callable[..., None], stack: int, infos: dict
) -> None:
    """One ``train_stack`` call of :func:`train_points`: members of one stack key."""
    p0: Point = ms[0].tag
    n = len(ms)

    def on_step(step, active):
        if step % 10 == 0 or active == 0:
            report("step", stack, step, active, n)

    def on_finish(res):
        p: Point = res.tag
        extra = dict(infos.get(p.point_id, {}))
        if cfg.row_extra is not None:
            extra.update(cfg.row_extra(p, res))
        report(
            "row",
            stack,
            row_of(p, res, device=cfg.device, dtype=cfg.dtype, stack_size=n, extra=extra),
        )

    kw = dict(
        batch_size=p0.batch_size,
        check_every=p0.check_every,
        max_steps=p0.max_steps,
        return_models=cfg.return_models,
        tf32=p0.matmul == "tf32",
    )
    if p0.n_train is not None and p0.epoch_loss_threshold is not None:
        kw.update(
            epoch_steps=math.ceil(p0.n_train / p0.batch_size),
            epoch_loss_threshold=p0.epoch_loss_threshold,
        )
    kw.update(cfg.train_kw or {})
    train_stack(ms, StackOptions(**kw), on_finish=on_finish, on_step=on_step)
