"""Time all of Figure 1 (both panels) with the batched trainer.

    python benchmarks/figure1_timing.py                 # CUDA when available: full figure, 5 seeds
    python benchmarks/figure1_timing.py --device cpu    # CPU: the quick version (2 seeds)
    python benchmarks/figure1_timing.py --device cuda --quick

Every run trains from scratch in a fresh results directory (no resume) and prints the wall
seconds of the whole figure and of each stack (one stack = one architecture on one panel, all
its N values and seeds trained together).

Reference numbers (measured for this project): the published code, one model at a time, took on
one H100 77 s for the whole 1STR panel at ONE seed and 130 s for three of the five simple-1STR
points, about 295 s per seed for the figure (~25 min for 5 seeds). The target for the batched
trainer is the whole figure, 5 seeds, in 75 s on one H100. A script, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from qstr.verify.experiments import Execution, run_experiment
from qstr.verify.experiments.run import default_jobs

PUBLISHED_S_PER_SEED = 295.0
TARGET_S = 75.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--quick", action="store_true", help="the quick version (default on CPU)")
    ap.add_argument("--full", action="store_true", help="the full figure even on CPU (hours)")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 5; quick 2)")
    ap.add_argument("--protocol", default="paper")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (with --jobs 1)")
    ap.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="stacks trained at once (default: every core on cpu, 1 on cuda)",
    )
    ap.add_argument(
        "--out", default=None, help="results directory (default: a fresh temporary one)"
    )
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    quick = args.quick or (dev.type == "cpu" and not args.full)
    out = args.out or tempfile.mkdtemp(prefix="figure1_timing_")
    if args.out and os.path.exists(os.path.join(out, "figure1.jsonl")):
        print(
            f"{out}/figure1.jsonl exists: rows there would be reused; use a fresh --out",
            file=sys.stderr,
        )
        return 2
    threads = args.threads or (1 if quick and dev.type == "cpu" else torch.get_num_threads())
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    rows = run_experiment(
        "figure1",
        out_dir=out,
        quick=quick,
        seeds=args.seeds,
        protocol=args.protocol,
        execution=Execution(device=dev, progress=args.progress, threads=threads, jobs=args.jobs),
    )
    if dev.type == "cuda":
        torch.cuda.synchronize()
    total = time.perf_counter() - t0
    seeds = sorted({r["seed"] for r in rows})
    what = "quick" if quick else "full"

    jobs = args.jobs or default_jobs(dev)
    name = (
        torch.cuda.get_device_name(dev)
        if dev.type == "cuda"
        else f"CPU, {jobs} worker process(es) x 1 thread"
        if jobs > 1
        else f"CPU, {threads} torch thread(s)"
    )
    print(
        f"Figure 1 ({what}, {len(seeds)} seeds, {len(rows)} models, protocol {args.protocol}) "
        f"on {name}: "
        f"{total:.1f} s (including plots and the summary); results in {out}"
    )
    stacks = {}
    for r in rows:
        k = (r["variant"], r["model"])
        stacks[k] = max(stacks.get(k, 0.0), r["wall_s"])
    for (variant, model), s in sorted(stacks.items()):
        n = sum(1 for r in rows if (r["variant"], r["model"]) == (variant, model))
        print(f"  {variant:6s} {model:11s} {n:3d} models in one stack: {s:8.1f} s")
    if dev.type == "cuda" and not quick:
        print(
            f"  target {TARGET_S:.0f} s for the whole figure at 5 seeds; "
            f"published code ~{PUBLISHED_S_PER_SEED:.0f} s "
            f"per seed (~{PUBLISHED_S_PER_SEED * len(seeds):.0f} s for {len(seeds)} seeds, "
            "one model at a time)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
