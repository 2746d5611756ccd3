"""The ``qstr`` command line: ``qstr verify|codebook|sample|construct|reproduce ...``
(``qstr --help``).

Exit status (docs/commands.md, "Exit statuses"): 0 done (for ``verify`` every selected claim
holds with every fault caught, for ``codebook`` the coherence bound is met), 1 a claim fails or
the codebook violates the bound, 2 bad input (one line on stderr, no traceback), 130
interrupted (143 on SIGTERM). Building the parser imports no torch, so ``--help`` is fast; each
command imports what it needs.

One module a command, each with its options: verify.py (and ``--list``), codebook.py, sample.py,
construct.py, summarize.py, reproduce.py; parser.py assembles them, options.py holds the option
parsers and the checks made before any work, signals.py Ctrl-C, SIGTERM and the standard streams.
"""

from __future__ import annotations

import sys
from typing import List, Optional

from rich.console import Console

from qstr.verify.cli import codebook, construct, reproduce, sample, summarize, verify
from qstr.verify.cli.options import _PROFILES as _PROFILES  # re-exported: the old cli.py's names
from qstr.verify.cli.options import SEED_MAX as SEED_MAX
from qstr.verify.cli.options import UsageError as UsageError
from qstr.verify.cli.options import _seed as _seed
from qstr.verify.cli.parser import _parser as _parser
from qstr.verify.cli.signals import _TERMINATED, _run, _Stream
from qstr.verify.threads import keep_freed_memory

__all__ = ["COMMANDS", "SEED_MAX", "UsageError", "main"]


COMMANDS = {
    "verify": verify.run,
    "codebook": codebook.run,
    "sample": sample.run,
    "construct": construct.run,
    "reproduce": reproduce.run,
    "summarize": summarize.run,
}


def main(argv: Optional[List[str]] = None) -> int:
    keep_freed_memory()  # this process's training steps reuse freed memory (verify/threads.py)
    out = _Stream(sys.stdout)
    # logs and pipes get the full table
    console = Console(file=out) if out.isatty() else Console(file=out, width=160)
    err = Console(file=_Stream(sys.stderr))
    args = None
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            raise UsageError(
                f"a command is required: one of {', '.join(COMMANDS)} (try qstr verify)"
            )
        return _run(COMMANDS[args.command], args, console)
    except (UsageError, ValueError) as exc:
        err.print(f"qstr: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        return 2
    except (MemoryError, RuntimeError) as exc:  # sizes no up-front estimate caught: still one line
        from qstr.constructions.validate import (  # noqa: PLC0415 - fast --help: it loads torch
            out_of_memory_message,
        )

        what = out_of_memory_message(exc)
        if what is None:
            raise
        err.print(
            f"qstr: error: {what}; use smaller sizes",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return 2
    except KeyboardInterrupt:
        if getattr(args, "interrupted", None):  # verify: what finished
            note = args.interrupted
        elif getattr(args, "command", None) in ("codebook", "sample", "construct"):
            note = "nothing was written (files are written whole, at the end)"
        else:
            resume = (
                " (run the same command to resume)"
                if getattr(args, "command", None) == "reproduce"
                else ""
            )
            note = f"what was written so far is kept{resume}"
        how = "terminated (SIGTERM)" if _TERMINATED.is_set() else "interrupted"
        err.print(f"qstr: {how}; {note}", markup=False, highlight=False, soft_wrap=True)
        return 143 if _TERMINATED.is_set() else 130
