"""The lock (constraints.txt, docs/install.md) against pyproject.toml: every package the project
or an extra asks for is pinned, inside the range asked for."""

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python >= 3.11")


def _pins() -> dict:
    """The lock's pins, by canonical name."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line)
        if m:
            pins[canonicalize_name(m.group(1))] = Version(m.group(2))
    return pins


def _asked() -> list:
    """Every requirement of pyproject.toml: the project's and each extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"].values()
    return [Requirement(r) for r in [*project["dependencies"], *(r for e in extras for r in e)]]


def test_the_lock_pins_every_requirement_inside_its_range():
    pins = _pins()
    for req in _asked():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in constraints.txt: regenerate it"
        assert req.specifier.contains(pins[name], prereleases=True), (req, pins[name])


def test_the_lock_pins_torch_at_the_cpu_build_installed_first():
    assert _pins()["torch"] == Version("2.13.0+cpu")
    assert "torch==2.13.0" in (ROOT / "constraints.in").read_text()
