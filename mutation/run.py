"""Mutation testing of constructions/ or bounds/ against `qstr verify --profile quick`, with cosmic-ray.

    pip install -e ".[mutation]"
    python mutation/run.py constructions --sample 40 --seed 0     # or: bounds

Mutates a copy of the committed tree (HEAD; never your working files) under .mutation/<package>/, draws a seeded
sample of the mutants outside argument handling (all of them with --sample 0), runs `qstr verify --profile quick
--fail-fast` on each (a mutant is killed when the run exits non-zero or times out), and prints the score and every
survivor. With --arguments it draws from the argument-handling mutants (checks of bad input, classified by syntax
in mutation/arguments.py) and runs the package's unit tests on them instead.
Interrupted runs resume where they stopped (cosmic-ray's session database). docs/mutation.md explains the
method and lists the survivors with the claim that now kills each, or why it is equivalent.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from arguments import is_argument_handling  # mutation/ is the script's directory

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("constructions", "bounds")
EXCLUDED_MODULES = ("validate.py",)  # argument checks: the unit tests' job, not a claim's
# The faults a reviewer plants: an arithmetic operator swapped (+ - * / and ** as a source), a comparison
# flipped, a number changed, a sign dropped, and/or, True/False, not, break/continue. Left out: bit, shift,
# floor-division, modulo and power targets and `is` comparisons (on floats and tensors they crash at once or
# are no fault anyone writes), exception-type and decorator removal.
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


def _copy_tree(work: Path, shim: bool = True) -> Path:
    """The committed tree (HEAD: edits in progress never reach a mutation run), unpacked to work/pristine
    and copied to work/tree (the copy cosmic-ray mutates), and a shim so `import qstr` finds the copy."""
    tree = work / "tree"
    (work / "pristine").mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT, check=True, capture_output=True)
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


def _verify_command(only: str = "") -> str:
    """The scored command; ``only`` (claim ids) narrows it to hunt survivors of one module fast, never to score."""
    return f"{sys.executable} -m qstr.verify.cli verify --profile quick --fail-fast" + (f" --only {only.replace(',', ' ')}" if only else "")


def _unit_test_command(package: str) -> str:
    """The package's unit tests: what owns argument handling (tests mirror the packages)."""
    return f"{sys.executable} -m pytest -x -q -p no:cacheprovider tests/{package}"


def _config(work: Path, package: str, timeout: float, arguments: bool, module: str, only: str) -> Path:
    cfg = work / "config.toml"
    cmd = _unit_test_command(package) if arguments else _verify_command(only)
    cfg.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{work / "tree" / package / module}"\n'
        f"timeout = {timeout}\n"
        f"excluded-modules = {json.dumps([str(work / 'tree' / package / m) for m in EXCLUDED_MODULES])}\n"
        f'test-command = "{cmd}"\n\n'
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
    """Keep the eligible mutants (:func:`_eligible`), then a seeded random sample of k of them (all when k = 0);
    the others are recorded as skipped. Returns (mutants generated, mutants eligible)."""
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session)) as db:
        items = sorted(db.work_items, key=lambda item: item.job_id)
        ids = [item.job_id for item in items if _eligible(item, session.parent, arguments)]
        keep = set(random.Random(seed).sample(ids, k)) if 0 < k < len(ids) else set(ids)
        skip = [item.job_id for item in items if item.job_id not in keep]
        if skip:
            db.set_multiple_results(skip, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
        return len(items), len(ids)


def _tally(session: Path) -> dict:
    """Counts and the survivors (file, line, operator) of the sampled mutants run so far."""
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    out = {"killed": 0, "survived": 0, "incompetent": 0, "pending": 0, "survivors": []}
    with use_db(str(session)) as db:
        out["pending"] = len(db.pending_work_items)
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            if result.test_outcome == TestOutcome.SURVIVED:
                m = item.mutations[0]
                out["survived"] += 1
                out["survivors"].append({"file": os.path.relpath(m.module_path, session.parent / "tree"),
                                         "line": m.start_pos[0], "operator": m.operator_name,
                                         "occurrence": m.occurrence, "diff": result.diff})
            elif result.test_outcome == TestOutcome.KILLED:
                out["killed"] += 1
            else:
                out["incompetent"] += 1
    return out


def _refresh(work: Path, session: Path) -> None:
    """Copy the committed tree (HEAD) over the old copy (same mutant positions need the same package source)
    and forget the survivors' results, so that exec runs them again."""
    pristine = work / "pristine"
    old = {p.relative_to(pristine): p.read_bytes() for p in pristine.rglob("*.py")}
    shutil.rmtree(pristine)
    shutil.rmtree(work / "tree")
    _copy_tree(work, shim=False)
    changed = [str(p) for p, b in old.items() if p.parts[0] in PACKAGES and (pristine / p).exists()
               and (pristine / p).read_bytes() != b]
    if changed:
        print(f"mutation: note: {', '.join(changed)} changed since the first run; a survivor's mutant may now sit "
              f"elsewhere (cosmic-ray re-applies it by position)", file=sys.stderr)
    with sqlite3.connect(session) as db:
        n = db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'").rowcount
    print(f"re-running {n} survivors against today's claims", flush=True)


def _counts(session: Path) -> dict:
    """{test outcome: count} of the mutants run so far (one SQL query: cheap enough to poll)."""
    with sqlite3.connect(session) as db:
        rows = db.execute("SELECT test_outcome, count(*) FROM work_results WHERE worker_outcome != 'SKIPPED' "
                          "GROUP BY test_outcome").fetchall()
    return {str(k).lower(): n for k, n in rows}


def _progress(session: Path, total: int, stop: threading.Event) -> None:
    start = time.time()
    while not stop.wait(30):
        c = _counts(session)
        print(f"  {sum(c.values())}/{total} mutants run, {c.get('killed', 0)} killed, {c.get('survived', 0)} "
              f"survived ({time.time() - start:.0f} s)", flush=True)


def _score(t: dict) -> str:
    n = t["killed"] + t["survived"]
    if n == 0:
        return "no mutant run yet"
    p = t["killed"] / n
    half = 1.96 * math.sqrt(max(p * (1 - p), 1e-12) / n)
    return f"{t['killed']}/{n} killed = {100 * p:.1f}% (95% interval +- {100 * half:.1f} points)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package", choices=PACKAGES)
    ap.add_argument("--sample", type=int, default=40, help="mutants drawn at random (0: all of them)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant before it counts as killed")
    ap.add_argument("--workdir", default=str(ROOT / ".mutation"))
    ap.add_argument("--arguments", action="store_true",
                    help="draw from the argument-handling mutants (mutation/arguments.py) and run the package's unit "
                         "tests on them instead of qstr verify")
    ap.add_argument("--module", default="", help="mutate one module of the package (e.g. recurrent.py)")
    ap.add_argument("--only", default="", help="run only these claims (comma-separated): a fast hunt for "
                                               "survivors, not a score")
    ap.add_argument("--rerun-survivors", action="store_true",
                    help="copy today's tree again and run the survivors of an earlier run once more (after new claims)")
    args = ap.parse_args(argv)
    if args.sample < 0:
        print("mutation: --sample must be >= 0", file=sys.stderr)
        return 2
    kind = ("-arguments" if args.arguments else "") + (f"-{Path(args.module).stem}" if args.module else "") \
        + (f"-only-{args.only.replace(',', '+')}" if args.only else "")
    work = Path(args.workdir) / f"{args.package}{kind}-seed{args.seed}-sample{args.sample}"
    session = work / "session.sqlite"
    fresh = not session.exists()
    if fresh:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        _copy_tree(work)
    if args.module and not (ROOT / args.package / args.module).is_file():
        print(f"mutation: no module {args.package}/{args.module}", file=sys.stderr)
        return 2
    cfg = _config(work, args.package, args.timeout, args.arguments, args.module, args.only)
    env, tree = _env(work), work / "tree"
    if args.rerun_survivors and not fresh:
        _refresh(work, session)
    # a run killed mid-mutant may have left that mutant on disk
    shutil.copytree(work / "pristine" / args.package, tree / args.package, dirs_exist_ok=True)
    if fresh:
        command = _unit_test_command(args.package) if args.arguments else _verify_command(args.only)
        base = subprocess.run(shlex.split(command),
                              cwd=tree, env=env, capture_output=True, text=True)
        if base.returncode != 0:
            print(f"mutation: `{command}` fails on the unmutated copy; fix that first", file=sys.stderr)
            return 1
        subprocess.run(["cosmic-ray", "init", str(cfg), str(session)], cwd=tree, env=env, check=True)
        total, eligible = _sample(session, args.sample, args.seed, args.arguments)
        where = "in argument handling" if args.arguments else "outside argument handling"
        print(f"{args.package}: {total} mutants, {eligible} of the operators kept {where}, "
              f"{min(args.sample, eligible) or eligible} sampled (seed {args.seed})", flush=True)
    with sqlite3.connect(session) as db:
        skipped = db.execute("SELECT count(*) FROM work_results WHERE worker_outcome = 'SKIPPED'").fetchone()[0]
        todo = db.execute("SELECT count(*) FROM work_items").fetchone()[0] - skipped
    stop = threading.Event()
    threading.Thread(target=_progress, args=(session, todo, stop), daemon=True).start()
    try:
        subprocess.run(["cosmic-ray", "exec", str(cfg), str(session)], cwd=tree, env=env, check=True)
    finally:
        stop.set()
    t = _tally(session)
    (work / "report.json").write_text(json.dumps({"package": args.package, "arguments": args.arguments, "seed": args.seed,
                                                  "sample": args.sample, **t}, indent=1))
    tests = "the unit tests" if args.arguments else "qstr verify"
    print(f"{args.package}{kind}: {tests}: {_score(t)}; incompetent {t['incompetent']}")
    for s in t["survivors"]:
        print(f"  survived: {s['file']}:{s['line']} {s['operator']} #{s['occurrence']}")
    print(f"report: {work / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
