"""The installed toolkit's version (``qstr --version``, the ``env`` of ``--json`` records);
torch-free. The one definition is ``qstr.constructions.provenance.toolkit_version``, which the
files the toolkit writes carry too."""

from __future__ import annotations

from qstr.constructions.provenance import DISTRIBUTION, toolkit_version

__all__ = ["DISTRIBUTION", "toolkit_version"]
