"""Tests for verify/experiments/cluster.py on real Dask clusters (no mocks): rows equal to the
in-process run, a worker killed mid-run (its stack's re-run trains only what was unfinished),
an interrupted client resumed, ``qstr reproduce --jobs 2`` as a process of its own killed by
``kill -9`` and by Ctrl-C, and ``qstr reproduce --scheduler`` / ``run_experiment`` with
``Execution(scheduler=)`` against a ``dask scheduler`` and a ``dask worker`` started as processes
(one of them unable to import qstr)."""

import _thread
import collections
import contextlib
import gc
import glob
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace

import pytest
import torch
from distributed import Client, LocalCluster

from qstr.verify import cli, experiments
from qstr.verify.experiments import Execution, figure1, run_experiment
from qstr.verify.experiments import cluster as cl
from qstr.verify.experiments.cluster import local_cluster
from qstr.verify.experiments.results import ResultsFile
from qstr.verify.experiments.run import RunConfig, run_points

VOLATILE = {"wall_s", "finished", "env"}  # timing and machine fields; everything else must match


def points(tiny, tiny_grid, steps=None, seeds=(0,)):
    over = dict(tiny, **({"max_steps": steps} if steps else {}))
    return figure1.points(seeds=list(seeds), N_values=tiny_grid, overrides=over)


def run(pts, path, **kw):
    cfg = RunConfig(device=torch.device("cpu"), dtype=torch.float64, progress=False, **kw)
    return run_points(pts, ResultsFile(str(path)), cfg)


def lines(path):
    with open(path) as fh:
        return fh.read().splitlines()


def ids(path):
    return [json.loads(line)["point_id"] for line in lines(path)]


def _rows_close(a: dict, b: dict) -> bool:
    """Rows equal field by field, floats to a relative 1e-12 (the order of a batched sum)."""

    def close(x, y):
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-300)
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(close(x[k], y[k]) for k in x)
        if isinstance(x, list) and isinstance(y, list):
            return len(x) == len(y) and all(close(u, v) for u, v in zip(x, y, strict=True))
        return x == y

    assert close(a, b), (a, b)
    return True


def stable(row):
    return {k: v for k, v in json.loads(json.dumps(row)).items() if k not in VOLATILE}


def wait_for_rows(path, n, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and len(lines(path)) >= n:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A 2-worker LocalCluster (processes, one thread each) and a client of the test's own, its
    scratch space in the test's temporary folder."""
    lc = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        silence_logs=logging.CRITICAL,
        dashboard_address=":0",
        local_directory=str(tmp_path_factory.mktemp("dask")),
    )
    client = Client(lc, set_as_default=False)
    yield lc, client
    client.close()
    lc.close()


def test_local_cluster_gives_the_rows_of_one_process_and_resumes_its_file(
    tmp_path, tiny, tiny_grid, cluster
):
    """A LocalCluster of 2 worker processes writes the rows the in-process run writes; it
    resumes a file the in-process run began, adding only the missing points. (``jobs=2``, which
    starts its own LocalCluster, is tested the same way in test_run.py.)"""
    lc, _ = cluster
    pts = points(tiny, tiny_grid)
    one = run(pts, tmp_path / "one.jsonl", jobs=1)
    two = tmp_path / "two.jsonl"
    two.write_text("\n".join(lines(tmp_path / "one.jsonl")[:4]) + "\n")  # in-process ran these four
    got = run(pts, two, scheduler=lc.scheduler_address)
    assert len(lines(two)) == len(pts) and sorted(ids(two)) == sorted(p.point_id for p in pts)
    assert lines(two)[:4] == lines(tmp_path / "one.jsonl")[:4]
    assert {k: stable(r) for k, r in got.items()} == {k: stable(r) for k, r in one.items()}
    before = lines(two)
    run(pts, two, jobs=2)  # all written: nothing trained, no LocalCluster started, nothing appended
    assert lines(two) == before


def test_a_worker_killed_mid_run_loses_no_point_and_retrains_only_the_unfinished(
    tmp_path, tiny, cluster
):
    """SIGKILL of the worker process training a stack of two, once its first member's row is
    written: the scheduler re-runs the stack on a worker, which trains only the other member.
    Every point is in the file exactly once, with the rows of the in-process run."""
    lc, client = cluster
    quick, slow = figure1.points(
        seeds=[0],
        N_values={"1str": [2, 3]},
        models=("transformer",),
        variants=("1str",),
        overrides=dict(tiny, max_steps=40),
    )
    pts = [
        replace(quick, threshold=1e9),
        replace(slow, threshold=0.0),
    ]  # done at the first check / at step 40
    assert len({p.stack_group for p in pts}) == 1 and pts[0].point_id != quick.point_id
    path = tmp_path / "f.jsonl"
    pids = client.run(os.getpid)
    killed = {}

    def killer():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if os.path.exists(path) and lines(path):
                busy = [a for a, keys in client.processing().items() if keys and a in pids]
                if busy:
                    killed["rows"] = ids(path)
                    os.kill(pids[busy[0]], signal.SIGKILL)
                    return
            time.sleep(0.02)

    t = threading.Thread(target=killer)
    t.start()
    got = run(pts, path, scheduler=lc.scheduler_address)
    t.join()
    assert killed.get("rows") == [pts[0].point_id], "the stack was not killed between its two rows"
    counts = collections.Counter(ids(path))
    assert set(counts) == {p.point_id for p in pts} and set(counts.values()) == {1}
    resumed = [
        msg
        for topic, events in client.get_events().items()
        if topic.startswith("qstr-rows-")
        for _, msg in events
        if msg[0] == "resumed"
    ]
    assert [list(m) for m in resumed] == [["resumed", 0, 1, 1]], (
        resumed
    )  # stack 0: 1 point already done, 1 trained
    one = run(pts, tmp_path / "one.jsonl", jobs=1)
    late = pts[1].point_id
    assert (
        got[late]["stack_size"] == 1 and one[late]["stack_size"] == 2
    )  # re-run alone / stacked in-process
    same = lambda rows: {k: dict(stable(r), stack_size=None) for k, r in rows.items()}  # noqa: E731
    # a stack of one and a stack of two batch their products differently: floats agree to rounding
    assert _rows_close(same(got), same(one))


@pytest.fixture
def default_sigint():
    """_thread.interrupt_main simulates SIGINT, which a shell's background job ignores (SIG_IGN):
    the default handler for the test's length."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_an_interrupted_client_resumes_without_duplicates(
    tmp_path, tiny, tiny_grid, cluster, default_sigint
):
    """Ctrl-C (KeyboardInterrupt in the main thread) once a first row is written: the run stops,
    its tasks are cancelled, the rows written stay; the same call writes the rest, once each."""
    lc, client = cluster
    pts = points(
        tiny, tiny_grid, steps=1500
    )  # long enough that the interrupt lands mid-run on an idle machine
    # A KeyboardInterrupt that lands inside a garbage-collector callback is swallowed by Python (the
    # CLI guards against it with a flag, verify/cli.py), and a sweep can finish before the
    # interrupt: then the run just completes. Up to 3 attempts, each must leave every point at most
    # once; one must stop mid-run.
    for attempt in range(3):
        path = tmp_path / f"f{attempt}.jsonl"

        def interrupt(path):
            if wait_for_rows(path, 1):
                _thread.interrupt_main()

        t = threading.Thread(target=interrupt, args=(path,))
        t.start()
        try:
            run(pts, path, scheduler=lc.scheduler_address)
            time.sleep(5)  # a sweep that finished first waits here for the interrupt
        except KeyboardInterrupt:
            pass
        t.join()
        assert len(set(ids(path))) == len(lines(path))  # whatever happened: no duplicates
        if len(lines(path)) < len(pts):  # interrupted mid-run
            break
    else:
        pytest.fail("no attempt was interrupted mid-run")
    kept = lines(path)
    assert 1 <= len(kept) < len(pts) and len(set(ids(path))) == len(kept)
    time.sleep(0.5)  # a late row of the cancelled run would show up here
    assert lines(path) == kept, "rows were appended after the interrupt"
    got = run(pts, path, scheduler=lc.scheduler_address)
    assert lines(path)[: len(kept)] == kept
    counts = collections.Counter(ids(path))
    assert (
        set(counts) == {p.point_id for p in pts}
        and set(counts.values()) == {1}
        and len(got) == len(pts)
    )


def test_bad_scheduler_address_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cl, "CONNECT_TIMEOUT", 1.0)
    port = _free_port()
    for address, says in [
        ("nonsense", "like tcp://HOST:PORT"),
        (f"tcp://127.0.0.1:{port}", "no Dask scheduler"),
        (f"tls://127.0.0.1:{port}", "no Dask scheduler"),  # a Client half made, then closed
    ]:
        assert (
            cli.main(
                [
                    "reproduce",
                    "figure1",
                    "--quick",
                    "--out",
                    str(tmp_path / "o"),
                    "--scheduler",
                    address,
                ]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1 and "Traceback" not in err
        unraised = []
        monkeypatch.setattr(sys, "unraisablehook", unraised.append)
        gc.collect()  # no finaliser left to print a traceback at exit
        monkeypatch.undo()
        monkeypatch.setattr(cl, "CONNECT_TIMEOUT", 1.0)
        assert unraised == [], [u.exc_value for u in unraised]
    assert not os.path.exists(tmp_path / "o" / "figure1.jsonl")


RUNNER = """\
import ast, sys
from dataclasses import replace
import torch
from qstr.verify import cli, experiments

if __name__ == "__main__":  # Dask's worker processes are spawned: they import this file again
    tiny, grid = ast.literal_eval(sys.argv[1]), ast.literal_eval(sys.argv[2])
    real = experiments.run_experiment
    experiments.run_experiment = lambda name, execution, **kw: real(
        name, execution=replace(execution, dtype=torch.float64), N_values=grid, overrides=tiny,
        **kw)
    sys.exit(cli.main(sys.argv[3:]))
"""


def reproduce(tmp_path, tiny, tiny_grid, *args):
    """``qstr reproduce figure1 --seeds 1 --out tmp_path/out ARGS`` with tiny models, as a process
    of its own (a session and process group of its own, as a shell starts it); output in files."""
    script = tmp_path / "reproduce.py"
    script.write_text(RUNNER)
    out, err = open(tmp_path / "stdout.txt", "w"), open(tmp_path / "stderr.txt", "w")
    argv = [
        sys.executable,
        str(script),
        repr(tiny),
        repr(tiny_grid),
        "reproduce",
        "figure1",
        "--seeds",
        "1",
        "--out",
        str(tmp_path / "out"),
        *args,
    ]
    return subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True, cwd=str(tmp_path))


def process_tree(pid):
    """Every descendant of ``pid`` now, from /proc."""
    children = collections.defaultdict(list)
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    children[int(fh.read().rsplit(") ", 1)[1].split()[1])].append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    tree, todo = [], [pid]
    while todo:
        tree += children[todo[-1]]
        todo[-1:] = children[todo[-1]]
    return tree


def dask_workers(pid):
    """The spawned Dask worker processes below ``pid``."""

    def cmdline(p):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as fh:
                return fh.read()
        except OSError:
            return b""

    return [p for p in process_tree(pid) if b"spawn_main" in cmdline(p)]


def alive(pid):
    """``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def outlive(pids, timeout=20.0):
    """The processes of ``pids`` still running after ``timeout`` s (they are then killed)."""
    deadline = time.monotonic() + timeout
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [p for p in pids if alive(p)]
    for p in left:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)
    return left


def test_kill_9_of_reproduce_ends_its_dask_workers(tmp_path, tiny, tiny_grid):
    """``kill -9`` of ``qstr reproduce --jobs 2`` once its LocalCluster's worker processes run:
    every process it started (the workers, multiprocessing's resource tracker) exits on its own."""
    proc = reproduce(tmp_path, dict(tiny, max_steps=2000), tiny_grid, "--jobs", "2")
    try:
        deadline = time.monotonic() + 120
        while (
            len(dask_workers(proc.pid)) < 2 and proc.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        time.sleep(1.0)  # the workers are past their start-up
        tree = process_tree(proc.pid)
        assert proc.poll() is None and len(dask_workers(proc.pid)) == 2, (
            tmp_path / "stderr.txt"
        ).read_text()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not outlive(tree), "processes outlived their parent"

    def scratch():
        return [
            f for f in os.listdir(tempfile.gettempdir()) if f.startswith(f"qstr-dask-{proc.pid}-")
        ]

    assert scratch(), "kill -9 leaves the run's scratch folder"
    cl._remove_stale_folders()  # what the next run does first
    assert not scratch()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "sig, status, said",
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
)
def test_ctrl_c_or_sigterm_of_reproduce_on_a_local_cluster(
    tmp_path, tiny, tiny_grid, sig, status, said
):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) or SIGTERM (to the process
    alone, as ``kill`` or a batch system's time limit sends it) of ``qstr reproduce --jobs 2``
    once a first row is written: exit status 130 or 143, one line on stderr that says how to
    resume, no traceback and no leaked-semaphore warning, every process it started gone, its
    ``qstr-dask-<pid>-*`` scratch folder removed and the rows written kept (resuming them:
    ``test_an_interrupted_client_resumes_without_duplicates``). No point stops at a threshold,
    so the first row is the cheapest stack's, written while the costliest still trains (not a
    race the signal can lose)."""
    path = tmp_path / "out" / "figure1.jsonl"
    endless = dict(tiny, max_steps=600, threshold=None)
    proc = reproduce(tmp_path, endless, tiny_grid, "--jobs", "2")
    try:
        assert wait_for_rows(path, 1), (tmp_path / "stderr.txt").read_text()
        tree = process_tree(proc.pid)
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
        assert proc.wait(timeout=60) == status
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert not outlive(tree), "processes outlived the signalled run"
    assert not glob.glob(os.path.join(tempfile.gettempdir(), f"qstr-dask-{proc.pid}-*"))
    err = (tmp_path / "stderr.txt").read_text()
    told = [line for line in err.splitlines() if line.startswith("qstr:")]
    assert len(told) == 1 and told[0].startswith(f"qstr: {said}; ") and "resume" in told[0], err
    assert err.splitlines()[-1] == told[0] and "Traceback" not in err, err
    assert "leaked semaphore" not in err, err
    kept = lines(path)
    assert 1 <= len(kept) < len(points(tiny, tiny_grid))


@contextlib.contextmanager
def dask_processes(*worker_args):
    """``dask scheduler`` and one ``dask worker`` (one thread, no nanny, plus ``worker_args``) as
    processes on 127.0.0.1; yields the scheduler's address once the worker has joined."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    script = os.path.join(
        os.path.dirname(sys.executable), "dask"
    )  # the `dask` command of this environment
    dask = [script] if os.path.exists(script) else [sys.executable, "-m", "dask"]
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scratch = tempfile.mkdtemp(prefix="qstr-test-dask-")  # the worker's, removed at the end
    procs = [
        subprocess.Popen(
            dask + ["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            **quiet,
        )
    ]
    try:  # both start at once: the worker keeps trying to reach the scheduler
        procs.append(
            subprocess.Popen(
                dask
                + [
                    "worker",
                    address,
                    "--nworkers",
                    "1",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                    "--no-nanny",
                    "--local-directory",
                    scratch,
                    *worker_args,
                ],
                **quiet,
            )
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(address, timeout=2, set_as_default=False) as c:
                    c.wait_for_workers(1, timeout=60)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def tiny_reproduce(monkeypatch, tiny, tiny_grid):
    """``qstr reproduce`` (in this process) trains tiny models on the tiny grid, in float64."""
    real = experiments.run_experiment
    monkeypatch.setattr(
        experiments,
        "run_experiment",
        lambda name, execution, **kw: real(
            name,
            execution=replace(execution, dtype=torch.float64),
            N_values=tiny_grid,
            overrides=tiny,
            **kw,
        ),
    )


@pytest.fixture(scope="module")
def dask_address():
    """The address of a ``dask scheduler`` with one ``dask worker``, both processes on 127.0.0.1."""
    with dask_processes() as address:
        yield address


@pytest.mark.slow
def test_reproduce_on_a_separate_dask_scheduler_and_worker(
    tmp_path, tiny, tiny_grid, capsys, tiny_reproduce, dask_address
):
    """``dask scheduler`` and ``dask worker`` as processes on 127.0.0.1; ``qstr reproduce
    --scheduler tcp://127.0.0.1:PORT`` trains every point there (tiny models) and resumes."""
    address = dask_address
    out = tmp_path / "out"
    argv = ["reproduce", "figure1", "--seeds", "1", "--out", str(out), "--scheduler", address]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert f"on {address}; dashboard" in err
    n = len(points(tiny, tiny_grid))
    assert len(lines(out / "figure1.jsonl")) == n and len(set(ids(out / "figure1.jsonl"))) == n
    assert (
        cli.main(argv) == 0 and len(lines(out / "figure1.jsonl")) == n
    )  # resumed: nothing to train


def test_run_experiment_trains_on_the_scheduler_it_is_given(
    tmp_path, tiny, tiny_grid, dask_address
):
    """The Python API: ``run_experiment(..., execution=Execution(scheduler=ADDRESS))`` sends its
    stacks to that Dask cluster (its rows arrive there as events) and writes every point once; a
    bad address is a one-line ValueError before anything trains."""

    def row_events():
        with Client(dask_address, timeout=5, set_as_default=False) as c:
            return sum(
                msg[0] == "row"
                for topic, events in c.get_events().items()
                if topic.startswith("qstr-rows-")
                for _, msg in events
            )

    before = row_events()
    kw = dict(
        out_dir=str(tmp_path / "out"),
        seeds=[0],
        N_values=tiny_grid,
        overrides=tiny,
    )
    ex = Execution(progress=False, dtype=torch.float64, scheduler=dask_address)
    rows = run_experiment("figure1", execution=ex, **kw)
    n = len(points(tiny, tiny_grid))
    assert len(rows) == n and sorted(ids(tmp_path / "out" / "figure1.jsonl")) == sorted(
        r["point_id"] for r in rows
    )
    assert row_events() - before == n
    with pytest.raises(ValueError, match="tcp://HOST:PORT"):
        run_experiment(
            "figure1",
            execution=replace(ex, scheduler="localhost:8786"),
            **dict(kw, out_dir=str(tmp_path / "bad")),
        )
    assert not os.path.exists(tmp_path / "bad" / "figure1.jsonl")


NO_QSTR = """\
\"\"\"Preload of a `dask worker`: qstr cannot be imported there, as on a machine \
without the toolkit.\"\"\"
import sys


class NoQstr:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "qstr":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoQstr())
"""


def test_a_worker_without_qstr_ends_reproduce_in_one_line_with_exit_2(
    tmp_path, capsys, tiny_reproduce
):
    """A ``dask worker`` that cannot import qstr: the task fails there (retried, then reported);
    ``qstr reproduce --scheduler`` ends with one line naming the missing module, exit status 2,
    no traceback and no row written."""
    preload = tmp_path / "no_qstr.py"
    preload.write_text(NO_QSTR)
    with dask_processes("--preload", str(preload)) as address:
        out = tmp_path / "out"
        assert (
            cli.main(
                ["reproduce", "figure1", "--seeds", "1", "--out", str(out), "--scheduler", address]
            )
            == 2
        )
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("qstr:")]
    assert said == [err.splitlines()[-1]] and "Traceback" not in err, err
    assert said[0] == (
        "qstr: error: a Dask worker could not run the task: ModuleNotFoundError: No module named "
        "'qstr' (install the toolkit on every worker: pip install -e .)"
    )
    assert not os.path.exists(out / "figure1.jsonl") or not lines(out / "figure1.jsonl")


def test_the_local_cluster_keeps_its_scratch_space_in_a_folder_it_removes(tmp_path, monkeypatch):
    """The workers' scratch space, and Dask's own ``dask-scratch-space`` (two lock files, issue
    52: it stayed in the system's temporary directory after ``qstr reproduce --jobs 2``), lie in
    the run's folder, removed when the cluster closes: the temporary directory is left as it was.
    The suite's own DASK_TEMPORARY_DIRECTORY (tests/conftest.py) is taken away here."""
    import dask  # noqa: PLC0415

    def run_folder(path):  # the qstr-dask-* folder the worker's scratch space is in
        while not os.path.basename(path).startswith("qstr-dask-"):
            assert path != os.path.dirname(path), "the scratch space is outside the run's folder"
            path = os.path.dirname(path)
        return path

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.delenv("DASK_TEMPORARY_DIRECTORY", raising=False)
    monkeypatch.setitem(dask.config.config, "temporary-directory", None)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    with local_cluster(1) as lc:
        folders = {run_folder(w["local_directory"]) for w in lc.scheduler_info["workers"].values()}
        assert len(folders) == 1 and os.path.isdir(next(iter(folders)))
        with Client(lc, set_as_default=False) as client:
            assert client.submit(sum, [1, 2]).result() == 3
    assert not os.path.exists(next(iter(folders)))
    assert os.listdir(tmp) == []
    assert "DASK_TEMPORARY_DIRECTORY" not in os.environ
    assert dask.config.get("temporary-directory") is None
