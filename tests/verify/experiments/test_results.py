"""Tests for verify/experiments/results.py: the append-only results file."""

import json
import shutil

import pytest

from qstr.verify.experiments.results import ResultsFile


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
