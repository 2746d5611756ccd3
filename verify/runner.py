"""How a claim is run: its checks on the honest inputs, then each fault's targets on the broken
ones, within a time limit, into a ``Result`` (``qstr.verify.results``).

A claim passes only when every check holds on the honest inputs and every fault makes each of
the checks it names fail (a check that crashes on broken inputs has caught nothing). The runner
is handed the claims it runs (``run_claim(claim, ctx)``): it never looks them up in the registry
and never imports the paper's catalog; ``qstr.verify.pool`` runs many side by side.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
import traceback
from typing import Any, Dict, List, Optional

from qstr.verify.claim import Check, Claim, Context, Fault, Vacuity, evidence_mix
from qstr.verify.results import TIMED_OUT, CheckResult, FaultResult, Result
from qstr.verify.threads import cpu_threads
from qstr.verify.verdict import Verdict


def _error_line(exc: BaseException) -> str:
    """'Type: message (file:line)': the exception and where it was raised (the innermost frame;
    the path relative to the working directory when it lies below it)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        path = os.path.relpath(frames[-1].filename)
        path = frames[-1].filename if path.startswith("..") else path
        where = f" ({path}:{frames[-1].lineno})"
    return f"{type(exc).__name__}: {exc}{where}"


def run_check(check: Check, inputs: Any, ctx: Context) -> CheckResult:
    """One check; an exception is a failed check with the error recorded."""
    start = time.perf_counter()
    try:
        v = check.run(inputs, ctx)
        if not isinstance(v, Verdict):
            raise TypeError(f"check {check.name!r} returned {type(v).__name__}, not a Verdict")
        out = CheckResult(
            check.name,
            v.measured,
            v.bound,
            v.relation,
            bool(v.holds),
            v.rounding,
            v.detail,
            v.dtype,
            vacuous=bool(v.vacuous),
            ratio=None if check.agreement else v.ratio,
            slack=_finite(v.slack) if v.relation != "==" else None,
            enclosure=v.enclosure,
            bound_enclosure=v.bound_enclosure,
            certified=v.certified,
        )
        out.cases = v.cases  # not a field (not recorded): pytest items report each case
    except Exception as exc:  # noqa: BLE001 - a crashing check is a failing check, reported
        out = CheckResult(check.name, "error", "", "", False, error=_error_line(exc))
        out.exception = exc  # not a field (not recorded): pytest items re-raise it
        out.traceback = "".join(traceback.format_exception(exc))  # for qstr verify --traceback
    out.seconds = round(time.perf_counter() - start, 3)
    out.evidence = check.evidence
    return out


def _run_fault(
    claim: Claim, fault: Fault, inputs: Any, ctx: Context, honest: Dict[str, CheckResult]
) -> FaultResult:
    """The fault's targets on the broken inputs: caught when every target fails without crashing.

    A fault whose target already fails on the honest inputs is not applicable: its failure there
    shows nothing about the fault, so it counts as not caught (and the claim fails)."""
    failing = [name for name in fault.breaks if name in honest and not honest[name].holds]
    if failing:
        return FaultResult(
            fault.name,
            fault.breaks,
            False,
            error=f"not applicable: {', '.join(failing)} already fail(s) on the honest inputs",
        )
    try:
        broken = fault.apply(inputs, ctx)
    except Exception as exc:  # noqa: BLE001 - a fault that cannot be applied catches nothing
        if fault.refused(exc):  # ... unless refusing is what the builder must do
            return FaultResult(fault.name, fault.breaks, True, refused=_error_line(exc))
        return FaultResult(fault.name, fault.breaks, False, error=_error_line(exc))
    checks = [run_check(claim.check_named(name), broken, ctx) for name in fault.breaks]
    refusals = [c.error for c in checks if fault.refused(getattr(c, "exception", None))]
    caught = all(
        not c.holds and (not c.error or fault.refused(getattr(c, "exception", None)))
        for c in checks
    )
    return FaultResult(fault.name, fault.breaks, caught, checks, refused="; ".join(refusals))


class ClaimTimeout(BaseException):
    """A claim ran past its time limit (``qstr verify --timeout``): not an Exception, so that no
    check's handler swallows it."""


@contextlib.contextmanager
def _time_limit(seconds: Optional[float]):
    """Raise ClaimTimeout in the block after ``seconds`` (SIGALRM; the main thread of the process,
    where the CLI and its worker processes run claims). None: no limit."""
    if seconds is None:
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        raise ValueError("a claim's time limit needs the main thread (SIGALRM)")

    def expire(signum, frame):
        raise ClaimTimeout(seconds)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_BUILD = object()  # run_claim builds the honest inputs itself


def run_claim(
    claim: Claim, ctx: Context, timeout: Optional[float] = None, inputs: Any = _BUILD
) -> Result:
    """Run every check on the honest inputs and every fault's targets on its broken inputs; a
    claim that runs past ``timeout`` seconds fails with every check and fault saying so.
    ``inputs``: the honest inputs already built at ``ctx`` (``claim_inputs``), reused as given."""
    start = time.perf_counter()
    try:
        with _time_limit(timeout):
            return _run_claim(claim, ctx, start, inputs)
    except ClaimTimeout:
        error = f"{TIMED_OUT} {timeout:g} s (--timeout)"
        checks, faults = _all_failed(
            claim.checks_in(ctx.profile, ctx.evidence),
            claim.faults_in(ctx.profile, ctx.evidence),
            error,
        )
        return _result(claim, ctx, checks, faults, round(time.perf_counter() - start, 3), error)


def _all_failed(checks_run, faults_run, error: str):
    """Every check and fault of a claim that could not run (its inputs failed, or it timed out),
    each failing with ``error``."""
    checks = [
        CheckResult(c.name, "error", "", "", False, error=error, evidence=c.evidence)
        for c in checks_run
    ]
    return checks, [FaultResult(f.name, f.breaks, False, error=error) for f in faults_run]


def _run_claim(claim: Claim, ctx: Context, start: float, inputs: Any) -> Result:
    error = ""
    with cpu_threads(ctx.threads):
        try:
            inputs = claim.inputs(ctx) if inputs is _BUILD else inputs
        except Exception as exc:  # noqa: BLE001 - inputs that cannot be built fail every check
            inputs, error = None, f"building the inputs: {_error_line(exc)}"
        checks_run, faults_run = (
            claim.checks_in(ctx.profile, ctx.evidence),
            claim.faults_in(ctx.profile, ctx.evidence),
        )
        if error:
            checks, faults = _all_failed(checks_run, faults_run, error)
        else:
            checks = [run_check(c, inputs, ctx) for c in checks_run]
            honest = {c.name: c for c in checks}
            faults = [_run_fault(claim, f, inputs, ctx, honest) for f in faults_run]
        vacuity = _vacuity(claim, inputs) if not error else None
        scope = _scope(claim, inputs) if not error else ""
    out = _result(claim, ctx, checks, faults, round(time.perf_counter() - start, 3), error)
    out.scope = scope
    if isinstance(vacuity, Vacuity):
        out.vacuity, out.vacuous = vacuity.line, bool(vacuity.everywhere)
    elif vacuity is not None:  # the vacuity could not be computed: said, and the claim fails
        out.vacuity, out.holds = vacuity, False
        out.error = "; ".join(e for e in (out.error, vacuity) if e)
    for c in [*checks, *(fc for f in faults for fc in f.checks)]:
        c.__dict__.pop("exception", None)  # a record: the line is kept, the object not
        c.__dict__.pop("cases", None)
    return out


def _scope(claim: Claim, inputs: Any) -> str:
    """The claim's scope line ("" when it declares none; the error, said, when it crashed)."""
    if claim.scope is None:
        return ""
    try:
        return str(claim.scope(inputs))
    except Exception as exc:  # noqa: BLE001 - a scope that cannot be said is said so
        return f"scope not computed: {_error_line(exc)}"


def _vacuity(claim: Claim, inputs: Any):
    """The claim's Vacuity, None when it declares none, or the error line when it crashed."""
    if claim.vacuity is None:
        return None
    try:
        v = claim.vacuity(inputs)
        if not isinstance(v, Vacuity):
            raise TypeError(f"the vacuity returned {type(v).__name__}, not a Vacuity")
        return v
    except Exception as exc:  # noqa: BLE001 - reported as the claim's error
        return f"vacuity: {_error_line(exc)}"


def _dtype(checks: List[CheckResult]) -> str:
    kinds = sorted({part for c in checks if c.dtype != "exact" for part in c.dtype.split("+")})
    return "+".join(kinds) if kinds else "float64"


def _check_detail(c: CheckResult) -> str:
    """'NAME: DETAIL; measured/bound R' (the ratio where the check is an inequality)."""
    ratio = f"measured/bound {c.ratio:.3g}" if c.ratio is not None else ""
    vacuous = "vacuous" if c.status == "vacuous" else ""
    return f"{c.name}: " + "; ".join(p for p in (c.detail, ratio, vacuous) if p)


def _finite(value: float) -> Optional[float]:
    return float(value) if math.isfinite(value) else None


def _number(value) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _result(claim: Claim, ctx: Context, checks, faults, seconds: float, error: str) -> Result:
    """The claim's row: its headline is the first failing check, else the first check; holds =
    every check holds."""
    head = next((c for c in checks if not c.holds), checks[0])
    errors = [error] if error else []
    errors += [f"{c.name}: {c.error}" for c in checks if c.error]
    errors += [f"fault {f.name}: {f.error}" for f in faults if f.error and not error]
    errors += [f"fault {f.name} / {c.name}: {c.error}" for f in faults for c in f.checks if c.error]
    return Result(
        id=claim.id,
        ref_seed=claim.ref.seed,
        ref_conference=claim.ref.conference,
        statement=claim.statement,
        measured=head.measured,
        bound=head.shown_bound if head.relation else head.bound,
        holds=all(c.holds for c in checks),
        falsifier_caught=all(f.caught for f in faults),
        profile=ctx.profile,
        device=ctx.device,
        seconds=seconds,
        seed=ctx.seed,
        dtype=_dtype(checks),
        detail="; ".join(_check_detail(c) for c in checks if c.detail or c.ratio is not None),
        falsifier="; ".join(f.name for f in faults),
        error="; ".join(errors),
        measured_value=_number(head.measured),
        bound_value=_number(head.bound),
        checks=checks,
        faults=faults,
        evidence=evidence_mix([c.evidence for c in checks]),
        marks=claim.marks,
    )
