"""Tests for verify/pytest_plugin.py: `pytest --qstr` on a user's project holding one claim that
holds and one that does not; items by id, -k, -x and --junitxml as pytest users expect."""

import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

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


def _pytest(tmp_path, *args):
    (tmp_path / "my_claims.py").write_text(CLAIMS)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--qstr",
        "--qstr-claims",
        str(tmp_path / "my_claims.py"),
        "--rootdir",
        str(tmp_path),
        *args,
    ]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_a_passing_and_a_failing_user_claim(tmp_path):
    out = _pytest(tmp_path, "-k", "user-", "--junitxml", str(tmp_path / "j.xml"), "-rf")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "2 failed, 2 passed" in out.stdout, out.stdout
    assert "user-bad does not hold: closed form: measured 16, bound == 8" in out.stdout, out.stdout
    cases = {
        (c.get("classname"), c.get("name")): c
        for c in ET.parse(tmp_path / "j.xml").iter("testcase")
    }
    assert set(cases) == {
        (f"qstr.user-{k}", n)
        for k in ("good", "bad")
        for n in ("check[closed form]", "fault[off by one]")
    }
    assert cases[("qstr.user-bad", "check[closed form]")].find("failure") is not None
    assert cases[("qstr.user-good", "check[closed form]")].find("failure") is None
    # 17 != 8 as well, but "closed form" fails on the honest inputs already: not applicable
    assert cases[("qstr.user-bad", "fault[off by one]")].find("failure") is not None
    assert "fault 'off by one' not applicable: closed form" in out.stdout, out.stdout


def test_k_selects_by_id_and_x_stops_at_the_first_failure(tmp_path):
    out = _pytest(tmp_path, "-k", "user-good", "-q")
    assert out.returncode == 0 and "2 passed" in out.stdout, out.stdout
    out = _pytest(tmp_path, "-k", "user-bad or user-good", "-x", "-q")
    assert out.returncode == 1 and "1 failed, 2 passed" in out.stdout, (
        out.stdout
    )  # good first, bad stops


def test_without_the_flag_nothing_is_collected(tmp_path):
    out = _pytest(tmp_path, "-q", "--co")
    assert "user-good" in out.stdout
    plain = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--co",
            "--rootdir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert "qstr::" not in plain.stdout and plain.returncode == 5, plain.stdout


def test_a_test_importing_the_claims_module_and_a_bad_module(tmp_path):
    """A test file that imports the user's claims module runs beside --qstr-claims of the same file
    (registered once); a module raising at import is pytest's one-line usage error, not an
    INTERNALERROR."""
    (tmp_path / "test_mine.py").write_text(
        "import my_claims\n\ndef test_registered():\n    assert my_claims.Inputs\n"
    )
    out = _pytest(tmp_path, "-q", "-k", "user-good or registered")
    assert out.returncode == 0 and "3 passed" in out.stdout, out.stdout + out.stderr
    (tmp_path / "raising.py").write_text("raise RuntimeError('not today')\n")
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--qstr", "--qstr-claims"]
    bad = subprocess.run(
        [*cmd, str(tmp_path / "raising.py"), "--rootdir", str(tmp_path), "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 4 and "INTERNALERROR" not in bad.stdout + bad.stderr
    assert "RuntimeError: not today (raising.py, line 1)" in bad.stderr


def test_header_and_options_the_machine_cannot_run(tmp_path):
    """The header names profile, device and seed; a negative seed, or CUDA where there is none, is
    one usage error line (exit 4)."""
    out = _pytest(tmp_path, "--co", "--qstr-seed", "3")  # the header is not printed with -q
    assert "qstr: profile quick, device cpu, seed 3" in out.stdout
    bad = _pytest(tmp_path, "-q", "--co", "--qstr-seed", "-1")
    assert bad.returncode == 4 and "INTERNALERROR" not in bad.stdout + bad.stderr
    import torch  # noqa: PLC0415 - only to know whether this machine has CUDA

    if not torch.cuda.is_available():
        cuda = _pytest(tmp_path, "-q", "--co", "--qstr-device", "cuda")
        assert cuda.returncode == 4 and "CUDA is not available" in cuda.stderr
