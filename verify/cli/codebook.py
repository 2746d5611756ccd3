"""``qstr codebook``: build a positional codebook (Assumption 3), or read a saved one, and report
its exact coherence."""

from __future__ import annotations

import argparse
import os

from rich.console import Console

from qstr.verify.cli.options import _count, _fraction, _seed_option, _writable_file
from qstr.verify.files import write_atomic


def add_options(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--N",
        type=_count,
        default=None,
        metavar="N",
        help="number of positions, i.e. of codes (required unless --check)",
    )
    c.add_argument(
        "--kind",
        default="rs-hadamard",
        help="rs-hadamard (deterministic), rademacher or experimental",
    )
    c.add_argument(
        "--mu",
        type=_fraction,
        default=0.5,
        metavar="MU",
        help="coherence the codebook must meet, in (0, 1) (default 1/2)",
    )
    c.add_argument(
        "--d-e",
        dest="d_e",
        type=_count,
        default=None,
        metavar="D_E",
        help="code dimension (default: the derived rule)",
    )
    c.add_argument(
        "--delta",
        type=_fraction,
        default=None,
        metavar="DELTA",
        help="failure probability of the Rademacher rule, in (0, 1) (default 0.001)",
    )
    _seed_option(c)
    c.add_argument(
        "--check", metavar="PATH", help="report the coherence of a saved (N, d_e) tensor instead"
    )
    c.add_argument(
        "--out", metavar="PATH", help="write {'omega', 'mu', 'kind', 'params'} with torch.save"
    )


def run(args, console: Console) -> int:
    from qstr.constructions.codes import coherence_report  # noqa: PLC0415 - fast --help

    _writable_file("--out", args.out)
    book = _saved_codebook(args) if args.check is not None else _new_codebook(args)
    rep = coherence_report(book.omega, args.mu)
    pair = f"pair {rep.pair}" if rep.pair is not None else f"no pairs: N = {book.N}"
    verdict = "meets" if rep.mu <= args.mu else "VIOLATES"
    console.print(
        f"{book.kind}: N = {book.N}, d_e = {book.d_e}, exact coherence mu = {rep.mu:.6f} "
        f"({pair}); {rep.n_violations} of {rep.n_pairs} pairs exceed {args.mu!r}: "
        f"{verdict} the coherence bound {args.mu!r}"
        + (" of Assumption 3" if args.mu == 0.5 else "")
    )
    if args.out:
        write_atomic(args.out, book.save)
    return 0 if rep.mu <= args.mu else 1


def _new_codebook(args):
    import torch  # noqa: PLC0415 - fast --help

    from qstr.bounds.codebooks import build_codebook  # noqa: PLC0415 - fast --help

    if args.N is None:
        raise ValueError("--N is required to build a codebook (or give --check PATH)")
    if args.delta is not None and args.kind != "rademacher":
        raise ValueError(f"--delta applies to --kind rademacher only (got --kind {args.kind})")
    delta = 1e-3 if args.delta is None else args.delta
    gen = torch.Generator().manual_seed(args.seed)
    return build_codebook(
        args.N, kind=args.kind, mu_max=args.mu, d_e=args.d_e, delta=delta, generator=gen
    )


def _saved_codebook(args):
    """The codebook in ``--check PATH``, reported under the kind the file records
    (``custom`` if none)."""
    from qstr.constructions.codes import Codebook, CodebookFileError  # noqa: PLC0415 - fast --help

    if not os.path.isfile(args.check):
        raise ValueError(f"--check {args.check!r}: no such file")
    try:
        book = Codebook.load(args.check)
    except CodebookFileError as exc:
        raise ValueError(f"--check: {exc}") from None
    if args.N is not None and args.N != book.N:
        raise ValueError(
            f"--N {args.N} does not match {args.check}, which holds {book.N} codes "
            "(omit --N with --check)"
        )
    return book
