"""``qstr summarize``: recompute a figure's summary and plots from its rows (no training)."""

from __future__ import annotations

import argparse

from rich.console import Console


def add_options(r: argparse.ArgumentParser) -> None:
    r.add_argument(
        "figure",
        choices=["figure1", "figure2", "figure3", "bounds"],
        help="the figure the rows are of; bounds: the paper's explicit sample bounds beside "
        "Figure 1's rows",
    )
    r.add_argument("rows", metavar="ROWS", help="the rows (JSON lines, as qstr reproduce writes)")
    r.add_argument(
        "--stem",
        default=None,
        help="write STEM-summary.json, STEM.png and STEM.pdf (default: ROWS without .jsonl)",
    )


def run(args, console: Console) -> int:
    from qstr.verify.experiments import summarize_rows  # noqa: PLC0415 - fast --help

    stem = summarize_rows(args.figure, args.rows, stem=args.stem)
    console.print(f"wrote {stem}-summary.json, {stem}.png and {stem}.pdf")
    return 0
