"""Ctrl-C and SIGTERM as one clean ending (exit status 130 or 143), and standard output and error
as command-line tools treat them (a closed pipe, a character the encoding lacks)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading


_INTERRUPTED = threading.Event()


_TERMINATED = threading.Event()


def _on_sigint(signum, frame):
    """Ctrl-C, or SIGTERM (``kill``, a batch system's time limit): remember it (a
    KeyboardInterrupt raised inside a garbage-collector callback is swallowed by Python, so loops
    also check the flag) and interrupt, so that both end the same way: workers and temporary
    folders cleaned up, one line, exit status 130 (SIGINT) or 143 (SIGTERM)."""
    if signum == signal.SIGTERM:
        _TERMINATED.set()
    _INTERRUPTED.set()
    raise KeyboardInterrupt


class _Stream(io.TextIOBase):
    """Standard output or error as command-line tools treat them: once the reader has gone (a closed
    pipe, `qstr ... | head -1`) writes go nowhere and the command ends with its own status; a
    character the encoding lacks is written escaped rather than failing."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._silence()
        except UnicodeEncodeError:
            enc = getattr(self._stream, "encoding", None) or "ascii"
            return self.write(text.encode(enc, "backslashreplace").decode(enc))
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    def _silence(self) -> None:
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # Python's own flush at exit finds no pipe
            os.close(devnull)

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self):
        return getattr(self._stream, "encoding", "utf-8")


def _run(command, args, console) -> int:
    """``command(args, console)``, with Ctrl-C caught by :func:`_on_sigint`
    (the caller's handler restored after)."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _on_sigint) if main_thread else None
    previous_term = signal.signal(signal.SIGTERM, _on_sigint) if main_thread else None
    hook = sys.unraisablehook
    sys.unraisablehook = lambda u: (
        None if issubclass(u.exc_type, KeyboardInterrupt) else hook(u)
    )  # no gc traceback
    _INTERRUPTED.clear()
    _TERMINATED.clear()
    try:
        status = command(args, console)
        if _INTERRUPTED.is_set():
            raise KeyboardInterrupt
        return status
    finally:
        sys.unraisablehook = hook
        if main_thread:
            signal.signal(signal.SIGINT, previous)
            signal.signal(signal.SIGTERM, previous_term)
