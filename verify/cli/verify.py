"""``qstr verify``: run the claims and print measured against bound, or list them (``--list``)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from rich.console import Console

from qstr.verify.cli.options import (
    _PROFILES,
    UsageError,
    _count,
    _device,
    _positive,
    _seed_option,
    _writable_file,
)
from qstr.verify.cli.signals import _INTERRUPTED, _Stream
from qstr.verify.files import STDOUT


def add_options(v: argparse.ArgumentParser) -> None:
    v.add_argument(
        "--profile", default="quick", help=f"one of {', '.join(_PROFILES)} (default quick)"
    )
    v.add_argument(
        "--device", default=None, help="cpu or cuda (default: cpu; cuda for --profile gpu)"
    )
    v.add_argument(
        "--only",
        nargs="+",
        action="extend",
        metavar="ID",
        help="run only these claim ids (repeatable)",
    )
    v.add_argument(
        "--json",
        metavar="PATH",
        help="write the results as a JSON list of records (-: to standard output, "
        "the table to standard error)",
    )
    _seed_option(v)
    v.add_argument(
        "--list",
        action="store_true",
        help="print the index of the claims (references, checks, faults, functions, derivation)",
    )
    v.add_argument(
        "--claims",
        nargs="+",
        action="extend",
        metavar="MODULE",
        help="also run the claims this module registers (dotted name or path to a "
        ".py file; docs/claims.md)",
    )
    v.add_argument(
        "--certified",
        action="store_true",
        help="run only the certified checks (ball arithmetic: docs/derivations/certified.md) "
        "and the faults that break them, of the claims that have one",
    )
    v.add_argument(
        "--only-claims",
        action="store_true",
        help="run only the claims of the --claims modules, not the paper's",
    )
    v.add_argument(
        "--threads",
        type=_count,
        default=1,
        metavar="T",
        help="CPU threads per check (default 1: the checks are many small ops)",
    )
    v.add_argument(
        "--traceback",
        action="store_true",
        help="after the table, the whole traceback of every check that crashed",
    )
    v.add_argument(
        "--timeout",
        type=_positive,
        metavar="S",
        help="fail a claim that runs longer than S seconds (for claims of your own that may hang)",
    )
    v.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop at the first claim that fails (exit 1); for mutation testing",
    )
    v.add_argument(
        "--jobs",
        type=_count,
        default=None,
        metavar="J",
        help="claims run side by side in J worker processes (default: the CPU cores, at most 4, "
        "on the CPU with 4 claims or more; else 1); the records are those of one process",
    )


def _context(args):
    from qstr.verify.registry import PROFILES, Context  # noqa: PLC0415 - fast --help

    if args.profile not in PROFILES:
        raise ValueError(f"--profile must be one of {', '.join(PROFILES)}, got {args.profile!r}")
    default = "cuda" if args.profile == "gpu" else "cpu"
    device = _device(default if args.device is None else args.device)
    cores = os.cpu_count() or 1
    if args.threads > cores:
        raise ValueError(f"--threads {args.threads}: this machine has {cores} CPU cores")
    evidence = "certified" if args.certified else None
    return Context(args.profile, device, args.seed, args.threads, evidence)


def _jobs(args, ctx, n_claims: int) -> int:
    """--jobs, or by default the CPU cores (at most 4) for 4 claims or more on the CPU, else 1
    (a worker's start, about 5 s of imports, would cost more than it saves)."""
    cores = os.cpu_count() or 1
    if args.jobs is not None:
        if args.jobs > cores:
            raise ValueError(f"--jobs {args.jobs}: this machine has {cores} CPU cores")
        return args.jobs
    if ctx.device != "cpu" or n_claims < 4 or args.threads > 1:
        return 1
    return max(1, min(4, cores, n_claims))


def _selected(args, profile: str):
    """The paper's claims and those of every --claims module, narrowed by --only (and by
    --certified to the claims with a certified check)."""
    claims = _claims(args, profile)
    if args.certified:
        return [c for c in claims if c.checks_in(profile, "certified")]
    return claims


def _claims(args, profile: str):
    from qstr.verify.claims import select  # noqa: PLC0415 - fast --help
    from qstr.verify.registry import load_claims  # noqa: PLC0415 - fast --help

    for module in args.claims or ():
        load_claims(module)
    if not getattr(args, "only_claims", False):
        return select(profile, args.only)
    from qstr.verify.registry import defined_in  # noqa: PLC0415 - fast --help

    if not args.claims or args.only:
        raise ValueError("--only-claims runs the claims of --claims MODULE: give it, not --only")
    ids = [c.id for m in args.claims for c in defined_in(m)]
    if not ids:  # select(profile, []) would be every claim, the paper's included
        raise ValueError(
            f"--only-claims: {' '.join(args.claims)} define(s) no claim (a claim belongs to the "
            "module that defines its inputs function)"
        )
    return select(profile, ids)


def _list(args, console: Console) -> int:
    """The index of the selected claims (no device needed: nothing runs)."""
    from qstr.verify.claim import PROFILES  # noqa: PLC0415 - fast --help
    from qstr.verify.index import text  # noqa: PLC0415 - fast --help

    if args.profile not in PROFILES:
        raise ValueError(f"--profile must be one of {', '.join(PROFILES)}, got {args.profile!r}")
    index = text(_selected(args, args.profile))
    console.print(index, markup=False, highlight=False, soft_wrap=True)
    return 0


def run(args, console: Console) -> int:
    if args.list:
        if args.json is not None:
            raise UsageError("--list prints the claims index, --json writes results: not both")
        return _list(args, console)
    ctx = _context(args)
    _writable_file("--json", args.json)
    from qstr.verify.pool import run_claims  # noqa: PLC0415 - fast --help

    claims = _selected(args, ctx.profile)
    from qstr.verify.report import print_report, records, write_json  # noqa: PLC0415 - fast --help

    to_stdout, stdout = args.json == STDOUT, console.file
    if to_stdout:  # standard output carries the records alone; the table goes to stderr
        console = Console(file=_Stream(sys.stderr), width=console.width)
    results, write_error = [], None
    title = f"qstr verify - profile {ctx.profile}, seed {ctx.seed}"
    jobs = _jobs(args, ctx, len(claims))
    done: dict = {}
    try:
        with console.status("") as status:
            status.update(f"[0/{len(claims)}] checking {claims[0].id} ..." if claims else "")
            stop = (lambda r: not r.passed) if args.fail_fast else (lambda r: False)
            claimed = run_claims(claims, ctx, jobs, args.claims or (), stop, args.timeout)
            for i, result in claimed:
                done[i] = result
                results = [done[k] for k in sorted(done)]
                if _INTERRUPTED.is_set():
                    raise KeyboardInterrupt
                status.update(f"[{len(done)}/{len(claims)}] {result.id} done ...")
                if args.json and not to_stdout and write_error is None:
                    try:  # written as we go: an interrupted run keeps what it measured
                        write_json(results, args.json)
                    except ValueError as exc:  # the table first, then this one line
                        write_error = exc
    except KeyboardInterrupt:  # the table of what finished, then main's one line and exit 130
        if results:
            print_report(results, console, title=f"{title} (interrupted)", timeout=args.timeout)
        kept = f"; in {args.json}" if args.json and results and write_error is None else ""
        args.interrupted = (
            f"{len(results)} of {len(claims)} claims finished"
            f"{' (table above)' if results else ''}{kept}"
        )
        raise
    print_report(results, console, title=title, timeout=args.timeout)
    if args.traceback:
        _tracebacks(results, console)
    if len(results) < len(claims):
        failed = next(r.id for r in results if not r.passed)
        console.print(
            f"--fail-fast: stopped after {failed} failed; "
            f"{len(claims) - len(results)} claims not run"
        )
    if write_error is not None:
        raise write_error
    if to_stdout:
        stdout.write(json.dumps(records(results), indent=2, default=str) + "\n")
        stdout.flush()
    return 0 if all(r.passed for r in results) else 1


def _tracebacks(results, console: Console) -> None:
    """The traceback of every crashed check (honest inputs first, then each fault's)."""
    for r in results:
        crashed = [("", c) for c in r.checks] + [
            (f"fault {f.name!r}: ", c) for f in r.faults for c in f.checks
        ]
        for where, c in crashed:
            text = getattr(c, "traceback", "")
            if text:
                console.print(f"{r.id}: {where}check {c.name!r} crashed:", markup=False)
                console.print(text.rstrip(), markup=False, highlight=False)
