"""Mutation testing of constructions/ or bounds/ against `qstr verify --profile quick` and tests.

    pip install -e ".[mutation]"
    python mutation/run.py constructions --sample 30 --seed 0     # or: bounds

Method. The committed tree (HEAD; never your working files) is copied under .mutation/<package>/,
cosmic-ray generates every mutant of the package, and a seeded sample of the mutants outside
argument handling is drawn (all of them with --sample 0). Each sampled mutant, one at a time:
1. `qstr verify --profile quick --fail-fast` runs; the mutant is killed by verify when it exits
   non-zero or times out;
2. otherwise the tests selected for the mutated module run (`pytest -x`, mutation/selection.py: the
   files of tests/<package>/ that import the module, and its mirror test_<module>.py); the mutant
   is killed by the tests when they fail or time out, and survives when they pass.
Two scores follow over the mutants run: "verify alone" and "verify or tests", each with its
survivors. With --arguments the sample is drawn from the argument-handling mutants (checks of bad
input, mutation/arguments.py) and the package's whole unit-test suite is the only stage.
Each mutant's row goes to rows.jsonl beside cosmic-ray's session database as soon as it is known;
an interrupted run resumes with the mutants that have no row. docs/mutation.md explains the method
and lists the survivors with the claim that now kills each, or why it is equivalent.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from arguments import is_argument_handling  # mutation/ is the script's directory
from selection import INCOMPETENT, SURVIVED, TESTS, VERIFY, interval, latest, score, select_tests
from selection import tally

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("constructions", "bounds")
EXCLUDED_MODULES = ("validate.py",)  # argument checks: the unit tests' job, not a claim's
# The faults a reviewer plants: an arithmetic operator swapped (+ - * / and ** as a source), a
# comparison flipped, a number changed, a sign dropped, and/or, True/False, not, break/continue.
# Left out: bit, shift, floor-division, modulo and power targets and `is` comparisons (on floats and
# tensors they crash at once or are no fault anyone writes), exception-type and decorator removal.
EXCLUDED_OPERATORS = (
    r"core/ReplaceBinaryOperator_.*_(BitOr|BitAnd|BitXor|LShift|RShift|FloorDiv|Mod|Pow)$",
    r"core/ReplaceBinaryOperator_(BitOr|BitAnd|BitXor|LShift|RShift|FloorDiv|Mod)_",
    r"core/ReplaceComparisonOperator_.*_(Is|IsNot)$",
    r"core/ReplaceComparisonOperator_(Is|IsNot)_",
    r"core/ReplaceUnaryOperator_.*_(Invert|Not)$",
    r"core/ExceptionReplacer",
    r"core/RemoveDecorator",
)
EXCLUDED = re.compile("|".join(f"(?:{e})" for e in EXCLUDED_OPERATORS))
STAGES = {"verify": VERIFY, "tests": TESTS}  # stage -> the outcome when it fails
PYTEST = (sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider")


def _copy_tree(work: Path, shim: bool = True) -> Path:
    """The committed tree (HEAD: edits in progress never reach a mutation run), unpacked to
    work/pristine and copied to work/tree (the copy that is mutated), and a shim so that
    `import qstr` finds the copy."""
    tree = work / "tree"
    (work / "pristine").mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", "HEAD"], cwd=ROOT, check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(work / "pristine")], input=archive.stdout, check=True)
    shutil.copytree(work / "pristine", tree)
    if shim:
        qstr = work / "shim" / "qstr"
        qstr.mkdir(parents=True, exist_ok=True)
        (qstr / "__init__.py").write_text("")
        for pkg in ("constructions", "bounds", "verify"):
            (qstr / pkg).symlink_to(tree / pkg)
    return tree


def _env(work: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(work / "shim"), PYTHONDONTWRITEBYTECODE="1")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _verify_command(only: str = "") -> list:
    """The scored command; ``only`` (claim ids) narrows it to hunt survivors of one module fast,
    never to score."""
    cmd = [sys.executable, "-m", "qstr.verify.cli", "verify", "--profile", "quick", "--fail-fast"]
    return cmd + (["--only", *only.split(",")] if only else [])


def _stages(args, tree: Path, module: str) -> list:
    """(name, command, timeout) run in order on a mutant of ``module`` until one fails."""
    if args.arguments:
        return [("tests", [*PYTEST, f"tests/{args.package}"], args.test_timeout)]
    tests = select_tests(tree / "tests", module)
    stages = [("verify", _verify_command(args.only), args.timeout)]
    return stages + ([("tests", [*PYTEST, *tests], args.test_timeout)] if tests else [])


def _config(work: Path, package: str, module: str, only: str) -> Path:
    """cosmic-ray's configuration: it generates the mutants; run.py runs them (its test-command
    is only recorded)."""
    cfg = work / "config.toml"
    excluded = [str(work / "tree" / package / m) for m in EXCLUDED_MODULES]
    cfg.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{work / "tree" / package / module}"\n'
        "timeout = 300\n"
        f"excluded-modules = {json.dumps(excluded)}\n"
        f'test-command = "{shlex.join(_verify_command(only))}"\n\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    return cfg


def _eligible(item, work: Path, arguments: bool) -> bool:
    """A kept operator, in argument handling (``arguments``) or in the mathematics (otherwise)."""
    m = item.mutations[0]
    if EXCLUDED.match(m.operator_name):
        return False
    source = work / "pristine" / Path(m.module_path).relative_to(work / "tree")
    return is_argument_handling(source, tuple(m.start_pos)) == arguments


def _sample(session: Path, k: int, seed: int, arguments: bool) -> tuple:
    """Keep the eligible mutants (:func:`_eligible`), then a seeded random sample of k of them
    (all when k = 0); the others are recorded as skipped.
    Returns (mutants generated, mutants eligible)."""
    # cosmic-ray is the optional mutation extra: imported only when a session is sampled
    from cosmic_ray.work_db import use_db  # noqa: PLC0415
    from cosmic_ray.work_item import WorkerOutcome, WorkResult  # noqa: PLC0415

    with use_db(str(session)) as db:
        items = sorted(db.work_items, key=lambda item: item.job_id)
        ids = [item.job_id for item in items if _eligible(item, session.parent, arguments)]
        keep = set(random.Random(seed).sample(ids, k)) if 0 < k < len(ids) else set(ids)
        skip = [item.job_id for item in items if item.job_id not in keep]
        if skip:
            db.set_multiple_results(skip, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
        return len(items), len(ids)


def _sampled(session: Path) -> list:
    """The sampled work items (every one not skipped), in job-id order."""
    from cosmic_ray.work_db import use_db  # noqa: PLC0415 - optional (the mutation extra)

    with sqlite3.connect(session) as db:
        skipped = {
            r[0]
            for r in db.execute("SELECT job_id FROM work_results WHERE worker_outcome = 'SKIPPED'")
        }
    with use_db(str(session)) as db:
        items = [item for item in db.work_items if item.job_id not in skipped]
    return sorted(items, key=lambda item: item.job_id)


def _read_rows(path: Path) -> dict:
    """{mutant id: row} from rows.jsonl (the last row of an id wins; a torn line is dropped)."""
    if not path.exists():
        return {}
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return latest(rows)


def _append_row(path: Path, row: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")


def _run(cmd: list, cwd: Path, env: dict, timeout: float) -> tuple:
    """(exit status or None on a timeout, seconds, last lines of output), the whole process group
    killed on a timeout or an interrupt."""
    start = time.time()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except BaseException as e:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        if not isinstance(e, subprocess.TimeoutExpired):
            raise
        rc = None
    tail = out.decode("utf-8", "replace")[-1500:]
    return rc, round(time.time() - start, 1), tail


def _diff(before: str, after: str, module: str) -> str:
    return "\n".join(
        difflib.unified_diff(
            before.split("\n"), after.split("\n"), f"a/{module}", f"b/{module}", lineterm=""
        )
    )


def _operator(mutation):
    import cosmic_ray.plugins  # noqa: PLC0415 - optional (the mutation extra)

    return cosmic_ray.plugins.get_operator(mutation.operator_name)(
        **(getattr(mutation, "operator_args", None) or {})
    )


def _run_mutant(item, args, tree: Path, env: dict) -> dict:
    """Apply one mutant, run the stages on it in order, put the module back; its row."""
    from cosmic_ray.mutating import use_mutation  # noqa: PLC0415 - optional (the mutation extra)

    m = item.mutations[0]
    module = os.path.relpath(m.module_path, tree)
    row = {
        "id": item.job_id,
        "file": module,
        "line": m.start_pos[0],
        "operator": m.operator_name,
        "occurrence": m.occurrence,
        "outcome": SURVIVED,
        "stages": {},
    }
    with use_mutation(m.module_path, _operator(m), m.occurrence) as (before, after):
        if after is None:
            return {**row, "outcome": INCOMPETENT}
        row["diff"] = _diff(before, after, module)
        for name, cmd, timeout in _stages(args, tree, module):
            rc, seconds, tail = _run(cmd, tree, env, timeout)
            row["stages"][name] = {
                "command": shlex.join(cmd[1:]),
                "exit": rc,
                "timeout": rc is None,
                "seconds": seconds,
            }
            if rc != 0:
                row["stages"][name]["tail"] = tail
                return {**row, "outcome": STAGES[name]}
    return row


def _describe(row: dict) -> str:
    seconds = sum(s["seconds"] for s in row["stages"].values())
    timeouts = [k for k, s in row["stages"].items() if s["timeout"]]
    note = f", timeout in {timeouts[0]}" if timeouts else ""
    return f"{_where(row)}: {row['outcome']} ({seconds:.0f} s{note})"


def _exec(args, work: Path, session: Path) -> None:
    """Run every sampled mutant without a row yet, appending each row as soon as it is known."""
    tree, env, path = work / "tree", _env(work), work / "rows.jsonl"
    items, done = _sampled(session), _read_rows(path)
    todo = [item for item in items if item.job_id not in done]
    print(f"{len(items) - len(todo)} of {len(items)} mutants already run", flush=True)
    for i, item in enumerate(todo, len(items) - len(todo) + 1):
        row = _run_mutant(item, args, tree, env)
        _append_row(path, row)
        print(f"  [{i}/{len(items)}] {_describe(row)}", flush=True)


def _baseline_commands(args, tree: Path, modules: set) -> list:
    """The stages' commands that must pass on the unmutated copy: verify, and at once every test
    file a sampled mutant selects (or the package's unit tests with --arguments)."""
    if args.arguments:
        return [[*PYTEST, f"tests/{args.package}"]]
    tests = sorted({f for module in modules for f in select_tests(tree / "tests", module)})
    return [_verify_command(args.only)] + ([[*PYTEST, *tests]] if tests else [])


def _baseline(args, work: Path, session: Path) -> bool:
    tree, env = work / "tree", _env(work)
    modules = {os.path.relpath(i.mutations[0].module_path, tree) for i in _sampled(session)}
    for cmd in _baseline_commands(args, tree, modules):
        rc, seconds, tail = _run(cmd, tree, env, 1800)
        print(f"baseline `{shlex.join(cmd[1:])}`: exit {rc} ({seconds:.0f} s)", flush=True)
        if rc != 0:
            print(
                f"mutation: it fails on the unmutated copy; fix that first\n{tail}", file=sys.stderr
            )
            return False
    return True


def _refresh(work: Path) -> None:
    """Copy the committed tree (HEAD) over the old copy (the same mutant positions need the same
    package source) and forget the rows of the mutants verify did not kill, so they run again."""
    pristine = work / "pristine"
    old = {p.relative_to(pristine): p.read_bytes() for p in pristine.rglob("*.py")}
    shutil.rmtree(pristine)
    shutil.rmtree(work / "tree")
    _copy_tree(work, shim=False)
    changed = [
        str(p)
        for p, b in old.items()
        if p.parts[0] in PACKAGES and (pristine / p).exists() and (pristine / p).read_bytes() != b
    ]
    if changed:
        print(
            f"mutation: note: {', '.join(changed)} changed since the first run; a survivor's "
            f"mutant may now sit elsewhere (cosmic-ray re-applies it by position)",
            file=sys.stderr,
        )
    path = work / "rows.jsonl"
    rows = _read_rows(path)
    keep = [r for r in rows.values() if r["outcome"] in (VERIFY, INCOMPETENT)]
    path.write_text("".join(json.dumps(r) + "\n" for r in keep))
    print(
        f"re-running {len(rows) - len(keep)} survivors of verify against today's claims", flush=True
    )


def _where(row: dict) -> str:
    return f"{row['file']}:{row['line']} {row['operator']} #{row['occurrence']}"


def _report(args, label: str, rows: list) -> dict:
    """Print the scores and the survivors of each; the summary for report.json."""
    t = tally(r["outcome"] for r in rows)
    if args.arguments:
        print(
            f"{label}: the unit tests: {score(t['either'], t['n'])}"
            f" (95% interval +- {interval(t['either'], t['n']):.1f} points)"
        )
    else:
        print(f"{label}: verify alone: {score(t['verify'], t['n'])}")
        print(f"{label}: verify or tests: {score(t['either'], t['n'])}")
    print(f"{label}: incompetent (not scored) {t[INCOMPETENT]}")
    if not args.arguments:
        for r in rows:
            if r["outcome"] in (TESTS, SURVIVED):
                by = "killed by the tests" if r["outcome"] == TESTS else "survived the tests too"
                print(f"  survived verify: {_where(r)} ({by})")
    for r in rows:
        if r["outcome"] == SURVIVED:
            print(f"  survived {'the unit tests' if args.arguments else 'both'}: {_where(r)}")
    return t


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package", choices=PACKAGES)
    ap.add_argument("--sample", type=int, default=40, help="mutants drawn at random (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds of verify per mutant before it counts as killed",
    )
    ap.add_argument(
        "--test-timeout",
        type=float,
        default=180.0,
        help="seconds of the selected tests per mutant before it counts as killed",
    )
    ap.add_argument("--workdir", default=str(ROOT / ".mutation"))
    ap.add_argument(
        "--arguments",
        action="store_true",
        help="draw from the argument-handling mutants (mutation/arguments.py) and run "
        "the package's unit tests on them instead of qstr verify",
    )
    ap.add_argument(
        "--module", default="", help="mutate one module of the package (e.g. recurrent.py)"
    )
    ap.add_argument(
        "--only",
        default="",
        help="run only these claims (comma-separated): a fast hunt for survivors, not a score",
    )
    ap.add_argument(
        "--rerun-survivors",
        action="store_true",
        help="copy today's tree again and run the survivors of verify once more (after new claims)",
    )
    return ap


def _label(args) -> str:
    kind = (
        ("-arguments" if args.arguments else "")
        + (f"-{Path(args.module).stem}" if args.module else "")
        + (f"-only-{args.only.replace(',', '+')}" if args.only else "")
    )
    return f"{args.package}{kind}"


def _init(args, work: Path, session: Path) -> bool:
    """A fresh session: copy the tree, generate and sample the mutants, check the baseline."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _copy_tree(work)
    cfg = _config(work, args.package, args.module, args.only)
    subprocess.run(
        ["cosmic-ray", "init", str(cfg), str(session)],
        cwd=work / "tree",
        env=_env(work),
        check=True,
    )
    total, eligible = _sample(session, args.sample, args.seed, args.arguments)
    where = "in argument handling" if args.arguments else "outside argument handling"
    print(
        f"{args.package}: {total} mutants, {eligible} of the operators kept {where}, "
        f"{min(args.sample, eligible) or eligible} sampled (seed {args.seed})",
        flush=True,
    )
    if _baseline(args, work, session):
        return True
    session.unlink()  # the next run starts afresh
    return False


def main(argv=None) -> int:
    start = time.time()
    args = _parser().parse_args(argv)
    if args.sample < 0:
        print("mutation: --sample must be >= 0", file=sys.stderr)
        return 2
    if args.module and not (ROOT / args.package / args.module).is_file():
        print(f"mutation: no module {args.package}/{args.module}", file=sys.stderr)
        return 2
    label = _label(args)
    work = Path(args.workdir) / f"{label}-seed{args.seed}-sample{args.sample}"
    session = work / "session.sqlite"
    if not session.exists() and not _init(args, work, session):
        return 1
    if args.rerun_survivors:
        _refresh(work)
    # a run killed mid-mutant may have left that mutant on disk
    shutil.copytree(
        work / "pristine" / args.package, work / "tree" / args.package, dirs_exist_ok=True
    )
    _exec(args, work, session)
    rows = sorted(_read_rows(work / "rows.jsonl").values(), key=lambda r: r["id"])
    t = _report(args, label, rows)
    wall = time.time() - start
    report = {
        "package": args.package,
        "arguments": args.arguments,
        "seed": args.seed,
        "sample": args.sample,
        **t,
        "wall_s": round(wall),
        "rows": rows,
    }
    (work / "report.json").write_text(json.dumps(report, indent=1))
    print(f"rows: {work / 'rows.jsonl'}\nreport: {work / 'report.json'}")
    print(f"wall time: {wall:.0f} s ({wall / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
