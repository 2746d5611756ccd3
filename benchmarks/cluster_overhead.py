"""What running the stacks on Dask costs: one small Figure 1 sweep, timed two ways in one run.

    python benchmarks/cluster_overhead.py              # tiny models, 1STR N in {2,3,4},
                                                       # simple N=3, 1 seed
    python benchmarks/cluster_overhead.py --steps 300  # longer stacks: the fixed costs matter less

Prints the wall seconds of the same sweep (fresh results file each time, float64, one torch
thread per stack) trained

* in this process (``jobs=1``, no Dask),
* on a 2-worker ``LocalCluster`` (``jobs=2``: what ``qstr reproduce`` does), start and
  shutdown of the cluster included and also shown apart,

(the process pool that ``--jobs`` used before Dask was removed; docs/cluster.md gives its last
measured time), checks that the two give the same rows, and measures Dask's scheduling overhead
per task on a running 2-worker cluster (no-op tasks, one at a time and all at once). A script,
not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch
from distributed import Client, LocalCluster

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from qstr.verify.experiments import figure1
from qstr.verify.experiments.results import ResultsFile
from qstr.verify.experiments.run import RunConfig, run_points, stacks_of


def _noop(x):
    return x


def sweep_points(steps: int):
    tiny = {"width": 8, "rnn_hidden": 8, "ffn_hidden": (8, 8), "n_test": 64, "max_steps": steps}
    return figure1.points(
        quick=False,
        seeds=[0],
        protocol="paper",
        N_values={"1str": [2, 3, 4], "simple": [3]},
        overrides=tiny,
    )


def key(rows):
    return sorted((r["point_id"], r["samples"], r["steps"], r["test_mse"]) for r in rows)


def timed_run(pts, folder, **kw):
    t0 = time.perf_counter()
    cfg = RunConfig(device=torch.device("cpu"), dtype=torch.float64, progress=False, **kw)
    out = run_points(pts, ResultsFile(os.path.join(folder, "figure1.jsonl")), cfg)
    return time.perf_counter() - t0, list(out.values())


def task_overhead(n: int = 200):
    t0 = time.perf_counter()
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, silence_logs=40, dashboard_address=":0"
    )
    client = Client(cluster, set_as_default=False)
    client.submit(_noop, 0, pure=False).result()  # warm
    start = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(n):
        client.submit(_noop, i, pure=False).result()
    one = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    client.gather([client.submit(_noop, i, pure=False) for i in range(n)])
    batch = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    client.close()
    cluster.close()
    stop = time.perf_counter() - t0
    return start, stop, one, batch


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60, help="step cap of every model (default 60)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    pts = sweep_points(args.steps)
    n_stacks = len(stacks_of(pts))
    print(
        f"sweep: {len(pts)} points in {n_stacks} stacks "
        f"(Figure 1, tiny models, max_steps {args.steps}, float64); "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        t_in, rows_in = timed_run(pts, os.path.join(tmp, "in"), jobs=1)
        print(f"in-process (jobs=1, no Dask):          {t_in:7.2f} s")
        t_dask, rows_dask = timed_run(pts, os.path.join(tmp, "dask"), jobs=2)
        print(
            f"Dask LocalCluster (jobs=2, 2 workers): {t_dask:7.2f} s  "
            "(cluster start and shutdown included)"
        )
    same = key(rows_in) == key(rows_dask)
    print(f"rows identical across the two: {same}")
    start, stop, one, batch = task_overhead()
    print(
        f"2-worker LocalCluster: start {start:.2f} s (first task included), shutdown {stop:.2f} s"
    )
    print(
        f"Dask overhead per task (no-op): {one * 1e3:.2f} ms one at a time, "
        f"{batch * 1e3:.2f} ms each in a batch of 200"
    )
    print(
        f"Dask sweep minus cluster start/stop: {t_dask - start - stop:.2f} s "
        f"for {n_stacks} stack tasks"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
