"""Tests for verify/files.py: targets refused up front, atomic writes that leave the old file and
no temporary behind, and the CLI's one line and exit 2 for each bad target (issue 27's cases)."""

import json
import os
import shutil
import stat
import subprocess

import pytest
import torch

import qstr.verify.report as report
from qstr.verify.cli import main
from qstr.constructions.provenance import toolkit_version
from qstr.verify.files import check_target, save_torch, write_atomic, write_json_file


def _no_temporaries(folder) -> None:
    assert not [f for f in os.listdir(folder) if f.endswith(".tmp")], os.listdir(folder)


def _bad_targets(tmp_path):
    """(name, path) of targets every writer refuses; each is made here."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nothing")
    (tmp_path / "dir").mkdir()
    return [
        ("device", "/dev/full"),
        ("standard output's device", "/dev/stdout"),
        ("a file of /proc", "/proc/self/status"),
        ("FIFO", str(fifo)),
        ("symlink loop", str(loop)),
        ("dangling link", str(dangling)),
        ("directory", str(tmp_path / "dir")),
        ("empty", ""),
        ("trailing slash", str(tmp_path / "newdir") + "/"),
        ("missing folder", str(tmp_path / "no" / "x.pt")),
        ("name too long", str(tmp_path / ("a" * 300))),
    ]


def test_check_target_refuses_what_is_no_file_to_replace(tmp_path):
    for name, path in _bad_targets(tmp_path):
        with pytest.raises(ValueError) as exc:
            check_target("--out", path)
        assert "\n" not in str(exc.value) and str(exc.value).startswith("--out"), (name, exc.value)
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)  # nothing was replaced
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_check_target_accepts_new_names_and_regular_files_through_links(tmp_path):
    assert check_target("--out", str(tmp_path / "new.json")) == str(tmp_path / "new.json")
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert check_target("--out", str(link)) == str(real)
    assert real.read_text() == "old"  # checking changes nothing


def test_write_atomic_replaces_and_keeps_mode_and_links(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_json_file(str(link), {"a": 1})
    assert json.loads(real.read_text()) == {"a": 1}
    assert link.is_symlink() and stat.S_IMODE(os.stat(real).st_mode) == 0o640
    new = tmp_path / "new.json"
    write_json_file(str(new), [1, 2])
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o666 & ~umask
    _no_temporaries(tmp_path)


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("old")

    def broken(fh):
        fh.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(ValueError, match="No space left on device"):
        write_atomic(str(path), broken)
    assert path.read_text() == "old"
    _no_temporaries(tmp_path)
    with pytest.raises(KeyError):  # not an OSError: raised as it is, still no temporary
        write_atomic(str(path), lambda fh: {}["k"])
    _no_temporaries(tmp_path)


def test_a_removed_folder_is_one_line(tmp_path):
    folder = tmp_path / "gone"
    folder.mkdir()
    target = str(folder / "x.pt")
    check_target("--out", target)
    shutil.rmtree(folder)
    with pytest.raises(ValueError, match="does not exist"):
        save_torch(target, {"x": torch.zeros(2)})


def test_the_same_state_gives_the_same_bytes_whatever_the_name(tmp_path):
    state = {"x": torch.arange(5.0), "config": {"N": 4}}
    save_torch(str(tmp_path / "a.pt"), state)
    save_torch(str(tmp_path / "a-much-longer-name.pt"), state)
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "a-much-longer-name.pt").read_bytes()
    assert torch.equal(torch.load(tmp_path / "a.pt", weights_only=True)["x"], state["x"])


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "--only", "lemma-40", "--json"],
        ["codebook", "--N", "16", "--out"],
        ["sample", "--N", "6", "--d", "2", "--q", "2", "--B", "3", "--out"],
        ["construct", "transformer", "--N", "8", "--d", "4", "--q", "2", "--out"],
        ["construct", "rnn", "--N", "8", "--d", "2", "--q", "2", "--out"],
    ],
)
def test_every_writing_command_refuses_bad_targets_before_any_work(argv, tmp_path, capsys):
    for name, path in _bad_targets(tmp_path):
        assert main(argv + [path]) == 2, name
        err = capsys.readouterr().err.strip()
        assert err.startswith("qstr: error:") and len(err.splitlines()) == 1, (name, err)
        _no_temporaries(tmp_path)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_an_immutable_file_is_refused(tmp_path, capsys):
    path = tmp_path / "imm.json"
    path.write_text("old")
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        assert main(["verify", "--only", "lemma-40", "--json", str(path)]) == 2
        assert "cannot replace it" in capsys.readouterr().err
        assert path.read_text() == "old"
        _no_temporaries(tmp_path)
    finally:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def test_verify_json_to_standard_output_carries_the_records_alone(capsys):
    assert main(["verify", "--only", "lemma-40", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    records = json.loads(out)
    assert [r["id"] for r in records] == ["lemma-40"] and records[0]["passed"] is True
    assert "lemma-40" in err  # the table


def test_verify_prints_its_table_before_a_failed_write(tmp_path, capsys, monkeypatch):
    """The folder of --json removed during the run: the table, then one line, exit 2."""
    folder = tmp_path / "out"
    folder.mkdir()
    plain = report.write_json

    def remove_then_write(results, path):
        shutil.rmtree(folder, ignore_errors=True)
        return plain(results, path)

    monkeypatch.setattr(report, "write_json", remove_then_write)
    assert main(["verify", "--only", "lemma-40", "--json", str(folder / "v.json")]) == 2
    out, err = capsys.readouterr()
    assert "lemma-40" in out and "claims hold" in out
    assert err.strip().startswith("qstr: error: --json") and len(err.strip().splitlines()) == 1


def test_shared_memory_is_a_folder_like_any_other():
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm here")
    path = f"/dev/shm/qstr-test-{os.getpid()}.json"
    try:
        write_json_file(path, {"a": 1})
        assert json.loads(open(path).read()) == {"a": 1}
    finally:
        if os.path.exists(path):
            os.unlink(path)


def test_a_failed_torch_save_is_one_line_and_leaves_no_file(tmp_path, monkeypatch):
    import torch  # noqa: PLC0415

    from qstr.verify.files import save_torch  # noqa: PLC0415

    def full_disk(obj, fh):
        fh.write(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(ValueError, match=r"^--out .*cb\.pt: cannot write it \(torch\.save failed"):
        save_torch(str(tmp_path / "cb.pt"), {"a": 1})
    assert os.listdir(tmp_path) == []


def test_json_files_are_strict_json(tmp_path):
    from qstr.verify.files import write_json_file  # noqa: PLC0415

    write_json_file(str(tmp_path / "s.json"), {"a": float("nan"), "b": [1.0, float("-inf")]})
    text = (tmp_path / "s.json").read_text()
    assert json.loads(text) == {"a": None, "b": [1.0, None]} and "NaN" not in text


def test_torch_files_carry_the_toolkits_and_torchs_versions(tmp_path):
    """save_torch adds "versions" to a dict that has none (every torch file of the command line:
    construct, sample, Figure 2's matrices), keeps one the dict brings, and saves anything else as
    it is; `qstr sample` files carry them."""
    ours = {"qstr-toolkit": toolkit_version(), "torch": torch.__version__}
    save_torch(str(tmp_path / "a.pt"), {"x": torch.zeros(2)})
    assert torch.load(tmp_path / "a.pt", weights_only=True)["versions"] == ours
    save_torch(str(tmp_path / "b.pt"), {"x": torch.zeros(2), "versions": {"qstr-toolkit": "0.1"}})
    assert torch.load(tmp_path / "b.pt", weights_only=True)["versions"] == {"qstr-toolkit": "0.1"}
    save_torch(str(tmp_path / "c.pt"), torch.ones(3))
    assert torch.equal(torch.load(tmp_path / "c.pt", weights_only=True), torch.ones(3))
    out = tmp_path / "s.pt"
    assert main(["sample", "--N", "4", "--d", "2", "--B", "2", "--out", str(out)]) == 0
    assert torch.load(out, weights_only=True)["versions"] == ours


def test_verify_json_records_carry_the_toolkits_and_torchs_versions(tmp_path):
    out = tmp_path / "v.json"
    assert main(["verify", "--only", "lemma-40", "--json", str(out)]) == 0
    (record,) = json.loads(out.read_text())
    assert record["env"]["qstr-toolkit"] == toolkit_version()
    assert record["env"]["torch"] == torch.__version__
