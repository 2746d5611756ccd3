"""The ``qstr`` command line: ``qstr verify|codebook|sample|construct|reproduce ...``
(``qstr --help``).

Exit status (docs/commands.md, "Exit statuses"): 0 done (for ``verify`` every selected claim
holds with every fault caught, for ``codebook`` the coherence bound is met), 1 a claim fails or
the codebook violates the bound, 2 bad input (one line on stderr, no traceback), 130
interrupted (143 on SIGTERM). Building the parser imports no torch, so ``--help`` is fast; each
command imports what it needs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import os
import re
import signal
import sys
import tempfile
import threading
import warnings
from typing import List, Optional

from rich.console import Console

from qstr.verify.files import STDOUT, check_target, save_torch
from qstr.verify.threads import keep_freed_memory
from qstr.verify.version import toolkit_version


_INTERRUPTED = threading.Event()


_TERMINATED = threading.Event()


def _on_sigint(signum, frame):
    """Ctrl-C, or SIGTERM (``kill``, a batch system's time limit): remember it (a
    KeyboardInterrupt raised inside a garbage-collector callback is swallowed by Python, so loops
    also check the flag) and interrupt, so that both end the same way: workers and temporary
    folders cleaned up, one line, exit status 130 (SIGINT) or 143 (SIGTERM)."""
    if signum == signal.SIGTERM:
        _TERMINATED.set()
    _INTERRUPTED.set()
    raise KeyboardInterrupt


class _Stream(io.TextIOBase):
    """Standard output or error as command-line tools treat them: once the reader has gone (a closed
    pipe, `qstr ... | head -1`) writes go nowhere and the command ends with its own status; a
    character the encoding lacks is written escaped rather than failing."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._silence()
        except UnicodeEncodeError:
            enc = getattr(self._stream, "encoding", None) or "ascii"
            return self.write(text.encode(enc, "backslashreplace").decode(enc))
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    def _silence(self) -> None:
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # Python's own flush at exit finds no pipe
            os.close(devnull)

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self):
        return getattr(self._stream, "encoding", "utf-8")


class UsageError(Exception):
    """Bad command-line arguments: reported in one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit status 2 (not argparse's usage block)
        raise UsageError(message)


# Profiles of ``qstr verify`` (``qstr.verify.registry.PROFILES``, restated so that --help imports
# no torch).
_PROFILES = ("quick", "full", "gpu")
SEED_MAX = (
    2**63 - 1
)  # seeds are integers in [0, 2**63 - 1], on the command line and in the Python API


def _parser() -> argparse.ArgumentParser:
    """Every subcommand and option; imports nothing heavy (``qstr --help`` stays fast)."""
    p = _Parser(prog="qstr", description="Check the claims of the qSTR paper numerically.")
    p.add_argument(
        "--version",
        action="version",
        version=f"qstr {toolkit_version()}",
        help="print the version of the installed qstr-toolkit and exit",
    )
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    _verify_options(
        sub.add_parser("verify", help="run the claim checks and print measured vs bound")
    )
    _codebook_options(
        sub.add_parser(
            "codebook",
            help="build a positional codebook (Assumption 3) and report its exact coherence",
        )
    )
    _sample_options(
        sub.add_parser("sample", help="sample qSTR prompts (Definition 2) and save them")
    )
    _construct_options(
        sub.add_parser("construct", help="build a construction of the paper as torch weights")
    )
    _reproduce_options(
        sub.add_parser("reproduce", help="reproduce a figure of the paper (Appendix E), resumable")
    )
    _summarize_options(
        sub.add_parser(
            "summarize", help="recompute a figure's summary and plots from its rows (no training)"
        )
    )
    return p


def _seed_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--seed",
        type=_seed,
        default=0,
        metavar="S",
        help="seed of every random draw, an integer in [0, 2**63 - 1] (default 0)",
    )


def _verify_options(v: argparse.ArgumentParser) -> None:
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


def _codebook_options(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--N",
        type=_count,
        default=None,
        metavar="N",
        help="number of positions, i.e. of codes (required unless --check)",
    )
    c.add_argument(
        "--kind",
        default="rs-hadamard",
        help="rs-hadamard (deterministic), rademacher or experimental",
    )
    c.add_argument(
        "--mu",
        type=_fraction,
        default=0.5,
        metavar="MU",
        help="coherence the codebook must meet, in (0, 1) (default 1/2)",
    )
    c.add_argument(
        "--d-e",
        dest="d_e",
        type=_count,
        default=None,
        metavar="D_E",
        help="code dimension (default: the derived rule)",
    )
    c.add_argument(
        "--delta",
        type=_fraction,
        default=None,
        metavar="DELTA",
        help="failure probability of the Rademacher rule, in (0, 1) (default 0.001)",
    )
    _seed_option(c)
    c.add_argument(
        "--check", metavar="PATH", help="report the coherence of a saved (N, d_e) tensor instead"
    )
    c.add_argument(
        "--out", metavar="PATH", help="write {'omega', 'mu', 'kind', 'params'} with torch.save"
    )


def _sample_options(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--N",
        type=_count,
        required=True,
        metavar="N",
        help="prompt length: tokens (positions) per prompt",
    )
    s.add_argument("--d", type=_count, required=True, metavar="D", help="token dimension")
    s.add_argument(
        "--q",
        type=_count,
        default=1,
        metavar="Q",
        help="tokens each label reads (sparsity), 1 <= q <= N (default 1)",
    )
    s.add_argument(
        "--B", type=_count, default=16, metavar="B", help="number of prompts (default 16)"
    )
    s.add_argument(
        "--link", default="linear", help="linear, hermite, sqnorm, mean, mean-projected, teacher"
    )
    s.add_argument("--variant", default="general", help="general or simple")
    s.add_argument("--indices", default="uniform", help="uniform, distinct or few-heads")
    s.add_argument("--tokens", default="gaussian", help="gaussian or half-zero")
    s.add_argument("--dtype", default="float32", help="float32 or float64")
    _seed_option(s)
    s.add_argument(
        "--out",
        metavar="PATH",
        required=True,
        help="write {'x', 't', 'y', 'config'} with torch.save",
    )


def _construct_options(k: argparse.ArgumentParser) -> None:
    k.add_argument(
        "architecture",
        choices=["transformer", "rnn"],
        help="transformer: the Lemma 11 q-head attention; "
        "rnn: the Prop 28 bidirectional RNN (simple-qSTR)",
    )
    k.add_argument(
        "--N", type=_count, required=True, metavar="N", help="prompt length: number of positions"
    )
    k.add_argument("--d", type=_count, required=True, metavar="D", help="token dimension")
    k.add_argument(
        "--q",
        type=_count,
        required=True,
        metavar="Q",
        help="tokens each label reads (heads), 1 <= q <= N",
    )
    k.add_argument(
        "--eps",
        type=_positive,
        default=None,
        metavar="EPS",
        help="target error (transformer: against the Assumption 2 net, default 0.01; "
        "rnn: state accuracy, default 0.1)",
    )
    k.add_argument(
        "--link",
        default="teacher",
        help="link whose exact Assumption 2 net is used: teacher, linear, mean-projected "
        "(rnn: teacher only)",
    )
    k.add_argument(
        "--width", type=_count, default=8, metavar="M", help="teacher width m_g (default 8)"
    )
    k.add_argument(
        "--n",
        type=_count,
        default=None,
        metavar="SAMPLES",
        help="training sample size n that sets Lemma 12's token radius r_x "
        "(transformer only; default 10000)",
    )
    _seed_option(k)
    k.add_argument(
        "--out",
        metavar="PATH",
        required=True,
        help="torch file readable with torch.load(PATH, weights_only=True)",
    )


def _summarize_options(r: argparse.ArgumentParser) -> None:
    r.add_argument(
        "figure",
        choices=["figure1", "figure2", "figure3", "bounds"],
        help="the figure the rows are of; bounds: the paper's explicit sample bounds beside "
        "Figure 1's rows",
    )
    r.add_argument("rows", metavar="ROWS", help="the rows (JSON lines, as qstr reproduce writes)")
    r.add_argument(
        "--stem",
        default=None,
        help="write STEM-summary.json, STEM.png and STEM.pdf (default: ROWS without .jsonl)",
    )


def _reproduce_options(r: argparse.ArgumentParser) -> None:
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


# One parse function per kind of number; argparse reports a refusal as "argument --X: <message>".
def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _seed(text: str) -> int:
    """A seed: an integer in [0, 2**63 - 1]."""
    value = _int(text)
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(
            f"a seed must be an integer in [0, 2**63 - 1], got {value}"
        )
    return value


def _count(text: str) -> int:
    """A size or count: an integer >= 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def _positive(text: str) -> float:
    """A finite number > 0."""
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def _fraction(text: str) -> float:
    """A number in the open interval (0, 1)."""
    value = _float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text}")
    return value


def _writable_file(flag: str, path: Optional[str]) -> None:
    """A file we will write later (qstr.verify.files.check_target), refused before any work."""
    if path is not None and not (flag == "--json" and path == STDOUT):
        check_target(flag, path)


def _writable_dir(flag: str, folder: str, shown: Optional[str] = None) -> None:
    """``folder`` (created when missing, as the runs do) must be a directory
    that takes a new file."""
    shown = shown or folder
    probe_in = os.path.abspath(folder)
    while not os.path.exists(probe_in):  # the nearest existing ancestor must take the new folders
        probe_in = os.path.dirname(probe_in)
    if not os.path.isdir(probe_in):
        raise ValueError(f"{flag} {shown}: {probe_in} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=probe_in):
            pass
    except OSError as exc:
        raise ValueError(
            f"{flag} {shown}: cannot write in {probe_in} ({exc.strerror or exc})"
        ) from None


def _device(value: Optional[str]) -> str:
    """cpu, cuda or cuda:N, CUDA only where the machine has it (before any folder is made)."""
    import torch  # noqa: PLC0415 - fast --help

    if value not in ("cpu", "cuda") and not re.fullmatch(r"cuda:\d+", value or ""):
        raise ValueError(f"--device must be cpu, cuda or cuda:N, got {value!r}")
    if value.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"--device {value}: CUDA is not available on this machine (use --device cpu)"
        )
    return value


def _context(args):
    from qstr.verify.registry import PROFILES, Context  # noqa: PLC0415 - fast --help

    if args.profile not in PROFILES:
        raise ValueError(f"--profile must be one of {', '.join(PROFILES)}, got {args.profile!r}")
    default = "cuda" if args.profile == "gpu" else "cpu"
    device = _device(default if args.device is None else args.device)
    cores = os.cpu_count() or 1
    if args.threads > cores:
        raise ValueError(f"--threads {args.threads}: this machine has {cores} CPU cores")
    return Context(profile=args.profile, device=device, seed=args.seed, threads=args.threads)


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
    """The paper's claims and those of every --claims module, narrowed by --only."""
    from qstr.verify.claims import select  # noqa: PLC0415 - fast --help
    from qstr.verify.registry import load_claims  # noqa: PLC0415 - fast --help

    for module in args.claims or ():
        load_claims(module)
    if not getattr(args, "only_claims", False):
        return select(profile, args.only)
    from qstr.verify.registry import defined_in  # noqa: PLC0415 - fast --help

    if not args.claims or args.only:
        raise ValueError("--only-claims runs the claims of --claims MODULE: give it, not --only")
    return select(profile, [c.id for m in args.claims for c in defined_in(m)])


def _list(args, console: Console) -> int:
    """The index of the selected claims (no device needed: nothing runs)."""
    from qstr.verify.claim import PROFILES  # noqa: PLC0415 - fast --help
    from qstr.verify.index import text  # noqa: PLC0415 - fast --help

    if args.profile not in PROFILES:
        raise ValueError(f"--profile must be one of {', '.join(PROFILES)}, got {args.profile!r}")
    index = text(_selected(args, args.profile))
    console.print(index, markup=False, highlight=False, soft_wrap=True)
    return 0


def _verify(args, console: Console) -> int:
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


def _codebook(args, console: Console) -> int:
    from qstr.constructions.codes import coherence_report  # noqa: PLC0415 - fast --help

    _writable_file("--out", args.out)
    book = _saved_codebook(args) if args.check is not None else _new_codebook(args)
    rep = coherence_report(book.omega, args.mu)
    pair = f"pair {rep.pair}" if rep.pair is not None else f"no pairs: N = {book.N}"
    verdict = "meets" if rep.mu <= args.mu else "VIOLATES"
    console.print(
        f"{book.kind}: N = {book.N}, d_e = {book.d_e}, exact coherence mu = {rep.mu:.6f} "
        f"({pair}); {rep.n_violations} of {rep.n_pairs} pairs exceed {args.mu!r}: "
        f"{verdict} the coherence bound {args.mu!r}"
        + (" of Assumption 3" if args.mu == 0.5 else "")
    )
    if args.out:
        save_torch(
            args.out,
            {"omega": book.omega, "mu": rep.mu, "kind": book.kind, "params": dict(book.params)},
        )
    return 0 if rep.mu <= args.mu else 1


def _new_codebook(args):
    import torch  # noqa: PLC0415 - fast --help

    from qstr.constructions.codes import build_codebook  # noqa: PLC0415 - fast --help

    if args.N is None:
        raise ValueError("--N is required to build a codebook (or give --check PATH)")
    if args.delta is not None and args.kind != "rademacher":
        raise ValueError(f"--delta applies to --kind rademacher only (got --kind {args.kind})")
    delta = 1e-3 if args.delta is None else args.delta
    gen = torch.Generator().manual_seed(args.seed)
    return build_codebook(
        args.N, kind=args.kind, mu_max=args.mu, d_e=args.d_e, delta=delta, generator=gen
    )


def _saved_codebook(args):
    """The codebook in ``--check PATH``, reported under the kind the file records
    (``custom`` if none)."""
    from qstr.constructions.codes import BUILDABLE_KINDS, Codebook  # noqa: PLC0415 - fast --help

    obj = _load_codebook_file(args.check)
    kind = obj.get("kind", "custom")
    if kind != "custom" and kind not in BUILDABLE_KINDS:
        raise ValueError(
            f"--check: {args.check} records the kind {kind!r}; known kinds: custom, "
            f"{', '.join(BUILDABLE_KINDS)}"
        )
    book = Codebook.from_tensor(obj["omega"])
    if kind in BUILDABLE_KINDS:
        params = obj.get("params") if isinstance(obj.get("params"), dict) else {}
        book = dataclasses.replace(book, kind=obj["kind"], params=dict(params))
    if args.N is not None and args.N != book.N:
        raise ValueError(
            f"--N {args.N} does not match {args.check}, which holds {book.N} codes "
            "(omit --N with --check)"
        )
    return book


def _load_codebook_file(path: str) -> dict:
    """A dict with at least ``omega`` (a bare tensor ``t`` reads as ``{"omega": t}``),
    or a one-line ValueError."""
    import torch  # noqa: PLC0415 - fast --help

    if not os.path.isfile(path):
        raise ValueError(f"--check {path!r}: no such file")
    try:
        with warnings.catch_warnings():  # torch's warning of a pickle protocol: not for the user
            warnings.simplefilter("ignore")
            obj = torch.load(path, weights_only=True)
    except (
        Exception
    ) as exc:  # OSError, UnpicklingError, EOFError, KeyError ...: any unreadable file
        raise ValueError(
            f"--check: {path}: not a codebook file written by qstr codebook "
            f"(not a torch file: {_what_file(path, exc)})"
        ) from None
    if isinstance(obj, torch.Tensor):
        obj = {"omega": obj}
    if not isinstance(obj, dict) or not isinstance(obj.get("omega"), torch.Tensor):
        raise ValueError(
            f"--check: {path} holds {type(obj).__name__}, not a tensor or a dict with an "
            "'omega' tensor"
        )
    if obj["omega"].layout != torch.strided:
        raise ValueError(
            f"--check: {path} holds a {obj['omega'].layout} tensor; save a dense one "
            f"(omega.to_dense())"
        )
    return obj


def _what_file(path: str, exc: Exception) -> str:
    """What the file ``torch.load`` could not read looks like, from its first bytes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError as err:
        return f"unreadable: {err.strerror or err}"
    if not head:
        return "empty or truncated file"
    if not head.strip(b"\0"):
        return "all zero bytes"
    if head.startswith(b"PK"):
        return "a damaged or truncated zip archive"
    if head.startswith(b"\x80"):
        return "a Python pickle that torch.load(weights_only=True) refuses"
    try:
        if b"\0" not in head and head.decode("utf-8"):
            return "a text file"
    except UnicodeDecodeError:
        pass
    text = (str(exc).strip().splitlines() or [""])[0].split(". ")[0][:120]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _sample(args, console: Console) -> int:
    import torch  # noqa: PLC0415 - fast --help

    from qstr.constructions.links import make_link  # noqa: PLC0415 - fast --help
    from qstr.constructions.task import QSTR  # noqa: PLC0415 - fast --help

    _writable_file("--out", args.out)
    gen = torch.Generator().manual_seed(args.seed)
    link = make_link(args.link, args.q, args.d, generator=gen)
    task = QSTR(
        N=args.N,
        d=args.d,
        link=link,
        variant=args.variant,
        indices=args.indices,
        tokens=args.tokens,
    )
    p = task.sample(args.B, generator=gen, dtype=args.dtype)
    config = {
        k: getattr(args, k)
        for k in ("N", "d", "q", "B", "link", "variant", "indices", "tokens", "dtype", "seed")
    }
    save_torch(
        args.out,
        {"x": p.x, "t": p.t, "y": p.y, "config": config, "link_params": _link_params(link)},
    )
    console.print(
        f"wrote {args.B} prompts (x {tuple(p.x.shape)}, t {tuple(p.t.shape)}, "
        f"y {tuple(p.y.shape)}) to {args.out}"
    )
    return 0


def _link_params(link) -> dict:
    """The link's drawn parameters: teacher {a, W, b}, linear and hermite {u: (q, d)},
    mean-projected {u: (d,)}, sqnorm and mean none."""
    net = getattr(link, "net", None)
    if net is not None:
        return _net_params(net)
    u = getattr(link, "u", None)
    return {} if u is None else {"u": u.detach().clone()}


def _net_params(net) -> dict:
    return {"a": net.a.detach().clone(), "W": net.W.detach().clone(), "b": net.b.detach().clone()}


def _construct(args, console: Console) -> int:
    _writable_file("--out", args.out)
    if args.architecture == "rnn":
        return _construct_rnn(args, console)
    import torch  # noqa: PLC0415 - fast --help

    from qstr.bounds.attention import lemma11, lemma12_radius  # noqa: PLC0415 - fast --help
    from qstr.constructions.export import construction_state  # noqa: PLC0415 - fast --help
    from qstr.constructions.links import make_link  # noqa: PLC0415 - fast --help

    if args.link not in ("teacher", "linear", "mean-projected"):
        raise ValueError(
            "--link must be teacher, linear or mean-projected "
            f"(links with an exact two-layer net), got {args.link!r}"
        )
    n, eps = 10_000 if args.n is None else args.n, 0.01 if args.eps is None else args.eps
    _construct_fits(args)
    gen = torch.Generator().manual_seed(args.seed)
    link = make_link(args.link, args.q, args.d, generator=gen, width=args.width)
    cons = lemma11(
        args.N,
        args.d,
        args.q,
        link.two_layer_net(),
        eps=eps,
        r_x=lemma12_radius(args.d, n=n, N=args.N),
    )
    state = construction_state(cons)
    state["config"] = dict(
        state["config"], link=args.link, width=args.width, seed=args.seed, n=n, eps_target=eps
    )
    state["link_params"] = _link_params(link)
    save_torch(args.out, state)
    g = cons.guarantee
    console.print(
        f"Lemma 11: N = {args.N}, d = {args.d}, q = {args.q}, d_e = {cons.codebook.d_e}, "
        f"mu = {g.mu:.4f}, r_x = {g.r_x:.3f}, alpha = {g.alpha:.3f}, "
        f"error bound = {g.error_bound:.3g}; wrote {args.out}"
    )
    return 0


def _construct_fits(args) -> None:
    """Refuse Lemma 11 weights that cannot fit before the codes are built (the default
    RS-Hadamard code's dimension is known without them; make_link checks the teacher's own W)."""
    from qstr.constructions import validate  # noqa: PLC0415 - fast --help
    from qstr.constructions.attention import lemma11_nbytes  # noqa: PLC0415 - fast --help
    from qstr.constructions.codes import rs_hadamard_dim  # noqa: PLC0415 - fast --help

    D = args.d + (args.q + 1) * rs_hadamard_dim(args.N)
    validate.fits_in_memory(
        f"construct transformer (tokens of width {D}, {args.q} heads, a width-{args.width} net)",
        lemma11_nbytes(D, args.q, args.width),
        "cpu",
    )


def _construct_rnn(args, console: Console) -> int:
    from qstr.bounds.transition import teacher_rnn  # noqa: PLC0415 - fast --help
    from qstr.constructions.recurrent import rnn_state  # noqa: PLC0415 - fast --help

    if args.link != "teacher":
        raise ValueError(f"--link: construct rnn builds the teacher link only, got {args.link!r}")
    if args.n is not None:
        raise ValueError(
            "--n applies to construct transformer only (the RNN's r_x follows from d and N)"
        )
    eps = 0.1 if args.eps is None else args.eps
    cons = teacher_rnn(args.N, args.d, args.q, eps=eps, seed=args.seed, width=args.width)
    state = rnn_state(cons)
    state["config"] = dict(
        state["config"], link="teacher", width=args.width, seed=args.seed, eps_target=eps
    )
    state["link_params"] = _net_params(cons.g_net)
    save_torch(args.out, state)
    cfg = state["config"]
    console.print(
        f"Prop 28 RNN: N = {cfg['N']}, d = {cfg['d']}, q = {cfg['q']}, d_e = {cfg['d_e']}, "
        f"certified eps = {cfg['eps']:.3g}, r_x = {cfg['r_x']:.3f}, r_h = {cfg['r_h']:.3f}; "
        f"wrote {args.out}"
    )
    return 0


def _summarize(args, console: Console) -> int:
    from qstr.verify.experiments import summarize_rows  # noqa: PLC0415 - fast --help

    stem = summarize_rows(args.figure, args.rows, stem=args.stem)
    console.print(f"wrote {stem}-summary.json, {stem}.png and {stem}.pdf")
    return 0


def _reproduce(args, console: Console) -> int:
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


def _run(args, console: Console) -> int:
    """The command, with Ctrl-C caught by :func:`_on_sigint`
    (the caller's handler restored after)."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _on_sigint) if main_thread else None
    previous_term = signal.signal(signal.SIGTERM, _on_sigint) if main_thread else None
    hook = sys.unraisablehook
    sys.unraisablehook = lambda u: (
        None if issubclass(u.exc_type, KeyboardInterrupt) else hook(u)
    )  # no gc traceback
    _INTERRUPTED.clear()
    _TERMINATED.clear()
    try:
        status = COMMANDS[args.command](args, console)
        if _INTERRUPTED.is_set():
            raise KeyboardInterrupt
        return status
    finally:
        sys.unraisablehook = hook
        if main_thread:
            signal.signal(signal.SIGINT, previous)
            signal.signal(signal.SIGTERM, previous_term)


def _out_of_memory(exc: BaseException) -> Optional[str]:
    """What failed, when ``exc`` is an allocation failure (Python's, torch's CPU or CUDA allocator),
    else None."""
    text = str(exc)
    if not (
        isinstance(exc, MemoryError)
        or type(exc).__name__ == "OutOfMemoryError"
        or "can't allocate memory" in text
    ):
        return None
    asked = re.search(r"allocate (\d+) bytes", text)
    if asked is None:
        return "out of memory"
    return f"out of memory: an allocation of {int(asked.group(1)) / 2**30:.3g} GiB failed"


COMMANDS = {
    "verify": _verify,
    "codebook": _codebook,
    "sample": _sample,
    "construct": _construct,
    "reproduce": _reproduce,
    "summarize": _summarize,
}


def main(argv: Optional[List[str]] = None) -> int:
    keep_freed_memory()  # this process's training steps reuse freed memory (verify/threads.py)
    out = _Stream(sys.stdout)
    # logs and pipes get the full table
    console = Console(file=out) if out.isatty() else Console(file=out, width=160)
    err = Console(file=_Stream(sys.stderr))
    args = None
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            raise UsageError(
                f"a command is required: one of {', '.join(COMMANDS)} (try qstr verify)"
            )
        return _run(args, console)
    except (UsageError, ValueError) as exc:
        err.print(f"qstr: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        return 2
    except (MemoryError, RuntimeError) as exc:  # sizes no up-front estimate caught: still one line
        if not _out_of_memory(exc):
            raise
        err.print(
            f"qstr: error: {_out_of_memory(exc)}; use smaller sizes",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return 2
    except KeyboardInterrupt:
        if getattr(args, "interrupted", None):  # verify: what finished
            note = args.interrupted
        elif getattr(args, "command", None) in ("codebook", "sample", "construct"):
            note = "nothing was written (files are written whole, at the end)"
        else:
            resume = (
                " (run the same command to resume)"
                if getattr(args, "command", None) == "reproduce"
                else ""
            )
            note = f"what was written so far is kept{resume}"
        how = "terminated (SIGTERM)" if _TERMINATED.is_set() else "interrupted"
        err.print(f"qstr: {how}; {note}", markup=False, highlight=False, soft_wrap=True)
        return 143 if _TERMINATED.is_set() else 130


if __name__ == "__main__":
    sys.exit(main())
