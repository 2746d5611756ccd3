"""Claims declared where their parts are written: @claim.inputs, @claim.check, @claim.fault, the
fault helpers and the worst-case reduction of qstr.verify.claim."""

import dataclasses
from dataclasses import dataclass

import pytest

from qstr.verify.claim import (
    Claim,
    Context,
    Declaration,
    Ref,
    Verdict,
    at_least,
    at_most,
    by_measured,
    by_ratio,
    close,
    each,
    edited,
    exact,
    fields_edited,
    mapped,
    replaced,
    worst,
)
from qstr.verify.index import entry, text
from qstr.verify.registry import run_claim


@dataclass(frozen=True)
class Case:
    value: float
    scale: float = 1.0


@dataclass(frozen=True)
class Inputs:
    cases: tuple
    bound: float


def _declared() -> Claim:
    claim = Claim("decl", Ref("Lemma 1"), statement="every case's value <= bound")

    @claim.inputs
    def inputs(ctx):
        return Inputs((Case(1.0), Case(2.0)), bound=ctx.pick(quick=3.0))

    @claim.check("values <= bound")
    def values_below(inp):
        return worst(
            (f"case {i}", at_most(c.value * c.scale, inp.bound)) for i, c in enumerate(inp.cases)
        )

    @claim.check("seeded draw in [0, 1)")
    def seeded(inp, ctx):
        return at_most(float(ctx.seed_of("decl/x")) / 2**63, 1.0)

    claim.fault("bound lowered", breaks=values_below, apply=replaced(bound=1.5))
    claim.fault(
        "cases doubled",
        breaks=(values_below,),
        apply=mapped("cases", fields_edited(scale=lambda c: 2 * c.scale)),
    )

    @claim.fault("bound halved", breaks=[values_below])
    def halved(inp):
        return edited(bound=lambda b: b / 2)(inp)

    return claim


def test_a_declared_claim_runs_its_checks_and_catches_its_faults():
    claim = _declared()
    assert [c.name for c in claim.checks] == ["values <= bound", "seeded draw in [0, 1)"]
    assert [f.breaks for f in claim.faults] == [("values <= bound",)] * 3
    r = run_claim(claim.require_complete(), Context())
    assert r.passed and r.measured == 2.0 and r.bound == "<= 3"
    assert [f.caught for f in r.faults] == [True, True, True]
    assert "worst case 1" in r.checks[0].detail


def test_checks_and_faults_stay_callable_and_take_the_context_only_when_asked():
    claim = _declared()
    inp = claim.inputs(Context())
    check, seeded = claim.checks
    assert check(inp).measured == 2.0 and check.run(inp, Context()).holds
    assert seeded(inp).holds  # the default Context() is passed when the check asks for one
    assert claim.fault_named("bound halved")(inp).bound == 1.5
    assert claim.fault_named("cases doubled").apply(inp).cases[1].scale == 2.0


def test_a_fault_must_target_checks_of_its_own_claim():
    claim, other = _declared(), _declared()
    stranger = other.checks[0]
    with pytest.raises(ValueError, match="fault names repeat"):
        claim.fault("bound lowered", breaks=claim.checks[0], apply=replaced(bound=0.0))
    foreign = Claim("other", Ref("Lemma 2"), statement="")
    with pytest.raises(ValueError, match="breaks unknown check"):
        foreign.fault("f", breaks=stranger, apply=replaced(bound=0.0))
    with pytest.raises(ValueError, match="of another claim"):
        claim.fault("twin's check", breaks=stranger, apply=replaced(bound=0.0))
    with pytest.raises(ValueError, match="two checks named"):
        claim.check("values <= bound")(lambda inp: exact(1, 1))


def test_a_fault_takes_its_targets_and_edit_by_keyword_only():
    """breaks= and apply= (and what follows) are keyword-only: every fault reads the same."""
    claim = _declared()
    check = claim.checks[0]
    with pytest.raises(TypeError, match="positional"):
        claim.fault("positional targets", check, replaced(bound=0.0))
    with pytest.raises(TypeError, match="positional"):
        claim.fault("positional targets", check)
    assert [f.name for f in claim.faults] == ["bound lowered", "cases doubled", "bound halved"]


def test_an_incomplete_claim_is_refused():
    claim = Claim("bare", Ref("Lemma 3"), statement="")
    with pytest.raises(ValueError, match="declares no inputs"):
        claim.require_complete()
    claim.inputs(lambda ctx: 1)
    with pytest.raises(ValueError, match="needs at least one check"):
        claim.require_complete()
    claim.check("one")(lambda inp: exact(inp, 1))
    with pytest.raises(ValueError, match="declares no fault"):
        claim.require_complete()
    with pytest.raises(ValueError, match="declares its inputs twice"):
        claim.inputs(lambda ctx: 2)


@pytest.mark.parametrize(
    ("verdict", "slack"),
    [
        (at_most(1.0, 2.0), 0.5),
        (at_most(3.0, 2.0), -0.5),
        (at_least(3.0, 2.0), 0.5),
        (at_least(1.0, 2.0), -0.5),
        (close(1.1, 1.0, tol=0.2), 0.5),
        (close(1.4, 1.0, tol=0.2), -1.0),
        (exact(1, 1), 1.0),
        (exact(1, 2), -1.0),
        (at_most(float("nan"), 1.0), float("-inf")),
    ],
)
def test_slack_is_the_relative_room_and_negative_exactly_when_failing(verdict, slack):
    assert verdict.slack == pytest.approx(slack)
    assert (verdict.slack < 0) == (not verdict.holds)


def test_worst_picks_the_case_closest_to_failing():
    cases = [("a", at_most(1.0, 10.0)), ("b", at_most(0.9, 1.0)), ("c", at_least(5.0, 1.0))]
    v = worst(cases)
    assert v.measured == 0.9 and v.detail == "worst b"
    assert worst(cases, key=lambda v: v.measured).measured == 5.0
    assert not worst(cases + [("d", at_most(2.0, 1.0))]).holds
    # with a key, a failing case is returned whenever one fails (the key ranks the failing ones)
    failed = worst(cases + [("d", at_most(2.0, 1.0))], key=by_measured)
    assert not failed.holds and failed.measured == 2.0 and failed.detail == "worst d"
    assert worst(cases[:2], key=by_ratio).measured == 0.9  # 0.9 / 1 > 1 / 10
    with pytest.raises(ValueError, match="at least one"):
        worst([])
    assert isinstance(v, Verdict)


def test_each_edits_every_case_and_passes_the_context_when_asked():
    inp = Inputs((Case(1.0), Case(2.0)), bound=3.0)
    assert each()(lambda c: Case(c.value + 1))(inp).cases == (Case(2.0), Case(3.0))
    assert each(field="scale")(lambda c: c.value)(inp).cases[1] == Case(2.0, 2.0)
    seeded = each()(lambda c, ctx: Case(ctx.seed, c.scale))
    assert seeded(inp, Context(seed=7)).cases == (Case(7, 1.0), Case(7, 1.0))


def test_a_claims_declaration_is_one_record_and_the_keyword_call_is_unchanged():
    """``Claim(id, ref, statement, builds=..., ...)`` keeps the call users write; the declared
    fields are one frozen ``Declaration`` that the claim reads, and ``@claim.builds_with`` and
    ``@claim.bounds_with`` extend it."""
    claim = Claim(
        id="rec",
        ref=Ref("Lemma 1", "Lemma 2"),
        statement="s",
        builds=[abs],
        bounds=(min,),
        derivation="docs/derivations/x.md",
        profiles=("full",),
    )
    assert claim.declaration == Declaration(
        "rec", Ref("Lemma 1", "Lemma 2"), "s", (abs,), (min,), "docs/derivations/x.md", ("full",)
    )
    assert (claim.id, claim.statement, claim.builds, claim.profiles, claim.marks) == (
        "rec",
        "s",
        (abs,),
        ("full",),
        (),
    )
    claim.bounds_with(max)
    claim.builds_with(round)
    assert claim.bounds == (min, max) and claim.declaration.builds == (abs, round)
    with pytest.raises(dataclasses.FrozenInstanceError):
        claim.declaration.id = "other"
    with pytest.raises(TypeError, match="has no field 'derivations'; its fields: id, ref"):
        Claim("rec", Ref("Lemma 1"), "s", derivations="docs/x.md")
    with pytest.raises(ValueError, match="unknown profile"):
        Claim("rec", Ref("Lemma 1"), "s", profiles=("fast",))


def test_marks_are_pytest_mark_names_shown_only_when_given():
    """``marks=("slow", ...)``: Python identifiers (a lone string is one mark); the index and the
    run's record show them, and a claim without marks is indexed and recorded as before."""
    claim = _declared()
    assert claim.marks == () and "marks" not in entry(claim) and "marks:" not in text([claim])
    record = run_claim(claim, Context()).record()
    assert "marks" not in record and record["passed"]
    marked = Claim("m", Ref("Lemma 1"), "s", marks=("slow", "gpu_only"))
    marked.inputs(lambda ctx: 1.0)
    marked.check("le 2")(lambda x: at_most(x, 2.0))
    marked.fault("three", breaks="le 2", apply=lambda x: 3.0)
    assert entry(marked)["marks"] == ["slow", "gpu_only"]
    assert "  marks:      slow, gpu_only" in text([marked]).splitlines()
    assert run_claim(marked, Context()).record()["marks"] == ("slow", "gpu_only")
    assert Claim("one", Ref("Lemma 1"), "s", marks="slow").marks == ("slow",)
    for bad in (("slow down",), ("",), (3,), ("slow", "2fast")):
        with pytest.raises(ValueError, match="marks must be pytest mark names"):
            Claim("bad", Ref("Lemma 1"), "s", marks=bad)
