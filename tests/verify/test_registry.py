"""Tests for verify/registry.py: how run_claim scores checks and faults (a fault whose target still
holds, a crashing check, inputs that cannot be built), loading a user's module, and that a claim
run with the same seed gives the same numbers."""

import re
import subprocess
import sys

import pytest

import qstr.verify
from qstr.verify import catalog, pool, registry
from qstr.verify.claim import Check, Claim, Context, Fault, Ref, Vacuity, Verdict, at_most
from qstr.verify.claims import all_claims
from qstr.verify.registry import load_claims, register, run_claim


def _claim(inputs=lambda ctx: 1.0, apply=lambda inp, ctx: 3.0, run=None, cid="fake"):
    """Checks "le 2" (x <= 2) and "le 5" (x <= 5); fault "three" sets x = 3, breaking "le 2"."""
    return Claim(
        cid,
        Ref("Lemma 0", "Lemma 1"),
        "x <= 2",
        inputs=inputs,
        checks=[
            Check("le 2", run or (lambda x, ctx: at_most(x, 2.0))),
            Check("le 5", lambda x, ctx: at_most(x, 5.0)),
        ],
        faults=[Fault("three", apply, breaks=("le 2",))],
    )


def test_checks_and_faults_are_scored_each():
    r = run_claim(_claim(), Context())
    assert (
        r.passed
        and [c.name for c in r.checks] == ["le 2", "le 5"]
        and r.ref_conference == "Lemma 1"
    )
    assert (
        r.measured == 1.0 and r.bound == "<= 2" and r.measured_value == 1.0 and r.bound_value == 2.0
    )
    (f,) = r.faults
    assert f.caught and [(c.name, c.measured, c.holds) for c in f.checks] == [("le 2", 3.0, False)]


def test_a_fault_whose_target_still_holds_is_not_caught():
    r = run_claim(_claim(apply=lambda inp, ctx: 1.5), Context())
    assert r.holds and not r.falsifier_caught and not r.passed
    assert [f.name for f in r.missed_faults] == ["three"]


def test_a_fault_whose_target_fails_on_the_honest_inputs_is_not_applicable():
    """x = 4 on the honest inputs: "le 2" already fails there, so the fault breaking it shows
    nothing (not caught, with the reason), and the row's columns show the failing check."""
    r = run_claim(_claim(inputs=lambda ctx: 4.0), Context())
    assert not r.holds and not r.falsifier_caught
    (f,) = r.faults
    assert not f.caught and f.checks == [] and "not applicable: le 2" in f.error
    assert r.measured == 4.0 and r.bound == "<= 2"


def test_the_row_shows_the_first_failing_check():
    r = run_claim(_claim(inputs=lambda ctx: 1.0, run=lambda x, ctx: at_most(x, 2.0)), Context())
    assert r.measured == 1.0 and r.bound == "<= 2"  # all hold: the first check
    failing = Claim(
        "late",
        Ref("Lemma 2"),
        "x <= 5 and x <= 0.5",
        inputs=lambda ctx: 1.0,
        checks=[
            Check("le 5", lambda x: at_most(x, 5.0)),
            Check("le 0.5", lambda x: at_most(x, 0.5)),
        ],
        faults=[Fault("six", lambda x: 6.0, breaks="le 5")],
    )
    r = run_claim(failing, Context())
    assert not r.holds and r.falsifier_caught
    assert r.measured == 1.0 and r.bound == "<= 0.5"


def test_a_crashing_check_fails_and_catches_nothing():
    def boom(x, ctx):
        raise RuntimeError("kaput")

    r = run_claim(_claim(run=boom), Context())
    assert not r.holds and not r.falsifier_caught and "kaput" in r.error
    # the error once, with the file and line of the raise
    line = boom.__code__.co_firstlineno + 1
    assert r.checks[0].error == f"RuntimeError: kaput (tests/verify/test_registry.py:{line})"
    assert [c.name for c in r.failed_checks] == ["le 2"] and r.checks[1].holds


def _refusing(refuses, where: str):
    """x is a size; the fault sets it to -1, which the builder refuses (ValueError) in the fault
    itself or in the check that rebuilds from x."""

    def build(x):
        if x < 0:
            raise ValueError(f"size must be >= 0, got {x}")
        return x

    def apply(x, ctx):
        return build(-1) if where == "apply" else -1

    return Claim(
        "refusing",
        Ref("Lemma 0"),
        "x <= 2",
        inputs=lambda ctx: 1,
        checks=[Check("le 2", lambda x, ctx: at_most(build(x), 2))],
        faults=[Fault("negative", apply, breaks="le 2", refuses=refuses)],
    )


@pytest.mark.parametrize("where", ["apply", "check"])
def test_a_fault_the_builder_must_refuse_is_caught_by_the_refusal(where):
    (f,) = run_claim(_refusing(ValueError, where), Context()).faults
    assert f.caught and f.refused.startswith("ValueError: size must be >= 0, got -1")
    (f,) = run_claim(_refusing(TypeError, where), Context()).faults
    assert not f.caught and not f.refused
    (f,) = run_claim(_refusing(None, where), Context()).faults
    assert not f.caught
    with pytest.raises(ValueError, match="refuses must be an exception type"):
        Fault("bad", lambda x: x, breaks="le 2", refuses="ValueError")


def test_inputs_that_cannot_be_built_fail_every_check():
    r = run_claim(_claim(inputs=lambda ctx: 1 / 0), Context())
    assert not r.holds and not r.falsifier_caught and "ZeroDivisionError" in r.error
    assert all(c.measured == "error" for c in r.checks)


def test_faults_leave_the_honest_inputs_alone_and_see_the_context():
    seen = []
    r = run_claim(_claim(apply=lambda inp, ctx: seen.append((inp, ctx.profile)) or 4.0), Context())
    assert r.passed and seen == [(1.0, "quick")]


def test_declaration_is_checked():
    ok = dict(
        id="x",
        ref=Ref("Lemma 1"),
        statement="s",
        inputs=lambda ctx: 0,
        checks=[Check("a", lambda i, c: Verdict(0, 0, True))],
    )
    with pytest.raises(ValueError, match="declares no fault"):
        Claim(**ok, faults=[])
    with pytest.raises(ValueError, match="breaks unknown check"):
        Claim(**ok, faults=[Fault("f", lambda i, c: i, breaks=("b",))])
    with pytest.raises(ValueError, match="breaks no check"):
        Fault("f", lambda i, c: i, breaks=())
    with pytest.raises(ValueError, match="two checks named"):
        Claim(**{**ok, "checks": ok["checks"] * 2}, faults=[Fault("f", lambda i, c: i, breaks="a")])
    with pytest.raises(ValueError, match="ref must be a Ref"):
        Claim(**{**ok, "ref": "Lemma 1"}, faults=[Fault("f", lambda i, c: i, breaks="a")])
    with pytest.raises(ValueError, match="registered twice"):
        register(all_claims()["lemma-40"])


def test_load_claims_registers_a_users_file(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    (tmp_path / "mine.py").write_text(
        "from qstr.verify.claim import Check, Claim, Fault, Ref, at_most\n"
        "from qstr.verify.registry import register\n"
        "register(Claim('mine', Ref('Lemma 1'), 's', inputs=lambda ctx: 1.0,\n"
        "               checks=[Check('le 2', lambda x, ctx: at_most(x, 2.0))],\n"
        "               faults=[Fault('three', lambda x, ctx: 3.0, breaks='le 2')]))\n"
    )
    (claim,) = load_claims(str(tmp_path / "mine.py"))
    assert claim.id == "mine" and run_claim(claim, Context()).passed
    # the module's own claims (what --only-claims runs), and its honest inputs for a plain test
    assert [c.id for c in registry.defined_in(str(tmp_path / "mine.py"))] == ["mine"]
    assert registry.claim_inputs("mine") == 1.0
    with pytest.raises(ValueError, match="unknown claim id 'theirs'"):
        registry.claim_inputs("theirs")
    (tmp_path / "broken.py").write_text("def (:\n")
    with pytest.raises(ValueError, match="broken.py: line 1"):
        load_claims(str(tmp_path / "broken.py"))
    with pytest.raises(ValueError, match="no such file"):
        load_claims(str(tmp_path / "absent.py"))


def test_same_seed_same_numbers():
    a = run_claim(all_claims()["lemma-40"], Context(profile="quick", seed=3))
    b = run_claim(all_claims()["lemma-40"], Context(profile="quick", seed=3))
    assert a.measured == b.measured and a.detail == b.detail


def test_checks_and_faults_run_in_their_profiles_only():
    """A check declared for the full profile (training, say) and its fault are left out of quick."""
    slow = Check("trained", lambda x, ctx: at_most(x, 2.0), profiles=("full", "gpu"))
    c = Claim(
        "p",
        Ref("Lemma 1"),
        "s",
        inputs=lambda ctx: 1.0,
        checks=[Check("le 2", lambda x, ctx: at_most(x, 2.0)), slow],
        faults=[
            Fault("three", lambda x, ctx: 3.0, breaks="le 2"),
            Fault("three, trained", lambda x, ctx: 3.0, breaks="trained", profiles=("full", "gpu")),
        ],
    )
    quick, full = run_claim(c, Context(profile="quick")), run_claim(c, Context(profile="full"))
    assert [k.name for k in quick.checks] == ["le 2"]
    assert [f.name for f in quick.faults] == ["three"]
    assert [k.name for k in full.checks] == ["le 2", "trained"] and len(full.faults) == 2
    assert quick.passed and full.passed
    with pytest.raises(ValueError, match="runs in profiles where its check"):
        Claim(
            "p",
            Ref("Lemma 1"),
            "s",
            inputs=lambda ctx: 1.0,
            checks=[slow],
            faults=[Fault("three", lambda x, ctx: 3.0, breaks="trained")],
        )


def test_checks_and_faults_are_found_by_name():
    c = _claim()
    assert c.check_named("le 5").name == "le 5"
    assert c.fault_named("three").breaks == ("le 2",)
    with pytest.raises(ValueError, match="has no fault 'four'; its faults: three"):
        c.fault_named("four")
    with pytest.raises(ValueError, match="has no check 'le 9'"):
        c.check_named("le 9")


def _vacuity_claim(vacuity):
    c = Claim("vac-test", Ref("X"), statement="s")
    c.inputs(lambda ctx: 1.0)

    @c.check("holds", evidence="formula")
    def _holds(inp):
        return Verdict(inp, 2.0, True)

    c.fault("halved", breaks=_holds, apply=lambda inp: 3.0)
    c.vacuity_with(vacuity)
    return c


def test_vacuity_is_recorded_and_a_crashing_one_fails_the_claim():
    ok = run_claim(_vacuity_claim(lambda inp: Vacuity(True, "n(N) >= N d everywhere")), Context())
    assert ok.vacuous and ok.vacuity == "n(N) >= N d everywhere" and ok.holds
    assert ok.record()["vacuous"] is True
    bad = run_claim(_vacuity_claim(lambda inp: 1 / 0), Context())
    assert not bad.holds and "ZeroDivisionError" in bad.vacuity and "vacuity" in bad.error
    with pytest.raises(ValueError, match="vacuity twice"):
        _vacuity_claim(lambda inp: Vacuity(False, "")).vacuity_with(lambda inp: None)


def test_scope_is_recorded_and_a_crashing_one_says_so():
    c = _vacuity_claim(lambda inp: Vacuity(False, "n(N) < N d from N = 16"))
    c.scope_with(lambda inp: f"N = 16, value {inp}")
    assert run_claim(c, Context()).scope == "N = 16, value 1.0"
    bad = _vacuity_claim(lambda inp: Vacuity(False, ""))
    bad.scope_with(lambda inp: inp.missing)
    assert "scope not computed: AttributeError" in run_claim(bad, Context()).scope
    with pytest.raises(ValueError, match="scope twice"):
        c.scope_with(lambda inp: "")


_MINE = (
    "from qstr.verify.claim import Check, Claim, Fault, Ref, at_most\n"
    "from qstr.verify.registry import register\n"
    "from {helper} import BOUND\n"
    "register(Claim('{cid}', Ref('Lemma 1'), 's', inputs=lambda ctx: 1.0,\n"
    "               checks=[Check('le', lambda x, ctx: at_most(x, BOUND))],\n"
    "               faults=[Fault('three', lambda x, ctx: 3.0, breaks='le')]))\n"
)


def test_a_users_file_imports_its_siblings_once(tmp_path, monkeypatch):
    """The file's folder is on sys.path (its sibling helpers import), it is imported under its own
    name, and loading it again, or importing it, registers nothing twice."""
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(registry, "_LOADED", {})
    (tmp_path / "qstr_test_helpers_a.py").write_text("BOUND = 2.0\n")
    path = tmp_path / "qstr_test_claims_a.py"
    path.write_text(_MINE.format(helper="qstr_test_helpers_a", cid="mine-a"))
    try:
        (claim,) = load_claims(str(path))
        assert claim.id == "mine-a" and run_claim(claim, Context()).passed
        assert load_claims(str(path)) == [] and load_claims("qstr_test_claims_a") == []
        import qstr_test_claims_a  # noqa: F401, PLC0415 - the module users' tests import

        assert list(registry.REGISTRY).count("mine-a") == 1
    finally:
        sys.modules.pop("qstr_test_claims_a", None)
        sys.modules.pop("qstr_test_helpers_a", None)


@pytest.mark.parametrize(
    "body, needle",
    [
        (
            "x = 1\nraise RuntimeError('boom')\n",
            "raised RuntimeError: boom (qstr_test_bad.py, line 2)",
        ),
        ("print(undefined_name)\n", "raised NameError: name 'undefined_name' is not defined"),
        ("import qstr_no_such_module_x\n", "raised ModuleNotFoundError: No module named"),
        ("import sys\nsys.exit(7)\n", "called sys.exit(7) while imported"),
    ],
)
def test_a_users_file_that_fails_at_import_is_one_value_error(tmp_path, monkeypatch, body, needle):
    monkeypatch.setattr(sys, "path", list(sys.path))
    path = tmp_path / "qstr_test_bad.py"
    path.write_text(body)
    with pytest.raises(ValueError, match=re.escape(needle)):
        load_claims(str(path))
    assert "qstr_test_bad" not in sys.modules


def test_a_users_file_named_like_an_installed_module_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "json.py").write_text("")
    with pytest.raises(ValueError, match="a module named 'json' is already imported"):
        load_claims(str(tmp_path / "json.py"))


def test_a_claim_past_its_time_limit_fails_saying_so():
    import time  # noqa: PLC0415

    from qstr.verify.claim import Check, Claim, Context, Fault, Ref  # noqa: PLC0415
    from qstr.verify.registry import run_claim  # noqa: PLC0415

    def forever(inp, ctx):
        while True:
            time.sleep(0.01)

    c = Claim(
        id="user-hang",
        ref=Ref("Eq. 1"),
        statement="never ends",
        inputs=lambda ctx: 0,
        checks=[Check("loops", forever)],
        faults=[Fault("none", lambda inp, ctx: 1, breaks=("loops",))],
    )
    start = time.perf_counter()
    r = run_claim(c, Context(), timeout=0.5)
    assert time.perf_counter() - start < 5 and not r.holds and not r.passed
    said = "timed out after 0.5 s (--timeout)"
    assert r.error.startswith(said)
    assert [x.error for x in r.checks] == [said] and [f.error for f in r.faults] == [said]


def test_run_claim_reuses_inputs_built_before_and_builds_none():
    """``run_claim(..., inputs=...)``: the inputs given are the honest ones, the builder is never
    called; the record is the one ``run_claim`` gives when it builds them itself."""
    built = []
    claim = _claim(inputs=lambda ctx: built.append(1) or 1.0)
    own = run_claim(claim, Context())
    given = run_claim(claim, Context(), inputs=1.0)
    assert built == [1] and given.passed and own.passed
    assert [c.measured for c in given.checks] == [c.measured for c in own.checks]
    assert not run_claim(claim, Context(), inputs=4.0).holds and built == [1]


def test_the_catalog_registers_the_papers_claims_the_registry_alone_none():
    """In a fresh process importing the registry registers no claim (``claim_inputs`` of a paper
    id says where the paper's claims come from); ``qstr.verify.inputs`` asks the catalog, which
    registers them; ``paper_claims`` lists them in table order, a user's claim left out."""
    code = (
        "import qstr.verify.registry as r\n"
        "assert r.REGISTRY == {}, list(r.REGISTRY)\n"
        "try:\n"
        "    r.claim_inputs('lemma-38')\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "unknown claim id 'lemma-38'; known: none (the paper's claims are registered by "
        "importing qstr.verify.catalog)"
    )
    inputs = qstr.verify.inputs("lemma-38")
    assert (
        type(inputs)
        is type(catalog.claim_inputs("lemma-38"))
        is type(all_claims()["lemma-38"].inputs(Context()))
    )
    mine = register(_claim(cid="mine-catalog"))
    try:
        listed = catalog.paper_claims()
        assert mine not in listed and [c.id for c in listed] == [
            c.id for c in all_claims().values() if c is not mine
        ]
    finally:
        del registry.REGISTRY["mine-catalog"]


def test_worker_processes_get_the_claims_by_their_modules_and_give_the_same_records():
    """``run_claims`` is handed the claims: a worker imports the module each is declared in (no
    catalog) and gives the record one process gives; a claim whose module a worker cannot import
    fails saying which module and why."""
    claims = [all_claims()["lemma-38"], all_claims()["lemma-36"]]
    assert pool._homes([*claims, claims[0]]) == (
        "qstr.verify.claims.lemma_38",
        "qstr.verify.claims.lemma_36",
    )
    ctx = Context()

    def without_seconds(result):
        record = result.record()
        del record["seconds"]
        for c in [*record["checks"], *(fc for f in record["faults"] for fc in f["checks"])]:
            del c["seconds"]
        return record

    by_workers = sorted(pool.run_claims(claims, ctx, 2), key=lambda pair: pair[0])
    assert [without_seconds(r) for _, r in by_workers] == [
        without_seconds(run_claim(c, ctx)) for c in claims
    ]
    pool._load((), ("qstr_no_such_module",))
    try:
        with pytest.raises(ValueError, match="'absent' is not registered .*qstr_no_such_module"):
            pool._run("absent", ctx)
    finally:
        pool._UNLOADED.clear()


def _package(root, name="qstr_test_pkg", cid="pkg-claim"):
    """root/NAME/__init__.py, root/NAME/helpers.py and root/NAME/claims.py (a claim ``cid`` that
    imports its helper through the package); the claims file's path."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    (root / name / "helpers.py").write_text("BOUND = 2.0\n")
    path = root / name / "claims.py"
    path.write_text(_MINE.format(helper=f"{name}.helpers", cid=cid))
    return path


@pytest.fixture
def fresh_imports(monkeypatch):
    """The registry, sys.path and the loaded modules of this test its own; the qstr_test_pkg
    modules it imports forgotten after it."""
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    monkeypatch.setattr(registry, "_LOADED", {})
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for name in [m for m in sys.modules if m.split(".")[0] == "qstr_test_pkg"]:
        del sys.modules[name]


def test_a_file_in_a_package_is_its_dotted_module_whatever_the_spelling(tmp_path, fresh_imports):
    """``ourpkg/claims.py`` is the module ``ourpkg.claims``, as pytest names a file under its
    rootdir: loading the path, the dotted name, or importing the module registers its claims
    once, and both spellings name the same module's claims."""
    path = _package(tmp_path)
    assert registry.file_module(str(path)) == (str(tmp_path), "qstr_test_pkg.claims")
    assert registry.file_module(str(path.parent / "__init__.py"))[1] == "qstr_test_pkg"
    (claim,) = load_claims(str(path))
    assert sys.modules["qstr_test_pkg.claims"].__file__ == str(path)
    assert claim.inputs_function.__module__ == "qstr_test_pkg.claims"
    assert load_claims("qstr_test_pkg.claims") == [] and load_claims(str(path)) == []
    import qstr_test_pkg.claims  # noqa: F401, PLC0415 - the import a user's test writes

    assert list(registry.REGISTRY).count("pkg-claim") == 1
    assert registry.defined_in(str(path)) == registry.defined_in("qstr_test_pkg.claims") == [claim]
    assert run_claim(claim, Context()).passed


def test_a_package_module_from_another_file_is_a_clash_naming_both(tmp_path, fresh_imports):
    """The same dotted name from two files: the second is refused, naming both files and the
    --claims that loads the one imported; a path a module name cannot spell is refused first."""
    first = _package(tmp_path / "one")
    second = _package(tmp_path / "two", cid="pkg-claim-two")
    load_claims(str(first))
    with pytest.raises(ValueError) as caught:
        load_claims(str(second))
    assert str(caught.value) == (
        f"--claims {second}: a module named 'qstr_test_pkg.claims' is already imported from "
        f"{first}; pass --claims qstr_test_pkg.claims for that module, or rename this file (or "
        "its package)"
    )
    del sys.modules["qstr_test_pkg.claims"]  # the package imported, the module not: found there
    with pytest.raises(ValueError, match=f"the name 'qstr_test_pkg.claims' is taken by {first}"):
        load_claims(str(second))
    assert "pkg-claim-two" not in registry.REGISTRY
    (tmp_path / "not-a-pkg").mkdir()
    (tmp_path / "not-a-pkg" / "__init__.py").write_text("")
    (tmp_path / "not-a-pkg" / "claims.py").write_text("")
    with pytest.raises(ValueError, match="'not-a-pkg.claims' is not a Python module name"):
        load_claims(str(tmp_path / "not-a-pkg" / "claims.py"))
