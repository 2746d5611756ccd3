"""The ``qstr`` command line: ``qstr verify [--profile P] [--device D] [--only ID ...] [--json PATH]``.

Exit status: 0 when every selected claim holds with its falsifier caught, 1 when one does
not, 2 on bad arguments (one line on stderr, no traceback).
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
from typing import List, Optional

from rich.console import Console

from qstr.verify.claims import select
from qstr.verify.registry import PROFILES, Context, run_claim


_INTERRUPTED = threading.Event()


def _on_sigint(signum, frame):
    """Ctrl-C: remember it (a KeyboardInterrupt raised inside a garbage-collector callback is
    swallowed by Python, so loops also check the flag) and interrupt."""
    _INTERRUPTED.set()
    raise KeyboardInterrupt


class UsageError(Exception):
    """Bad command-line arguments: reported in one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit status 2 (not argparse's usage block)
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="qstr", description="Check the claims of the qSTR paper numerically.")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    v = sub.add_parser("verify", help="run the claim checks and print measured vs bound")
    v.add_argument("--profile", default="quick", help=f"one of {', '.join(PROFILES)} (default quick)")
    v.add_argument("--device", default=None, help="cpu or cuda (default: cpu; cuda for --profile gpu)")
    v.add_argument("--only", nargs="+", metavar="ID", help="run only these claim ids")
    v.add_argument("--json", metavar="PATH", help="write the results as a JSON list of records")
    v.add_argument("--seed", default="0", help="seed of every generator (default 0)")
    v.add_argument("--list", action="store_true", help="list the claims of the profile and exit")
    v.add_argument("--threads", type=_int, default=1, help="CPU threads per check (default 1: the checks are many small ops)")
    v.add_argument("--fail-fast", action="store_true", help="stop at the first claim that fails (exit 1); for mutation testing")

    c = sub.add_parser("codebook", help="build a positional codebook (Assumption 3) and report its exact coherence")
    c.add_argument("--N", type=_int, default=None, help="number of positions (required unless --check)")
    c.add_argument("--kind", default="rs-hadamard", help="rs-hadamard (deterministic), rademacher or experimental")
    c.add_argument("--mu", type=float, default=0.5, help="coherence the codebook must meet (default 1/2)")
    c.add_argument("--d-e", dest="d_e", type=_int, default=None, help="code dimension (default: the derived rule)")
    c.add_argument("--delta", type=float, default=1e-3, help="failure probability of the Rademacher rule")
    c.add_argument("--seed", type=_int, default=0)
    c.add_argument("--check", metavar="PATH", help="report the coherence of a saved (N, d_e) tensor instead")
    c.add_argument("--out", metavar="PATH", help="write {'omega', 'mu', 'kind', 'params'} with torch.save")

    s = sub.add_parser("sample", help="sample qSTR prompts (Definition 2) and save them")
    s.add_argument("--N", type=_int, required=True)
    s.add_argument("--d", type=_int, required=True)
    s.add_argument("--q", type=_int, default=1)
    s.add_argument("--B", type=_int, default=16, help="number of prompts")
    s.add_argument("--link", default="linear", help="linear, hermite, sqnorm, mean, mean-projected, teacher")
    s.add_argument("--variant", default="general", help="general or simple")
    s.add_argument("--indices", default="uniform", help="uniform, distinct or few-heads")
    s.add_argument("--tokens", default="gaussian", help="gaussian or half-zero")
    s.add_argument("--dtype", default="float32", help="float32 or float64")
    s.add_argument("--seed", type=_int, default=0)
    s.add_argument("--out", metavar="PATH", required=True, help="write {'x', 't', 'y', 'config'} with torch.save")

    k = sub.add_parser("construct", help="build a construction of the paper as torch weights")
    k.add_argument("architecture", choices=["transformer", "rnn"],
                   help="transformer: the Lemma 11 q-head attention; rnn: the Prop 28 bidirectional RNN (simple-qSTR)")
    k.add_argument("--N", type=_int, required=True)
    k.add_argument("--d", type=_int, required=True)
    k.add_argument("--q", type=_int, required=True)
    k.add_argument("--eps", type=float, default=None,
                   help="target error (transformer: against the Assumption 2 net, default 0.01; rnn: state accuracy, default 0.1)")
    k.add_argument("--link", default="teacher", help="link whose exact Assumption 2 net is used: teacher, linear, mean-projected")
    k.add_argument("--width", type=_int, default=8, help="teacher width m_g")
    k.add_argument("--n", type=_int, default=10_000, help="sample size in Lemma 12's token radius r_x")
    k.add_argument("--seed", type=_int, default=0)
    k.add_argument("--out", metavar="PATH", required=True, help="torch file readable with torch.load(PATH, weights_only=True)")

    r = sub.add_parser("reproduce", help="reproduce a figure of the paper (Appendix E), resumable")
    r.add_argument("figure", choices=["figure1", "figure2", "figure3"])
    r.add_argument("--quick", action="store_true", help="scaled down: minutes on 2 CPU cores")
    r.add_argument("--device", default="cpu", help="cpu or cuda")
    r.add_argument("--seeds", type=_int, default=None, help="number of seeds (default 5; 2 with --quick)")
    r.add_argument("--protocol", default="paper", help="paper (default) or published (the published code's choices)")
    r.add_argument("--out", metavar="DIR", required=True, help="results directory (JSON lines, PNG, PDF, summary)")
    r.add_argument("--jobs", type=_int, default=None,
                   help="stacks trained at once in worker processes (default: every CPU core on cpu, 1 on cuda)")
    r.add_argument("--matmul", default="float32", choices=["float32", "tf32"],
                   help="float32 (default) or tf32: matrix products on TF32 tensor cores (cuda only; faster)")
    r.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run the stacks on the running Dask cluster at ADDRESS (tcp://HOST:PORT) instead of "
                        "local worker processes; --jobs is then ignored (docs/cluster.md)")
    return p


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _writable_file(flag: str, path: Optional[str]) -> None:
    """A file we will write later: its folder must exist and take a new file, and it is no folder."""
    if path is None:
        return
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a directory; give a file path")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"{flag} {path}: the folder {folder} does not exist")
    _writable_dir(flag, folder, path)


def _writable_dir(flag: str, folder: str, shown: Optional[str] = None) -> None:
    """``folder`` (created when missing, as the runs do) must be a directory that takes a new file."""
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
        raise ValueError(f"{flag} {shown}: cannot write in {probe_in} ({exc.strerror or exc})") from None


def _context(args) -> Context:
    import torch

    if args.profile not in PROFILES:
        raise ValueError(f"--profile must be one of {', '.join(PROFILES)}, got {args.profile!r}")
    device = args.device or ("cuda" if args.profile == "gpu" else "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"--device must be cpu or cuda, got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: CUDA is not available on this machine (use --device cpu)")
    try:
        seed = int(args.seed)
    except ValueError:
        raise ValueError(f"--seed must be a non-negative integer, got {args.seed!r}") from None
    if seed < 0:
        raise ValueError(f"--seed must be a non-negative integer, got {seed}")
    if args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    return Context(profile=args.profile, device=device, seed=seed, threads=args.threads)


def _verify(args, console: Console) -> int:
    ctx = _context(args)
    _writable_file("--json", args.json)
    claims = select(ctx.profile, args.only)
    if args.list:
        for c in claims:
            console.print(f"{c.id:28s} {c.ref_seed:20s} {c.statement}")
        return 0
    from qstr.verify.report import print_report, write_json

    results = []
    with console.status("") as status:
        for i, c in enumerate(claims, 1):
            if _INTERRUPTED.is_set():
                raise KeyboardInterrupt
            status.update(f"[{i}/{len(claims)}] checking {c.id} ...")
            results.append(run_claim(c, ctx))
            if args.json:  # written as we go: an interrupted run keeps what it measured
                write_json(results, args.json)
            if args.fail_fast and not results[-1].passed:
                break
    print_report(results, console, title=f"qstr verify - profile {ctx.profile}, seed {ctx.seed}")
    if len(results) < len(claims):
        console.print(f"--fail-fast: stopped after {results[-1].id} failed; {len(claims) - len(results)} claims not run")
    return 0 if all(r.passed for r in results) else 1


def _codebook(args, console: Console) -> int:
    import torch

    from qstr.constructions.codes import Codebook, build_codebook, coherence_report

    _writable_file("--out", args.out)
    if args.check:
        book = Codebook.from_tensor(_load_tensor(args.check))
        if args.N is not None and args.N != book.N:
            raise ValueError(f"--N {args.N} does not match {args.check}, which holds {book.N} codes (omit --N with --check)")
    else:
        if args.N is None:
            raise ValueError("--N is required to build a codebook (or give --check PATH)")
        gen = torch.Generator().manual_seed(args.seed)
        book = build_codebook(args.N, kind=args.kind, mu_max=args.mu, d_e=args.d_e, delta=args.delta, generator=gen)
    rep = coherence_report(book.omega, args.mu)
    verdict = "meets" if rep.mu <= args.mu else "VIOLATES"
    console.print(
        f"{book.kind}: N = {book.N}, d_e = {book.d_e}, exact coherence mu = {rep.mu:.6f} "
        f"(pair {rep.pair}); {rep.n_violations} of {rep.n_pairs} pairs exceed {args.mu:g}: "
        f"{verdict} the coherence bound {args.mu:g}" + (" of Assumption 3" if args.mu == 0.5 else "")
    )
    if args.out:
        torch.save({"omega": book.omega, "mu": rep.mu, "kind": book.kind, "params": dict(book.params)}, args.out)
    return 0 if rep.mu <= args.mu else 1


def _load_tensor(path: str):
    import torch

    try:
        obj = torch.load(path, weights_only=True)
    except Exception as exc:  # OSError, UnpicklingError, EOFError, KeyError ...: any unreadable file
        text = str(exc).strip()
        reason = text.splitlines()[0].split(". ")[0][:120] if text else "empty or truncated file"
        raise ValueError(f"--check: {path} is not a torch file holding a tensor ({type(exc).__name__}: {reason})") from None
    if isinstance(obj, dict) and "omega" in obj:
        obj = obj["omega"]
    if not isinstance(obj, torch.Tensor):
        raise ValueError(f"--check: {path} holds {type(obj).__name__}, not a tensor or a dict with 'omega'")
    return obj


def _sample(args, console: Console) -> int:
    import torch

    from qstr.constructions.links import make_link
    from qstr.constructions.task import QSTR

    _writable_file("--out", args.out)
    gen = torch.Generator().manual_seed(args.seed)
    task = QSTR(N=args.N, d=args.d, link=make_link(args.link, args.q, args.d, generator=gen),
                variant=args.variant, indices=args.indices, tokens=args.tokens)
    p = task.sample(args.B, generator=gen, dtype=args.dtype)
    config = {k: getattr(args, k) for k in ("N", "d", "q", "B", "link", "variant", "indices", "tokens", "dtype", "seed")}
    torch.save({"x": p.x, "t": p.t, "y": p.y, "config": config}, args.out)
    console.print(f"wrote {args.B} prompts (x {tuple(p.x.shape)}, t {tuple(p.t.shape)}, y {tuple(p.y.shape)}) to {args.out}")
    return 0


def _construct(args, console: Console) -> int:
    _writable_file("--out", args.out)
    if args.architecture == "rnn":
        return _construct_rnn(args, console)
    import torch

    from qstr.bounds.attention import lemma11, lemma12_radius
    from qstr.constructions.export import construction_state
    from qstr.constructions.links import make_link

    if args.link not in ("teacher", "linear", "mean-projected"):
        raise ValueError(f"--link must be teacher, linear or mean-projected (links with an exact two-layer net), got {args.link!r}")
    gen = torch.Generator().manual_seed(args.seed)
    link = make_link(args.link, args.q, args.d, generator=gen, width=args.width)
    r_x = lemma12_radius(args.d, n=args.n, N=args.N)
    cons = lemma11(args.N, args.d, args.q, link.two_layer_net(), eps=0.01 if args.eps is None else args.eps, r_x=r_x)
    state = construction_state(cons)
    state["config"] = dict(state["config"], link=args.link, seed=args.seed, n=args.n)
    torch.save(state, args.out)
    g = cons.guarantee
    console.print(f"Lemma 11: N = {args.N}, d = {args.d}, q = {args.q}, d_e = {cons.codebook.d_e}, mu = {g.mu:.4f}, "
                  f"r_x = {g.r_x:.3f}, alpha = {g.alpha:.3f}, error bound = {g.error_bound:.3g}; wrote {args.out}")
    return 0


def _construct_rnn(args, console: Console) -> int:
    import torch

    from qstr.constructions.recurrent import build_rnn_for_cli

    cons, state = build_rnn_for_cli(args.N, args.d, args.q, eps=0.1 if args.eps is None else args.eps, seed=args.seed)
    torch.save(state, args.out)
    cfg = state["config"]
    console.print(f"Prop 28 RNN: N = {cfg['N']}, d = {cfg['d']}, q = {cfg['q']}, d_e = {cfg['d_e']}, "
                  f"certified eps = {cfg['eps']:.3g}, r_x = {cfg['r_x']:.3f}, r_h = {cfg['r_h']:.3f}; wrote {args.out}")
    return 0


def _reproduce(args, console: Console) -> int:
    import torch

    from qstr.verify.experiments import run_experiment

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: CUDA is not available on this machine (use --device cpu)")
    if args.seeds is not None and args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out {args.out} is a file; give a results directory")
    _writable_dir("--out", args.out)
    from qstr.verify.experiments.cluster import check_scheduler, using_scheduler

    if args.scheduler is not None:
        check_scheduler(args.scheduler)
    with using_scheduler(args.scheduler):
        rows = run_experiment(args.figure, out_dir=args.out, quick=args.quick, device=args.device, seeds=args.seeds,
                              protocol=args.protocol, jobs=args.jobs, matmul=args.matmul)
    console.print(f"{args.figure}: {len(rows)} rows in {args.out}")
    return 0


def _run(args, console: Console) -> int:
    """The command, with Ctrl-C caught by :func:`_on_sigint` (the caller's handler restored after)."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _on_sigint) if main_thread else None
    hook = sys.unraisablehook
    sys.unraisablehook = lambda u: None if issubclass(u.exc_type, KeyboardInterrupt) else hook(u)  # no gc traceback
    _INTERRUPTED.clear()
    try:
        status = COMMANDS[args.command](args, console)
        if _INTERRUPTED.is_set():
            raise KeyboardInterrupt
        return status
    finally:
        sys.unraisablehook = hook
        if main_thread:
            signal.signal(signal.SIGINT, previous)


COMMANDS = {"verify": _verify, "codebook": _codebook, "sample": _sample, "construct": _construct, "reproduce": _reproduce}


def main(argv: Optional[List[str]] = None) -> int:
    console = Console() if sys.stdout.isatty() else Console(width=160)  # logs and pipes get the full table
    err = Console(stderr=True)
    args = None
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            raise UsageError(f"a command is required: one of {', '.join(COMMANDS)} (try qstr verify)")
        return _run(args, console)
    except (UsageError, ValueError) as exc:
        err.print(f"qstr: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        resume = " (run the same command to resume)" if getattr(args, "command", None) == "reproduce" else ""
        err.print(f"qstr: interrupted; what was written so far is kept{resume}", markup=False, highlight=False,
                  soft_wrap=True)
        return 130


if __name__ == "__main__":
    sys.exit(main())
