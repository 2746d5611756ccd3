"""The installed toolkit's version (``qstr --version``, the ``env`` of ``--json`` records);
torch-free."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "qstr-toolkit"  # the [project] name in pyproject.toml


def toolkit_version() -> str:
    """The version of the installed ``qstr-toolkit`` distribution, ``unknown`` when not
    installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "unknown"
