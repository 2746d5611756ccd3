"""Tests for verify/experiments/results.py: the append-only results file."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from qstr.verify import cli
from qstr.verify.experiments import figure1
from qstr.verify.experiments.results import ResultsFile, environment
from qstr.verify.version import toolkit_version


def test_rows_survive_a_reopen_and_a_cut_last_line(tmp_path):
    path = tmp_path / "r.jsonl"
    f = ResultsFile(str(path))
    f.append({"point_id": "a", "value": 1})
    f.append({"point_id": "b", "value": 2})
    with open(path, "a") as fh:
        fh.write('{"point_id": "c", "val')  # a kill during the write
    g = ResultsFile(str(path))
    assert g.repaired and [r["point_id"] for r in g.rows] == ["a", "b"] and "c" not in g
    assert path.read_text().endswith("\n")


@pytest.mark.parametrize(
    "line, needle",
    [
        ('{"point_id": "b", oops}', "line 2: not a JSON object"),
        ("[1, 2]", "line 2: a JSON list, not a results row"),
    ],
)
def test_a_damaged_middle_line_names_the_file_and_the_line(tmp_path, line, needle):
    path = tmp_path / "r.jsonl"
    path.write_text(
        json.dumps({"point_id": "a"}) + "\n" + line + "\n" + json.dumps({"point_id": "c"}) + "\n"
    )
    with pytest.raises(ValueError, match=needle) as err:
        ResultsFile(str(path))
    assert str(path) in str(err.value)


def test_a_row_that_cannot_be_appended_is_one_line(tmp_path):
    folder = tmp_path / "r"
    results = ResultsFile(str(folder / "rows.jsonl"))
    results.append({"point_id": "a"})
    shutil.rmtree(folder)
    with pytest.raises(ValueError, match="cannot append a row") as exc:
        results.append({"point_id": "b"})
    assert "\n" not in str(exc.value)


def test_rows_of_another_figure_are_refused(tmp_path):
    path = tmp_path / "figure1.jsonl"
    path.write_text(
        json.dumps({"figure": "figure1", "point_id": "a"})
        + "\n"
        + json.dumps({"figure": "figure2", "point_id": "b"})
        + "\n"
    )
    with pytest.raises(ValueError, match="line 2: a row of 'figure2', not of figure1"):
        ResultsFile(str(path), "figure1")
    assert len(ResultsFile(str(path)).rows) == 2  # without a figure: any rows


def _good_row():
    from qstr.verify.experiments.points import config_id  # noqa: PLC0415

    config = {"figure": "figure1", "protocol": "paper", "model": "ffn", "N": 4, "seed": 0}
    return {
        "figure": "figure1",
        "protocol": "paper",
        "model": "ffn",
        "N": 4,
        "seed": 0,
        "samples": 640,
        "point_id": config_id(config),
        "config": config,
    }


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda r: r["config"].update(N=5), "does not give its point_id"),
        (lambda r: r.update(protocol="published"), "protocol = 'published' but its configuration"),
    ],
)
def test_a_row_edited_by_hand_is_refused_with_its_line(tmp_path, edit, needle):
    path = tmp_path / "figure1.jsonl"
    good, bad = _good_row(), _good_row()
    edit(bad)
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=rf"line 2: .*{needle}"):
        ResultsFile(str(path), "figure1")


def test_non_finite_numbers_are_written_as_null_with_where_they_were(tmp_path):
    path = tmp_path / "figure1.jsonl"
    row = _good_row() | {"test_mse": float("nan"), "curve": [[10, float("inf")]]}
    ResultsFile(str(path), "figure1").append(row)
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    back = json.loads(text)
    assert back["test_mse"] is None and back["curve"] == [[10, None]]
    assert back["non_finite"] == ["test_mse=nan", "curve[0][1]=inf"]
    assert ResultsFile(str(path), "figure1").rows[0]["point_id"] == row["point_id"]


def test_a_repeated_row_is_counted_once_with_a_note_and_a_conflict_is_refused(tmp_path, capsys):
    path = tmp_path / "figure1.jsonl"
    row = _good_row()
    path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    assert ResultsFile(str(path), "figure1").rows == [row]
    pid = row["point_id"]
    assert capsys.readouterr().err.splitlines() == [
        f"qstr: note: {path}, line 2: a repeat of line 1 (point {pid}); it is counted once"
    ]
    path.write_text(json.dumps(row) + "\n" + json.dumps(row | {"samples": 1280}) + "\n")
    with pytest.raises(ValueError) as err:
        ResultsFile(str(path), "figure1")
    assert str(err.value) == (
        f"{path}, line 2: point {pid} has another row on line 1 with different content; "
        "remove the wrong one of the two lines"
    )


FIGURE1_ROWS = Path(__file__).resolve().parents[3] / "docs" / "figures"


def test_summarize_and_reproduce_read_repeated_and_conflicting_rows_alike(
    tmp_path, capsys, monkeypatch
):
    """Issue 52: summarize counted a repeated row twice (its fits changed) where reproduce kept
    one; both read rows with :func:`unique_rows`."""
    committed = (FIGURE1_ROWS / "figure1-paper-h200-tf32-v2.jsonl").read_text().splitlines()
    rows = tmp_path / "figure1.jsonl"
    rows.write_text("\n".join(committed + [committed[4]]) + "\n")
    reported = []
    monkeypatch.setattr(figure1, "report", lambda rows, stem, **kw: reported.append(rows))
    assert cli.main(["summarize", "figure1", str(rows), "--stem", str(tmp_path / "f1")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"qstr: note: {rows}, line {len(committed) + 1}: a repeat of line 5 "
        f"(point {json.loads(committed[4])['point_id']}); it is counted once"
    ]
    assert len(reported[0]) == len(committed) == 165

    conflict = json.loads(committed[4]) | {"samples": 1}
    rows.write_text("\n".join(committed + [json.dumps(conflict)]) + "\n")
    for argv in (
        ["summarize", "figure1", str(rows)],
        ["reproduce", "figure1", "--quick", "--jobs", "1", "--out", str(tmp_path)],
    ):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            f"qstr: error: {rows}, line {len(committed) + 1}: point {conflict['point_id']} has "
            "another row on line 5 with different content; remove the wrong one of the two lines"
        ], err


def test_summarize_names_a_damaged_line_without_resume_advice_and_changes_no_file(tmp_path, capsys):
    """Issue 52: summarize (which only reads) told the user to resume; it also cut a torn last
    line off the file."""
    rows = tmp_path / "figure1.jsonl"
    good = json.dumps(_good_row())
    for text, number in ((good + "\n{oops\n" + good + "\n", 2), (good + '\n{"figure": "fig', 2)):
        rows.write_text(text)
        assert cli.main(["summarize", "figure1", str(rows)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(
            f"qstr: error: {rows}, line {number}: not a JSON object ("
        ), err
        assert err[0].endswith("); the file is damaged -- remove or repair that line"), err
        assert rows.read_text() == text
    rows.write_text(good + "\n{oops\n")
    with pytest.raises(ValueError, match="remove or repair that line and run the same command"):
        ResultsFile(str(rows), "figure1")  # reproduce's reading: the same command resumes


def test_a_rows_env_names_the_toolkit_and_torch_that_ran_it():
    """Every results row's ``env`` carries the toolkit's and torch's versions (docs/formats.md)."""
    env = environment("cpu")
    assert env["qstr-toolkit"] == toolkit_version() and env["torch"] == torch.__version__
    assert env["cpu_count"] >= 1
