"""verify/experiments/lock.py: one writer per results folder."""

import errno
import json
import os
import subprocess
import sys
import textwrap

import pytest

from qstr.verify import cli
from qstr.verify.experiments.lock import LOCK_NAME, folder_lock


def test_a_held_folder_is_refused_naming_its_holder_and_released_after(tmp_path):
    with folder_lock(str(tmp_path)) as lock:
        assert lock.taken_over is None
        with pytest.raises(ValueError, match=rf"in use by another qstr run \(pid {os.getpid()} "):
            with folder_lock(str(tmp_path)):
                pass
    assert not (tmp_path / LOCK_NAME).exists()
    with folder_lock(str(tmp_path)):  # free again
        pass


def test_a_lock_file_left_by_a_killed_run_is_taken_over_with_its_holder_named(tmp_path):
    left = {"pid": 999999, "host": "elsewhere", "since": "2026-01-01T00:00:00+00:00"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(left))
    with folder_lock(str(tmp_path)) as lock:
        assert lock.taken_over == "pid 999999 on host elsewhere since 2026-01-01T00:00:00+00:00"
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()


HOLD = textwrap.dedent("""
    import sys, time
    from qstr.verify.experiments.lock import folder_lock
    with folder_lock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(60)
""")


def test_reproduce_into_a_folder_another_process_holds_is_one_line_and_exit_2(tmp_path, capsys):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        argv = ["reproduce", "figure2", "--quick", "--seeds", "1", "--out", str(out)]
        assert cli.main(argv) == 2
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"pid {holder.pid} on host" in err[0], err
    assert not (out / "figure2.jsonl").exists()


def test_the_holder_removes_temporaries_a_killed_run_left(tmp_path):
    (tmp_path / ".figure2-paper-quick.pdf.k3j9x2.tmp").write_bytes(b"half")
    (tmp_path / "figure2.jsonl").write_text("")
    with folder_lock(str(tmp_path)):
        assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME, "figure2.jsonl"]


def test_a_dask_folder_whose_process_is_gone_is_removed_and_a_live_ones_kept(tmp_path, monkeypatch):
    import tempfile  # noqa: PLC0415

    from qstr.verify.experiments import cluster  # noqa: PLC0415

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    (tmp_path / f"qstr-dask-{gone.pid}-abc").mkdir()
    (tmp_path / f"qstr-dask-{os.getpid()}-def").mkdir()
    (tmp_path / "qstr-dask-old-style").mkdir()
    cluster._remove_stale_folders()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [f"qstr-dask-{os.getpid()}-def", "qstr-dask-old-style"]


def test_a_full_disk_while_writing_the_lock_file_is_one_line_and_exit_2(
    tmp_path, capsys, monkeypatch
):
    """Issue 52: a full disk while writing the lock file was a 35-line traceback and exit 1."""

    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", full)
    out = tmp_path / "out"
    with pytest.raises(ValueError) as err:
        with folder_lock(str(out)):
            pass
    lock = out / LOCK_NAME
    assert str(err.value) == (
        f"--out {out}: cannot write its lock file {lock} (No space left on device)"
    )
    assert not lock.exists()
    argv = ["reproduce", "figure2", "--quick", "--seeds", "1", "--out", str(out)]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"qstr: error: {err.value}"]
    assert list(out.iterdir()) == []
