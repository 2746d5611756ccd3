"""Prop 26's inputs (Appendix B): the codes (RS-Hadamard, rotated, short rows, mu = 1/8), the
transition cases with their worst tokens in the r_x ball, and the RNN curves; the claim module
``prop_26.py`` declares the checks and faults. docs/derivations/rnn-transition.md."""

from __future__ import annotations

import torch

from qstr.bounds.transition import prop26_transition, prop28_rnn
from qstr.constructions.codes import Codebook, rs_hadamard_codebook
from qstr.constructions.links import make_link
from qstr.verify.adversarial import ball_ascent
from qstr.verify.claim import Context
from qstr.verify.claims._transition import F64, TransitionCase
from qstr.verify.claims._transition import orthogonally_rotated
from qstr.verify.claims._transition import boundary_tokens, target_errors, worst_target


P26_D, P26_Q, P26_RX, P26_EPS = 3, 2, 2.5, 0.1
P26_ROTATED_NS = (512, 2048, 8192, 32768)  # RS-Hadamard with d_e = 64 (mu = 1/2) stops at N = 32768
P26_LONG_NS = (1000, 10_000, 100_000, 1_000_000)  # gpu: the transition scanned at N = 1e6


# ------------------------------------------------------------------ the codes


def _every_other_row_scaled(book: Codebook) -> Codebook:
    """Every other row scaled by 0.999: the norm defect nu = max | ||w||^2 - 1 | = 0.002 enters
    every budget of the transition (products, gate, certified eps); the coherence stays <= 1/2."""
    omega = book.omega.clone()
    omega[::2] *= 0.999
    return Codebook(omega, book.mu, "custom", dict(book.params, short_rows=0.999))


def _quarter(ctx: Context) -> Codebook:
    """A rotated RS-Hadamard code built for mu <= 1/4 (measured mu = 1/8): approximate products."""
    book = rs_hadamard_codebook(64, mu=0.25, dtype=F64)
    return orthogonally_rotated(book, ctx.generator("prop-26/quarter-rotation")).to(ctx.device)


def _p26_books(ctx: Context):
    """RS-Hadamard N = 64 (d_e = 16, mu = 1/2 attained), rotated, rotated with short rows (and
    in full, the mu = 1/8 code)."""
    base = rs_hadamard_codebook(64, dtype=F64)
    rotated = orthogonally_rotated(base, ctx.generator("prop-26/rotation"))
    books = [
        ("rs-hadamard N=64 (exact products)", base),
        ("rotated rs-hadamard N=64 (approx. products)", rotated),
        (
            "rotated rs-hadamard N=64, every other row of norm 0.999 (nu = 0.002)",
            _every_other_row_scaled(rotated),
        ),
    ]
    if ctx.profile != "quick":  # mu = 1/8 < 1/2 with approximate products: K1 from the dA branch
        books.append(("rotated rs-hadamard N=64, mu = 1/8", _quarter(ctx)))
    return [(label, book.to(device=ctx.device)) for label, book in books]


# ------------------------------------------------------------------ the inputs


def _gate_leaks(tr, x: torch.Tensor, zs: torch.Tensor, hit: torch.Tensor) -> torch.Tensor:
    """max |gate|_inf at non-target slots (0 at targets): the gate before layers 3-4."""
    G = tr(torch.cat([x, zs], 1), rectify=False).view(-1, tr.q, x.shape[1]).abs().amax(-1)
    return torch.where(hit, torch.zeros_like(G), G)


def _transition_case(label: str, book: Codebook, k: int, ctx: Context) -> TransitionCase:
    tr = prop26_transition(book, P26_D, P26_Q, eps=P26_EPS, r_x=P26_RX)
    dev, N, q, d, r_x = ctx.device, book.N, P26_Q, P26_D, P26_RX
    ar = torch.arange(N, device=dev)
    i, j = (v.flatten() for v in torch.meshgrid(ar, ar, indexing="ij"))
    t = torch.stack([(j + 7 * l) % N for l in range(q)], 1)
    P = i.numel()
    gen = ctx.generator("prop-26/tokens", k, device=dev)
    x = torch.randn(P, d, generator=gen, dtype=F64, device=dev)
    radii = torch.rand(P, 1, generator=gen, dtype=F64, device=dev).sqrt()
    x = x / x.norm(dim=1, keepdim=True) * r_x * radii
    bnd = boundary_tokens(d, r_x, dev)
    hit = t == i[:, None]
    targets = hit.any(1).nonzero().flatten()
    some = torch.randperm(P, generator=gen, device=dev)[: ctx.pick(quick=384, full=4096)]
    sub = torch.cat([targets, some])
    h = torch.randn(sub.numel(), tr.d_h, generator=gen, dtype=F64, device=dev) * r_x
    om = book.omega.to(dtype=F64, device=dev)
    s_pair = torch.stack([(om[i] * om[t[:, l]]).sum(1) for l in range(q)], 1)
    at_mu = (((s_pair - book.mu).abs() < 1e-9) & ~hit).any(1)  # the gate is closest to on there
    sel = torch.cat([targets[:64], at_mu.nonzero().flatten()[:192]])
    boundary = bnd[torch.arange(P, device=dev) % bnd.shape[0]]
    x0 = boundary[: sel.numel()] * 0.999 + 1e-3 * x[sel]
    zs, hs = torch.cat([om[i[sel]]] + [om[t[sel, l]] for l in range(q)], 1), hit[sel]
    # the worst tokens in the r_x ball for the target error and for the gate off target
    steps = ctx.pick(quick=25, full=100)
    xa = ball_ascent(lambda x: target_errors(tr, x, zs, hs), x0, r_x, steps)
    xl = ball_ascent(lambda x: _gate_leaks(tr, x, zs, hs), x0, r_x, steps)
    return TransitionCase(label, book, tr, i, t, x, boundary, sub, h, sel, x0, xa, xl)


def _curve(N: int, rotate: bool, ctx: Context) -> tuple:
    """The RNN on the RS-Hadamard codes of N (rotated: d_e = 64, mu = 1/2, approximate products),
    scanned over the prefixes of P26_ROTATED_NS (rotated) or P26_LONG_NS, with the target position
    and token where its transition's target error is largest (``worst_target``)."""
    book = rs_hadamard_codebook(N, dtype=F64)
    if rotate:
        book = orthogonally_rotated(book, ctx.generator("prop-26/curve-rotation"))
    link = make_link("linear", 1, P26_D, generator=ctx.generator("prop-26/link"))
    rnn = prop28_rnn(
        book.to(device=ctx.device), P26_D, link.two_layer_net(), eps=P26_EPS, r_x=P26_RX
    )
    kind = "rotated" if rotate else "rs-hadamard"
    t, x_t = worst_target(rnn.transition, rnn.omega, P26_RX, ctx.pick(quick=25, full=100))
    return f"{kind} N={N}", rnn, P26_ROTATED_NS if rotate else P26_LONG_NS, int(t[0]), x_t[0]
