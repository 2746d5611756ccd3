"""constructions/provenance.py: which toolkit versions count as newer than the installed one."""

import pytest
import torch

from qstr.constructions import provenance


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
