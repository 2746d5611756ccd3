"""Tests for verify/report.py: the results table, and the device and dtype its records and title
carry."""

import pytest
from rich.console import Console

from qstr.verify.claim import Check, Context, at_least, at_most, close, exact
from qstr.verify.registry import CheckResult, FaultResult, Result, run_check
from qstr.verify.report import WIDE, check_line, failure_lines, print_report, ratio_range, table


def _result(cid, device, dtype):
    return Result(
        id=cid,
        ref_seed="r",
        ref_conference="r",
        statement="s",
        measured=1.0,
        bound="<= 1",
        holds=True,
        falsifier_caught=True,
        profile="quick",
        device=device,
        seconds=0.1,
        seed=0,
        dtype=dtype,
    )


def test_record_and_table_carry_device_and_dtype():
    same = [_result("a", "cpu", "float64"), _result("b", "cpu", "float64")]
    assert same[0].record()["dtype"] == "float64" and same[0].record()["device"] == "cpu"
    t = table(same, "qstr verify")
    assert "device cpu" in t.title and "dtype float64" in t.title and len(t.columns) == 10
    mixed = table(
        [_result("a", "cpu", "float64"), _result("b", "cpu", "float32+float64")], "qstr verify"
    )
    assert "dtype" not in mixed.title and [c.header for c in mixed.columns].count("dtype") == 1
    Console(width=120, file=open("/dev/null", "w")).print(mixed)


def test_table_says_what_each_claim_rests_on():
    r = _result("a", "cpu", "float64")
    r.evidence = "built 2, formula 1"
    t = table([r], "qstr verify")
    col = [c for c in t.columns if c.header == "rests on"][0]
    assert list(col.cells) == ["built 2\nformula 1"]  # one kind of evidence a line


def test_the_statement_gets_the_width_at_the_commands_160_columns():
    """At the 160 columns `qstr verify` prints to a file or pipe, a long statement's longest line
    is 30 characters or more: the reference, evidence and bound columns wrap first (the
    statement had 22 to 27 characters a line, an 11-word sentence over 8 lines)."""
    r = _result("lemma-22", "cpu", "float64")
    r.ref_seed, r.ref_conference = "Thm 7", "Thm 5"
    r.statement = "product gadget (x+y)^2/4 - (x-y)^2/4 by knot interpolation: " * 4
    r.evidence, r.bound = "built 12, exact 1, formula 4, certified 1", "<= 0.00390625 + 2.2e-13"
    console = Console(width=160, record=True, file=open("/dev/null", "w"))
    console.print(table([r], "qstr verify"))
    rows = [line.split("│") for line in console.export_text().splitlines() if "│" in line]
    statement = [cells[3].strip() for cells in rows if len(cells) > 3]
    assert max(len(text) for text in statement) >= 30, statement
    assert len(statement) <= 9, statement  # 240 characters in 9 lines: 27 or more a line


def test_a_fault_whose_check_crashed_says_why():
    """A fault not caught because its target check crashed names the check and the error."""
    r = _result("a", "cpu", "float64")
    crashed = CheckResult("c", "error", "", "", False, error="ZeroDivisionError: float division")
    held = CheckResult("h", 1.0, 2.0, "<=", True)
    r.faults = [FaultResult("f", ("c", "h"), False, [crashed, held])]
    (line,) = failure_lines(r)
    assert line == (
        "fault 'f' NOT caught: still holds: h measured 1 <= 2; "
        "crashed: c - ZeroDivisionError: float division"
    )


def test_a_long_claim_id_folds_and_leaves_the_numbers_readable():
    import io  # noqa: PLC0415

    r = _result("x" * 300, "cpu", "float64")
    r.measured, r.bound = 0.123456, "<= 0.5"
    buf = io.StringIO()
    Console(width=120, file=buf).print(table([r], "qstr verify"))
    text = buf.getvalue()
    rows = [line.split("│") for line in text.splitlines() if line.startswith("│")]
    assert [c.strip() for c in rows[0][5:9]] == ["0.1235", "<= 0.5", "", "yes 0/0"]
    assert "".join(r[1].strip() for r in rows) == "x" * 300  # folded, not cut


def test_a_vacuous_check_is_said_and_not_counted_as_holding():
    """A check whose bound says nothing on its inputs (``vacuous=True``) reports the status
    ``vacuous``: counted apart in the holds column, named in its line, recorded in --json."""
    v = at_least(384, 0.319, vacuous=True)
    assert v.holds and v.status == "vacuous" and at_least(384, 0.319).status == "holds"
    c = run_check(Check("d_h >= width bound", lambda inp: v), None, Context())
    assert c.status == "vacuous" and c.ratio == pytest.approx(0.319 / 384, rel=1e-12)
    r = _result("a", "cpu", "float64")
    r.checks = [c]
    holds = [col for col in table([r], "t").columns if col.header == "holds"][0]
    assert list(holds.cells) == ["[green]yes[/green]\n[yellow]1 vacuous[/yellow]"]
    assert ", VACUOUS" in check_line(c) and "measured/bound 0.000831" in check_line(c)
    assert r.record()["checks"][0]["status"] == "vacuous"


def test_each_inequality_records_its_measured_over_bound():
    """measured/bound for <=, bound/measured for >=, none for two-sided or exact checks; the
    table's m/b column gives the least and the largest of a claim's checks that hold."""
    assert at_most(0.25, 1.0).ratio == 0.25 and at_least(4.0, 1.0).ratio == 0.25
    assert close(1.0, 1.0, tol=0.1).ratio is None and exact(3, 3).ratio is None
    assert at_most(1.0, 0.0).ratio is None and at_least(3.0, 0.0).ratio is None  # margin >= 0
    assert at_most(-2.0, 1.0).ratio is None and at_most(-1.0, -0.5).ratio is None  # signs
    verdicts = (at_most(0.5, 1.0), at_least(8.0, 1.0), at_most(2.0, 1.0))
    checks = [run_check(Check(str(i), verdicts.__getitem__), i, Context()) for i in range(3)]
    assert [c.slack for c in checks] == pytest.approx([0.5, 7.0, -1.0])
    assert ratio_range(checks) == "0.12-0.5"  # the failing check (2.0 <= 1) is not a range end


def test_an_agreement_check_has_no_ratio():
    """A check declared ``agreement=True`` (a pin: a relative gap within 1e-12) records no
    measured/bound ratio, so the m/b column shows only the paper's bounds."""
    pin = Check("pin", lambda inp: at_most(3e-16, 1e-12), agreement=True)
    bound = Check("bound", lambda inp: at_most(0.5, 1.0))
    checks = [run_check(c, None, Context()) for c in (pin, bound)]
    assert [c.ratio for c in checks] == [None, 0.5] and checks[0].slack > 0.99
    assert ratio_range(checks) == "0.5"


def _statement_lines(console_width: int, r) -> list:
    """The lines of the statement column when ``print_report`` prints ``r`` at a width."""
    console = Console(width=console_width, record=True, file=open("/dev/null", "w"))
    print_report([r], console, "qstr verify")
    lines = console.export_text().splitlines()
    header = next(line.split("┃") for line in lines if "┃" in line and "statement" in line)
    at = next(i for i, c in enumerate(header) if "statement" in c)
    rows = [line.split("│") for line in lines if "│" in line]
    return [cells[at].strip() for cells in rows if len(cells) > at]


def test_a_terminal_narrower_than_wide_folds_the_cells_and_keeps_the_statement_readable():
    """Below WIDE columns (a terminal's width) the claim's id, reference and evidence share one
    cell, measured, bound and m/b another, the two counts a third: at 100 columns the statement's
    longest line is 35 characters or more (the wide layout gave its column 10 at 120 and 1 at
    100), at 80 15 or more; at WIDE and above, and with no width, one column a field."""
    r = _result("lemma-22", "cpu", "float64")
    r.ref_seed, r.ref_conference = "Thm 7", "Thm 5"
    r.statement = "product gadget (x+y)^2/4 - (x-y)^2/4 by knot interpolation: " * 4
    r.evidence, r.bound = "built 12, exact 1, formula 4, certified 1", "<= 0.00390625 + 2.2e-13"
    folded = table([r], "qstr verify", width=WIDE - 1)
    assert [c.header for c in folded.columns] == [
        "claim",
        "statement",
        "measured\nbound",
        "holds\nfaults",
        "s",
    ]
    claim, _, numbers, counts, _ = (list(c.cells)[0] for c in folded.columns)
    assert claim.startswith("[bold]lemma-22[/bold]\nThm 7 / Thm 5\n[dim]built 12\nexact 1")
    assert numbers.splitlines() == ["1", "<= 0.00390625 + 2.2e-13"]  # no ratio: no checks
    assert counts.splitlines() == ["[green]yes[/green] 0/0", "faults [green]yes[/green] 0/0"]
    for width in (None, WIDE):
        assert [c.header for c in table([r], "t", width=width).columns][:3] == [
            "id",
            "reference (seed / conf.)",
            "statement",
        ]
    assert max(map(len, _statement_lines(100, r))) >= 35
    assert max(map(len, _statement_lines(80, r))) >= 15
