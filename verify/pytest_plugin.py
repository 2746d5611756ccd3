"""pytest integration: `pytest --qstr` collects every registered claim as items (docs/claims.md).

Claims are collected from the files that define them: a claim is the node FILE::ID, its checks
(`check[NAME]`) and faults (`fault[NAME]`) the items, so a printed node id can be passed back,
`--lf`, `-k`, `-x` and `--junitxml` work as usual, and every item records measured, bound,
rounding term, relation and evidence with `record_property`. Items are marked `qstr` (and `gpu`
when they run on CUDA) and with the claim's own marks (``Claim(marks=...)``, registered as
markers). The claim's inputs are built once, by its first item. Paths narrow as for any test: with
no path given every claim is collected, else the claims in files under the paths given (node ids
included), and the paper's with --qstr-paper; ``--qstr-certified`` keeps only the certified checks
and the faults that break only them (``qstr verify --certified``). ``--qstr-profile P`` loads the
hypothesis profile ``qstr-P`` unless ``--hypothesis-profile`` names one. Loaded through the
`pytest11` entry point; nothing is imported until --qstr (or a qstr-* hypothesis profile).
"""

from __future__ import annotations

import contextlib
import inspect
import os
from pathlib import Path

import pytest

_PROFILES = (
    "quick",
    "full",
    "gpu",
)  # qstr.verify.claim.PROFILES, restated so loading imports no torch


def pytest_addoption(parser):
    group = parser.getgroup("qstr", "qstr-toolkit claims as test items")
    group.addoption(
        "--qstr",
        action="store_true",
        help="collect the registered claims (the paper's and those of --qstr-claims) as test "
        "items: one node per claim, its checks and faults as items; with paths given, only the "
        "claims in files under them",
    )
    group.addoption(
        "--qstr-paper",
        action="store_true",
        help="with --qstr and paths given, collect the paper's claims too",
    )
    group.addoption(
        "--qstr-profile",
        default=None,
        choices=_PROFILES,
        help="claim sizes (default quick); also loads the hypothesis profile qstr-PROFILE "
        "unless --hypothesis-profile names one",
    )
    group.addoption(
        "--qstr-device", default=None, help="cpu or cuda (default: cpu; cuda for the gpu profile)"
    )
    group.addoption(
        "--qstr-seed", type=int, default=0, help="seed of every random draw (default 0)"
    )
    group.addoption(
        "--qstr-certified",
        action="store_true",
        help="with --qstr, only the certified checks (ball arithmetic) and the faults that break "
        "only them, of the claims that have one: what `qstr verify --certified` runs",
    )
    group.addoption(
        "--qstr-claims",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module of your own claims (dotted name or .py path); repeatable; needs --qstr",
    )


class ClaimFailed(Exception):
    """A check that does not hold, or a fault whose target checks still hold: one line each."""


class ClaimsFile(pytest.File):
    """A file defining claims: its claims in registry order, each a :class:`ClaimNode`."""

    @classmethod
    def at(cls, parent, path: Path):
        """The file's collector, its node id the path relative to the rootdir or, for a file
        outside it (the paper's claims in site-packages), its module path (qstr/verify/...)."""
        return cls.from_parent(parent, path=path, nodeid=_file_id(parent.config, path))

    def collect(self):
        st = _state(self.config)
        st.collected.add(self.path.resolve())
        for claim in st.files.get(self.path.resolve(), ()):
            yield ClaimNode.from_parent(
                self, name=claim.id, nodeid=f"{self.nodeid}::{claim.id}", claim=claim, ctx=st.ctx
            )


class ClaimNode(pytest.Collector):
    """One claim: builds its inputs once and yields its checks and faults as items."""

    def __init__(self, *, claim, ctx, **kw):
        super().__init__(**kw)
        self.claim, self.ctx, self._inputs, self._error = claim, ctx, None, None
        self.honest = {}  # check name -> its result on the honest inputs, once run
        self.add_marker("qstr")
        if ctx.device.startswith("cuda"):
            self.add_marker("gpu")
        for mark in claim.marks:  # Claim(..., marks=("slow",))
            self.add_marker(mark)

    def collect(self):
        # node ids given as strings, so that they parse as pytest parses a rerun's "check[NAME]"
        for c in self.claim.checks_in(self.ctx.profile, self.ctx.evidence):
            name = f"check[{c.name}]"
            yield CheckItem.from_parent(self, name=name, nodeid=f"{self.nodeid}::{name}", check=c)
        for f in self.claim.faults_in(self.ctx.profile, self.ctx.evidence):
            name = f"fault[{f.name}]"
            yield FaultItem.from_parent(self, name=name, nodeid=f"{self.nodeid}::{name}", fault=f)

    def inputs(self):
        """The honest inputs, built by the first item that asks (an error fails every item, the
        first with its traceback)."""
        if self._inputs is None and self._error is None:
            from qstr.verify.threads import cpu_threads  # noqa: PLC0415 - no import without --qstr

            try:
                with cpu_threads(self.ctx.threads):
                    self._inputs = (self.claim.inputs(self.ctx),)
            except Exception as exc:
                self._error = exc
                raise
        if self._error is not None:
            raise ClaimFailed(f"building the inputs of {self.claim.id}: {_error(self._error)}")
        return self._inputs[0]


def _error(exc: BaseException) -> str:
    from qstr.verify.registry import _error_line  # noqa: PLC0415 - no import without --qstr

    return _error_line(exc)


class _ClaimItem(pytest.Item):
    def _run(self, check, inputs):
        from qstr.verify.registry import run_check  # noqa: PLC0415 - no import without --qstr
        from qstr.verify.threads import cpu_threads  # noqa: PLC0415 - no import without --qstr

        with cpu_threads(self.parent.ctx.threads):
            return run_check(check, inputs, self.parent.ctx)

    def _record(self, r, prefix: str = "") -> None:
        """The check's numbers as JUnit properties (record_property's user_properties), and one
        property per case the check's worst case was taken over."""
        for key in ("measured", "bound", "relation", "rounding", "evidence", "holds", "dtype"):
            self.user_properties.append((prefix + key, getattr(r, key)))
        if r.error:
            self.user_properties.append((prefix + "error", r.error))
        for label, v in getattr(r, "cases", ()):
            self.user_properties.append((f"{prefix}case[{label}]", _case(v)))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ClaimFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def _traceback_filter(self, excinfo):
        """A crashing check's traceback from the check down: pytest's, pluggy's and qstr's
        dispatch frames left out."""
        tb = excinfo.traceback
        kept = tb.filter(lambda e: not _dispatch_frame(str(e.path), e.name))
        return kept or tb

    def reportinfo(self):
        return self.path, None, f"{self.parent.claim.id}: {self.name}"


_DISPATCH = {"runtest", "_run", "inputs", "run_check", "run", "_call"}


def _dispatch_frame(path: str, name: str) -> bool:
    if f"{os.sep}_pytest{os.sep}" in path or f"{os.sep}pluggy{os.sep}" in path:
        return True
    ours = path.endswith(("pytest_plugin.py", "registry.py", "runner.py", "claim.py"))
    return ours and f"{os.sep}verify{os.sep}" in path and name in _DISPATCH


def _case(v) -> str:
    """'measured M, bound <= B + term, holds' for one case of a check."""
    from qstr.verify.report import fmt  # noqa: PLC0415 - no import without --qstr

    return f"measured {fmt(v.measured)}, bound {v.shown_bound}, " + (
        "holds" if v.holds else "FAILS"
    )


def _failing(r, shown: int = 8) -> str:
    """The failing cases of a check taken over several: each on its own line."""
    cases = getattr(r, "cases", ())
    bad = [(label, v) for label, v in cases if not v.holds]
    if not cases or not bad:
        return ""
    lines = [f"\n  {label}: {_case(v)}" for label, v in bad[:shown]]
    more = f"\n  ... and {len(bad) - shown} more" if len(bad) > shown else ""
    return f"\n{len(bad)} of {len(cases)} cases fail:" + "".join(lines) + more


def _line(r) -> str:
    from qstr.verify.report import check_line  # noqa: PLC0415 - no import without --qstr

    return check_line(r)


class CheckItem(_ClaimItem):
    """A check on the honest inputs: passes when it holds; a crashing check fails with its own
    traceback (pytest's --tb rules)."""

    def __init__(self, *, check, **kw):
        super().__init__(**kw)
        self.check = check

    def runtest(self):
        r = self._run(self.check, self.parent.inputs())
        self.parent.honest[self.check.name] = r
        self._record(r)
        self._report_cases(r)
        if getattr(r, "exception", None) is not None:
            raise r.exception
        if not r.holds:
            raise ClaimFailed(f"{self.parent.claim.id} does not hold: {_line(r)}{_failing(r)}")

    def _report_cases(self, r) -> None:
        """Each case of a check taken over several as a subtest report (pytest 9's subtests, as
        ``subtests.test(LABEL)`` would make): ``check[NAME] [LABEL]`` passed or failed in the
        terminal (``-v`` shows passed ones) and in the JUnit report; the item itself is the
        worst case. Nothing on a pytest without subtests."""
        try:
            from _pytest.subtests import SubtestContext  # noqa: PLC0415 - pytest >= 9 only
        except ImportError:
            return
        for label, v in getattr(r, "cases", ()):
            failure = None if v.holds else ClaimFailed(f"{label}: {_case(v)}")
            call = pytest.CallInfo.from_call(lambda f=failure: _raise(f), "call")
            report = self.ihook.pytest_runtest_makereport(item=self, call=call)
            context = SubtestContext(msg=label, kwargs={})
            sub = pytest.SubtestReport._new(report, context, None, None)
            with _uncaptured(self.config):  # the terminal's line, not the item's captured output
                self.ihook.pytest_runtest_logreport(report=sub)


def _uncaptured(config):
    capman = config.pluginmanager.get_plugin("capturemanager")
    return capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()


def _raise(exc) -> None:
    if exc is not None:
        raise exc


class FaultItem(_ClaimItem):
    """A fault: passes when every check it names holds on the honest inputs and fails on the
    broken inputs (a target failing on the honest inputs makes the fault not applicable)."""

    def __init__(self, *, fault, **kw):
        super().__init__(**kw)
        self.fault = fault

    def runtest(self):
        node = self.parent
        for n in self.fault.breaks:
            if n not in node.honest:
                node.honest[n] = self._run(node.claim.check_named(n), node.inputs())
        failing = [n for n in self.fault.breaks if not node.honest[n].holds]
        if failing:
            raise ClaimFailed(
                f"{self.parent.claim.id}: fault {self.fault.name!r} not applicable: "
                f"{', '.join(failing)} already fail(s) on the honest inputs"
            )
        try:
            broken = self.fault.apply(self.parent.inputs(), self.parent.ctx)
        except Exception as exc:
            if not self.fault.refused(exc):
                raise
            self.user_properties += [("caught", True), ("refused", _error(exc))]
            return  # the builder refused, as the fault declares it must
        results = [self._run(self.parent.claim.check_named(n), broken) for n in self.fault.breaks]
        for r in results:
            self._record(r, prefix=f"{r.name}: ")

        def missed_by(r):
            return r.holds or (r.error and not self.fault.refused(getattr(r, "exception", None)))

        missed = [r for r in results if missed_by(r)]
        self.user_properties.append(("caught", not missed))
        if missed:
            raise ClaimFailed(
                f"{self.parent.claim.id}: fault {self.fault.name!r} not caught; "
                + "; ".join(_line(r) for r in missed)
            )


def _context(config):
    """The run's Context; a device the machine lacks is refused (ValueError), as `qstr verify`
    refuses it."""
    import torch  # noqa: PLC0415 - no import without --qstr

    from qstr.verify.claim import Context  # noqa: PLC0415 - no import without --qstr

    profile = config.getoption("qstr_profile") or "quick"
    device = config.getoption("qstr_device") or ("cuda" if profile == "gpu" else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--qstr-device {device}: CUDA is not available on this machine")
    if device != "cpu" and not device.startswith("cuda"):
        raise ValueError(f"--qstr-device must be cpu, cuda or cuda:N, got {device!r}")
    evidence = "certified" if config.getoption("qstr_certified") else None
    return Context(
        profile=profile, device=device, seed=config.getoption("qstr_seed"), evidence=evidence
    )


class _State:
    """The run's Context, the claims of the profile by the file that defines them (registry
    order), each file's module name, and the files collected so far."""

    def __init__(self, ctx, files, modules):
        self.ctx, self.files, self.modules, self.collected = ctx, files, modules, set()


_STATE = pytest.StashKey[_State]()


def _state(config) -> _State:
    """Load the --qstr-claims modules and the registry once; a bad module or option is pytest's
    one-line usage error (exit 4), not an INTERNALERROR."""
    if _STATE not in config.stash:
        try:  # the options first: a bad one is refused before the paper's claims are imported
            from qstr.verify.registry import check_claims_file, load_claims  # noqa: PLC0415

            ctx = _context(config)
            for module in config.getoption("qstr_claims"):
                if module.endswith(".py"):
                    check_claims_file(module)
            import qstr.verify.claims as paper  # noqa: PLC0415 - no import without --qstr

            for module in config.getoption("qstr_claims"):
                load_claims(module)
        except ValueError as exc:
            raise pytest.UsageError(_as_plugin_option(str(exc))) from None
        files, modules = {}, {}
        for claim in paper.select(ctx.profile):
            if not claim.checks_in(ctx.profile, ctx.evidence):
                continue  # --qstr-certified: a claim with no certified check
            path = _path(claim, config.rootpath)
            files.setdefault(path, []).append(claim)
            modules.setdefault(path, getattr(claim.inputs_function, "__module__", "") or "")
        _register_marks(config, [c for claims in files.values() for c in claims])
        config.stash[_STATE] = _State(ctx, files, modules)
    return config.stash[_STATE]


def _register_marks(config, claims) -> None:
    """The marks the claims declare (``Claim(marks=...)``) registered as pytest markers, so that
    --strict-markers passes and ``-m`` selects by them."""
    known = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    for mark in sorted({m for c in claims for m in c.marks} - known):
        config.addinivalue_line("markers", f"{mark}: declared by a qstr claim (Claim(marks=...))")


def _as_plugin_option(message: str) -> str:
    """A loader's message about ``--claims M`` (the ``qstr verify`` option) as one about the
    plugin's ``--qstr-claims M``."""
    return (
        "--qstr-claims" + message[len("--claims") :] if message.startswith("--claims ") else message
    )


def _selected(config, path: Path) -> bool:
    """Whether the claim file ``path`` is collected: every one when the command line gives no path
    (pytest's testpaths or the current folder), else those under a path given (a folder, the file,
    a node id in it), and the paper's with --qstr-paper."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return True
    if config.getoption("qstr_paper") and _state(config).modules.get(path, "").startswith(
        "qstr.verify.claims."
    ):
        return True
    here = config.invocation_params.dir
    given = [(here / arg.partition("::")[0]).resolve() for arg in config.args]
    return any(path == p or p in path.parents for p in given)


def _file_id(config, path: Path) -> str:
    try:
        return path.resolve().relative_to(config.rootpath.resolve()).as_posix()
    except ValueError:
        module = _state(config).modules.get(path.resolve(), "")
        return module.replace(".", "/") + ".py" if module else path.resolve().as_posix()


def pytest_load_initial_conftests(early_config, parser, args):
    """With --qstr, a node id rooted at a module path (qstr/verify/claims/lemma_11.py::...), as
    printed for claim files outside the rootdir, is rewritten to the file it names."""
    if "--qstr" not in args:
        return
    import importlib.util  # noqa: PLC0415
    import os  # noqa: PLC0415

    for i, arg in enumerate(args):
        path, sep, rest = arg.partition("::")
        if not path.endswith(".py") or os.path.exists(path) or path.startswith(("-", "/")):
            continue
        try:
            spec = importlib.util.find_spec(path[:-3].replace("/", "."))
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.origin:
            args[i] = spec.origin + sep + rest


def _path(claim, default: Path) -> Path:
    try:
        return Path(inspect.getsourcefile(claim.inputs_function)).resolve()
    except TypeError:
        return default


@pytest.fixture(scope="session")
def qstr_context(pytestconfig):
    """The Context of the --qstr-profile, --qstr-device and --qstr-seed options (with or without
    --qstr): what a test passes to a builder or to ``qstr.verify.inputs``."""
    try:
        return _context(pytestconfig)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture(scope="session")
def qstr_inputs(qstr_context):
    """``qstr_inputs(claim_id)``: a registered claim's honest inputs at ``qstr_context``, built
    once a session (the worst prompts, modules and cases its checks measure)."""
    # the catalog: the paper's claims registered, and any claim registered by the user's imports
    from qstr.verify.catalog import claim_inputs  # noqa: PLC0415 - no import until used

    built = {}

    def get(claim_id: str):
        if claim_id not in built:
            built[claim_id] = claim_inputs(claim_id, qstr_context)
        return built[claim_id]

    return get


@pytest.hookimpl(tryfirst=True)  # before hypothesis's plugin loads --hypothesis-profile
def pytest_configure(config):
    config.addinivalue_line("markers", "qstr: a check or fault of a claim (pytest --qstr)")
    config.addinivalue_line("markers", "gpu: runs on a CUDA device (skipped or refused without)")
    if config.getoption("qstr_claims") and not config.getoption("qstr"):
        raise pytest.UsageError(
            "--qstr-claims needs --qstr (its claims are registered and collected only with --qstr)"
        )
    if config.getoption("qstr_certified") and not config.getoption("qstr"):
        raise pytest.UsageError("--qstr-certified needs --qstr (it narrows the claims collected)")
    _hypothesis_profile(config)
    if config.getoption("qstr") and config.getoption("markers"):
        _state(config)  # `pytest --qstr --markers` lists the claims' marks too


def _hypothesis_profile(config) -> None:
    """``--qstr-profile P`` selects the hypothesis profile ``qstr-P`` unless --hypothesis-profile
    names one; a qstr-* profile asked for is registered before hypothesis's plugin loads it."""
    if not hasattr(config.option, "hypothesis_profile"):
        return  # hypothesis's plugin not loaded (-p no:hypothesispytest)
    asked, qstr = config.option.hypothesis_profile, config.getoption("qstr_profile")
    if asked is None and qstr is not None:
        asked = config.option.hypothesis_profile = f"qstr-{qstr}"
    if asked and str(asked).startswith("qstr-"):
        from qstr.verify.strategies import register_profiles  # noqa: PLC0415 - only when asked

        register_profiles()


def pytest_report_header(config):
    """With --qstr, pytest's header says which profile, device and seed the claims run at, and
    how many claims there are."""
    if not config.getoption("qstr"):
        return None
    st = _state(config)
    n = sum(len(v) for v in st.files.values())
    only = ", certified checks only" if st.ctx.evidence else ""
    return (
        f"qstr: profile {st.ctx.profile}, device {st.ctx.device}, seed {st.ctx.seed}, {n} claims"
        + only
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    """With --qstr, the modules and options are checked before anything is collected, so that a
    bad one is pytest's usage error, not a collection error of some file."""
    if session.config.getoption("qstr"):
        _state(session.config)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path, parent):
    """A file that defines claims, named on the command line (a printed node id passed back), is
    collected as its claims, not imported as a test module."""
    if not parent.config.getoption("qstr"):
        return None
    if module_path.resolve() in _state(parent.config).files:
        return ClaimsFile.at(parent, module_path)
    return None


@pytest.hookimpl(tryfirst=True)  # before -k, -m and --lf deselect
def pytest_collection_modifyitems(session, config, items):
    """The claim files the command line selects (:func:`_selected`) and pytest did not collect
    (only a file named on it, or a test_*.py in a folder, is) are collected here, after the tests,
    in registry order."""
    if not config.getoption("qstr"):
        return
    st = _state(config)
    for path in st.files:
        if path in st.collected or not _selected(config, path):
            continue
        node = ClaimsFile.at(session, path)
        for claim_node in node.collect():
            new = list(claim_node.collect())
            # reported like collected files, so "collected N items" and -k's counts include them
            config.hook.pytest_collectreport(
                report=pytest.CollectReport(claim_node.nodeid, "passed", None, new)
            )
            items.extend(new)
