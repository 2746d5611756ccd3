"""The ``qstr`` parser: every command and option, built without torch (``qstr --help`` stays
fast); each command's options are declared in its own module."""

from __future__ import annotations

import argparse

from qstr.verify.cli import codebook, construct, reproduce, sample, summarize, verify
from qstr.verify.cli.options import _Parser
from qstr.verify.version import toolkit_version


def _parser() -> argparse.ArgumentParser:
    """Every subcommand and option; imports nothing heavy (``qstr --help`` stays fast)."""
    p = _Parser(prog="qstr", description="Check the claims of the qSTR paper numerically.")
    p.add_argument(
        "--version",
        action="version",
        version=f"qstr {toolkit_version()}",
        help="print the version of the installed qstr-toolkit and exit",
    )
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    verify.add_options(
        sub.add_parser("verify", help="run the claim checks and print measured vs bound")
    )
    codebook.add_options(
        sub.add_parser(
            "codebook",
            help="build a positional codebook (Assumption 3) and report its exact coherence",
        )
    )
    sample.add_options(
        sub.add_parser("sample", help="sample qSTR prompts (Definition 2) and save them")
    )
    construct.add_options(
        sub.add_parser("construct", help="build a construction of the paper as torch weights")
    )
    reproduce.add_options(
        sub.add_parser("reproduce", help="reproduce a figure of the paper (Appendix E), resumable")
    )
    summarize.add_options(
        sub.add_parser(
            "summarize", help="recompute a figure's summary and plots from its rows (no training)"
        )
    )
    return p
