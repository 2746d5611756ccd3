"""Tests for verify/cli/ (one module a command): the qstr commands (verify, codebook, sample,
construct, reproduce), their arguments, output paths and exit codes."""

import argparse
import contextlib
import io
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

import qstr.verify.cli as cli
from qstr.bounds.attention import lemma11
from qstr.bounds.transition import teacher_rnn
from qstr.constructions.codes import Codebook, build_codebook
from qstr.constructions.links import make_link
from qstr.constructions.task import QSTR
from qstr.constructions.validate import seed
from qstr.verify import registry
from qstr.verify.claim import EVIDENCE, Check, Claim, Context, Fault, Ref, Verdict
from qstr.verify.experiments import figure1
from qstr.verify.cli import _PROFILES, SEED_MAX, _parser, _seed, main
from qstr.verify.registry import PROFILES
from qstr.verify.version import toolkit_version
from tests.numbers import assert_close


def test_verify_json(tmp_path, capsys):
    path = tmp_path / "out.json"
    assert main(["verify", "--only", "lemma-40", "data-model", "--json", str(path)]) == 0
    records = json.loads(path.read_text())
    assert [r["id"] for r in records] == ["lemma-40", "data-model"]
    keys = {
        "id",
        "ref_seed",
        "ref_conference",
        "statement",
        "measured",
        "bound",
        "measured_value",
        "bound_value",
        "holds",
        "falsifier_caught",
        "passed",
        "profile",
        "device",
        "dtype",
        "seconds",
        "seed",
        "detail",
        "falsifier",
        "error",
        "checks",
        "faults",
        "env",
        "evidence",
        "vacuity",
        "vacuous",
        "scope",
    }
    check_keys = {
        "name",
        "measured",
        "bound",
        "relation",
        "holds",
        "rounding",
        "detail",
        "dtype",
        "error",
        "seconds",
        "evidence",
        "vacuous",
        "ratio",
        "slack",
        "status",
    }
    for r in records:
        assert set(r) == keys  # exactly the keys docs/formats.md lists
        assert {"qstr-toolkit", "python", "torch", "platform"} <= set(r["env"])
        assert r["holds"] is True and r["falsifier_caught"] is True
        assert r["profile"] == "quick" and r["device"] == "cpu"
        # a certified check adds its enclosures (docs/formats.md)
        balls = {"enclosure", "bound_enclosure", "certified"}
        assert r["checks"] and all(
            set(c) == check_keys | (balls if c["evidence"] == "certified" else set())
            and c["holds"] is True
            for c in r["checks"]
        )
        assert all(c["evidence"] in EVIDENCE for c in r["checks"]) and r["evidence"]
        assert all(
            set(f) == {"name", "breaks", "caught", "checks", "error", "refused"}
            and f["caught"] is True
            and [c["name"] for c in f["checks"]] == f["breaks"]
            for f in r["faults"]
        )
        assert all(c["holds"] is False for f in r["faults"] for c in f["checks"])
        assert all(c["status"] in ("fails", "crashed") for f in r["faults"] for c in f["checks"])
        assert all(c["status"] == "holds" for c in r["checks"])
    out = capsys.readouterr().out
    assert "lemma-40" in out and "2/2 claims hold" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["verify", "--profile", "fast"], "--profile must be one of"),
        (["verify", "--only", "lemma-99"], "unknown claim id"),
        (["verify", "--seed", "-1"], "--seed"),
        (["verify", "--device", "tpu"], "--device"),
        (["verify", "--bogus"], "unrecognized arguments"),
        ([], "a command is required"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_cuda_request_without_cuda(capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    assert main(["verify", "--device", "cuda", "--only", "lemma-40"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_failing_claim_exits_1(monkeypatch, capsys):
    bad = _claim("always-false", holds=False)
    monkeypatch.setitem(registry.REGISTRY, "always-false", bad)
    assert main(["verify", "--only", "always-false"]) == 1
    out = capsys.readouterr().out
    assert "0/1 claims hold" in out and "check one: measured 1, bound <= 0" in out


def _claim(cid: str, holds: bool) -> Claim:
    """A claim with one check (1 <= 0 when it must fail) and one fault that makes it fail."""
    return Claim(
        cid,
        Ref("-"),
        "1 <= bound",
        inputs=lambda ctx: holds,
        checks=[Check("one", lambda inp, ctx: Verdict(1.0, 2.0 if inp else 0.0, inp))],
        faults=[Fault("bound 0", lambda inp, ctx: False, breaks=("one",))],
    )


def test_console_script_module_entry():
    """``python -m verify.cli`` exits 2 on bad input with a single line on stderr."""
    p = subprocess.run(
        [sys.executable, "-m", "qstr.verify.cli", "verify", "--profile", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    assert p.stderr.strip().startswith("qstr: error:") and len(p.stderr.strip().splitlines()) == 1


def test_codebook_command_reports_experimental_violation(capsys, tmp_path):
    out = tmp_path / "book.pt"
    assert main(["codebook", "--N", "100", "--kind", "experimental", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "d_e = 23" in text and "VIOLATES" in text

    saved = torch.load(out, weights_only=True)
    assert saved["omega"].shape == (100, 23) and saved["mu"] > 0.5
    _documented("qstr codebook", saved, config_keys=saved["params"])
    assert main(["codebook", "--check", str(out)]) == 1  # the kind the file records, not "custom"
    assert capsys.readouterr().out.startswith(
        "experimental: N = 100, d_e = 23, exact coherence mu = "
    )


def test_codebook_command_deterministic(capsys):
    assert main(["codebook", "--N", "1000"]) == 0
    text = capsys.readouterr().out
    assert "rs-hadamard" in text and "d_e = 64" in text and "meets" in text


def test_codebook_check_of_saved_tensor(tmp_path, capsys):
    omega = torch.eye(4)
    torch.save(omega, tmp_path / "eye.pt")
    assert main(["codebook", "--N", "4", "--check", str(tmp_path / "eye.pt")]) == 0
    assert "mu = 0.000000" in capsys.readouterr().out
    omega[0, 0] = float("nan")
    torch.save(omega, tmp_path / "nan.pt")
    assert main(["codebook", "--N", "4", "--check", str(tmp_path / "nan.pt")]) == 2
    assert "omega contains NaN" in capsys.readouterr().err


def test_sample_command(tmp_path, capsys):
    path = tmp_path / "p.pt"
    assert (
        main(
            [
                "sample",
                "--N",
                "6",
                "--d",
                "2",
                "--q",
                "2",
                "--B",
                "3",
                "--variant",
                "simple",
                "--link",
                "hermite",
                "--dtype",
                "float64",
                "--out",
                str(path),
            ]
        )
        == 0
    )
    saved = torch.load(path, weights_only=True)
    assert saved["x"].shape == (3, 6, 2) and saved["x"].dtype == torch.float64
    assert (saved["t"] == saved["t"][:, :1]).all()
    assert saved["config"]["link"] == "hermite"
    assert (
        saved["link_params"]["u"].shape == (2, 2)
        and saved["link_params"]["u"].dtype == torch.float64
    )
    _documented("qstr sample", saved, config_keys=saved["config"])


@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            ["sample", "--N", "3", "--d", "2", "--q", "5", "--out", "x.pt"],
            "q must satisfy 1 <= q <= N",
        ),
        (
            ["sample", "--N", "-3", "--d", "2", "--out", "x.pt"],
            "argument --N: must be an integer >= 1, got -3",
        ),
        (
            ["sample", "--N", "4", "--d", "2", "--link", "cubic", "--out", "x.pt"],
            "link must be one of",
        ),
        (["codebook", "--N", "1000", "--kind", "rademacher", "--d-e", "20"], "d_e must be >= 138"),
        (["codebook", "--N", "10", "--kind", "gold"], "kind"),
        (["codebook", "--N", "x"], "expected an integer"),
        (
            ["construct", "transformer", "--N", "4", "--d", "2", "--q", "5", "--out", "x.pt"],
            "q must satisfy",
        ),
        (
            [
                "construct",
                "transformer",
                "--N",
                "8",
                "--d",
                "2",
                "--q",
                "1",
                "--eps",
                "0",
                "--out",
                "x.pt",
            ],
            "eps",
        ),
        (
            [
                "construct",
                "transformer",
                "--N",
                "8",
                "--d",
                "2",
                "--q",
                "1",
                "--link",
                "hermite",
                "--out",
                "x.pt",
            ],
            "--link",
        ),
        (
            ["construct", "lstm", "--N", "8", "--d", "2", "--q", "1", "--out", "x.pt"],
            "invalid choice",
        ),
    ],
)
def test_bad_construction_arguments_exit_2(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_construct_rnn_file(tmp_path, capsys):
    path = tmp_path / "r.pt"
    assert (
        main(
            [
                "construct",
                "rnn",
                "--N",
                "40",
                "--d",
                "2",
                "--q",
                "2",
                "--eps",
                "0.1",
                "--out",
                str(path),
            ]
        )
        == 0
    )
    s = torch.load(path, weights_only=True)
    cfg = s["config"]
    assert (cfg["N"], cfg["d"], cfg["q"]) == (40, 2, 2) and 0 < cfg["eps"] <= 0.1
    assert cfg["r_h"] >= (2**0.5) * cfg["r_x"]  # r_h >= sqrt(q)(r_x + sqrt(d) eps)
    assert s["omega"].shape == (40, cfg["d_e"])
    for key in ("forward_transition", "backward_transition"):
        layers = s[key]
        assert len(layers) == 4 and all("b" in l for l in layers[:3]) and "b" not in layers[3]
        D_in = cfg["q"] * cfg["d"] + cfg["d"] + (cfg["q"] + 1) * cfg["d_e"]  # u = (h, z)
        assert layers[0]["W"].shape[1] == D_in and layers[3]["W"].shape[0] == cfg["q"] * cfg["d"]
        assert (
            float(layers[0]["W"][:, : cfg["q"] * cfg["d"]].abs().max()) == 0.0
        )  # the transition ignores h
    assert (cfg["link"], cfg["width"], cfg["seed"], cfg["eps_target"]) == ("teacher", 8, 0, 0.1)
    assert s["link_params"]["W"].shape == (8, 4)  # the teacher drawn from the seed
    _documented("qstr construct rnn", s, config_keys=cfg)
    assert main(["construct", "rnn", "--N", "3", "--d", "2", "--q", "4", "--out", str(path)]) == 2


def test_construct_transformer_file(tmp_path, capsys):
    path = tmp_path / "t.pt"
    assert (
        main(
            [
                "construct",
                "transformer",
                "--N",
                "32",
                "--d",
                "3",
                "--q",
                "2",
                "--eps",
                "0.01",
                "--out",
                str(path),
            ]
        )
        == 0
    )
    s = torch.load(path, weights_only=True)
    cfg = s["config"]
    assert (
        (cfg["N"], cfg["d"], cfg["q"]) == (32, 3, 2)
        and cfg["alpha"] > 0
        and cfg["c"] == pytest.approx((3 / 2) ** 0.5)
    )
    assert s["omega"].shape == (32, cfg["d_e"])
    D_e = 3 + 3 * cfg["d_e"]
    assert s["W_QK"].shape == (2, D_e, D_e)
    assert set(s["ffn"]) == {"a", "W", "b"} and s["guarantee"]["error_bound"] <= 0.01 + 1e-12
    # score of query i and key j = z_i^T W_QK[h] z_j: only the (slot h, pos) block is nonzero
    W = s["W_QK"][0]
    pos, slot0 = slice(3, 3 + cfg["d_e"]), slice(3 + cfg["d_e"], 3 + 2 * cfg["d_e"])
    assert torch.allclose(W[slot0, pos], cfg["alpha"] * torch.eye(cfg["d_e"], dtype=W.dtype))
    assert float(W.abs().sum()) == pytest.approx(cfg["alpha"] * cfg["d_e"])
    assert "mha_state_dict" in s
    assert (cfg["link"], cfg["width"], cfg["seed"], cfg["n"], cfg["eps_target"]) == (
        "teacher",
        8,
        0,
        10_000,
        0.01,
    )
    assert s["link_params"]["W"].shape == (8, 6)
    _documented("qstr construct transformer", s, config_keys=cfg)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["reproduce", "figure4", "--out", "r"], "invalid choice"),
        (
            ["reproduce", "figure1", "--quick", "--seeds", "0", "--out", "r"],
            "argument --seeds: must be an integer >= 1, got 0",
        ),
        (["reproduce", "figure1", "--quick", "--protocol", "mine", "--out", "r"], "protocol"),
        (
            ["reproduce", "figure1", "--quick", "--weight-decay", "-0.1", "--out", "r"],
            "weight_decay must be >= 0 with lr * weight_decay < 1",
        ),
        (
            ["reproduce", "figure3", "--quick", "--weight-decay", "1e4", "--out", "r"],
            "got 10000.0 at lr 0.0001",
        ),
        (["reproduce", "figure1", "--weight-decay", "inf", "--out", "r"], "finite number"),
    ],
)
def test_reproduce_bad_arguments(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_reproduce_weight_decay_reaches_every_point(monkeypatch, tmp_path):
    """--weight-decay W replaces the protocol's value in every point (so in every point id)."""
    seen = {}

    def run_experiment(name, *, seeds, overrides=None, **_):
        seen["points"] = figure1.points(quick=True, seeds=seeds, overrides=overrides)
        return []

    monkeypatch.setattr("qstr.verify.experiments.run_experiment", run_experiment)
    out = str(tmp_path / "wd")
    assert main(["reproduce", "figure1", "--quick", "--weight-decay", "0.01", "--out", out]) == 0
    assert {p.weight_decay for p in seen["points"]} == {0.01}
    default = {p.point_id for p in figure1.points(quick=True)}
    assert not default & {p.point_id for p in seen["points"]}


def test_reproduce_cuda_without_cuda(capsys, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    assert (
        main(["reproduce", "figure1", "--quick", "--device", "cuda", "--out", str(tmp_path)]) == 2
    )
    assert "CUDA is not available" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["sample", "--N", "10", "--d", "4", "--out", "{missing}/s.pt"], "does not exist"),
        (["sample", "--N", "10", "--d", "4", "--out", "{tmp}"], "is a directory"),
        (
            ["construct", "rnn", "--N", "8", "--d", "2", "--q", "1", "--out", "{missing}/r.pt"],
            "does not exist",
        ),
        (
            [
                "construct",
                "transformer",
                "--N",
                "8",
                "--d",
                "2",
                "--q",
                "1",
                "--out",
                "{missing}/t.pt",
            ],
            "does not exist",
        ),
        (["codebook", "--N", "100", "--out", "{missing}/cb.pt"], "does not exist"),
        (["verify", "--only", "lemma-40", "--json", "{missing}/x.json"], "does not exist"),
        (["reproduce", "figure1", "--quick", "--out", "{file}"], "is a file"),
    ],
)
def test_bad_output_paths_are_refused_before_any_work(argv, needle, tmp_path, capsys, monkeypatch):
    (tmp_path / "f.txt").write_text("x")
    argv = [
        a.format(missing=tmp_path / "no" / "such", tmp=tmp_path, file=tmp_path / "f.txt")
        for a in argv
    ]

    monkeypatch.setattr(
        cli,
        "run_claim",
        lambda *a: pytest.fail("work started before the path was checked"),
        raising=False,
    )
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_unwritable_folder_is_refused(capsys):
    assert main(["reproduce", "figure1", "--quick", "--out", "/proc/qstr-results"]) == 2
    assert "cannot write in /proc" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"\x80\x03garbage bytes", "not a torch file"),
        (b"hello\n", "not a torch file"),
        (b"", "empty or truncated file"),
    ],
)
def test_codebook_check_of_corrupt_files(content, needle, tmp_path, capsys):
    (tmp_path / "bad.pt").write_bytes(content)
    assert main(["codebook", "--check", str(tmp_path / "bad.pt")]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "bad.pt" in err


@pytest.mark.parametrize(
    "write, what",
    [
        (lambda p: p.write_bytes(pickle.dumps({"omega": [1.0, 2.0]})), "a Python pickle that"),
        (lambda p: p.write_text("hello\n"), "a text file"),
        (lambda p: p.write_bytes(bytes(1000)), "all zero bytes"),
    ],
)
def test_codebook_check_of_a_file_it_cannot_read_says_what_it_is_not(write, what, tmp_path, capsys):
    """Issue 52: a pickle printed torch's warning first, a text file said 'KeyError: 101', and
    zeros 'legacy .tar format'."""
    path = tmp_path / "bad.pt"
    write(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["codebook", "--check", str(path)]) == 2
    assert caught == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"qstr: error: --check: {path}: not a codebook file written by qstr codebook "
        f"(not a torch file: {what}"
    ), err


def test_codebook_check_uses_the_file_and_refuses_a_different_N(tmp_path, capsys):
    torch.save(torch.eye(4), tmp_path / "eye.pt")
    assert main(["codebook", "--check", str(tmp_path / "eye.pt")]) == 0
    assert "N = 4" in capsys.readouterr().out
    assert main(["codebook", "--N", "999", "--check", str(tmp_path / "eye.pt")]) == 2
    assert "does not match" in capsys.readouterr().err
    assert main(["codebook"]) == 2 and "--N is required" in capsys.readouterr().err


SLEEPY = """
import time

from qstr.verify.claim import Check, Claim, Fault, Ref, at_most
from qstr.verify.registry import register

for cid, seconds in (("user-quick", 0), ("user-sleeps", 600)):
    register(Claim(id=cid, ref=Ref("-"), statement="x <= 1",
                   inputs=lambda ctx, s=seconds: time.sleep(s) or 1.0,
                   checks=[Check("x <= 1", lambda x, ctx: at_most(x, 1.0))],
                   faults=[Fault("x = 2", lambda x, ctx: 2.0, breaks=("x <= 1",))]))
"""


@pytest.mark.parametrize(
    "sig, status, said",
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
)
def test_ctrl_c_or_sigterm_prints_one_line_and_exits_130_or_143(tmp_path, sig, status, said):
    """Once a first claim is recorded, while a worker runs a claim that would take 10 minutes:
    the run ends at once (the claim in flight is not awaited) with its one line and exit status,
    the table and the JSON of what finished."""
    (tmp_path / "sleepy.py").write_text(SLEEPY)
    p = subprocess.Popen(
        [sys.executable, "-m", "qstr.verify.cli", "verify", "--json", str(tmp_path / "r.json")]
        + ["--claims", "sleepy.py", "--only", "user-quick", "user-sleeps", "--jobs", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    deadline = time.time() + 60
    while not (tmp_path / "r.json").exists() and time.time() < deadline:  # interrupt mid-run
        time.sleep(0.2)
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=60)  # not the 600 s the claim in flight would take
    finally:
        p.kill()
    assert p.returncode == status, err
    kept = json.loads(
        (tmp_path / "r.json").read_text()
    )  # the records measured before the interrupt
    assert [r["id"] for r in kept] == ["user-quick"]
    lines = err.strip().splitlines()
    said = f"qstr: {said}; 1 of 2 claims finished (table above); in {tmp_path / 'r.json'}"
    assert lines == [said], err
    assert "(interrupted)" in out and "user-quick" in out  # the table of what finished


def test_fail_fast_stops_at_the_first_failing_claim(monkeypatch, tmp_path, capsys):
    """--fail-fast: the run ends after the first failing claim, exit 1, the table and JSON hold what
    ran."""
    monkeypatch.setitem(registry.REGISTRY, "lemma-40", _claim("lemma-40", holds=False))
    path = tmp_path / "out.json"
    assert (
        main(["verify", "--only", "lemma-40", "data-model", "--fail-fast", "--json", str(path)])
        == 1
    )
    assert [r["id"] for r in json.loads(path.read_text())] == ["lemma-40"]
    assert "stopped after lemma-40 failed; 1 claims not run" in capsys.readouterr().out


def _documented(heading: str, saved: dict, config_keys) -> None:
    """docs/formats.md's section on ``heading`` names every key of the file and of its config."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text()
    section = text.split(f"## `{heading} ")[1].split("\n## ")[0]
    for key in list(saved) + list(config_keys):
        assert re.search(rf"\b{re.escape(key)}\b", section), (
            f"docs/formats.md ({heading}) does not name {key!r}"
        )


def _qstr(*argv: str):
    """The ``qstr`` command in this process, as the console script calls it (``main``): (exit
    status, stdout, stderr). The console script itself, in a process of its own:
    test_console_script_module_entry."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(argv))
        except SystemExit as exc:  # argparse's --help and --version exit
            status = exc.code
    return status, out.getvalue(), err.getvalue()


SEED_ERROR = "qstr: error: argument --seed: a seed must be an integer in [0, 2**63 - 1], got {}"


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["sample", "--N", "4", "--d", "2", "--seed", "-1", "--out", "x.pt"],
            SEED_ERROR.format(-1),
        ),
        (
            [
                "construct",
                "transformer",
                "--N",
                "4",
                "--d",
                "2",
                "--q",
                "1",
                "--seed",
                "-1",
                "--out",
                "x.pt",
            ],
            SEED_ERROR.format(-1),
        ),
        (
            [
                "construct",
                "rnn",
                "--N",
                "4",
                "--d",
                "2",
                "--q",
                "1",
                "--seed",
                str(2**63),
                "--out",
                "x.pt",
            ],
            SEED_ERROR.format(2**63),
        ),
        (["verify", "--seed", "-1"], SEED_ERROR.format(-1)),
        (
            ["codebook", "--N", "8", "--seed", "1.5"],
            "qstr: error: argument --seed: expected an integer, got '1.5'",
        ),
        (["codebook", "--N", "0"], "qstr: error: argument --N: must be an integer >= 1, got 0"),
        (
            ["sample", "--N", "4", "--d", "2", "--B", "0", "--out", "x.pt"],
            "qstr: error: argument --B: must be an integer >= 1, got 0",
        ),
        (
            [
                "construct",
                "rnn",
                "--N",
                "4",
                "--d",
                "2",
                "--q",
                "1",
                "--eps",
                "nan",
                "--out",
                "x.pt",
            ],
            "qstr: error: argument --eps: expected a finite number, got 'nan'",
        ),
        (
            ["codebook", "--N", "8", "--mu", "1.5"],
            "qstr: error: argument --mu: must be a number in (0, 1), got 1.5",
        ),
        (
            ["verify", "--threads", "0"],
            "qstr: error: argument --threads: must be an integer >= 1, got 0",
        ),
        (
            ["reproduce", "figure1", "--jobs", "-2", "--out", "r"],
            "qstr: error: argument --jobs: must be an integer >= 1, got -2",
        ),
    ],
)
def test_numbers_are_validated_alike_by_every_subcommand(argv, message, tmp_path):
    status, out, err = _qstr(*argv)
    assert (status, out, err) == (2, "", message + "\n")


def test_seed_range_is_the_same_in_the_cli_and_the_python_api():
    assert SEED_MAX == 2**63 - 1
    for bad in (-1, 2**63):
        with pytest.raises(argparse.ArgumentTypeError):
            _seed(str(bad))
        for api in (
            lambda v: seed("seed", v),
            lambda v: Context(seed=v),
            lambda v: teacher_rnn(4, 2, 1, seed=v),
        ):
            with pytest.raises(
                ValueError, match=r"seed must be an integer in \[0, 2\*\*63 - 1\], got"
            ):
                api(bad)
    assert _seed(str(SEED_MAX)) == seed("seed", SEED_MAX) == Context(seed=SEED_MAX).seed
    Context(seed=SEED_MAX).generator("any", 7)  # the largest seed still seeds a generator


def test_sizes_that_cannot_fit_in_memory_are_refused_before_allocating(capsys):
    status, out, err = _qstr("sample", "--N", "100000000", "--d", "1000", "--out", "x.pt")
    assert status == 2 and out == ""
    assert re.fullmatch(
        r"qstr: error: sampling B = 16 prompts of N = 100000000 tokens in d = 1000 "
        r"\(q = 1, float32\) "
        r"needs about 17\.5 TiB of memory, more than the [0-9.]+ [KMGT]iB available\n",
        err,
    ), err
    assert main(["codebook", "--N", "100000000"]) == 2
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"qstr: error: a codebook of N = 100000000 codes in d_e = 256 \(float32\) "
        r"needs about 286 GiB "
        r"of memory, more than the [0-9.]+ [KMGT]iB available\n",
        err,
    ), err
    with pytest.raises(ValueError, match="needs about"):
        build_codebook(10**8, kind="rademacher", generator=torch.Generator())
    task = QSTR(N=10**8, d=1000, link=make_link("sqnorm", 1, 1000))
    with pytest.raises(ValueError, match="needs about"):
        task.sample(16, generator=torch.Generator())


@pytest.mark.parametrize(
    "argv,what",
    [
        (
            ["construct", "transformer", "--d", "100000"],
            "construct transformer (tokens of width 100048",
        ),
        (
            ["construct", "transformer", "--d", "100000000"],
            "construct transformer (tokens of width",
        ),
        (["construct", "rnn", "--d", "100000"], "the Prop 26 transition's dense layers"),
        (["construct", "rnn", "--d", "100000000"], "the teacher's W (8 x 200000000, float64)"),
    ],
)
def test_construct_refuses_sizes_that_cannot_fit_before_building(argv, what, tmp_path, capsys):
    assert main(argv + ["--N", "64", "--q", "2", "--out", str(tmp_path / "x.pt")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"qstr: error: {what}"), err
    assert "needs about" in err and "available" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "x.pt").exists()


def test_lemma11_weights_refuse_a_codebook_too_wide_to_fit():
    net = make_link("teacher", 1, 2, generator=torch.Generator().manual_seed(0)).two_layer_net()
    wide = Codebook.from_tensor(torch.eye(4, 300_000, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"Lemma 11's weights \(W_QK: 1 x 600002 x 600002"):
        lemma11(4, 2, 1, net, codebook=wide, eps=0.1, r_x=1.0)


def test_version_help_and_a_parser_without_torch():
    assert toolkit_version() != "unknown"  # the installed distribution qstr-toolkit
    assert _qstr("--version") == (0, f"qstr {toolkit_version()}\n", "")
    code = (
        "import sys; from qstr.verify.cli import _parser; _parser(); print('torch' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout == "False\n", p.stderr
    status, out, _ = _qstr("sample", "--help")
    assert status == 0 and "--N N" in out and "--seed S" in out


def test_every_option_has_help_and_N_differs_from_n():
    subs = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, sub in subs.items():
        for action in sub._actions:
            assert action.help, f"qstr {name} {action.option_strings or action.dest} has no help"

    assert _PROFILES == PROFILES  # restated in the CLI so that --help imports no torch
    options = {o: a for a in subs["construct"]._actions for o in a.option_strings}
    assert (
        options["--N"].metavar != options["--n"].metavar
        and options["--N"].help != options["--n"].help
    )
    assert "prompt length" in options["--N"].help and "sample size" in options["--n"].help


def test_codebook_of_one_position_has_no_pair(capsys):
    assert main(["codebook", "--N", "1"]) == 0
    assert capsys.readouterr().out == (
        "rs-hadamard: N = 1, d_e = 4, exact coherence mu = 0.000000 (no pairs: N = 1); "
        "0 of 0 pairs exceed 0.5: meets the coherence bound 0.5 of Assumption 3\n"
    )


def test_rnn_refuses_options_it_would_ignore(capsys, tmp_path):
    out = str(tmp_path / "r.pt")
    assert (
        main(["construct", "rnn", "--N", "8", "--d", "2", "--q", "1", "--n", "5", "--out", out])
        == 2
    )
    assert (
        capsys.readouterr().err == "qstr: error: --n applies to construct transformer only "
        "(the RNN's r_x follows from d and N)\n"
    )
    assert (
        main(
            [
                "construct",
                "rnn",
                "--N",
                "8",
                "--d",
                "2",
                "--q",
                "1",
                "--link",
                "linear",
                "--out",
                out,
            ]
        )
        == 2
    )
    assert (
        capsys.readouterr().err
        == "qstr: error: --link: construct rnn builds the teacher link only, got 'linear'\n"
    )


def test_an_allocation_failure_is_one_line(monkeypatch, capsys):
    """A size no up-front estimate caught still ends in one line, exit 2, not the allocator's
    traceback."""

    def fail(args, console):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] err == 0. "
            "DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 320000000000 bytes. Error code 12 (Cannot allocate memory)"
        )

    monkeypatch.setitem(cli.COMMANDS, "sample", fail)
    assert main(["sample", "--N", "4", "--d", "2", "--out", "x.pt"]) == 2
    assert (
        capsys.readouterr().err
        == "qstr: error: out of memory: an allocation of 298 GiB failed; use smaller sizes\n"
    )
    monkeypatch.setitem(
        cli.COMMANDS, "sample", lambda args, console: [0] * (1 << 62)
    )  # MemoryError
    assert main(["sample", "--N", "4", "--d", "2", "--out", "x.pt"]) == 2
    assert capsys.readouterr().err == "qstr: error: out of memory; use smaller sizes\n"
    monkeypatch.setitem(cli.COMMANDS, "sample", lambda args, console: 1 / 0)
    with pytest.raises(ZeroDivisionError):  # other errors are not disguised as memory
        main(["sample", "--N", "4", "--d", "2", "--out", "x.pt"])


def test_verify_only_is_repeatable():
    """`--only A --only B` runs both (argparse's default would keep only B)."""
    args = _parser().parse_args(["verify", "--only", "thm-7", "--only", "lemma-40", "lemma-39"])
    assert args.only == ["thm-7", "lemma-40", "lemma-39"]


@pytest.mark.parametrize("device", ["gpu", "meta", ""])
def test_reproduce_refuses_a_bad_device_before_making_its_folder(device, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["reproduce", "figure1", "--quick", "--device", device, "--out", str(out)]) == 2
    assert "--device must be cpu, cuda or cuda:N" in capsys.readouterr().err
    assert not out.exists()


def test_threads_beyond_the_machine_are_refused(capsys):
    assert main(["verify", "--only", "lemma-40", "--threads", str((os.cpu_count() or 1) + 1)]) == 2
    assert "CPU cores" in capsys.readouterr().err


@pytest.mark.parametrize(
    "obj,reason",
    [
        ({"omega": torch.eye(4).to_sparse()}, "sparse_coo tensor"),
        ({"omega": torch.eye(4), "kind": "bogus-kind"}, "records the kind 'bogus-kind'"),
        ({"omega": torch.eye(4), "kind": 3}, "records the kind 3"),
    ],
)
def test_codebook_check_refuses_files_it_cannot_honestly_report(obj, reason, tmp_path, capsys):
    path = tmp_path / "cb.pt"
    torch.save(obj, path)
    assert main(["codebook", "--check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert reason in err and len(err.splitlines()) == 1


def _python_qstr(*argv):
    return [
        sys.executable,
        "-c",
        "import sys; from qstr.verify.cli import main; sys.exit(main())",
        *argv,
    ]


@pytest.mark.parametrize(
    "argv,status",
    [
        (["codebook", "--N", "64"], 0),  # the codebook meets the bound: 0, as with an open stdout
        (["verify", "--list"], 0),
        (["verify", "--only", "lemma-40", "--json", "-"], 0),
        (
            ["construct", "transformer", "--N", "8", "--d", "4", "--q", "2", "--out", "{tmp}/c.pt"],
            0,
        ),
    ],
)
def test_a_closed_stdout_ends_with_the_commands_own_status_and_no_message(argv, status, tmp_path):
    argv = [a.format(tmp=tmp_path) for a in argv]
    proc = subprocess.Popen(_python_qstr(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line (`| head -0`)
    err = proc.stderr.read().decode()  # (with --json - the table goes there)
    assert proc.wait(timeout=120) == status, err
    assert "Traceback" not in err and "error" not in err and "Broken pipe" not in err, err


def test_a_path_the_terminal_cannot_encode_is_written_and_printed_escaped(tmp_path):
    folder = tmp_path / "ü"
    folder.mkdir()
    env = dict(os.environ, LC_ALL="C", PYTHONIOENCODING="ascii")
    argv = [
        "construct",
        "transformer",
        "--N",
        "8",
        "--d",
        "4",
        "--q",
        "2",
        "--out",
        str(folder / "c.pt"),
    ]
    proc = subprocess.run(_python_qstr(*argv), capture_output=True, env=env)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    assert b"\\xfc" in proc.stdout and (folder / "c.pt").exists()


def test_list_needs_no_gpu(capsys):
    assert main(["verify", "--list", "--profile", "gpu", "--only", "lemma-40"]) == 0
    assert "lemma-40" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["construct", "codebook", "sample"])
def test_ctrl_c_in_a_writing_command_says_nothing_was_written(command, monkeypatch, capsys):
    def interrupted(args, console):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, command, interrupted)
    argv = {
        "construct": [
            "construct",
            "transformer",
            "--N",
            "8",
            "--d",
            "4",
            "--q",
            "2",
            "--out",
            "x.pt",
        ],
        "codebook": ["codebook", "--N", "16"],
        "sample": ["sample", "--N", "6", "--d", "2", "--out", "x.pt"],
    }[command]
    assert main(argv) == 130
    assert capsys.readouterr().err.strip() == (
        "qstr: interrupted; nothing was written (files are written whole, at the end)"
    )


FIGURE1_ROWS = Path(__file__).resolve().parents[2] / "docs" / "figures"
# The summary's fits and bootstrap intervals, recomputed from the committed rows (numpy/scipy
# least squares and censored fits, whose results move with the BLAS kernels the CPU gets), against
# the committed numbers. Measured (issue 52): the lock's venv (torch 2.13.0) and the newest
# (torch 2.14.1, all else as the lock) on this AVX2 machine: 0; with OpenBLAS's kernels of
# another CPU (OPENBLAS_CORETYPE Prescott, Nehalem, Sandybridge) 33 of 587 numbers move, at most
# 5.3e-11 relative (fits.simple.ffn.censored_fit.ci[0], the end of an iterated fit's interval);
# the fresh environment: 27 at about 1e-12. rel_tol 1e-9 is a round value above 5.3e-11;
# abs_tol 1e-12 for the values at 0 (local slopes of 0.0; delta_aic = -9.3e-4, a difference of
# two AICs, moved 3.6e-14 absolute).
SUMMARY_REL_TOL, SUMMARY_ABS_TOL = 1e-9, 1e-12


def test_summarize_recomputes_the_committed_summary_from_its_rows(tmp_path, capsys):
    """`qstr summarize` on the committed H200 rows of Figure 1 writes the committed summary
    (the same numbers) and both figures, training nothing."""
    rows = FIGURE1_ROWS / "figure1-paper-h200-tf32-v2.jsonl"
    stem = str(tmp_path / "f1")
    assert main(["summarize", "figure1", str(rows), "--stem", stem]) == 0
    assert f"wrote {stem}-summary.json" in capsys.readouterr().out
    got = json.loads(Path(stem + "-summary.json").read_text())
    want = json.loads((FIGURE1_ROWS / "figure1-paper-h200-tf32-v2-summary.json").read_text())
    assert_close(
        got, want, rel_tol=SUMMARY_REL_TOL, abs_tol=SUMMARY_ABS_TOL, what="figure1 summary"
    )
    assert Path(stem + ".png").stat().st_size > 0 and Path(stem + ".pdf").stat().st_size > 0


@pytest.mark.parametrize(
    "make,needle",
    [
        (lambda p: None, "no such rows file"),
        (lambda p: p.write_text(""), "holds no rows"),
        (lambda p: p.write_text('{"figure": "figure3"}\n'), "figure"),
        (lambda p: p.write_text('{"figure": "figure1", "protocol": "paper"}\n'), "row 1: not a"),
    ],
)
def test_summarize_bad_rows_are_one_line(tmp_path, capsys, make, needle):
    rows = tmp_path / "rows.jsonl"
    make(rows)
    assert main(["summarize", "figure1", str(rows)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["codebook", "--N", "16", "--kind", "rademacher", "--mu", "1e-300"], "about 10^601"),
        (["codebook", "--N", "16", "--kind", "rademacher", "--mu", "1e-10"], "about 2.48e+21"),
        (["codebook", "--N", "16", "--kind", "rademacher", "--mu", "1e-4"], "about 2.48e+09"),
        (["sample", "--N", "4", "--d", "99999999999999999999999"], "link's directions"),
        (["sample", "--N", "4", "--d", "9223372036854775807"], "link's directions"),
        (["sample", "--N", "4", "--d", "3", "--q", "99999999999999999999999"], "directions"),
    ],
)
def test_sizes_and_tolerances_out_of_reach_are_one_line_before_any_work(
    tmp_path, capsys, argv, needle
):
    assert main(argv + ["--out", str(tmp_path / "x.pt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["verify", "--only", "data-model", "--device", ""], "--device must be cpu"),
        (["codebook", "--N", "16", "--check", ""], "--check '': no such file"),
        (["reproduce", "figure2", "--quick", "--jobs", "4097", "--out", "{tmp}"], "CPU cores"),
        (["codebook", "--N", "16", "--delta", "0.01"], "--delta applies to --kind rademacher"),
    ],
)
def test_empty_names_and_more_jobs_than_cores_are_one_line(tmp_path, capsys, argv, needle):
    """Found by studies/bad_inputs.py: an empty --device or --check was taken as no option,
    reproduce took any --jobs (verify already refused more jobs than cores), and codebook ignored
    a --delta its kind does not use."""
    assert main([a.replace("{tmp}", str(tmp_path / "r")) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_a_bound_near_1_is_printed_as_given_and_torch_dtype_names_are_accepted(tmp_path, capsys):
    assert main(["codebook", "--N", "16", "--kind", "rademacher", "--mu", "0.9999999"]) == 0
    assert "pairs exceed 0.9999999: meets the coherence bound 0.9999999" in capsys.readouterr().out
    out = tmp_path / "s.pt"
    argv = ["sample", "--N", "4", "--d", "3", "--dtype", "torch.float64", "--out", str(out)]
    assert main(argv) == 0
    assert torch.load(out)["x"].dtype == torch.float64


def test_verify_with_a_timeout_says_how_many_claims_timed_out(capsys):
    """Issue 52: the last line of ``qstr verify --timeout S`` did not say how many timed out."""
    argv = ["verify", "--only", "lemma-40", "data-model", "--jobs", "1", "--timeout"]
    assert main(argv + ["0.0001"]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "0/2 claims hold with every fault caught; 2 timed out (--timeout 0.0001 s)"
    assert main(argv + ["600"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "2/2 claims hold with every fault caught; 0 timed out (--timeout 600 s)"


def test_list_with_json_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["verify", "--list", "--json", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["qstr: error: --list prints the claims index, --json writes results: not both"]
