"""The options every ``qstr`` command shares: the one-line usage error, the number parsers argparse
calls, and the checks of output paths and devices made before any work."""

from __future__ import annotations

import argparse
import math
import os
import re
import tempfile
from typing import Optional

from qstr.verify.files import STDOUT, check_target


class UsageError(Exception):
    """Bad command-line arguments: reported in one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit status 2 (not argparse's usage block)
        raise UsageError(message)


# Profiles of ``qstr verify`` (``qstr.verify.registry.PROFILES``, restated so that --help imports
# no torch).
_PROFILES = ("quick", "full", "gpu")
SEED_MAX = (
    2**63 - 1
)  # seeds are integers in [0, 2**63 - 1], on the command line and in the Python API


def _seed_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--seed",
        type=_seed,
        default=0,
        metavar="S",
        help="seed of every random draw, an integer in [0, 2**63 - 1] (default 0)",
    )


# One parse function per kind of number; argparse reports a refusal as "argument --X: <message>".
def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _seed(text: str) -> int:
    """A seed: an integer in [0, 2**63 - 1]."""
    value = _int(text)
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(
            f"a seed must be an integer in [0, 2**63 - 1], got {value}"
        )
    return value


def _count(text: str) -> int:
    """A size or count: an integer >= 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def _positive(text: str) -> float:
    """A finite number > 0."""
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def _fraction(text: str) -> float:
    """A number in the open interval (0, 1)."""
    value = _float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text}")
    return value


def _writable_file(flag: str, path: Optional[str]) -> None:
    """A file we will write later (qstr.verify.files.check_target), refused before any work."""
    if path is not None and not (flag == "--json" and path == STDOUT):
        check_target(flag, path)


def _writable_dir(flag: str, folder: str, shown: Optional[str] = None) -> None:
    """``folder`` (created when missing, as the runs do) must be a directory
    that takes a new file."""
    shown = shown or folder
    probe_in = os.path.abspath(folder)
    while not os.path.exists(probe_in):  # the nearest existing ancestor must take the new folders
        probe_in = os.path.dirname(probe_in)
    if not os.path.isdir(probe_in):
        raise ValueError(f"{flag} {shown}: {probe_in} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=probe_in):
            pass
    except OSError as exc:
        raise ValueError(
            f"{flag} {shown}: cannot write in {probe_in} ({exc.strerror or exc})"
        ) from None


def _device(value: Optional[str]) -> str:
    """cpu, cuda or cuda:N, CUDA only where the machine has it (before any folder is made)."""
    import torch  # noqa: PLC0415 - fast --help

    if value not in ("cpu", "cuda") and not re.fullmatch(r"cuda:\d+", value or ""):
        raise ValueError(f"--device must be cpu, cuda or cuda:N, got {value!r}")
    if value.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"--device {value}: CUDA is not available on this machine (use --device cpu)"
        )
    return value
