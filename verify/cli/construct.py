"""``qstr construct``: build a construction of the paper (Lemma 11's transformer, Prop 28's RNN)
as torch weights."""

from __future__ import annotations

import argparse

from rich.console import Console

from qstr.verify.cli.options import _count, _positive, _seed_option, _writable_file
from qstr.verify.cli.sample import _link_params, _net_params
from qstr.verify.files import save_torch


def add_options(k: argparse.ArgumentParser) -> None:
    k.add_argument(
        "architecture",
        choices=["transformer", "rnn"],
        help="transformer: the Lemma 11 q-head attention; "
        "rnn: the Prop 28 bidirectional RNN (simple-qSTR)",
    )
    k.add_argument(
        "--N", type=_count, required=True, metavar="N", help="prompt length: number of positions"
    )
    k.add_argument("--d", type=_count, required=True, metavar="D", help="token dimension")
    k.add_argument(
        "--q",
        type=_count,
        required=True,
        metavar="Q",
        help="tokens each label reads (heads), 1 <= q <= N",
    )
    k.add_argument(
        "--eps",
        type=_positive,
        default=None,
        metavar="EPS",
        help="target error (transformer: against the Assumption 2 net, default 0.01; "
        "rnn: state accuracy, default 0.1)",
    )
    k.add_argument(
        "--link",
        default="teacher",
        help="link whose exact Assumption 2 net is used: teacher, linear, mean-projected "
        "(rnn: teacher only)",
    )
    k.add_argument(
        "--width", type=_count, default=8, metavar="M", help="teacher width m_g (default 8)"
    )
    k.add_argument(
        "--n",
        type=_count,
        default=None,
        metavar="SAMPLES",
        help="training sample size n that sets Lemma 12's token radius r_x "
        "(transformer only; default 10000)",
    )
    _seed_option(k)
    k.add_argument(
        "--out",
        metavar="PATH",
        required=True,
        help="torch file readable with torch.load(PATH, weights_only=True)",
    )


def run(args, console: Console) -> int:
    _writable_file("--out", args.out)
    if args.architecture == "rnn":
        return _construct_rnn(args, console)
    import torch  # noqa: PLC0415 - fast --help

    from qstr.bounds.attention import lemma11, lemma12_radius  # noqa: PLC0415 - fast --help
    from qstr.constructions.export import construction_state  # noqa: PLC0415 - fast --help
    from qstr.constructions.links import make_link  # noqa: PLC0415 - fast --help

    if args.link not in ("teacher", "linear", "mean-projected"):
        raise ValueError(
            "--link must be teacher, linear or mean-projected "
            f"(links with an exact two-layer net), got {args.link!r}"
        )
    n, eps = 10_000 if args.n is None else args.n, 0.01 if args.eps is None else args.eps
    _construct_fits(args)
    gen = torch.Generator().manual_seed(args.seed)
    link = make_link(args.link, args.q, args.d, generator=gen, width=args.width)
    cons = lemma11(
        args.N,
        args.d,
        args.q,
        link.two_layer_net(),
        eps=eps,
        r_x=lemma12_radius(args.d, n=n, N=args.N),
    )
    state = construction_state(cons)
    state["config"] = dict(
        state["config"], link=args.link, width=args.width, seed=args.seed, n=n, eps_target=eps
    )
    state["link_params"] = _link_params(link)
    save_torch(args.out, state)
    g = cons.guarantee
    console.print(
        f"Lemma 11: N = {args.N}, d = {args.d}, q = {args.q}, d_e = {cons.codebook.d_e}, "
        f"mu = {g.mu:.4f}, r_x = {g.r_x:.3f}, alpha = {g.alpha:.3f}, "
        f"error bound = {g.error_bound:.3g}; wrote {args.out}"
    )
    return 0


def _construct_fits(args) -> None:
    """Refuse Lemma 11 weights that cannot fit before the codes are built (the default
    RS-Hadamard code's dimension is known without them; make_link checks the teacher's own W)."""
    from qstr.constructions import validate  # noqa: PLC0415 - fast --help
    from qstr.constructions.attention import lemma11_nbytes  # noqa: PLC0415 - fast --help
    from qstr.constructions.codes import rs_hadamard_dim  # noqa: PLC0415 - fast --help

    D = args.d + (args.q + 1) * rs_hadamard_dim(args.N)
    validate.fits_in_memory(
        f"construct transformer (tokens of width {D}, {args.q} heads, a width-{args.width} net)",
        lemma11_nbytes(D, args.q, args.width),
        "cpu",
    )


def _construct_rnn(args, console: Console) -> int:
    from qstr.bounds.transition import teacher_rnn  # noqa: PLC0415 - fast --help
    from qstr.constructions.recurrent import rnn_state  # noqa: PLC0415 - fast --help

    if args.link != "teacher":
        raise ValueError(f"--link: construct rnn builds the teacher link only, got {args.link!r}")
    if args.n is not None:
        raise ValueError(
            "--n applies to construct transformer only (the RNN's r_x follows from d and N)"
        )
    eps = 0.1 if args.eps is None else args.eps
    cons = teacher_rnn(args.N, args.d, args.q, eps=eps, seed=args.seed, width=args.width)
    state = rnn_state(cons)
    state["config"] = dict(
        state["config"], link="teacher", width=args.width, seed=args.seed, eps_target=eps
    )
    state["link_params"] = _net_params(cons.g_net)
    save_torch(args.out, state)
    cfg = state["config"]
    console.print(
        f"Prop 28 RNN: N = {cfg['N']}, d = {cfg['d']}, q = {cfg['q']}, d_e = {cfg['d_e']}, "
        f"certified eps = {cfg['eps']:.3g}, r_x = {cfg['r_x']:.3f}, r_h = {cfg['r_h']:.3f}; "
        f"wrote {args.out}"
    )
    return 0
