"""Tables and machine-readable records of claim results."""

from __future__ import annotations

import platform
from typing import Iterable, List, Optional, Sequence

import torch
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from qstr.verify.files import write_json_file
from qstr.verify.results import TIMED_OUT, CheckResult, Result
from qstr.verify.version import toolkit_version as _version


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def device_label(device: str) -> str:
    """'cuda (NVIDIA H100 80GB HBM3)' for a CUDA device, the device string otherwise."""
    if device.startswith("cuda"):
        if torch.cuda.is_available():
            return f"{device} ({torch.cuda.get_device_name(device)})"
    return device


def _shared(results: Sequence[Result], attr: str):
    values = {getattr(r, attr) for r in results}
    return values.pop() if len(values) == 1 else None


ID_WIDTH = 28  # a longer claim id folds onto more lines; the JSON records keep it whole
WIDE = 140  # columns below which the table folds its cells (``_folded``): the statement keeps room


def table(results: Sequence[Result], title: str, *, width: Optional[int] = None) -> Table:
    """The claims table; device and dtype in the title when every claim shares them, else
    columns. Narrower than ``WIDE`` columns (a terminal's ``width``), each cell of a claim's
    reference, evidence, numbers and counts folds under its neighbour's, one column each."""
    device, dtype = _shared(results, "device"), _shared(results, "dtype")
    shared = [f"device {device_label(device)}"] if device else []
    shared += [f"dtype {dtype}"] if dtype else []
    t = Table(title=" · ".join([title] + shared), show_lines=False, expand=False)
    extra = [name for name, value in (("device", device), ("dtype", dtype)) if value is None]
    rows = [_cells(r, extra) for r in results]
    layout = _wide(extra) if width is None or width >= WIDE else _folded(extra)
    for header, kw, _ in layout:
        t.add_column(header, **kw)
    for cells in rows:
        t.add_row(*(join(cells) for _, _, join in layout))
    return t


def _wide(extra: Sequence[str]) -> list:
    """(header, column options, cell from a row's cells): one column a field."""

    def one(key):
        return lambda cells: cells[key]

    return [
        ("id", dict(style="bold", max_width=ID_WIDTH, overflow="fold"), one("id")),  # JSON: whole
        ("reference (seed / conf.)", dict(max_width=14), one("reference")),
        ("statement", dict(ratio=3), one("statement")),
        ("rests on", dict(max_width=14), one("rests on")),
        ("measured", dict(min_width=8), one("measured")),
        ("bound", dict(min_width=8, max_width=16), one("bound")),
        ("m/b", dict(justify="right"), one("m/b")),
        *((name, dict(), one(name)) for name in extra),
        ("holds", dict(justify="center", min_width=5), one("holds")),
        ("faults caught", dict(justify="center"), one("faults caught")),
        ("s", dict(justify="right"), one("s")),
    ]


def _folded(extra: Sequence[str]) -> list:
    """The narrow layout: the claim (id, reference, what it rests on), the statement, the numbers
    (measured, bound, m/b), the counts (holds, faults caught), the seconds."""

    def lines(*keys, label=None):
        def cell(cells):
            parts = [
                f"{label[k]} {cells[k]}" if label and k in label else cells[k]
                for k in keys
                if cells[k]
            ]
            return "\n".join(parts)

        return cell

    numbers = lines("measured", "bound", "m/b", *extra, label={k: k for k in ("m/b", *extra)})
    return [
        ("claim", dict(max_width=14, overflow="fold"), _claim_cell),
        ("statement", dict(ratio=3), lines("statement")),
        ("measured\nbound", dict(max_width=16), numbers),
        (
            "holds\nfaults",
            dict(justify="center"),
            lines("holds", "faults caught", label={"faults caught": "faults"}),
        ),
        ("s", dict(justify="right"), lines("s")),
    ]


def _claim_cell(cells: dict) -> str:
    return f"[bold]{cells['id']}[/bold]\n{cells['reference']}\n[dim]{cells['rests on']}[/dim]"


def _cells(r: Result, extra: Sequence[str]) -> dict:
    """A claim's row, field by field (rich markup)."""
    ref = r.ref_seed if r.ref_seed == r.ref_conference else f"{r.ref_seed} / {r.ref_conference}"
    return {
        "id": r.id,
        "reference": ref,
        "statement": r.statement
        + (f"\n[dim]checked at: {escape(r.scope)}[/dim]" if r.scope else ""),
        "rests on": r.evidence.replace(", ", "\n"),  # one kind of evidence a line
        "measured": fmt(r.measured),
        "bound": fmt(r.bound),
        "m/b": ratio_range(r.checks),
        **{name: str(getattr(r, name)) for name in extra},
        "holds": _count(r.holds, sum(c.status == "holds" for c in r.checks), len(r.checks))
        + _vacuous_checks(r.checks)
        + ("\n[yellow]vacuous[/yellow]" if r.vacuous else ""),
        "faults caught": _count(r.falsifier_caught, sum(f.caught for f in r.faults), len(r.faults)),
        "s": f"{r.seconds:.1f}",
    }


def ratio_range(checks: Sequence[CheckResult]) -> str:
    """The least and the largest measured/bound of a claim's inequality checks that held and say
    something (not vacuous): '0.0004-0.98', one value, or '' when it has none."""
    ratios = [c.ratio for c in checks if c.ratio is not None and c.status == "holds"]
    if not ratios:
        return ""
    lo, hi = min(ratios), max(ratios)
    return f"{lo:.2g}" if f"{lo:.2g}" == f"{hi:.2g}" else f"{lo:.2g}-{hi:.2g}"


def _vacuous_checks(checks: Sequence[CheckResult]) -> str:
    n = sum(c.status == "vacuous" for c in checks)
    fallback = sum(c.certified is False for c in checks)
    return (f"\n[yellow]{n} vacuous[/yellow]" if n else "") + (
        f"\n[yellow]{fallback} not certified[/yellow]" if fallback else ""
    )


def _count(ok: bool, good: int, total: int) -> str:
    """'yes' (one part), 'yes 5/5', or 'NO 3/5' in red."""
    mark = "[green]yes[/green]" if ok else "[bold red]NO[/bold red]"
    return mark if total == 1 else f"{mark} {good}/{total}"


def check_line(c: CheckResult) -> str:
    """'NAME: measured M, bound <= B + term (detail)', or 'NAME: crashed: ERROR (file:line)': one
    check, one line."""
    if c.error:
        return f"{c.name}: crashed: {c.error}"
    ratio = f", measured/bound {c.ratio:.3g}" if c.ratio is not None else ""
    said = ", VACUOUS" if c.status == "vacuous" else ""
    return (
        f"{c.name}: measured {fmt(c.measured)}, bound {c.shown_bound}{ratio}{said}"
        + _balls(c)
        + (f" ({c.detail})" if c.detail else "")
    )


def _balls(c: CheckResult) -> str:
    """A certified check's enclosures, and whether they decided: '' for a float check."""
    if c.certified is None:
        return ""
    how = "certified" if c.certified else "NOT CERTIFIED, the float64 fallback decides"
    balls = "".join(
        f", {what} in [{ends[0]:.12g}, {ends[1]:.12g}]"
        for what, ends in (("measured", c.enclosure), ("bound", c.bound_enclosure))
        if ends is not None
    )
    return f", {how}{balls}"


def failure_lines(r: Result) -> List[str]:
    """What a failing claim's reader needs: each failed check with its measured and bound values,
    each fault whose target checks still held, and any error."""
    lines = [f"check {check_line(c)}" for c in r.failed_checks]
    for f in r.missed_faults:
        held = ", ".join(
            f"{c.name} measured {fmt(c.measured)} {c.shown_bound}" for c in f.checks if c.holds
        )
        crashed = ", ".join(f"{c.name} - {c.error}" for c in f.checks if c.error)
        why = "; ".join(
            part
            for part in (held and f"still holds: {held}", crashed and f"crashed: {crashed}")
            if part
        )
        lines.append(f"fault {f.name!r} NOT caught: " + (f.error or why))
    if r.error and not lines:
        lines.append(f"error: {r.error}")
    return lines


def print_report(
    results: Sequence[Result], console: Console, title: str, timeout: Optional[float] = None
) -> None:
    """The table, each failure's lines, and the last line: how many claims hold (and, with a
    ``timeout``, how many ran past it)."""
    console.print(table(results, title, width=console.width))
    for r in results:
        if r.vacuity:
            console.print(f"{r.id} vacuity: {r.vacuity}", markup=False, highlight=False)
    for r in results:
        if not r.passed:
            console.print(f"[bold red]{r.id}[/bold red] fails:", highlight=False)
            for line in failure_lines(r):
                console.print(f"  {line}", markup=False, highlight=False)
    passed = sum(r.passed for r in results)
    style = "green" if passed == len(results) else "bold red"
    late = sum(r.error.startswith(TIMED_OUT) for r in results)
    timed = "" if timeout is None else f"; {late} timed out (--timeout {timeout:g} s)"
    console.print(
        f"[{style}]{passed}/{len(results)} claims hold with every fault caught{timed}[/{style}]"
    )


def environment() -> dict:
    env = {
        "qstr-toolkit": _version(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
    }
    if torch.cuda.is_available():
        env["cuda_device"] = torch.cuda.get_device_name()
    return env


def write_json(results: Iterable[Result], path: str) -> None:
    """Write the list of records (one dict per claim) to ``path``, atomically."""
    write_json_file(path, records(results))


def records(results: Iterable[Result]) -> List[dict]:
    """One dict per claim (docs/formats.md), with the environment that ran it."""
    env = environment()
    return [r.record() | {"env": env} for r in results]
