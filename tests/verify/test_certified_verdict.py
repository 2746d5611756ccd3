"""A certified computation as a check's verdict, recorded and selected (docs/claims.md,
"Certified checks"): the enclosures decide where they can, the float64 fallback is said."""

import json

import pytest
from flint import arb

from qstr.verify.ball import CERTIFIED, NOT_CERTIFIED, VIOLATED, Certified, Enclosure
from qstr.verify.certified.verdict import certified
from qstr.verify import registry
from qstr.verify.claim import Claim, Context, Ref
from qstr.verify.cli import main
from qstr.verify.runner import run_claim
from qstr.verify.verdict import at_most


def _rec(status, measured=(0.25, 0.5), bound=(1.0, 1.0)):
    return Certified("x <= b", Enclosure(*measured), Enclosure(*bound), status, 7, 0.01)


def test_certified_enclosures_decide_the_verdict_and_are_kept():
    held = certified(_rec(CERTIFIED))
    assert (held.holds, held.certified, held.measured, held.bound) == (True, True, 0.5, 1.0)
    assert (held.enclosure, held.bound_enclosure) == ((0.25, 0.5), (1.0, 1.0))
    broken = certified(_rec(VIOLATED, measured=(1.5, 2.0)))
    assert (broken.holds, broken.certified, broken.measured) == (False, True, 2.0)


def test_a_straddle_fails_without_a_fallback_and_says_the_fallback_decided_with_one():
    straddle = _rec(NOT_CERTIFIED, measured=(0.5, 1.5))
    alone = certified(straddle)
    assert (alone.holds, alone.certified) == (False, False)
    assert "no fallback" in alone.detail
    fell = certified(straddle, fallback=lambda: at_most(0.75, 1.0, detail="float64 scan"))
    assert (fell.holds, fell.certified, fell.measured, fell.enclosure) == (
        True,
        False,
        0.75,
        (0.5, 1.5),
    )
    assert "the float64 check decides: float64 scan" in fell.detail
    failed = certified(straddle, fallback=lambda: at_most(1.25, 1.0))
    assert (failed.holds, failed.certified) == (False, False)


def _claim(cid="certified-toy"):
    """A claim with one certified check (e^-1 <= 1/2), one float check, a fault for each."""
    claim = Claim(cid, Ref("Toy"), "e^-1 <= 1/2", inputs=lambda ctx: {"x": 1.0})

    @claim.check("e^-x <= 1/2", evidence="certified")
    def ball(inp):
        m = Enclosure.of(arb(-inp["x"]).exp())
        return certified(Certified("e^-x <= 1/2", m, Enclosure(0.5, 0.5), _status(m), 1, 0.0))

    @claim.check("x >= 1/2, float", evidence="formula")
    def flt(inp):
        return at_most(0.5, inp["x"])

    claim.fault("x a tenth", breaks=("e^-x <= 1/2",), apply=lambda inp: {"x": 0.1})
    claim.fault("x a quarter", breaks=("x >= 1/2, float",), apply=lambda inp: {"x": 0.25})
    return claim


def _status(m: Enclosure) -> str:
    return CERTIFIED if m.upper < 0.5 else (VIOLATED if m.lower > 0.5 else NOT_CERTIFIED)


def test_the_runner_records_enclosures_only_for_certified_checks():
    rec = run_claim(_claim(), Context()).record()
    ball, flt = rec["checks"]
    assert ball["certified"] is True and ball["status"] == "holds"
    lo, hi = ball["enclosure"]
    assert lo <= 0.36787944117144233 <= hi and hi - lo < 1e-15
    assert "certified" not in flt and "enclosure" not in flt
    assert rec["passed"] and all(f["caught"] for f in rec["faults"])


def test_context_evidence_runs_only_those_checks_and_the_faults_that_break_only_them():
    result = run_claim(_claim(), Context(evidence="certified"))
    assert [c.name for c in result.checks] == ["e^-x <= 1/2"]
    assert [f.name for f in result.faults] == ["x a tenth"]
    with pytest.raises(ValueError, match="evidence must be one of"):
        Context(evidence="proved")


TOY_CLAIMS = """
from flint import arb

from qstr.verify.ball import CERTIFIED, NOT_CERTIFIED, Certified, Enclosure
from qstr.verify.certified.verdict import certified
from qstr.verify.claim import Claim, Ref, at_most
from qstr.verify.registry import register

claim = register(Claim("toy-certified-file", Ref("Toy"), "e^-1 <= 1/2", inputs=lambda ctx: 1.0))


@claim.check("e^-x <= 1/2", evidence="certified")
def ball(x):
    m = Enclosure.of(arb(-x).exp())
    ok = CERTIFIED if m.upper < 0.5 else NOT_CERTIFIED
    return certified(Certified("e^-x <= 1/2", m, Enclosure(0.5, 0.5), ok, 1, 0.0))


@claim.check("x >= 1/2, float", evidence="formula")
def flt(x):
    return at_most(0.5, x)


claim.fault("x a tenth", breaks=("e^-x <= 1/2",), apply=lambda x: 0.1)
claim.fault("x a quarter", breaks=("x >= 1/2, float",), apply=lambda x: 0.25)
"""


def test_qstr_verify_certified_runs_the_certified_checks_of_a_claims_file(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    monkeypatch.setattr(registry, "_LOADED", dict(registry._LOADED))
    mod = tmp_path / "toy_certified_claims.py"
    mod.write_text(TOY_CLAIMS)
    out = tmp_path / "out.json"
    argv = ["verify", "--claims", str(mod), "--only-claims", "--certified", "--json", str(out)]
    assert main(argv) == 0
    (rec,) = json.loads(out.read_text())
    assert [c["name"] for c in rec["checks"]] == ["e^-x <= 1/2"]
    assert rec["checks"][0]["certified"] is True
    assert [f["name"] for f in rec["faults"]] == ["x a tenth"]


def test_only_claims_of_a_module_that_defines_none_is_one_line(tmp_path, monkeypatch, capsys):
    """--only-claims with a module whose claims' inputs are defined elsewhere ran every claim of
    the paper; now it is one line, exit status 2."""
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    monkeypatch.setattr(registry, "_LOADED", dict(registry._LOADED))
    mod = tmp_path / "defines_none.py"
    mod.write_text("X = 1\n")
    assert main(["verify", "--claims", str(mod), "--only-claims"]) == 2
    assert "define(s) no claim" in capsys.readouterr().err
