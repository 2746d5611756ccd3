"""The versions a file the toolkit writes carries (``"versions"``: the toolkit's and torch's), and
what loading one says when a newer toolkit wrote it (docs/formats.md, "Versions in files").

Here, not in ``verify/``, so that both the constructions' loaders and the command line's writers
use it (constructions never import verify); torch-free at import, so ``qstr --version`` reads the
toolkit's version here without loading torch.
"""

from __future__ import annotations

import re
import warnings
from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "qstr-toolkit"  # the [project] name in pyproject.toml
KEY = "versions"  # the key of a file's dict that holds them


class NewerFileWarning(UserWarning):
    """A file written by a newer qstr-toolkit than the one reading it (read as this one reads
    it: fields it added are ignored)."""


def toolkit_version() -> str:
    """The installed ``qstr-toolkit``'s version, ``unknown`` when not installed (a checkout)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def versions() -> dict:
    """``{"qstr-toolkit": ..., "torch": ...}``: what every file the toolkit writes carries."""
    import torch  # noqa: PLC0415 - the module stays torch-free for `qstr --version`

    return {
        DISTRIBUTION: toolkit_version(),
        "torch": str(torch.__version__),
    }  # a str, not TorchVersion


def _release(text) -> tuple | None:
    """The release numbers of a version string ("0.4.0rc1" -> (0, 4, 0)); None when unreadable."""
    found = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(text))
    return tuple(int(p) for p in found.group(1).split(".")) if found else None


def _padded(release: tuple, length: int) -> tuple:
    return release + (0,) * (length - len(release))


def newer_writer(stored) -> str | None:
    """The toolkit version that wrote a file whose ``"versions"`` entry is ``stored``, when it is
    newer than this one; None for an older or equal one, a file without the entry (written before
    versions were recorded, or by ``torch.save`` of a bare state) or an unreadable version."""
    if not isinstance(stored, dict):
        return None
    theirs, ours = _release(stored.get(DISTRIBUTION)), _release(toolkit_version())
    if theirs is None or ours is None:
        return None
    length = max(len(theirs), len(ours))
    return str(stored[DISTRIBUTION]) if _padded(theirs, length) > _padded(ours, length) else None


def newer_note(stored) -> str:
    """``" (written by qstr-toolkit X, newer than this Y: upgrade to read it)"``, or ``""``: what
    a loader's one-line ValueError adds when a newer toolkit wrote the file it cannot read."""
    writer = newer_writer(stored)
    if writer is None:
        return ""
    return f" (written by {DISTRIBUTION} {writer}, newer than this {toolkit_version()}: upgrade)"


def warn_if_newer(stored, what: str, stacklevel: int = 1) -> None:
    """A :class:`NewerFileWarning` when a newer toolkit wrote ``what`` (its ``"versions"`` entry
    ``stored``): the file is read as this toolkit reads it. ``stacklevel``: as for
    ``warnings.warn``, counted from the caller of this function."""
    writer = newer_writer(stored)
    if writer is not None:
        warnings.warn(
            f"{what} was written by {DISTRIBUTION} {writer}, newer than this "
            f"{toolkit_version()}: read as {toolkit_version()} reads it (upgrade to read what "
            "it added)",
            NewerFileWarning,
            stacklevel=stacklevel + 1,
        )
