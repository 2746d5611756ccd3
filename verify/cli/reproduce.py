"""``qstr reproduce``: reproduce a figure of the paper (Appendix E), resumable."""

from __future__ import annotations

import argparse
import os

from rich.console import Console

from qstr.verify.cli.options import _count, _device, _float, _writable_dir


def add_options(r: argparse.ArgumentParser) -> None:
    r.add_argument(
        "figure", choices=["figure1", "figure2", "figure3"], help="the figure of Appendix E"
    )
    r.add_argument("--quick", action="store_true", help="scaled down: minutes on 2 CPU cores")
    r.add_argument("--device", default="cpu", help="cpu or cuda")
    r.add_argument(
        "--seeds",
        type=_count,
        default=None,
        metavar="S",
        help="number of seeds (default: figures 1 and 3 five, two with --quick; "
        "figure 2 one, seed 0)",
    )
    r.add_argument(
        "--protocol",
        default="paper",
        help="paper (default) or published (the published code's choices)",
    )
    r.add_argument(
        "--out",
        metavar="DIR",
        required=True,
        help="results directory (JSON lines, PNG, PDF, summary)",
    )
    r.add_argument(
        "--jobs",
        type=_count,
        default=None,
        metavar="J",
        help="stacks trained at once in worker processes "
        "(default: every CPU core on cpu, 1 on cuda)",
    )
    r.add_argument(
        "--matmul",
        default="float32",
        choices=["float32", "tf32"],
        help="float32 (default) or tf32: matrix products on TF32 tensor cores (cuda only; faster)",
    )
    r.add_argument(
        "--weight-decay",
        type=_float,
        default=None,
        metavar="W",
        help="AdamW weight decay of every model instead of the protocol's (figures 1 and 3: "
        "0.1, published 0.01; figure 2: 0.2); enters every row's point id, so give its own --out",
    )
    r.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="run the stacks on the running Dask cluster at ADDRESS (tcp://HOST:PORT) instead of "
        "local worker processes; --jobs is then ignored (docs/cluster.md)",
    )


def run(args, console: Console) -> int:
    from qstr.verify.experiments import Execution, run_experiment  # noqa: PLC0415 - fast --help

    _device(args.device)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out {args.out} is a file; give a results directory")
    _writable_dir("--out", args.out)
    # device, protocol, matmul and the scheduler's address are checked by run_experiment before any
    # training
    execution = Execution(
        device=args.device, jobs=args.jobs, matmul=args.matmul, scheduler=args.scheduler
    )
    options = {}
    if args.weight_decay is not None:  # checked with every point's lr by Point
        options["overrides"] = {"weight_decay": args.weight_decay}
    rows = run_experiment(
        args.figure,
        out_dir=args.out,
        quick=args.quick,
        seeds=args.seeds,
        protocol=args.protocol,
        execution=execution,
        **options,
    )
    console.print(f"{args.figure}: {len(rows)} rows in {args.out}")
    return 0
