"""``qstr sample``: sample qSTR prompts (Definition 2) and save them."""

from __future__ import annotations

import argparse

from rich.console import Console

from qstr.verify.cli.options import _count, _seed_option, _writable_file
from qstr.verify.files import save_torch


def add_options(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--N",
        type=_count,
        required=True,
        metavar="N",
        help="prompt length: tokens (positions) per prompt",
    )
    s.add_argument("--d", type=_count, required=True, metavar="D", help="token dimension")
    s.add_argument(
        "--q",
        type=_count,
        default=1,
        metavar="Q",
        help="tokens each label reads (sparsity), 1 <= q <= N (default 1)",
    )
    s.add_argument(
        "--B", type=_count, default=16, metavar="B", help="number of prompts (default 16)"
    )
    s.add_argument(
        "--link", default="linear", help="linear, hermite, sqnorm, mean, mean-projected, teacher"
    )
    s.add_argument("--variant", default="general", help="general or simple")
    s.add_argument("--indices", default="uniform", help="uniform, distinct or few-heads")
    s.add_argument("--tokens", default="gaussian", help="gaussian or half-zero")
    s.add_argument("--dtype", default="float32", help="float32 or float64")
    _seed_option(s)
    s.add_argument(
        "--out",
        metavar="PATH",
        required=True,
        help="write {'x', 't', 'y', 'config'} with torch.save",
    )


def run(args, console: Console) -> int:
    import torch  # noqa: PLC0415 - fast --help

    from qstr.constructions.links import make_link  # noqa: PLC0415 - fast --help
    from qstr.constructions.task import QSTR  # noqa: PLC0415 - fast --help

    _writable_file("--out", args.out)
    gen = torch.Generator().manual_seed(args.seed)
    link = make_link(args.link, args.q, args.d, generator=gen)
    task = QSTR(
        N=args.N,
        d=args.d,
        link=link,
        variant=args.variant,
        indices=args.indices,
        tokens=args.tokens,
    )
    p = task.sample(args.B, generator=gen, dtype=args.dtype)
    config = {
        k: getattr(args, k)
        for k in ("N", "d", "q", "B", "link", "variant", "indices", "tokens", "dtype", "seed")
    }
    save_torch(
        args.out,
        {"x": p.x, "t": p.t, "y": p.y, "config": config, "link_params": _link_params(link)},
    )
    console.print(
        f"wrote {args.B} prompts (x {tuple(p.x.shape)}, t {tuple(p.t.shape)}, "
        f"y {tuple(p.y.shape)}) to {args.out}"
    )
    return 0


def _link_params(link) -> dict:
    """The link's drawn parameters: teacher {a, W, b}, linear and hermite {u: (q, d)},
    mean-projected {u: (d,)}, sqnorm and mean none."""
    net = getattr(link, "net", None)
    if net is not None:
        return _net_params(net)
    u = getattr(link, "u", None)
    return {} if u is None else {"u": u.detach().clone()}


def _net_params(net) -> dict:
    return {"a": net.a.detach().clone(), "W": net.W.detach().clone(), "b": net.b.detach().clone()}
