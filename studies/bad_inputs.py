"""Bad inputs to every `qstr` option, each run as its own process: its exit status, its stderr
lines and whether a traceback escaped. The census of issue 42 (docs/commands.md): a bad input
must give exit status 2 and one line on stderr, never a traceback or a long run.

    python studies/bad_inputs.py [--jobs 2] [--timeout 60] [--out rows.jsonl]

Each option of each command gets the values that are invalid for its kind (sizes, seeds,
positive numbers, fractions in (0, 1), names, paths) on top of a valid, fast command line;
the cases of issue 42's report are added by hand. Then bad arguments to the Python API, in this
process, each of which must raise one ValueError line. Prints one line per case that breaks the
rule and a count by outcome; ``--out`` writes every case as a JSON line.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HUGE = "9" * 23
BAD = {
    "_count": ["0", "-1", "1.5", "abc", "", "1e400", HUGE, "nan"],
    "_seed": ["-1", "1.5", "abc", "", str(2**64), "nan"],
    "_positive": ["0", "-1", "abc", "", "nan", "inf", "1e-400"],
    "_fraction": ["0", "1", "-0.5", "1.5", "abc", "", "nan", "1e-300"],
    "_float": ["-1", "abc", "", "nan", "inf"],
    "name": ["bogus", ""],
}
# a valid, fast command line per command; {tmp} is a fresh folder per case
BASE = {
    "verify": ["verify", "--only", "data-model"],
    "codebook": ["codebook", "--N", "16"],
    "sample": ["sample", "--N", "4", "--d", "3", "--out", "{tmp}/s.pt"],
    "construct": ["construct", "transformer", "--N", "8", "--d", "3", "--q", "2"]
    + ["--out", "{tmp}/t.pt"],
    "reproduce": ["reproduce", "figure2", "--quick", "--out", "{tmp}/r"],
    "summarize": ["summarize", "figure1", "{tmp}/rows.jsonl"],
}
NAMED = {  # string options whose values are names
    "--profile",
    "--device",
    "--kind",
    "--link",
    "--variant",
    "--indices",
    "--tokens",
    "--dtype",
    "--protocol",
    "--matmul",
    "--only",
}
PATHS = {"--json", "--out", "--check", "--claims", "--stem"}
LONG = "x" * 300
BAD_PATHS = ["{tmp}/no/such/folder/f", f"{{tmp}}/{LONG}", "{tmp}", "/proc/version", ""]
BY_HAND = [  # issue 42's report, each as it was run
    ["codebook", "--N", "16", "--kind", "rademacher", "--mu", "1e-300"],
    ["codebook", "--N", "16", "--kind", "rademacher", "--mu", "1e-10"],
    ["codebook", "--N", "16", "--kind", "rademacher", "--mu", "1e-160"],
    ["codebook", "--N", "16", "--kind", "rademacher", "--mu", "1e-4"],
    ["sample", "--N", "4", "--d", HUGE, "--out", "{tmp}/s.pt"],
    ["sample", "--N", "4", "--d", str(2**63 - 1), "--out", "{tmp}/s.pt"],
    ["sample", "--N", "4", "--d", "3", "--q", HUGE, "--out", "{tmp}/s.pt"],
    ["reproduce", "figure2", "--quick", "--out", f"{{tmp}}/{LONG}"],
    ["reproduce", "figure2", "--quick", "--out", "{tmp}/jdir", "--jobs", "1"],  # rows: a folder
    ["reproduce", "figure1", "--quick", "--scheduler", "tls://127.0.0.1:1", "--out", "{tmp}/r"],
    ["reproduce", "figure2", "--quick", "--seeds", "1000000", "--out", "{tmp}/r"],
    ["verify", "--list", "--json", "{tmp}/l.json"],
    ["sample", "--N", "4", "--d", "3", "--dtype", "torch.float65", "--out", "{tmp}/s.pt"],
    ["codebook", "--N", "16", "--mu", "0.9999999", "--kind", "rademacher", "--d-e", "1"],
]


def cases(parser: argparse.ArgumentParser):
    """(command line, option, value) for every bad value of every option, then BY_HAND."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sp in sub.choices.items():
        for action in sp._actions:
            opt = action.option_strings[-1] if action.option_strings else None
            if opt in (None, "--help") or action.nargs == 0:
                continue
            kind = getattr(action.type, "__name__", None)
            values = (
                BAD.get(kind)
                or (BAD["name"] if opt in NAMED else None)
                or (BAD_PATHS if opt in PATHS else ["bogus"])
            )
            for value in values:
                argv = _with(BASE[name], opt, value)
                yield argv, opt, value
    for argv in BY_HAND:
        yield argv, "by hand", None


def _with(base, opt, value):
    """``base`` with ``opt`` set to ``value`` (replaced where ``base`` has it)."""
    argv = list(base)
    if opt in argv:
        argv[argv.index(opt) + 1] = value
        return argv
    return argv + [opt, value]


def run(case, timeout: float) -> dict:
    argv, opt, value = case
    with tempfile.TemporaryDirectory(prefix="qstr-bad-") as tmp:
        os.makedirs(os.path.join(tmp, "jdir", "figure2.jsonl"))
        with open(os.path.join(tmp, "rows.jsonl"), "w") as fh:
            fh.write('{"figure": "figure1", "protocol": "paper"}\n')
        line = [a.replace("{tmp}", tmp) for a in argv]
        try:
            p = subprocess.run(
                [sys.executable, "-m", "qstr.verify.cli", *line],
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=tmp,
            )
            status, err = p.returncode, p.stderr
        except subprocess.TimeoutExpired as exc:
            status, err = "timeout", (exc.stderr or b"").decode(errors="replace")
    lines = [x for x in err.splitlines() if x.strip()]
    return {
        "argv": " ".join(argv),
        "option": opt,
        "value": value,
        "status": status,
        "stderr_lines": len(lines),
        "traceback": "Traceback" in err,
        "said": lines[-1][:160] if lines else "",
    }


def verdict(row: dict) -> str:
    """'bad input: one line' (the rule), 'accepted' (exit 0 or 1), or what broke the rule."""
    if row["traceback"]:
        return "traceback"
    if row["status"] == "timeout":
        return "ran past the timeout"
    if row["status"] == 2:
        return "bad input: one line" if row["stderr_lines"] == 1 else "bad input: several lines"
    if row["status"] in (0, 1):
        return "accepted"
    return f"exit {row['status']}"


def api_cases(tmp: str):
    """(name, call) for bad arguments to the Python API: each must raise one ValueError line."""
    import torch  # noqa: PLC0415 - the API cases only

    from qstr.bounds.transformer import Theorem4Params, theorem4_bound  # noqa: PLC0415
    from qstr.bounds.codebooks import rademacher_dim  # noqa: PLC0415
    from qstr.constructions.codes import Codebook, build_codebook  # noqa: PLC0415
    from qstr.verify.experiments import Execution, run_experiment  # noqa: PLC0415

    def reproduce(name="figure1", **kw):
        ex = Execution(progress=False, jobs=1)
        return lambda: run_experiment(name, out_dir=kw.pop("out_dir", tmp), execution=ex, **kw)

    quick = dict(quick=True)
    yield "seeds='12'", reproduce(seeds="12", **quick)
    yield "seeds=[1.7]", reproduce(seeds=[1.7], **quick)
    yield "seeds=[2**70]", reproduce(seeds=[2**70], **quick)
    yield "seeds=[0, 0]", reproduce(seeds=[0, 0], **quick)
    yield "seeds=10**6", reproduce(seeds=10**6, **quick)
    for key, value in (("lr", float("nan")), ("n_test", 0), ("threshold", -1.0)):
        yield f"overrides {key}={value}", reproduce(overrides={key: value}, **quick)
    yield "overrides max_steps=2.5", reproduce(overrides={"max_steps": 2.5}, **quick)
    yield "overrides bogus=1", reproduce(overrides={"bogus": 1}, **quick)
    for key in ("N", "epochs", "n_train"):
        yield f"figure2 {key}=0", reproduce("figure2", **{key: 0})
    yield "out_dir=None", reproduce(out_dir=None, **quick)
    yield "figure4", reproduce("figure4")
    yield "protocol='papr'", reproduce(protocol="papr", **quick)
    yield (
        "Execution(jobs=0)",
        lambda: run_experiment(
            "figure1", out_dir=tmp, quick=True, execution=Execution(jobs=0, progress=False)
        ),
    )
    yield (
        "Execution(device='tpu')",
        lambda: run_experiment(
            "figure1", out_dir=tmp, quick=True, execution=Execution(device="tpu", progress=False)
        ),
    )
    p0 = Theorem4Params.default()
    yield "theorem4_bound(10**400)", lambda: theorem4_bound(10**400, 16, p0)
    yield "theorem4_bound(N=1)", lambda: theorem4_bound(10, 1, p0)
    yield "from_tensor(meta)", lambda: Codebook.from_tensor(torch.eye(4, device="meta"))
    yield "from_tensor(1-d)", lambda: Codebook.from_tensor(torch.ones(4))
    yield (
        "build_codebook(mu_max=1e-300)",
        lambda: build_codebook(16, kind="rademacher", mu_max=1e-300, generator=torch.Generator()),
    )
    yield "rademacher_dim(16, 1e-3, 1e-10)", lambda: rademacher_dim(16, 1e-3, 1e-10)
    yield "build_codebook(kind='x')", lambda: build_codebook(16, kind="x")


def run_api(name: str, call) -> dict:
    try:
        call()
    except ValueError as exc:
        text = str(exc)
        said = "ValueError: one line" if "\n" not in text else "ValueError: several lines"
        return {"case": name, "verdict": said, "said": text[:160]}
    except Exception as exc:  # noqa: BLE001 - the census records whatever escapes
        return {"case": name, "verdict": type(exc).__name__, "said": str(exc)[:160]}
    return {"case": name, "verdict": "accepted", "said": ""}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--out", help="every case as a JSON line")
    args = ap.parse_args()
    from qstr.verify.cli import _parser  # noqa: PLC0415 - the census reads the CLI's own options

    todo = list(cases(_parser()))
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda c: run(c, args.timeout), todo))
    counts = collections.Counter(verdict(r) for r in rows)
    for r in rows:
        if verdict(r) not in ("bad input: one line",):
            print(f"{verdict(r):<24} exit {r['status']}: qstr {r['argv']} -> {r['said']}")
    print(f"{len(rows)} cases: " + ", ".join(f"{n} {k}" for k, n in counts.most_common()))
    with tempfile.TemporaryDirectory(prefix="qstr-bad-api-") as tmp:
        api = [run_api(name, call) for name, call in api_cases(tmp)]
    for r in api:
        if r["verdict"] != "ValueError: one line":
            print(f"{r['verdict']:<24} {r['case']} -> {r['said']}")
    counts = collections.Counter(r["verdict"] for r in api)
    print(f"{len(api)} API cases: " + ", ".join(f"{n} {k}" for k, n in counts.most_common()))
    rows += api
    if args.out:
        with open(args.out, "w") as fh:
            for r in rows:
                fh.write(json.dumps({"verdict": r.get("verdict") or verdict(r), **r}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
