"""Tests for verify/experiments/__init__.py: run_experiment and the points functions refuse bad
arguments."""

import pytest
import torch

from qstr.verify.experiments import Execution, figure1, run_experiment


def test_bad_arguments():
    with pytest.raises(ValueError, match="experiment"):
        run_experiment("figure9", out_dir="unused")
    with pytest.raises(ValueError, match="protocol"):
        run_experiment("figure1", out_dir="unused", protocol="mine")
    with pytest.raises(ValueError, match="overrides"):
        figure1.points(overrides={"N": 3})
    with pytest.raises(ValueError, match="seeds"):
        figure1.points(seeds=[])


@pytest.mark.parametrize(
    "execution, match",
    [
        ({"device": "cuda"}, r"device= is a field of Execution"),
        ({"q_values": [1]}, "figure1 takes no option 'q_values'; its options: N_values, max_"),
        ("cpu", "execution must be an Execution"),
        (Execution(device="gpu"), "device must be 'cpu' or 'cuda'"),
        (Execution(matmul="bf16"), "matmul"),
        (Execution(threads=0), "threads"),
        (Execution(threads=1.5), "threads"),
        (Execution(dtype=torch.int64), "dtype"),
        (Execution(matmul="tf32"), "needs device='cuda'"),
        (Execution(scheduler="localhost:8786"), "tcp://HOST:PORT"),
        (Execution(jobs=0), "jobs must be an integer >= 1"),
        (Execution(jobs=4097), "jobs=4097: this machine has \\d+ CPU cores"),
    ],
)
def test_a_bad_execution_is_refused_before_anything_trains(tmp_path, execution, match):
    """Where and how a run trains is one ``Execution``, checked whole before the first point; a
    keyword the figure does not take (the run settings of version 0.2 among them) is refused."""
    kw = execution if isinstance(execution, dict) else {"execution": execution}
    with pytest.raises(ValueError, match=match):
        run_experiment("figure1", out_dir=str(tmp_path / "out"), quick=True, **kw)
    assert not (tmp_path / "out").exists()  # the results folder is made only after the checks


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda t: t / ("a" * 300), "cannot create it (File name too long)"),
        (lambda t: (t / "j" / "figure2.jsonl").mkdir(parents=True) or t / "j", "is a directory"),
        (lambda t: (t / "f").write_text("x") and t / "f", "is a file"),
    ],
)
def test_a_results_folder_that_cannot_hold_the_rows_is_one_line(tmp_path, capsys, make, needle):
    from qstr.verify import cli  # noqa: PLC0415

    out = make(tmp_path)
    assert cli.main(["reproduce", "figure2", "--quick", "--seeds", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
