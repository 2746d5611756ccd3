"""Shared machinery of the experiments (Appendix E; SPEC section 7).

* :class:`Protocol`: ``paper`` (what the paper describes) or ``published`` (the choices of the
  published experiment code, mousavih/transformers-separation, reproduced for comparison).
* :class:`Point`: one model to train (figure, model, variant, N, q, seed and every
  hyper-parameter); its ``point_id`` is a hash of all of it, the key for resuming.
* :func:`build_member`: a :class:`verify.training.Member` (task instance, codes, model, streams,
  test set) from a point, with seeds derived from the point (same point -> same numbers).
* :class:`ResultsFile`: JSON lines, appended as each point finishes; rows already there are
  skipped on a rerun.
* :func:`run_points`: group points into stacks and train each stack with
  :func:`verify.training.train_stack`, with a progress bar.
* :func:`fit_exponent`: samples ~ N^a by least squares in log-log, bootstrap interval.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import platform
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from qstr.constructions.codes import experimental_codebook, experimental_dim
from qstr.constructions.links import make_link
from qstr.constructions.models import build_practical
from qstr.constructions.task import QSTR

PROTOCOLS = ("paper", "published")
# enters every point_id: bump it when a change alters the numbers a point produces, so that
# rows computed under the old rules are not reused on resume
PROTOCOL_VERSION = 1
MODELS = ("transformer", "rnn", "ffn")
MATMUL = ("float32", "tf32")


# ------------------------------------------------------------------------------ protocols


@dataclass(frozen=True)
class Protocol:
    """How a point is trained and tested.

    ``paper`` follows SPEC section 7 (Appendix E): encoding prefactor c = sqrt(d/q), test
    prompts drawn from the training variant, AdamW weight decay as stated in the paper, a fresh
    task instance (u, codes) per seed, the FFN of Theorem 6 on concat(vec(x), onehot(t)).

    ``published`` reproduces the published code's choices: c = 1; test prompts ALWAYS from
    simple-qSTR (even when training on qSTR -- the fault the paper protocol fixes); weight
    decay 0.01 in the sample-complexity runs (the default of its training function, which its
    script does not override; the paper states 0.1); one direction u for all N and seeds and
    one codebook per N for all seeds; the FFN on the flattened encoding vec(x, omega_i,
    omega_t); attention with biases (torch's default). Figure 2 follows its script (simple
    prompts, c = 1, weight decay 0.2).
    """

    name: str

    def __post_init__(self):
        if self.name not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {self.name!r}")

    @property
    def published(self) -> bool:
        return self.name == "published"

    def c(self, d: int, q: int) -> float:
        return 1.0 if self.published else math.sqrt(d / q)

    def test_variant(self, variant: str) -> str:
        return "simple" if self.published else variant

    def online_weight_decay(self, paper_value: float) -> float:
        return 0.01 if self.published else paper_value

    def label_for(self, figure: str) -> str:
        """The label printed on a figure (Figure 2 has its own published choices)."""
        if figure == "figure2":
            if self.published:
                return "protocol: PUBLISHED CODE (simple-1STR prompts for training and test, c = 1, attention biases)"
            return "protocol: paper (1STR prompts for training and test, c = sqrt(d/q))"
        if figure == "figure3" and self.published:
            return self.label + " -- no published Figure 3 script: its choices applied by analogy"
        return self.label

    @property
    def label(self) -> str:
        if self.published:
            return ("protocol: PUBLISHED CODE (test prompts always simple, c = 1, weight decay 0.01, "
                    "shared u and codes, FFN on vec(encoding))")
        return "protocol: paper (test prompts from the training variant, c = sqrt(d/q))"


def as_protocol(p) -> Protocol:
    return p if isinstance(p, Protocol) else Protocol(str(p))


# ---------------------------------------------------------------------------------- seeds


def derive_seed(*parts) -> int:
    """A 62-bit seed from any printable parts (stable across runs, machines and Python versions)."""
    h = hashlib.sha256(repr(tuple(parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") >> 2


def generator(device, *parts) -> torch.Generator:
    g = torch.Generator(device=torch.device(device))
    g.manual_seed(derive_seed(*parts))
    return g


# ---------------------------------------------------------------------------------- points


TASK_VARIANT = {"1str": "general", "qstr": "general", "simple": "simple"}


@dataclass(frozen=True)
class Point:
    """One model of one experiment, fully specified (all of it enters ``point_id``)."""

    figure: str
    protocol: str
    model: str
    variant: str  # "1str" / "qstr" (general) or "simple"
    N: int
    q: int
    seed: int
    d: int = 10
    link: str = "linear"
    lr: float = 1e-3
    weight_decay: float = 0.1
    threshold: Optional[float] = 0.7
    check_every: int = 10
    n_test: int = 10_000
    batch_size: int = 64
    max_steps: int = 15_625
    width: int = 100  # transformer ReLU layer
    rnn_hidden: int = 500  # per direction (500 q in the paper)
    ffn_hidden: Tuple[int, ...] = (100, 1000)
    n_train: Optional[int] = None  # fixed training set (Figure 2); None: online
    epoch_loss_threshold: Optional[float] = None
    quick: bool = False
    matmul: str = "float32"  # "tf32": float32 matrix products on TF32 tensor cores (CUDA only)

    def __post_init__(self):
        if self.matmul not in MATMUL:
            raise ValueError(f"matmul must be one of {MATMUL}, got {self.matmul!r}")
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.variant not in TASK_VARIANT:
            raise ValueError(f"variant must be one of {tuple(TASK_VARIANT)}, got {self.variant!r}")
        as_protocol(self.protocol)

    @property
    def config(self) -> dict:
        c = dataclasses.asdict(self)
        c["ffn_hidden"] = list(self.ffn_hidden)
        c["d_e"] = experimental_dim(self.N)
        c["test_variant"] = self.test_variant
        c["c"] = as_protocol(self.protocol).c(self.d, self.q)
        c["protocol_version"] = PROTOCOL_VERSION
        if self.matmul == "float32":  # the default: ids of rows written before the field existed stay valid
            del c["matmul"]
        return c

    @property
    def test_variant(self) -> str:
        tv = as_protocol(self.protocol).test_variant(TASK_VARIANT[self.variant])
        return "simple" if tv == "simple" else self.variant

    @property
    def point_id(self) -> str:
        return hashlib.sha1(json.dumps(self.config, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def stack_group(self) -> tuple:
        """Points in one group are trained in one stack (same family, variant, protocol)."""
        return (self.figure, self.protocol, self.model, self.variant, self.quick, self.matmul)


def apply_overrides(points: Sequence[Point], overrides: Optional[dict]) -> List[Point]:
    """Replace fields of every point (e.g. ``{"rnn_hidden": 16, "n_test": 200}``): for small
    trial runs; the changed fields enter ``point_id``, so such rows never mix with others."""
    if not overrides:
        return list(points)
    names = {f.name for f in dataclasses.fields(Point)}
    bad = sorted(set(overrides) - names)
    if bad:
        raise ValueError(f"overrides has unknown fields {bad}; allowed: {sorted(names)}")
    fixed = {"figure", "protocol", "model", "variant", "N", "q", "seed"} & set(overrides)
    if fixed:
        raise ValueError(f"overrides cannot change {sorted(fixed)}; use the experiment's own options")
    return [dataclasses.replace(p, **overrides) for p in points]


def build_member(p: Point, *, device="cpu", dtype=torch.float32):
    """The :class:`verify.training.Member` of a point: task instance, model, streams, test set."""
    from qstr.constructions.models import BiasedTransformer, EncodedFFN
    from qstr.verify.training import EpochStream, Member, OnlineStream

    proto = as_protocol(p.protocol)
    device = torch.device(device)
    d_e = experimental_dim(p.N)
    # task instance: u (link directions) and positional codes omega
    if proto.published:  # one u for all N and seeds, one codebook per N for all seeds
        g_link = generator(device, "published-u", p.figure, p.link, p.q, p.d)
        g_code = generator(device, "published-codes", p.figure, p.N)
    else:
        g_link = generator(device, "u", p.figure, p.link, p.variant, p.N, p.q, p.d, p.seed)
        g_code = generator(device, "codes", p.figure, p.variant, p.N, p.q, p.seed)
    link = make_link(p.link, p.q, p.d, generator=g_link)
    book, redraws = _codebook(p.N, g_code, device, dtype, distinct=not proto.published)
    omega = book.omega
    task = QSTR(p.N, p.d, link, variant=TASK_VARIANT[p.variant])
    test_task = QSTR(p.N, p.d, link, variant="simple" if p.test_variant == "simple" else "general")
    g_test = generator(device, "test", p.figure, p.test_variant, p.N, p.q, p.seed)
    tp = test_task.sample(p.n_test, generator=g_test, device=device, dtype=dtype)
    g_init = generator("cpu", "init", p.figure, p.model, p.variant, p.N, p.q, p.seed)
    kw = dict(generator=g_init, dtype=dtype, device=device)
    D_e = p.d + (p.q + 1) * d_e
    c = 1.0
    if p.model == "transformer":
        if proto.published:
            model = BiasedTransformer(D_e, p.q, p.width, **kw)
        else:
            model = build_practical("transformer", N=p.N, d=p.d, q=p.q, d_e=d_e, width=p.width, **kw)
        c = proto.c(p.d, p.q)
    elif p.model == "rnn":
        model = build_practical("rnn", N=p.N, d=p.d, q=p.q, d_e=d_e, hidden=p.rnn_hidden, cell="gru", **kw)
    elif proto.published:
        model = EncodedFFN(p.N, D_e, tuple(p.ffn_hidden), **kw)
    else:
        model = build_practical("ffn", N=p.N, d=p.d, q=p.q, d_e=d_e, hidden=tuple(p.ffn_hidden),
                                task=TASK_VARIANT[p.variant], **kw)
    g_train = generator(device, "train", p.figure, p.variant, p.N, p.q, p.seed)
    if p.n_train is None:
        stream = OnlineStream(task, g_train, dtype=dtype)
    else:
        tr = task.sample(p.n_train, generator=g_train, device=device, dtype=dtype)
        stream = EpochStream(tr.x, tr.t, tr.y, generator(device, "shuffle", p.figure, p.N, p.seed))
    info = {"code_mu": book.mu, "code_pairs_above_half": book.params["n_violations"], "code_redraws": redraws}
    return Member(model=model, stream=stream, test=(tp.x, tp.t, tp.y), omega=omega, c=c, threshold=p.threshold,
                  lr=p.lr, weight_decay=p.weight_decay, tag=p, info=info)


def _codebook(N: int, g, device, dtype, *, distinct: bool, tries: int = 1000):
    """The experiments' Rademacher codes, d_e = floor(5 ln N) (no coherence check, as in the
    paper). With ``distinct`` (paper protocol) a draw in which two positions get the SAME code is
    drawn again: such positions cannot be told apart by any model reading the codes, which puts
    a floor under the test MSE (at N = 5, d_e = 8 a draw has a repeated code with probability
    ~0.04; at the paper's N >= 25 below 0.01). Returns (codebook, number of redraws)."""
    for k in range(tries):
        book = experimental_codebook(N, generator=g, device=device, dtype=dtype)
        if not distinct or torch.unique(book.omega, dim=0).shape[0] == N:
            return book, k
    raise ValueError(f"no codebook with {N} distinct codes in {tries} draws (d_e = {experimental_dim(N)})")


# ----------------------------------------------------------------------------- results file


def environment(device) -> dict:
    dev = torch.device(device)
    info = {"python": platform.python_version(), "torch": torch.__version__, "platform": platform.platform(),
            "device": str(dev), "threads": torch.get_num_threads()}
    if dev.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(dev)
    else:
        info["cpu_count"] = os.cpu_count()
    return info


class ResultsFile:
    """JSON lines, one row per finished point; rows are only ever appended.

    A run that was interrupted while writing leaves at most one incomplete last line; it is
    cut off (with a note) before the next append, so every line stays one valid JSON object.
    """

    def __init__(self, path: str):
        self.path = path
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.rows: List[dict] = []
        self.repaired = False
        if os.path.exists(path):
            with open(path, "rb") as fh:
                data = fh.read()
            if data and not data.endswith(b"\n"):
                cut = data.rfind(b"\n") + 1
                with open(path, "r+b") as fh:
                    fh.truncate(cut)
                data = data[:cut]
                self.repaired = True
            for line in data.decode().splitlines():
                if line.strip():
                    self.rows.append(json.loads(line))
        self.ids = {r.get("point_id") for r in self.rows}

    def __contains__(self, point_id: str) -> bool:
        return point_id in self.ids

    def append(self, row: dict) -> None:
        line = json.dumps(row, default=_json_default) + "\n"
        with open(self.path, "a") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        self.rows.append(row)
        self.ids.add(row.get("point_id"))

    def rows_for(self, points: Iterable[Point]) -> List[dict]:
        by_id = {r["point_id"]: r for r in self.rows if "point_id" in r}
        return [by_id[p.point_id] for p in points if p.point_id in by_id]


def _json_default(v):
    if isinstance(v, torch.Tensor):
        return v.tolist()
    if isinstance(v, tuple):
        return list(v)
    return str(v)


def row_of(p: Point, res, *, device, dtype, stack_size: int, extra: Optional[dict] = None) -> dict:
    """The JSON row of a finished point."""
    row = {
        "figure": p.figure, "protocol": p.protocol, "quick": p.quick, "model": p.model, "variant": p.variant,
        "test_variant": p.test_variant, "N": p.N, "q": p.q, "seed": p.seed,
        "samples": res.samples, "reached": res.reached, "steps": res.steps, "threshold": p.threshold,
        "test_mse": res.test_mse, "train_loss": res.train_loss, "curve": [[s, round(v, 6)] for s, v in res.curve],
        "wall_s": round(res.seconds, 3), "stack_size": stack_size, "device": str(device),
        "dtype": str(dtype).replace("torch.", ""), "point_id": p.point_id, "config": p.config,
        "env": environment(device), "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    if extra:
        row.update(extra)
    return row


# ------------------------------------------------------------------------------- running


class _Progress:
    """A rich progress bar (or nothing)."""

    def __init__(self, enabled: bool, console=None):
        self.enabled = enabled
        self.console = console
        self.bar = None

    def __enter__(self):
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.console = self.console or wide_console(stderr=True)
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=self.console, transient=False)
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def add(self, description: str, total: int):
        return self.bar.add_task(description, total=total) if self.bar is not None else None

    def update(self, task, **kw):
        if self.bar is not None and task is not None:
            self.bar.update(task, **kw)

    def log(self, text: str):
        if self.bar is not None:
            self.bar.console.print(text)


def wide_console(**kw):
    """A rich Console; 110 columns when not writing to a terminal (logs), not rich's 80."""
    from rich.console import Console

    c = Console(**kw)
    if not c.is_terminal and c.width < 110:
        c = Console(width=110, **kw)
    return c


def stacks_of(points: Sequence[Point], *, device="cpu") -> List[List[Point]]:
    """Split points into stacks: one per :attr:`Point.stack_group` with equal check interval,
    step cap and test size. On a CPU the RNN stacks are also split by N: the recurrence runs
    over the longest prompt of its stack, and on a CPU the padded steps cost real time (on a
    GPU they are free parallelism); likewise by q and hidden size, which are zero-padded to the
    largest in a stack. Numbers never depend on the stacking (docs/experiments.md)."""
    cpu = torch.device(device).type == "cpu"
    groups: Dict[tuple, List[Point]] = {}
    for p in points:
        key = p.stack_group + (p.check_every, p.max_steps, p.n_test)
        if cpu and p.model == "rnn":
            key += (p.N, p.q, p.rnn_hidden)
        groups.setdefault(key, []).append(p)
    return list(groups.values())


def stack_cost(pts: Sequence[Point]) -> float:
    """Rough multiply-adds per step of a stack (used only to start the longest stacks first)."""
    p, n = pts[0], max(q.N for q in pts)
    D = p.d + 5 * n
    per_position = {"rnn": 6 * p.rnn_hidden * (p.rnn_hidden + D), "transformer": p.q * (D * D + n * D) + p.width * D,
                    "ffn": p.ffn_hidden[0] * (p.d + p.q * n) + math.prod(p.ffn_hidden[-2:]) / n}[p.model]
    return len(pts) * n * per_position


def train_points(pts: Sequence[Point], *, device, dtype, report: Callable[..., None], stack: int = 0,
                 return_models: bool = False, row_extra: Optional[Callable] = None,
                 train_kw: Optional[dict] = None) -> None:
    """Build and train the members of one stack; ``report`` receives ``("step", stack, step,
    active, n)`` every 10 steps and ``("row", stack, row)`` as each member finishes."""
    from qstr.verify.training import stack_key, train_stack

    members = [build_member(p, device=device, dtype=dtype) for p in pts]
    infos = {m.tag.point_id: m.info for m in members}
    sub: Dict[tuple, list] = {}
    for m in members:
        sub.setdefault(stack_key(m), []).append(m)
    for ms in sub.values():
        p0: Point = ms[0].tag

        def on_step(step, active, n=len(ms)):
            if step % 10 == 0 or active == 0:
                report("step", stack, step, active, n)

        def on_finish(res, n=len(ms)):
            p: Point = res.tag
            extra = dict(infos.get(p.point_id, {}))
            if row_extra is not None:
                extra.update(row_extra(p, res))
            report("row", stack, row_of(p, res, device=device, dtype=dtype, stack_size=n, extra=extra))

        kw = dict(batch_size=p0.batch_size, check_every=p0.check_every, max_steps=p0.max_steps,
                  on_finish=on_finish, on_step=on_step, return_models=return_models, tf32=p0.matmul == "tf32")
        if p0.n_train is not None and p0.epoch_loss_threshold is not None:
            kw.update(epoch_steps=math.ceil(p0.n_train / p0.batch_size), epoch_loss_threshold=p0.epoch_loss_threshold)
        kw.update(train_kw or {})
        train_stack(ms, **kw)


_QUEUE = None


def _init_worker(queue, threads: int) -> None:
    global _QUEUE
    _QUEUE = queue
    torch.set_num_threads(threads)


def _train_in_worker(pts, stack: int, device, dtype, train_kw) -> None:
    try:
        train_points(pts, device=device, dtype=dtype, report=lambda *msg: _QUEUE.put(msg), stack=stack,
                     train_kw=train_kw)
    finally:
        _QUEUE.put(("done", stack))


def default_jobs(device) -> int:
    """Worker processes for :func:`run_points`: every CPU core on a CPU (each with one torch
    thread), one on a GPU."""
    if torch.device(device).type != "cpu":
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_points(points: Sequence[Point], results: ResultsFile, *, device="cpu", dtype=torch.float32,
               progress: bool = True, return_models: bool = False, console=None,
               row_extra: Optional[Callable] = None, train_kw: Optional[dict] = None,
               jobs: Optional[int] = 1) -> Dict[str, dict]:
    """Train every point whose row is not yet in ``results`` (stacks by :func:`stacks_of`) and
    append one row per point as it finishes. Returns {point_id: row} for all ``points``.

    ``jobs > 1`` trains that many stacks at once in worker processes (spawned, one torch thread
    each; the longest stacks start first); rows are still appended by this process as each
    member finishes. ``jobs=None``: :func:`default_jobs`. ``row_extra(point, result) -> dict``
    adds fields to a row (e.g. Figure 2's block mass); it and ``return_models`` need ``jobs=1``.
    """
    todo = [p for p in points if p.point_id not in results]
    stacks = sorted(stacks_of(todo, device=device), key=stack_cost, reverse=True)
    jobs = default_jobs(device) if jobs is None else _checks_jobs(jobs)
    jobs = max(1, min(jobs, len(stacks))) if (row_extra is None and not return_models) else 1
    with _Progress(progress, console) as bar:
        if bar.bar is not None and len(todo) < len(points):
            bar.log(f"resuming: {len(points) - len(todo)} of {len(points)} points already in {results.path}")
        overall = bar.add(f"{len(todo)} points to train" + (f" ({jobs} processes)" if jobs > 1 else ""), len(todo))
        tasks = []
        for pts in stacks:
            p0 = pts[0]
            desc = f"{p0.figure} {p0.variant} {p0.model}" + (f" N={p0.N}" if len({p.N for p in pts}) == 1 else "")
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
                bar.log(f"{row['figure']} {row['variant']:6s} {row['model']:11s} N={row['N']:3d} q={row['q']} "
                        f"seed={row['seed']}: {s} (test MSE {row['test_mse']:.4f}, {row['steps']} steps)")
            else:  # "done"
                bar.update(task, completed=stacks[stack][0].max_steps)

        if jobs == 1:
            for i, pts in enumerate(stacks):
                train_points(pts, device=device, dtype=dtype, report=report, stack=i, return_models=return_models,
                             row_extra=row_extra, train_kw=train_kw)
                report("done", i)
        else:
            _run_parallel(stacks, jobs, report, device=device, dtype=dtype, train_kw=train_kw)
    return {r["point_id"]: r for r in results.rows_for(points)}


def figure_stem(out_dir: str, figure: str, protocol: str, quick: bool) -> str:
    """``out_dir/<figure>-<protocol>[-quick]``: the stem of a figure's PNG, PDF and summary."""
    return os.path.join(out_dir, f"{figure}-{protocol}" + ("-quick" if quick else ""))


def train_figure(figure: str, pts: Sequence[Point], *, out_dir: str, **run_kw) -> List[dict]:
    """Train (or resume) ``pts`` into ``out_dir/<figure>.jsonl`` with :func:`run_points`;
    returns the rows of ``pts`` in their order."""
    by_id = run_points(pts, ResultsFile(os.path.join(out_dir, f"{figure}.jsonl")), **run_kw)
    return [by_id[p.point_id] for p in pts if p.point_id in by_id]


def _checks_jobs(jobs) -> int:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    return jobs


def _run_parallel(stacks, jobs: int, report, *, device, dtype, train_kw) -> None:
    """Train ``stacks`` in ``jobs`` spawned processes; relay their reports in this process."""
    import multiprocessing
    import queue as _queue
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    pool = ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker, initargs=(q, 1))
    try:
        futures = [pool.submit(_train_in_worker, pts, i, torch.device(device), dtype, train_kw)
                   for i, pts in enumerate(stacks)]
        done = 0
        while done < len(stacks):
            try:
                msg = q.get(timeout=0.5)
            except _queue.Empty:
                for f in futures:  # a worker that died without reporting "done"
                    if f.done() and f.exception() is not None:
                        raise f.exception()
                continue
            report(*msg)
            done += msg[0] == "done"
        for f in futures:
            f.result()  # a worker's error is raised here
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        for child in multiprocessing.active_children():  # stop stacks still training
            child.terminate()
        raise
    pool.shutdown()


# --------------------------------------------------------------------------- scaling fits


def fit_exponent(N: Sequence[float], samples: Sequence[Optional[float]], *, n_boot: int = 2000, seed: int = 0,
                 level: float = 0.95) -> dict:
    """Fit samples ~ C N^a by least squares on (log N, log samples); bootstrap interval for a.

    Points with ``samples`` None (threshold not reached within the step cap) are left out and
    counted in ``censored`` (the fit is then biased low: say so when it is non-zero). The
    bootstrap resamples points within each N value (stratified), so every N stays in.
    Returns {a, log_C, ci: [lo, hi], n, censored, N_values}; a is NaN with < 2 distinct N.
    """
    pts = [(float(n), float(s)) for n, s in zip(N, samples) if s is not None and s > 0]
    censored = sum(1 for s in samples if s is None)
    Ns = sorted({n for n, _ in pts})
    out = {"n": len(pts), "censored": censored, "N_values": Ns, "level": level}
    if len(Ns) < 2:
        return out | {"a": math.nan, "log_C": math.nan, "ci": [math.nan, math.nan]}
    x = torch.tensor([math.log(n) for n, _ in pts], dtype=torch.float64)
    y = torch.tensor([math.log(s) for _, s in pts], dtype=torch.float64)

    def ls(xv, yv):
        xm, ym = xv.mean(-1, keepdim=True), yv.mean(-1, keepdim=True)
        a = ((xv - xm) * (yv - ym)).sum(-1) / ((xv - xm) ** 2).sum(-1)
        return a, (ym.squeeze(-1) - a * xm.squeeze(-1))

    a, b = ls(x, y)
    g = torch.Generator().manual_seed(seed)
    strata = [torch.tensor([i for i, (n, _) in enumerate(pts) if n == v]) for v in Ns]
    idx = torch.cat([s[torch.randint(len(s), (n_boot, len(s)), generator=g)] for s in strata], dim=1)
    ab, _ = ls(x[idx], y[idx])
    ab = ab[torch.isfinite(ab)]
    lo, hi = torch.quantile(ab, torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)).tolist()
    return out | {"a": float(a), "log_C": float(b), "ci": [lo, hi]}


def summarize(rows: Sequence[dict], *, by: str = "N") -> Dict[str, Dict[str, dict]]:
    """Per (variant, model): fitted exponent of samples in ``by`` and per-value means."""
    out: Dict[str, Dict[str, dict]] = {}
    for variant in sorted({r["variant"] for r in rows}):
        out[variant] = {}
        for model in MODELS:
            rs = [r for r in rows if r["variant"] == variant and r["model"] == model]
            if not rs:
                continue
            fit = fit_exponent([r[by] for r in rs], [r["samples"] for r in rs])
            per = {}
            for v in sorted({r[by] for r in rs}):
                ss = [r["samples"] for r in rs if r[by] == v]
                got = [s for s in ss if s is not None]
                per[str(v)] = {"mean": (sum(got) / len(got)) if got else None,
                               "median": (sorted(got)[len(got) // 2] if got else None),
                               "reached": len(got), "runs": len(ss)}
            out[variant][model] = {"fit": fit, f"per_{by}": per}
    return out


def write_json(path: str, obj) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=2, default=_json_default)
    os.replace(tmp, path)


def seeds_of(seeds, default: Sequence[int]) -> List[int]:
    if seeds is None:
        return list(default)
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1 (a count) or a list of seeds, got {seeds}")
        return list(range(seeds))
    seeds = [int(s) for s in seeds]
    if not seeds or any(s < 0 for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of non-negative integers, got {seeds}")
    return seeds


# ------------------------------------------------------------------------------ plotting


COLORS = {"transformer": "#1b9e77", "rnn": "#d95f02", "ffn": "#7570b3"}
LABELS = {"transformer": "Transformer", "rnn": "RNN (GRU)", "ffn": "FFN"}


def plot_samples(ax, rows: Sequence[dict], *, by: str = "N", cap: Optional[float] = None, title: str = ""):
    """Mean +- std of samples over seeds, per model, against ``by``; runs that never reached
    the threshold are drawn as open triangles at the step cap (a lower bound)."""
    for model in MODELS:
        rs = [r for r in rows if r["model"] == model]
        if not rs:
            continue
        xs = sorted({r[by] for r in rs})
        mean, std, xm = [], [], []
        for v in xs:
            got = [r["samples"] for r in rs if r[by] == v and r["samples"] is not None]
            if got:
                t = torch.tensor(got, dtype=torch.float64)
                xm.append(v)
                mean.append(float(t.mean()))
                std.append(float(t.std()) if len(got) > 1 else 0.0)
        if xm:
            ax.errorbar(xm, mean, yerr=std, color=COLORS[model], marker="o", capsize=3, label=LABELS[model])
        miss = [(r[by], r["steps"] * r["config"]["batch_size"]) for r in rs if r["samples"] is None]
        if miss:
            ax.scatter([m[0] for m in miss], [m[1] for m in miss], marker="^", facecolors="none",
                       edgecolors=COLORS[model], label=f"{LABELS[model]}: not reached (cap)")
    ax.set_yscale("log")
    ax.set_xticks(sorted({r[by] for r in rows}))
    ax.set_xlabel(by)
    ax.set_ylabel("samples to threshold")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def save_figure(fig, stem: str) -> List[str]:
    paths = [f"{stem}.png", f"{stem}.pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return paths


def mpl():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt
