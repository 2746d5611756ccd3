"""Stacks of points as tasks on Dask distributed: a ``LocalCluster`` (``--jobs J``) or a running
cluster reached at an address (``qstr reproduce ... --scheduler tcp://HOST:PORT``; docs/cluster.md).

Only the client writes the results file. Each task trains one stack on a worker and returns its
rows; as each model finishes its row is also sent at once as a Dask event, so a stack that dies
half-way keeps the rows it finished, and its re-run trains only the points whose rows the
client has not received (a Dask ``Variable`` per run lists them). The client appends a row only
when its ``point_id`` is not in the results file yet: a stack re-run after a worker died, a late
event, or a resumed run never writes a row twice. Ctrl-C cancels the tasks, closes the client
(and the local cluster) and keeps every row written; the same command resumes, whichever engine
ran the earlier part.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import logging
import os
import pickle
import queue
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from typing import Callable, List, Optional, Sequence

import dask
import torch
from distributed import Client, LocalCluster, Variable, get_worker

from qstr.verify.experiments.base import RunConfig, train_points
from qstr.verify.experiments.points import Point
from qstr.verify.experiments.results import ResultsFile, _json_default
from qstr.verify.threads import keep_freed_memory

RETRIES = (
    2  # a task that raised is re-run this often; a worker that died is handled by the scheduler
)
STEP_EVERY = 1.0  # seconds between progress events of one stack
CONNECT_TIMEOUT = 5.0

_ADDRESS = re.compile(r"^(tcp|tls|inproc|ucx|ws|wss)://[^\s/]+$")


def check_scheduler(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """A ValueError (one line) unless a Dask scheduler answers at ``address``."""
    if not isinstance(address, str) or not _ADDRESS.match(address):
        raise ValueError(
            f"--scheduler must be a Dask scheduler address like tcp://HOST:PORT, got {address!r}"
        )
    reason = None
    try:
        with _quiet():
            client = Client(address, timeout=timeout, set_as_default=False)
    except Exception as exc:  # OSError, TimeoutError, CommClosedError ...
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
    if reason is not None:
        _collect_quietly()  # the half-made Client's __del__ would print a traceback at exit
        raise ValueError(
            f"--scheduler {address}: no Dask scheduler answered within {timeout:g} s ({reason})"
        )
    client.close()


def _collect_quietly() -> None:
    """Collect garbage with the errors of finalisers (a failed Client's close) not printed."""
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    try:
        with _quiet():
            gc.collect()
    finally:
        sys.unraisablehook = hook


@contextlib.contextmanager
def _quiet(
    names=(
        "distributed",
        "distributed.client",
        "distributed.core",
        "distributed.comm",
        "distributed.batched",
    ),
):
    """Dask's connection and shutdown chatter stays out of the progress output."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


@contextlib.contextmanager
def local_cluster(jobs: int):
    """The ``LocalCluster`` of ``--jobs J``: ``jobs`` worker processes with one thread each, their
    scratch space in a folder made for this run and removed when it closes (whatever ended it,
    short of kill -9), Dask's own ``dask-scratch-space`` too (:func:`_dask_temporary`). Its worker
    processes end on their own when this process dies (even by ``kill -9``: Dask's worker process
    exits when the pipe from its parent closes), and leave Ctrl-C to this process."""
    _remove_stale_folders()
    folder = tempfile.mkdtemp(prefix=f"qstr-dask-{os.getpid()}-")
    cluster = None
    with _dask_temporary(folder):
        try:
            cluster = LocalCluster(
                n_workers=jobs,
                threads_per_worker=1,
                processes=True,
                silence_logs=logging.ERROR,
                dashboard_address=":0",
                preload=[__name__],
                local_directory=folder,
            )
            yield cluster
        finally:
            if cluster is not None:
                with _quiet(), contextlib.suppress(Exception):
                    cluster.close(timeout=10)
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _dask_temporary(folder: str):
    """Dask's temporary directory (config ``temporary-directory``, and DASK_TEMPORARY_DIRECTORY
    for the processes it starts) is ``folder`` for the block, so that its ``dask-scratch-space``
    (two lock files) goes with the run's folder instead of staying in the system's."""
    before = os.environ.get("DASK_TEMPORARY_DIRECTORY")
    os.environ["DASK_TEMPORARY_DIRECTORY"] = folder
    try:
        with dask.config.set({"temporary-directory": folder}):
            yield
    finally:
        if before is None:
            os.environ.pop("DASK_TEMPORARY_DIRECTORY", None)
        else:
            os.environ["DASK_TEMPORARY_DIRECTORY"] = before


def _remove_stale_folders() -> None:
    """Remove the ``qstr-dask-<pid>-*`` folders of this user whose process is gone (a run killed
    with kill -9 cannot remove its own)."""
    top = tempfile.gettempdir()
    for name in os.listdir(top):
        parts = name.split("-")
        if len(parts) < 4 or parts[:2] != ["qstr", "dask"] or not parts[2].isdigit():
            continue
        path = os.path.join(top, name)
        try:
            if os.stat(path).st_uid != os.getuid():
                continue
            os.kill(int(parts[2]), 0)  # raises ProcessLookupError once the process is gone
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def dask_setup(worker) -> None:
    """Preload of a local cluster's workers: Ctrl-C at a terminal reaches every process of its
    group; a worker ignores it and the client, which caught it, closes the cluster. Its training
    steps reuse freed memory (:func:`~qstr.verify.threads.keep_freed_memory`)."""
    keep_freed_memory()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def dashboard_note() -> str:
    return (
        ""
        if importlib.util.find_spec("bokeh")
        else " (pip install 'bokeh>=3.1' on the scheduler's machine to see it)"
    )


def plain_row(row: dict) -> dict:
    """The row as JSON sees it (lists, not tuples or tensors): what the file holds, and what an
    event can carry."""
    return json.loads(json.dumps(row, default=_json_default))


def train_stack_task(
    pts: Sequence[Point], stack: int, device: str, dtype, train_kw, topic: Optional[str]
) -> List[dict]:
    """Runs on a worker: train the points of one stack whose rows the client has not received
    (all of them, unless the task is re-run after its worker died) with one torch thread; send
    each row (and a progress event at most every :data:`STEP_EVERY` s) under ``topic``; return
    the rows it trained."""
    torch.set_num_threads(1)
    worker = None
    if topic is not None:
        with contextlib.suppress(ValueError):
            worker = get_worker()
    if worker is not None:
        done = received(topic)
        todo = [p for p in pts if p.point_id not in done]
        if len(todo) < len(pts):
            worker.log_event(topic, ["resumed", stack, len(pts) - len(todo), len(todo)])
        pts = todo
    rows: List[dict] = []
    last = [0.0]

    def report(kind, _stack, *payload):
        if kind == "row":
            row = plain_row(payload[0])
            rows.append(row)
            if worker is not None:
                worker.log_event(topic, ["row", stack, row])
        elif kind == "step" and worker is not None:
            now = time.monotonic()
            if now - last[0] >= STEP_EVERY or payload[1] == 0:
                last[0] = now
                worker.log_event(topic, ["step", stack, *payload])

    if pts:
        cfg = RunConfig(device=torch.device(device), dtype=dtype, progress=False, train_kw=train_kw)
        train_points(pts, cfg, report, stack=stack)
    return rows


def received(topic: str) -> set:
    """The point_ids whose rows the client of ``topic`` has received so far (a Dask
    ``Variable`` it updates as rows arrive; empty if it cannot be read)."""
    try:
        return set(Variable(f"{topic}-received").get(timeout=CONNECT_TIMEOUT))
    except (
        Exception
    ):  # not set, or the scheduler is gone: train them all, the client drops duplicates
        return set()


class TaskFailed(ValueError):
    """A stack's task failed on a worker after its retries (a ValueError: ``qstr reproduce``
    reports it in one line with exit status 2)."""


def failure(exc: BaseException) -> TaskFailed:
    """The one-line report of a task's error."""
    text = (str(exc).strip().splitlines() or [""])[0][:200]
    hint = ""
    if isinstance(exc, ImportError) and (getattr(exc, "name", None) or "").split(".")[0] == "qstr":
        hint = " (install the toolkit on every worker: pip install -e .)"
    return TaskFailed(f"a Dask worker could not run the task: {type(exc).__name__}: {text}{hint}")


class _Call:
    """Unpickling this calls ``fn(*args)``. A task is sent as these bytes and run by
    ``pickle.loads``, so a worker that cannot import qstr fails the task (ModuleNotFoundError,
    retried, then reported by the client) instead of dropping its connection to the scheduler."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def run_stacks(
    stacks: Sequence[Sequence[Point]],
    report: Callable[..., None],
    results: ResultsFile,
    cfg,
    *,
    log: Callable[[str], None] = lambda text: None,
    retries: int = RETRIES,
) -> None:
    """Train ``stacks`` as Dask tasks (on the cluster at ``cfg.scheduler``, else on a
    ``LocalCluster`` of ``cfg.jobs`` single-threaded worker processes; ``cfg``: the run's
    :class:`~qstr.verify.experiments.base.RunConfig`) and relay their reports to ``report`` (the
    callback of :func:`~qstr.verify.experiments.run.run_points`: ``("step", i, step, active, n)``,
    ``("row", i, row)``, ``("done", i)``). A row reaches ``report`` only if its point is not in
    ``results`` yet, so each point is appended once whatever is re-run or arrives twice."""
    if not stacks:
        return
    with _quiet(
        ("tornado.application",)
    ):  # Ctrl-C inside a Dask call: its clean-up logs a traceback there
        _run_stacks(stacks, report, results, cfg, log, retries)


def _run_stacks(stacks, report, results, cfg, log, retries) -> None:
    """:func:`run_stacks` itself."""
    jobs, scheduler = cfg.jobs, cfg.scheduler
    events: "queue.Queue" = queue.Queue()
    topic = f"qstr-rows-{uuid.uuid4().hex}"
    cluster = client = None
    pending = {}
    owned = contextlib.ExitStack()  # the local cluster and its scratch folder
    try:
        with _quiet():
            if scheduler is not None:
                client = Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
            else:
                cluster = owned.enter_context(local_cluster(jobs))
                client = Client(cluster, set_as_default=False)
        where = scheduler or f"a local cluster of {jobs} worker processes"
        log(
            f"dask: {len(stacks)} stacks on {where}; dashboard {client.dashboard_link}"
            + (dashboard_note() if cluster is not None else "")
        )
        client.subscribe_topic(topic, lambda event: events.put(event[1]))
        received_ids: List[str] = []
        shared = Variable(f"{topic}-received", client=client)
        shared.set(received_ids)
        dev = str(torch.device(cfg.device))
        for i, pts in enumerate(stacks):  # stacks come in start_order: higher priority starts first
            p0 = pts[0]
            key = f"qstr-{p0.figure}-{p0.variant}-{p0.model}-{i}-{topic[-8:]}"
            task = pickle.dumps(
                _Call(train_stack_task, list(pts), i, dev, cfg.dtype, cfg.train_kw, topic)
            )
            f = client.submit(
                pickle.loads, task, key=key, retries=retries, pure=False, priority=len(stacks) - i
            )
            pending[f] = i

        def relay(msg) -> None:
            kind, i = msg[0], msg[1]
            if kind == "row":
                if msg[2]["point_id"] not in results:
                    report("row", i, msg[2])
                    received_ids.append(msg[2]["point_id"])
                    shared.set(received_ids)
            elif kind == "step":
                report("step", i, *msg[2:])
            elif kind == "resumed":
                log(
                    f"dask: stack {i} re-run on another worker: {msg[2]} of its points already "
                    f"done, training {msg[3]}"
                )

        while pending:
            try:
                relay(events.get(timeout=0.2))
                continue
            except queue.Empty:
                pass
            for f in [f for f in pending if f.status in ("finished", "error", "cancelled")]:
                i = pending.pop(f)
                try:
                    rows = f.result()  # a task's error (after its retries) is raised here
                except Exception as exc:
                    raise failure(exc) from exc
                for row in rows:
                    relay(["row", i, row])
                report("done", i)
        while True:  # events that came after their task's result: all duplicates, dropped by relay
            try:
                relay(events.get_nowait())
            except queue.Empty:
                break
    except BaseException:
        if client is not None and pending:
            with _quiet(), contextlib.suppress(Exception):
                client.cancel(list(pending), force=True)
        raise
    finally:
        with _quiet():
            if client is not None:
                with contextlib.suppress(Exception):
                    client.unsubscribe_topic(topic)
                with contextlib.suppress(Exception):
                    Variable(f"{topic}-received", client=client).delete()
                with contextlib.suppress(Exception):
                    client.close(timeout=10)
        owned.close()
