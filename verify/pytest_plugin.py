"""pytest integration: `pytest --qstr` collects every registered claim as items (docs/claims.md).

Each claim is a node named by its id; its checks (`check[NAME]`) and faults (`fault[NAME]`) are the
items, so `-k lemma-11`, `-x` and `--junitxml` work as usual. The claim's inputs are built once,
by its first item. Loaded through the `pytest11` entry point; nothing is imported until --qstr.
"""

from __future__ import annotations

import inspect
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
        help="collect every registered claim (the paper's and "
        "those of --qstr-claims) as test items: one node per claim, its checks and faults as items",
    )
    group.addoption(
        "--qstr-profile", default="quick", choices=_PROFILES, help="claim sizes (default quick)"
    )
    group.addoption(
        "--qstr-device", default=None, help="cpu or cuda (default: cpu; cuda for the gpu profile)"
    )
    group.addoption(
        "--qstr-seed", type=int, default=0, help="seed of every random draw (default 0)"
    )
    group.addoption(
        "--qstr-claims",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module of your own claims (dotted name or .py path); repeatable",
    )


class ClaimFailed(Exception):
    """A check that does not hold, or a fault whose target checks still hold: one line each."""


class ClaimNode(pytest.Collector):
    """One claim: builds its inputs once and yields its checks and faults as items."""

    def __init__(self, *, claim, ctx, **kw):
        super().__init__(**kw)
        self.claim, self.ctx, self._inputs, self._error = claim, ctx, None, None
        self.honest = {}  # check name -> its result on the honest inputs, once run

    def collect(self):
        for c in self.claim.checks_in(self.ctx.profile):
            yield CheckItem.from_parent(self, name=f"check[{c.name}]", check=c)
        for f in self.claim.faults_in(self.ctx.profile):
            yield FaultItem.from_parent(self, name=f"fault[{f.name}]", fault=f)

    def inputs(self):
        """The honest inputs, built by the first item that asks (an error fails every item)."""
        if self._inputs is None and self._error is None:
            from qstr.verify.threads import cpu_threads  # noqa: PLC0415 - no import without --qstr

            try:
                with cpu_threads(self.ctx.threads):
                    self._inputs = (self.claim.inputs(self.ctx),)
            except Exception as exc:  # noqa: BLE001 - reported by every item of the claim
                self._error = exc
        if self._error is not None:
            raise ClaimFailed(f"building the inputs of {self.claim.id}: {self._error!r}")
        return self._inputs[0]


class _ClaimItem(pytest.Item):
    def _run(self, check, inputs):
        from qstr.verify.registry import run_check  # noqa: PLC0415 - no import without --qstr
        from qstr.verify.threads import cpu_threads  # noqa: PLC0415 - no import without --qstr

        with cpu_threads(self.parent.ctx.threads):
            return run_check(check, inputs, self.parent.ctx)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ClaimFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"{self.parent.claim.id}: {self.name}"


def _line(r) -> str:
    from qstr.verify.report import check_line  # noqa: PLC0415 - no import without --qstr

    return check_line(r)


class CheckItem(_ClaimItem):
    """A check on the honest inputs: passes when it holds."""

    def __init__(self, *, check, **kw):
        super().__init__(**kw)
        self.check = check

    def runtest(self):
        r = self._run(self.check, self.parent.inputs())
        self.parent.honest[self.check.name] = r
        if not r.holds:
            raise ClaimFailed(f"{self.parent.claim.id} does not hold: {_line(r)}")


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
        broken = self.fault.apply(self.parent.inputs(), self.parent.ctx)
        results = [self._run(self.parent.claim.check_named(n), broken) for n in self.fault.breaks]
        missed = [r for r in results if r.holds or r.error]
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

    profile = config.getoption("qstr_profile")
    device = config.getoption("qstr_device") or ("cuda" if profile == "gpu" else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--qstr-device {device}: CUDA is not available on this machine")
    if device != "cpu" and not device.startswith("cuda"):
        raise ValueError(f"--qstr-device must be cpu, cuda or cuda:N, got {device!r}")
    return Context(profile=profile, device=device, seed=config.getoption("qstr_seed"))


def pytest_report_header(config):
    """With --qstr, pytest's header says which profile, device and seed the claims run at."""
    if not config.getoption("qstr"):
        return None
    profile = config.getoption("qstr_profile")
    device = config.getoption("qstr_device") or ("cuda" if profile == "gpu" else "cpu")
    return f"qstr: profile {profile}, device {device}, seed {config.getoption('qstr_seed')}"


def _path(claim, default: Path) -> Path:
    try:
        return Path(inspect.getsourcefile(claim.inputs_function))
    except TypeError:
        return default


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect
def pytest_collection_modifyitems(session, config, items):
    if not config.getoption("qstr"):
        return
    import qstr.verify.claims as paper  # noqa: PLC0415 - no import without --qstr
    from qstr.verify.registry import load_claims  # noqa: PLC0415 - no import without --qstr

    try:  # a bad module or option: pytest's one-line usage error, not an INTERNALERROR
        for module in config.getoption("qstr_claims"):
            load_claims(module)
        ctx = _context(config)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    for claim in paper.select(ctx.profile):
        node = ClaimNode.from_parent(
            session,
            name=claim.id,
            nodeid=f"qstr::{claim.id}",
            path=_path(claim, session.path),
            claim=claim,
            ctx=ctx,
        )
        new = list(node.collect())
        # reported like collected files, so "collected N items" and -k's counts include them
        config.hook.pytest_collectreport(
            report=pytest.CollectReport(node.nodeid, "passed", None, new)
        )
        items.extend(new)
