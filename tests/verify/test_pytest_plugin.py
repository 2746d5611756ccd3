"""Tests for verify/pytest_plugin.py: `pytest --qstr` on a user's project holding one claim that
holds and one that does not; items by id, -k, -x, --lf, -m, --junitxml and tracebacks as pytest
users expect. Each `python -m pytest` runs in this process (conftest.py: inner_pytest), from what
a fresh process would see."""

import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

# qstr.verify.pool imported here, not first by the `qstr verify` a test runs inside pytester's
# fixture: pytester drops the modules imported meanwhile, and a second concurrent.futures.process
# breaks the pickling of a later --jobs run ("not the same object as ..._process_worker")
import qstr.verify.pool  # noqa: F401
from qstr.verify.cli import main

CLAIMS = textwrap.dedent('''
    from dataclasses import dataclass, replace

    from qstr.bounds.gaussian import conditional_sqnorm_variance
    from qstr.verify.claim import Check, Claim, Fault, Ref, exact
    from qstr.verify.registry import register


    @dataclass(frozen=True)
    class Inputs:
        variance: object


    def two_k_minus_r(inp, ctx):
        return exact(inp.variance(7, 3), 8.0)


    def off_by_one(inp, ctx):
        return replace(inp, variance=lambda k, r: conditional_sqnorm_variance(k, r) + 1)


    for cid, fn in (("user-good", conditional_sqnorm_variance),
                    ("user-bad", lambda k, r: conditional_sqnorm_variance(k, r) * 2)):
        register(Claim(id=cid, ref=Ref("Lemma 40"), statement="Var = 2 (k - r) at k = 7, r = 3",
                       inputs=lambda ctx, fn=fn: Inputs(fn),
                       checks=[Check("closed form", two_k_minus_r)],
                       faults=[Fault("off by one", off_by_one, breaks=("closed form",))]))
''')


def _pytest(inner_pytest, *args, cache=False):
    """`python -m pytest --qstr --qstr-claims my_claims.py ARGS` in the folder inner_pytest.path."""
    tmp_path = inner_pytest.path
    (tmp_path / "my_claims.py").write_text(CLAIMS)
    qstr = ("--qstr", "--qstr-claims", tmp_path / "my_claims.py", "--rootdir", tmp_path)
    return inner_pytest(*qstr, *args, cache=cache)


def test_a_passing_and_a_failing_user_claim(tmp_path, inner_pytest):
    out = _pytest(inner_pytest, "-k", "user-", "--junitxml", str(tmp_path / "j.xml"), "-rf")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "2 failed, 2 passed" in out.stdout, out.stdout
    assert "user-bad does not hold: closed form: measured 16, bound == 8" in out.stdout, out.stdout
    cases = {
        (c.get("classname"), c.get("name")): c
        for c in ET.parse(tmp_path / "j.xml").iter("testcase")
    }
    assert set(cases) == {
        (f"my_claims.user-{k}", n)
        for k in ("good", "bad")
        for n in ("check[closed form]", "fault[off by one]")
    }
    assert cases[("my_claims.user-bad", "check[closed form]")].find("failure") is not None
    assert cases[("my_claims.user-good", "check[closed form]")].find("failure") is None
    # 17 != 8 as well, but "closed form" fails on the honest inputs already: not applicable
    assert cases[("my_claims.user-bad", "fault[off by one]")].find("failure") is not None
    # every item, passing ones included, carries its numbers as JUnit properties
    props = {
        p.get("name"): p.get("value")
        for p in cases[("my_claims.user-good", "check[closed form]")].iter("property")
    }
    assert props == {
        "measured": "8.0",
        "bound": "8.0",
        "relation": "==",
        "rounding": "0.0",
        "evidence": "undeclared",
        "holds": "True",
        "dtype": "exact",
    }, props
    fault = {
        p.get("name"): p.get("value")
        for p in cases[("my_claims.user-good", "fault[off by one]")].iter("property")
    }
    assert fault["closed form: measured"] == "9.0" and fault["caught"] == "True", fault
    assert "fault 'off by one' not applicable: closed form" in out.stdout, out.stdout


def test_k_selects_by_id_and_x_stops_at_the_first_failure(tmp_path, inner_pytest):
    out = _pytest(inner_pytest, "-k", "user-good", "-q")
    assert out.returncode == 0 and "2 passed" in out.stdout, out.stdout
    out = _pytest(inner_pytest, "-k", "user-bad or user-good", "-x", "-q")
    assert out.returncode == 1 and "1 failed, 2 passed" in out.stdout, (
        out.stdout
    )  # good first, bad stops


def test_without_the_flag_nothing_is_collected(tmp_path, inner_pytest):
    out = _pytest(inner_pytest, "-q", "--co")
    assert "user-good" in out.stdout
    plain = inner_pytest("-q", "--co", "--rootdir", str(tmp_path))
    assert "user-good" not in plain.stdout and plain.returncode == 5, plain.stdout
    markers = inner_pytest("--markers")
    assert "@pytest.mark.qstr:" in markers.stdout and "@pytest.mark.gpu:" in markers.stdout
    # the hypothesis profiles named after the qstr profiles exist once asked for
    # (inner_pytest unregisters them first, as in a fresh process, and restores this one's after)
    profile = inner_pytest("-q", "--co", "--hypothesis-profile", "qstr-full")
    assert profile.returncode == 5 and "InvalidArgument" not in profile.stdout + profile.stderr


def test_a_test_importing_the_claims_module_and_a_bad_module(tmp_path, inner_pytest):
    """A test file that imports the user's claims module runs beside --qstr-claims of the same file
    (registered once) and reads a claim's inputs through the qstr_inputs fixture; a module raising
    at import is pytest's one-line usage error, not an INTERNALERROR."""
    (tmp_path / "test_mine.py").write_text(
        "import my_claims\n\ndef test_registered():\n    assert my_claims.Inputs\n\n"
        "def test_registered_inputs(qstr_inputs, qstr_context):\n"
        "    assert qstr_context.seed == 0\n"
        "    assert qstr_inputs('user-good').variance(7, 3) == 8.0\n"
    )
    out = _pytest(inner_pytest, "-q", "-k", "user-good or registered")
    assert out.returncode == 0 and "4 passed" in out.stdout, out.stdout + out.stderr
    (tmp_path / "raising.py").write_text("raise RuntimeError('not today')\n")
    cmd = ["--qstr", "--qstr-claims"]
    bad = inner_pytest(*cmd, str(tmp_path / "raising.py"), "--rootdir", str(tmp_path), "-q")
    assert bad.returncode == 4 and "INTERNALERROR" not in bad.stdout + bad.stderr
    assert "RuntimeError: not today (raising.py, line 1)" in bad.stderr


def test_qstr_inputs_reads_a_paper_claims_inputs_without_qstr(tmp_path):
    """docs/claims.md's ``qstr_inputs("lemma-38")`` in a plain pytest run (no --qstr), in a fresh
    process (in this one the paper's claims are imported already): the fixture loads them."""
    (tmp_path / "test_paper_inputs.py").write_text(
        "def test_inputs(qstr_inputs):\n    assert qstr_inputs('lemma-38') is not None\n"
    )
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_paper_inputs.py"]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr


def test_header_and_options_the_machine_cannot_run(tmp_path, inner_pytest):
    """The header names profile, device, seed and the number of claims; -m selects by the qstr
    marker; a negative seed, or CUDA where there is none, is one usage error line (exit 4)."""
    # the header is not printed with -q; claims carry the marker qstr (and gpu on CUDA)
    out = _pytest(
        inner_pytest, "--co", "--qstr-seed", "3", "-m", "qstr and not gpu", "-k", "user-g"
    )
    assert "qstr: profile quick, device cpu, seed 3, " in out.stdout, out.stdout
    assert " claims" in out.stdout.split("seed 3, ")[1].splitlines()[0], out.stdout
    assert "2/" in out.stdout and "tests collected" in out.stdout, out.stdout
    bad = _pytest(inner_pytest, "-q", "--co", "--qstr-seed", "-1")
    assert bad.returncode == 4 and "INTERNALERROR" not in bad.stdout + bad.stderr
    # checked before collection, so -q and a named test file change nothing
    (tmp_path / "test_plain.py").write_text("def test_ok():\n    pass\n")
    missing = _pytest(inner_pytest, "-q", "--qstr-claims", "absent.py", "test_plain.py")
    assert (
        missing.returncode == 4 and "ERROR: --qstr-claims absent.py: no such file" in missing.stderr
    )
    import torch  # noqa: PLC0415 - only to know whether this machine has CUDA

    if not torch.cuda.is_available():
        cuda = _pytest(inner_pytest, "-q", "--co", "--qstr-device", "cuda")
        assert cuda.returncode == 4 and "CUDA is not available" in cuda.stderr


CRASHING = textwrap.dedent("""
    from qstr.verify.claim import Check, Claim, Fault, Ref, at_most
    from qstr.verify.registry import register


    def helper(inp):
        return 1 / inp


    def divides(inp, ctx):
        return at_most(helper(inp), 1.0)


    register(Claim(id="user-crash", ref=Ref("Eq. 1"), statement="1 / 0 <= 1",
                   inputs=lambda ctx: 0, checks=[Check("divides", divides)],
                   faults=[Fault("halved", lambda inp, ctx: 0.5, breaks=("divides",))]))
""")


def test_a_printed_node_id_reruns_and_lf_reruns_the_failures(tmp_path, inner_pytest):
    """The node id pytest prints for a failing claim item selects it when passed back; --lf
    reruns exactly the failures of the last run (the cache on)."""
    out = _pytest(inner_pytest, "-q", "-k", "user-", cache=True)
    assert out.returncode == 1 and "2 failed, 2 passed" in out.stdout, out.stdout
    failed = sorted(line.split()[1] for line in out.stdout.splitlines() if line.startswith("FAIL"))
    assert failed == ["my_claims.py::user-bad::check[closed", "my_claims.py::user-bad::fault[off"]
    again = _pytest(inner_pytest, "-q", "my_claims.py::user-bad::check[closed form]")
    assert again.returncode == 1 and "1 failed in" in again.stdout, again.stdout
    lf = _pytest(inner_pytest, "-q", "--lf", cache=True)
    assert lf.returncode == 1 and "2 failed" in lf.stdout and "passed" not in lf.stdout, lf.stdout


def test_a_crashing_check_shows_its_traceback_and_file_line(tmp_path, inner_pytest, capsys):
    """pytest shows the check's own frames down to the raise; `qstr verify` one line with the
    exception and file:line, and with --traceback the whole stack."""
    (tmp_path / "crashing.py").write_text(CRASHING)
    out = _pytest(inner_pytest, "-q", "--qstr-claims", str(tmp_path / "crashing.py"), "-k", "crash")
    assert out.returncode == 1, out.stdout
    text = out.stdout
    assert "def helper(inp):" in text and "ZeroDivisionError: division by zero" in text, text
    assert "crashing.py:7: ZeroDivisionError" in text and "_pytest" not in text, text
    # `qstr verify` as the console script runs it, in the same folder (inner_pytest's registry
    # restore drops the claim it registers)
    capsys.readouterr()
    main(["verify", "--claims", "crashing.py", "--only", "user-crash", "--traceback"])
    cli = capsys.readouterr()
    assert "divides: crashed: ZeroDivisionError: division by zero (crashing.py:7)" in cli.out
    # --traceback: the whole stack after the table
    assert "user-crash: check 'divides' crashed:" in cli.out
    assert 'crashing.py", line 7, in helper' in cli.out, cli.out


def test_a_paper_claim_outside_the_rootdir_is_rerun_by_its_module_path(tmp_path, inner_pytest):
    """The paper's claims, outside the user's rootdir, are printed as qstr/verify/claims/FILE.py
    node ids, and such an id passed back selects the item."""
    node = "qstr/verify/claims/lemma_34.py::lemma-34::check[||h_i|| <= r_h]"
    run = _pytest(inner_pytest, "-v", node)
    assert run.returncode == 0 and f"{node} PASSED" in run.stdout, run.stdout + run.stderr


CASES = textwrap.dedent('''
    from qstr.verify.claim import Claim, Ref, at_most, worst
    from qstr.verify.registry import register

    c = register(Claim("user-cases", Ref("Lemma 40"), statement="each <= 1"))
    c.inputs(lambda ctx: {"N=16": 0.5, "N=256": 2.0, "N=4096": 0.1})


    @c.check("each <= 1")
    def each(inp):
        return worst((label, at_most(v, 1.0)) for label, v in inp.items())


    c.fault("doubled", breaks=each, apply=lambda inp: {k: 2 * v for k, v in inp.items()})
''')


def test_each_case_of_a_check_is_a_subtest_report(tmp_path, inner_pytest):
    """A check taken over cases reports each case as pytest 9 reports a subtest: SUBPASSED and
    SUBFAILED lines under -v, the failing case with its own header and summary line; the item
    stays the worst case."""
    (tmp_path / "cases.py").write_text(CASES)
    cmd = ["--qstr", "--qstr-claims"]
    cmd += [str(tmp_path / "cases.py"), "--rootdir", str(tmp_path), "-k", "user-cases", "-v"]
    out = inner_pytest(*cmd)
    text = out.stdout
    assert out.returncode == 1, text + out.stderr
    for label, word in (("N=16", "SUBPASSED"), ("N=256", "SUBFAILED"), ("N=4096", "SUBPASSED")):
        assert f"cases.py::user-cases::check[each <= 1] {word}[{label}]" in text, text
    assert "user-cases: check[each <= 1] [N=256]" in text, text
    assert "N=256: measured 2, bound <= 1, FAILS" in text, text
    assert "SUBFAILED[N=256] cases.py::user-cases::check[each <= 1]" in text, text
    assert "cases.py::user-cases::check[each <= 1] FAILED" in text, text
    assert "Captured stdout" not in text, text


def _collected(out) -> list:
    """The node ids ``pytest --co -q`` printed."""
    return [line for line in out.stdout.splitlines() if "::" in line and line == line.strip()]


def test_paths_narrow_the_claims_as_they_narrow_tests(tmp_path, inner_pytest):
    """With --qstr, a test's node id runs that test alone; a folder collects the user claim files
    under it; the paper's claims come with no path given, with --qstr-paper, or by their own node
    ids; with no path every claim is collected (the header counts them)."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_plain.py").write_text("def test_ok():\n    pass\n")
    only = _pytest(inner_pytest, "--co", "-q", "tests/test_plain.py::test_ok")
    assert _collected(only) == ["tests/test_plain.py::test_ok"], only.stdout
    run = _pytest(inner_pytest, "-q", "tests/test_plain.py::test_ok")
    assert run.returncode == 0 and "1 passed in" in run.stdout, run.stdout
    folder = _pytest(inner_pytest, "--co", "-q", "tests")
    assert _collected(folder) == ["tests/test_plain.py::test_ok"], folder.stdout
    # the claims file lies under the rootdir, so "." selects it (and the test), not the paper's
    here = _collected(_pytest(inner_pytest, "--co", "-q", "."))
    assert [n for n in here if n.startswith("my_claims.py::")] == [
        f"my_claims.py::user-{k}::{n}"
        for k in ("good", "bad")
        for n in ("check[closed form]", "fault[off by one]")
    ], here
    assert "tests/test_plain.py::test_ok" in here and not any("qstr/" in n for n in here), here
    paper = _collected(_pytest(inner_pytest, "--co", "-q", "--qstr-paper", "tests"))
    assert paper[0] == "tests/test_plain.py::test_ok", paper
    assert "qstr/verify/claims/lemma_34.py::lemma-34::check[||h_i|| <= r_h]" in paper, paper
    assert not any(n.startswith("my_claims.py") for n in paper), paper
    every = _collected(_pytest(inner_pytest, "--co", "-q"))
    assert set(every) == set(paper) | set(here), sorted(set(every) ^ (set(paper) | set(here)))
    ids = {n.split("::")[1] for n in every if "::" in n and n.endswith("]")}
    header = _pytest(inner_pytest, "--co", "tests/test_plain.py")
    assert f"seed 0, {len(ids)} claims" in header.stdout, header.stdout


def test_claims_without_qstr_are_refused_and_name_the_plugins_option(tmp_path, inner_pytest):
    """--qstr-claims without --qstr is a one-line usage error (exit 4), not silently ignored; a bad
    claims file's error names --qstr-claims, the option given."""
    (tmp_path / "my_claims.py").write_text(CLAIMS)
    out = inner_pytest("--qstr-claims", "my_claims.py", "-q")
    err = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 4 and err == [
        "ERROR: --qstr-claims needs --qstr (its claims are registered and collected only with "
        "--qstr)"
    ], out.stdout + out.stderr
    (tmp_path / "broken.py").write_text("def f(:\n")
    bad = inner_pytest("--qstr", "--qstr-claims", "broken.py", "-q")
    assert bad.returncode == 4 and "ERROR: --qstr-claims broken.py: line 1" in bad.stderr, (
        bad.stderr
    )
    assert " --claims" not in bad.stderr, bad.stderr


PROFILE_TEST = """
from hypothesis import settings


def test_profile():
    assert settings.get_current_profile_name() == "{name}"
    assert settings().max_examples == {examples}
"""


def test_qstr_profile_selects_the_hypothesis_profile_unless_one_is_named(tmp_path, inner_pytest):
    """--qstr-profile P loads the hypothesis profile qstr-P, with or without --qstr;
    --hypothesis-profile wins; without either, hypothesis's default stays."""
    for args, name, examples in (
        (("--qstr-profile", "full"), "qstr-full", 200),
        (("--qstr-profile", "quick"), "qstr-quick", 25),
        (("--qstr-profile", "full", "--hypothesis-profile", "default"), "default", 100),
        ((), "default", 100),
    ):
        (tmp_path / "test_profile.py").write_text(PROFILE_TEST.format(name=name, examples=examples))
        out = inner_pytest("-q", *args, "test_profile.py")
        assert out.returncode == 0 and "1 passed" in out.stdout, (args, out.stdout + out.stderr)


CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def test_the_readmes_ci_step_installs_cpu_torch_at_the_locked_version():
    """The README's CI step (its `yaml` block) installs torch from PyTorch's CPU index, at the
    version constraints.txt locks, before the toolkit: the default index's wheel is the CUDA build
    (gigabytes of CUDA libraries on a hosted runner)."""
    root = Path(__file__).resolve().parents[2]
    (block,) = re.findall(r"```yaml\n(.*?)```", (root / "README.md").read_text(), re.S)
    pips = [line.split("#")[0].split() for line in block.splitlines() if "pip install" in line]
    (lock,) = re.findall(r"^torch==([\w.]+)\+cpu$", (root / "constraints.txt").read_text(), re.M)
    cpu_torch = ["pip", "install", f"torch=={lock}", "--index-url", CPU_INDEX]
    assert [p for p in pips if any(w.startswith("torch") for w in p)] == [cpu_torch], block
    assert pips[0] == cpu_torch, block  # first: the toolkit's install then finds it satisfied


MARKED = textwrap.dedent("""
    from qstr.verify.claim import Claim, Ref, exact
    from qstr.verify.registry import register

    for cid, marks in (("user-slow", ("slow", "ours")), ("user-plain", ())):
        c = register(Claim(cid, Ref("Eq. 1"), statement="1 == 1", marks=marks))
        c.inputs(lambda ctx: 1)
        c.check("one")(lambda inp: exact(inp, 1))
        c.fault("two", breaks="one", apply=lambda inp: 2)
""")


def test_a_claims_marks_mark_its_items_and_pass_strict_markers(tmp_path, inner_pytest):
    """Claim(marks=("slow", "ours")) marks every item of the claim, registered as markers, so -m
    selects by them under --strict-markers (a mark no one registered is still refused)."""
    (tmp_path / "marked.py").write_text(MARKED)
    cmd = ["--qstr", "--qstr-claims", "marked.py", "marked.py", "--strict-markers", "-q"]
    slow = inner_pytest(*cmd, "-m", "slow")
    assert slow.returncode == 0 and "2 passed, 2 deselected" in slow.stdout, (
        slow.stdout + slow.stderr
    )
    mine = inner_pytest(*cmd, "--co", "-m", "not ours")
    assert _collected(mine) == [
        "marked.py::user-plain::check[one]",
        "marked.py::user-plain::fault[two]",
    ]
    markers = inner_pytest(*cmd, "--markers")
    assert "@pytest.mark.ours: declared by a qstr claim" in markers.stdout, markers.stdout
    (tmp_path / "test_unknown.py").write_text(
        "import pytest\n\n@pytest.mark.theirs\ndef test_x():\n    pass\n"
    )
    unknown = inner_pytest(*cmd, "test_unknown.py")
    assert unknown.returncode != 0 and "'theirs' not found in `markers`" in unknown.stdout, (
        unknown.stdout
    )


def test_qstr_certified_collects_the_certified_checks_and_their_faults(tmp_path, inner_pytest):
    """--qstr-certified narrows as `qstr verify --certified` does: only checks resting on
    `certified` (the paper's, quick) and the faults that break only them, of the claims that
    have one (the user's claims, which have none, drop out); a certified claim's items run and
    pass; without --qstr it is a one-line usage error."""
    out = _pytest(inner_pytest, "--co", "-q", "--qstr-certified")
    items = _collected(out)
    checks = [n for n in items if "::check[" in n]
    assert out.returncode == 0 and len(checks) >= 8, out.stdout
    assert all(n.endswith("(certified)]") for n in checks), checks
    zeros = "qstr/verify/claims/prop_26.py::prop-26::check[exactly 0 off target (certified)]"
    assert zeros in items
    assert "qstr/verify/claims/lemma_11.py::lemma-11::check[error <= bound]" not in items
    assert not any("user-" in n for n in items), items
    claims = {n.split("::")[1] for n in items}
    assert {n.split("::")[1] for n in checks} == claims  # every claim collected has one
    faults = "\n".join(n for n in items if "::fault[" in n)
    assert "lemma-11::fault[head 0's W_QK target block halved, the guarantee kept]" in faults
    assert "fault[scores halved]" not in faults  # it breaks float64 checks
    header = _pytest(inner_pytest, "--co", "--qstr-certified", "-k", "lemma-40")
    assert f"{len(claims)} claims, certified checks only" in header.stdout, header.stdout
    run = _pytest(inner_pytest, "-q", "--qstr-certified", "-k", "lemma-40")
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout
    alone = inner_pytest("--qstr-certified", "-q")
    err = [line for line in alone.stderr.splitlines() if line.strip()]
    assert alone.returncode == 4 and err == [
        "ERROR: --qstr-certified needs --qstr (it narrows the claims collected)"
    ], alone.stdout + alone.stderr
