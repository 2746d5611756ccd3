"""One writer per results folder: ``qstr reproduce`` (``run_experiment``) holds an exclusive lock
on ``--out`` while it trains and draws (docs/experiments.md, "Resuming"). The lock is an
``flock`` on ``<out>/.qstr-lock``, which the kernel releases when the holder exits however it
exits (Ctrl-C, SIGTERM, kill -9); the file records the holder's pid, host and start time, for
the refusal's message and for the note when a later run finds a holder that is gone."""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import os
import socket
from typing import Iterator, Optional

LOCK_NAME = ".qstr-lock"


class FolderLock:
    """The held lock: ``taken_over`` names the earlier holder whose lock file was left behind
    (a run that was killed), or is None."""

    def __init__(self, path: str, taken_over: Optional[str]):
        self.path, self.taken_over = path, taken_over


def _holder(text: str) -> str:
    """'pid P on host H since T' from a lock file's contents, or 'an unknown process'."""
    try:
        h = json.loads(text)
        return f"pid {h['pid']} on host {h['host']} since {h['since']}"
    except (ValueError, KeyError, TypeError):
        return "an unknown process"


def _remove_temporaries(folder: str) -> None:
    """Remove the hidden ``.NAME.XXXX.tmp`` files an atomic write (verify/files.py) left in
    ``folder`` when its run was killed; only the lock's holder writes there, so none is live."""
    for name in os.listdir(folder):
        if name.startswith(".") and name.endswith(".tmp") and name != LOCK_NAME:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))


def _write_holder(fd: int, path: str) -> None:
    """Record this process (pid, host, start time) in the lock file ``fd`` (unbuffered: nothing
    is left to fail again at close); an OSError (a full disk) is a one-line ValueError naming it,
    and the file is removed."""
    me = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    data = json.dumps(me).encode()
    try:
        os.ftruncate(fd, 0)
        if os.pwrite(fd, data, 0) != len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise ValueError(
            f"--out {os.path.dirname(path)}: cannot write its lock file {path} "
            f"({exc.strerror or exc})"
        ) from None


@contextlib.contextmanager
def folder_lock(folder: str) -> Iterator[FolderLock]:
    """Hold ``folder``'s lock for the block; ValueError naming the holder if another process
    holds it (the folder is created if missing). The lock file is removed on release."""
    path = os.path.join(folder, LOCK_NAME)
    try:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ValueError(
            f"--out {folder}: cannot create its lock file {path} ({exc.strerror})"
        ) from None
    with os.fdopen(fd, "r+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ValueError(
                f"--out {folder} is in use by another qstr run ({_holder(fh.read())}); wait for "
                "it to finish or choose another --out"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fh.fileno()).st_ino
        except OSError:
            same = False
        if not same:  # the holder released and removed the file between our open and our lock
            raise ValueError(f"--out {folder} was being released by another qstr run; run again")
        left = fh.read()
        _write_holder(fh.fileno(), path)
        taken = None if not left.strip() else _holder(left)
        _remove_temporaries(folder)
        try:
            yield FolderLock(path, taken)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
