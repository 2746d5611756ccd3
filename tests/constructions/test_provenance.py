"""constructions/provenance.py: which toolkit versions count as newer than the installed one, and
what Codebook.load says of a newer toolkit's file."""

import re
import warnings

import pytest
import torch

from qstr.constructions import provenance
from qstr.constructions.codes import Codebook, CodebookFileError, rs_hadamard_codebook


def test_versions_are_the_installed_toolkits_and_torchs_as_plain_strings():
    got = provenance.versions()
    assert got == {"qstr-toolkit": provenance.toolkit_version(), "torch": torch.__version__}
    assert all(type(v) is str for v in got.values())  # torch.load(weights_only=True) reads them


@pytest.mark.parametrize(
    "theirs, ours, newer",
    [
        ("0.4.0", "0.3.0", True),
        ("0.10.0", "0.9.2", True),  # numbers, not text
        ("1.0", "0.99.9", True),
        ("0.3.1rc1", "0.3.0", True),
        ("0.3.0", "0.3.0", False),
        ("0.3", "0.3.0", False),
        ("0.2.9", "0.3.0", False),
        ("unknown", "0.3.0", False),  # unreadable: nothing said
        ("0.4.0", "unknown", False),
    ],
)
def test_newer_writer_compares_release_numbers(monkeypatch, theirs, ours, newer):
    monkeypatch.setattr(provenance, "toolkit_version", lambda: ours)
    stored = {"qstr-toolkit": theirs, "torch": "2.13.0"}
    assert provenance.newer_writer(stored) == (theirs if newer else None)
    assert bool(provenance.newer_note(stored)) is newer


@pytest.mark.parametrize("stored", [None, {}, "0.9", {"torch": "9.0"}])
def test_a_file_without_a_toolkit_version_is_not_newer(stored):
    assert provenance.newer_writer(stored) is None


def test_a_codebook_file_from_a_newer_toolkit_says_so_on_load(tmp_path):
    """Codebook.save records the versions; Codebook.load warns on a newer toolkit's file, names
    it in the one-line error of one it cannot read (a kind it does not know), and loads this
    toolkit's file silently."""
    book = rs_hadamard_codebook(8)
    path = tmp_path / "cb.pt"
    book.save(path)
    record = torch.load(path, weights_only=True)
    assert record["versions"] == provenance.versions()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(Codebook.load(path).omega, book.omega)
    ours = provenance.toolkit_version()
    newer = f"{int(ours.split('.')[0]) + 1}.0.0"
    torch.save(dict(record, versions={"qstr-toolkit": newer}), path)
    with pytest.warns(provenance.NewerFileWarning, match=f"{path} was written by qstr-toolkit"):
        assert Codebook.load(path).kind == "rs-hadamard"
    torch.save(dict(record, kind="lattice", versions={"qstr-toolkit": newer}), path)
    note = f"(written by qstr-toolkit {newer}, newer than this {ours}: upgrade)"
    with pytest.raises(
        CodebookFileError, match=re.escape("known kinds: custom, ") + ".*" + re.escape(note)
    ):
        Codebook.load(path)
