"""Every file the toolkit writes: the target is refused up front unless it is a regular file or a
new name in a folder that takes files, and it is written atomically (a temporary file beside it,
then one rename), so a failure leaves the old file and no temporary behind.

A refusal or a failure is a ``ValueError`` with one line (the CLI prints it and exits 2). A torch
file holding a dict carries the toolkit's and torch's versions (``"versions"``; docs/formats.md).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import stat
import tempfile
import threading
from typing import BinaryIO, Callable

from qstr.constructions import provenance

STDOUT = "-"  # `--json -`: the records go to standard output
# never written (/dev/stdout is whatever fd 1 is), except the shared-memory folder /dev/shm
SYSTEM_FOLDERS = ("/dev/", "/proc/", "/sys/")
_UMASK_LOCK = threading.Lock()


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_target(flag: str, path: str) -> str:
    """The file ``path`` (given as ``flag``) names, resolved through symbolic links; ValueError
    unless it is a regular file we may replace or a new name in an existing folder we may write."""
    if not isinstance(path, str) or path == "":
        raise ValueError(f"{flag}: the file name is empty")
    if path.endswith(os.sep) or os.path.basename(path) in (".", ".."):
        raise ValueError(f"{flag} {path}: names a folder; give a file path")
    where = os.path.abspath(path)
    if where.startswith(SYSTEM_FOLDERS) and not where.startswith("/dev/shm/"):  # (a tmpfs)
        raise ValueError(
            f"{flag} {path}: a device or process file, not a file to replace"
            + ("; --json - writes to standard output" if flag == "--json" else "")
        )
    try:
        st = os.stat(path)  # through links: a loop or an over-long name ends here
    except FileNotFoundError:
        if os.path.islink(path):
            raise ValueError(f"{flag} {path}: a symbolic link to nothing") from None
        st = None
    except OSError as exc:
        raise ValueError(f"{flag} {path}: {_reason(exc)}") from None
    target = os.path.realpath(path) if st is not None else os.path.abspath(path)
    folder = os.path.dirname(target)
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ValueError(f"{flag} {path} is a directory; give a file path")
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(
                f"{flag} {path} is not a regular file (a device, FIFO or socket); give a file path"
            )
        try:  # opening to append changes nothing; it fails on immutable and read-only files
            with open(target, "ab"):
                pass
        except OSError as exc:
            raise ValueError(f"{flag} {path}: cannot replace it ({_reason(exc)})") from None
    elif not os.path.isdir(folder):
        raise ValueError(f"{flag} {path}: the folder {folder} does not exist")
    else:
        longest = os.pathconf(folder, "PC_NAME_MAX")
        if len(os.fsencode(os.path.basename(target))) > longest:
            raise ValueError(f"{flag} {path}: the file name is longer than {longest} bytes")
    try:  # the temporary file of the atomic write goes beside the target
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot write in {folder} ({_reason(exc)})") from None
    return target


def _new_file_mode(target: str) -> int:
    """The mode the file would get from open(): the old file's, else 0o666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        with _UMASK_LOCK:
            umask = os.umask(0o022)
            os.umask(umask)
        return 0o666 & ~umask


def write_atomic(path: str, write: Callable[[BinaryIO], None], *, flag: str = "--out") -> None:
    """Write ``path`` by ``write(binary_file)``: into a temporary file in the same folder, then one
    rename over ``path`` (through a symbolic link, the file it points to)."""
    target = check_target(flag, path)
    folder, name = os.path.split(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name[:200]}.", suffix=".tmp")
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot write it ({_reason(exc)})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _new_file_mode(target))
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ValueError(f"{flag} {path}: cannot write it ({_reason(exc)})") from None
        raise


def strict_json(obj, *, default=str):
    """(``obj`` as plain JSON values, the paths of the non-finite numbers it held): each NaN or
    infinity becomes None (strict JSON has no NaN), its path ("a.b[2]") and value listed."""
    plain = json.loads(json.dumps(obj, default=default))  # NaN and inf survive as floats
    found = []

    def clean(v, where):
        if isinstance(v, float) and not math.isfinite(v):
            found.append(f"{where}={v}")
            return None
        if isinstance(v, dict):
            return {k: clean(x, f"{where}.{k}" if where else str(k)) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x, f"{where}[{i}]") for i, x in enumerate(v)]
        return v

    return clean(plain, ""), found


def write_json_file(path: str, obj, *, flag: str = "--json", default=str) -> None:
    """``obj`` as indented strict JSON (non-finite numbers as null), written atomically."""
    text = json.dumps(strict_json(obj, default=default)[0], indent=2, allow_nan=False) + "\n"
    write_atomic(path, lambda fh: fh.write(text.encode()), flag=flag)


def save_torch(path: str, obj, *, flag: str = "--out") -> None:
    """``torch.save(obj)`` written atomically (through a file object: the archive's inner folder
    is then "archive" whatever the file's name, so the same command gives the same bytes); a
    failed save (a full disk) is one line, and no partial or temporary file is left. A dict
    without ``"versions"`` is saved with them added (``provenance.versions()``)."""
    import torch  # noqa: PLC0415 - the CLI imports this module; its --help loads no torch

    if isinstance(obj, dict) and provenance.KEY not in obj:
        obj = {**obj, provenance.KEY: provenance.versions()}

    def save(fh):
        try:
            torch.save(obj, fh)
        except RuntimeError as exc:  # torch's writer reports a short write as a RuntimeError
            raise OSError(errno.EIO, f"torch.save failed: {str(exc).splitlines()[0]}") from None

    write_atomic(path, save, flag=flag)
