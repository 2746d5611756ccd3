"""Tests for verify/claim.py: seeds drawn from names, and the verdict constructors' arithmetic."""

import math
from dataclasses import replace

import pytest
import torch

from qstr.verify.claim import (
    UNDECLARED,
    Check,
    Context,
    Verdict,
    at_least,
    at_most,
    close,
    evidence_mix,
    exact,
    worst,
)
from qstr.verify.rounding import Rounding


def test_generators_are_named_and_independent_of_each_other():
    ctx = Context(seed=5)
    a = torch.rand(3, generator=ctx.generator("thm-6/min-norm", 0))
    assert torch.equal(a, torch.rand(3, generator=Context(seed=5).generator("thm-6/min-norm", 0)))
    others = [
        ctx.generator("thm-6/min-norm", 1),
        ctx.generator("thm-6/risk", 0),
        Context(seed=6).generator("thm-6/min-norm", 0),
    ]
    assert all(not torch.equal(a, torch.rand(3, generator=g)) for g in others)
    assert 0 <= ctx.seed_of("x") < 2**63
    for bad in (3, "", None):
        with pytest.raises(ValueError, match="named by a non-empty string"):
            ctx.generator(bad)


def test_verdicts_add_the_rounding_term_on_the_right_side():
    r = Rounding(n=10, scale=1.0)  # 10 eps = 2.2e-15
    assert at_most(1 + 2e-15, 1.0, r).holds and not at_most(1 + 3e-15, 1.0, r).holds
    assert at_least(1 - 2e-15, 1.0, r).holds and not at_least(1 - 3e-15, 1.0, r).holds
    v = at_most(0.5, 1.0, r, detail="worst case")
    assert (
        v.rounding == r.term
        and v.detail.startswith("worst case; rounding term")
        and v.dtype == "float64"
    )
    assert v.shown_bound == f"<= 1 + {r.term:.2g}"
    assert close(1.1, 1.0, tol=0.1 + 1e-12).holds and not close(1.1, 1.0, tol=0.09).holds
    assert not close(math.nan, 1.0, tol=1.0).holds and not at_most(math.nan, 1.0).holds
    assert exact(3, 3).holds and not exact(3, 4).holds and exact(3, 3).relation == "=="
    assert at_most(1.0, 2.0, Rounding(n=1, scale=1.0, dtype=torch.float32)).dtype == "float32"


def test_context_rejects_an_unknown_profile():
    with pytest.raises(ValueError, match="profile must be one of"):
        Context(profile="fast")


def test_a_check_declares_known_evidence_and_the_mix_counts_it():
    fn = lambda inp: Verdict(0.0, 1.0, True)  # noqa: E731
    assert Check("c", fn, evidence="monte-carlo").evidence == "monte-carlo"
    assert Check("c", fn).evidence == UNDECLARED
    with pytest.raises(ValueError, match="evidence must be one of built, exact, monte-carlo"):
        Check("c", fn, evidence="proof")
    assert (
        evidence_mix(["formula", "built", "built", UNDECLARED])
        == "built 2, formula 1, undeclared 1"
    )
    assert evidence_mix(["formula", "formula"]) == "formula only"
    assert evidence_mix([]) == ""


def test_worst_keeps_every_case_flattened_for_reports():
    """The worst case's verdict carries all the cases it was taken over (nested worsts flattened,
    labels joined), so a pytest item can report each; equality ignores them."""
    inner = worst([("q=1", at_most(1.0, 2.0)), ("q=2", at_most(3.0, 2.0))])
    outer = worst([("N=16", inner), ("N=64", at_most(0.5, 2.0))])
    assert [label for label, _ in outer.cases] == ["N=16; q=1", "N=16; q=2", "N=64"]
    assert [v.holds for _, v in outer.cases] == [True, False, True]
    assert not outer.holds and outer.measured == 3.0
    assert outer == replace(outer, cases=())


def test_a_pytest_item_lists_the_failing_cases():
    from qstr.verify.pytest_plugin import _failing  # noqa: PLC0415 - the plugin's formatter
    from qstr.verify.registry import CheckResult  # noqa: PLC0415

    v = worst([(f"k={k}", at_most(float(k), 10.0)) for k in (4, 12, 3, 20)])
    r = CheckResult("k <= n", v.measured, v.bound, v.relation, v.holds)
    r.cases = v.cases
    assert _failing(r) == (
        "\n2 of 4 cases fail:\n  k=12: measured 12, bound <= 10, FAILS"
        "\n  k=20: measured 20, bound <= 10, FAILS"
    )
