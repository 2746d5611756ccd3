"""Lemma 39 (Appendix D): the mixed-norm Hölder inequality ||AB||_{p,q} <= ||A||_{r,q} ||B||_{p,s},
tight (docs/derivations/lemmas-39-41-42.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Tuple

import mpmath as mp
import torch

from qstr.bounds.packing import conjugate, lemma39_equality_case, mixed_norm
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, close, replaced, worst
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

INF = math.inf
# (p, q, r): ||AB||_{p,q} <= ||A||_{r,q} ||B||_{p,s}, s = r/(r-1)
LEMMA39_CASES = ((2, 2, 2), (1, INF, INF), (INF, 1, 1), (3, 1.5, 4 / 3), (1, 2, 3), (INF, INF, 1.5))
LEMMA39_SHAPES = ((1, 5, 1), (3, 4, 5), (6, 2, 3))  # (m, n, k) of the random pairs
LEMMA39_ROUNDING = Rounding(
    n=128,
    scale=1.0,
    what="128 eps x ratio (3 mixed norms of <= 6 x 5 matrices: sums, powers, roots)",
)
Pair = Tuple[torch.Tensor, torch.Tensor]
PIN_DPS = 40
# float64 mixed norms of <= 6 x 5 matrices (sums of <= 30 powers, two roots) against 40 digits:
# measured gaps ~1e-16; 1e-12 leaves room for the powers' rounding, not for a slipped formula
PIN_RTOL = 1e-12

claim = register(
    Claim(
        "lemma-39",
        Ref("Lemma 39"),
        statement=(
            "||AB||_{p,q} <= ||A||_{r,q} ||B||_{p,s} (row p-norms then q-norm; 1/r + 1/s = 1), "
            "tight"
        ),
        builds=(lemma39_equality_case,),
        bounds=(mixed_norm, conjugate),
        derivation="docs/derivations/lemmas-39-41-42.md",
    )
)


def holder_rhs(A: torch.Tensor, B: torch.Tensor, p: float, q: float, r: float) -> torch.Tensor:
    """Lemma 39's right-hand side ||A||_{r,q} ||B||_{p,s}, batched and differentiable."""
    return mixed_norm(A, r, q) * mixed_norm(B, p, conjugate(r))


@dataclass(frozen=True)
class Lemma39Inputs:
    """Per (p, q, r): random pairs, the equality case and Adam's starting pairs; the right-hand
    side."""

    cases: Tuple[Tuple[float, float, float], ...]
    random: Tuple[Tuple[Pair, ...], ...]  # per case, one batch of pairs per shape
    equality: Tuple[Pair, ...]  # lemma39_equality_case, per case
    starts: Tuple[Pair, ...]  # batched starting pairs of the ascent, per case
    steps: int  # Adam steps of the ascent
    rhs: Callable[..., torch.Tensor] = holder_rhs  # ||A||_{r,q} ||B||_{p,s}
    norm: Callable[..., torch.Tensor] = mixed_norm  # ||M||_{p,q}, the pin's function under test
    conj: Callable[[float], float] = conjugate  # the Hölder conjugate s of r


def _random_pairs(ctx: Context, i: int, n_random: int) -> Tuple[Pair, ...]:
    """Gaussian A with half its entries zeroed, heavy-tailed B = g / U, of every shape."""
    pairs = []
    for j, (m, n, k) in enumerate(LEMMA39_SHAPES):
        g = ctx.generator("lemma-39/random", i, j, device=ctx.device)
        kw = dict(generator=g, dtype=torch.float64, device=ctx.device)
        A = torch.randn(n_random, m, n, **kw) * (torch.rand(n_random, m, n, **kw) < 0.5)
        B = torch.randn(n_random, n, k, **kw) / torch.rand(n_random, n, k, **kw).clamp_min(1e-3)
        keep = (mixed_norm(A, 2, 2) > 0) & (mixed_norm(B, 2, 2) > 0)
        pairs.append((A[keep], B[keep]))
    return tuple(pairs)


@claim.inputs
def lemma39_inputs(ctx: Context) -> Lemma39Inputs:
    """Random, structured (equality case) and ascent starting pairs for every (p, q, r)
    (docs/derivations/lemmas-39-41-42.md, Lemma 39)."""
    restarts, steps = ctx.pick(quick=(2, 30), full=(6, 300))
    n_random = ctx.pick(quick=200, full=2000)
    random, equality, starts = [], [], []
    for i, (p, q, r) in enumerate(LEMMA39_CASES):
        random.append(_random_pairs(ctx, i, n_random))
        g = ctx.generator("lemma-39/equality", i, device=ctx.device)
        equality.append(lemma39_equality_case(5, 3, p, q, r, generator=g, m=2))
        g = ctx.generator("lemma-39/ascent", i, device=ctx.device)
        kw = dict(generator=g, dtype=torch.float64, device=ctx.device)
        starts.append((torch.randn(restarts, 3, 4, **kw), torch.randn(restarts, 4, 3, **kw)))
    return Lemma39Inputs(LEMMA39_CASES, tuple(random), tuple(equality), tuple(starts), steps)


def _ratio(inp: Lemma39Inputs, A: torch.Tensor, B: torch.Tensor, p, q, r) -> torch.Tensor:
    return mixed_norm(A @ B, p, q) / inp.rhs(A, B, p, q, r)


def _ascent(inp: Lemma39Inputs, i: int) -> float:
    """Adam ascent on log(lhs / rhs) from the case's starting pairs (one batch, no host sync per
    step); the largest ratio seen."""
    p, q, r = inp.cases[i]
    A, B = (t.clone().requires_grad_(True) for t in inp.starts[i])
    opt = torch.optim.Adam([A, B], lr=0.05)
    seen = []
    for _ in range(inp.steps):
        ratio = _ratio(inp, A, B, p, q, r)
        seen.append(ratio.detach().max())
        opt.zero_grad()
        (-torch.log(ratio)).sum().backward()
        opt.step()
    return float(torch.stack(seen).max())


def _exponents(p, q, r) -> str:
    return f"(p,q,r,s)=({p:g},{q:g},{r:.3g},{conjugate(r):.3g})"


def _largest_ratio(inp: Lemma39Inputs, i: int) -> Verdict:
    """The largest lhs / rhs of case i over its random pairs, its equality case and the ascent."""
    p, q, r = inp.cases[i]
    found = [(float(_ratio(inp, A, B, p, q, r).max()), "random") for A, B in inp.random[i]]
    found.append((float(_ratio(inp, *inp.equality[i], p, q, r)), "equality case"))
    found.append((_ascent(inp, i), "ascent"))
    top, how = max(found)
    return at_most(top, 1.0, LEMMA39_ROUNDING, detail=f"largest lhs/rhs ({how})")


@claim.check("lhs <= rhs", evidence="monte-carlo")
def lemma39_holds(inp: Lemma39Inputs) -> Verdict:
    """Lemma 39: the largest lhs / rhs over random pairs, the equality case and the ascent, over
    every (p, q, r), is at most 1 (docs/derivations/lemmas-39-41-42.md)."""
    # one rounding term for every case: the least slack is the largest ratio
    return worst((_exponents(*pqr), _largest_ratio(inp, i)) for i, pqr in enumerate(inp.cases))


@claim.check("equality case attained", evidence="built")
def lemma39_tight(inp: Lemma39Inputs) -> Verdict:
    """Lemma 39 is tight: lemma39_equality_case attains lhs / rhs = 1 for every (p, q, r); the
    ratio farthest from 1."""
    return worst(
        (_exponents(p, q, r), close(float(_ratio(inp, A, B, p, q, r)), 1.0, 0.0, LEMMA39_ROUNDING))
        for (p, q, r), (A, B) in zip(inp.cases, inp.equality, strict=True)
    )


def _mp_vector_norm(xs, p):
    """(sum |x|^p)^(1/p) (max |x| for p = inf) of mpf values, at the working precision."""
    if p == INF:
        return max(abs(x) for x in xs)
    return mp.fsum(abs(x) ** p for x in xs) ** (1 / p)


def mixed_norm_mp(M: torch.Tensor, p: float, q: float):
    """||M||_{p,q} written from the definition (docs/derivations/lemmas-39-41-42.md, Lemma 39) in
    mpmath: the p-norm of every row, then the q-norm of the row norms; M's float64 entries exact."""
    p, q = (mp.inf if e == INF else mp.mpf(e) for e in (p, q))
    rows = [_mp_vector_norm([mp.mpf(float(x)) for x in row], p) for row in M.tolist()]
    return _mp_vector_norm(rows, q)


def conjugate_mp(r: float):
    """s with 1/r + 1/s = 1 in mpmath (r = 1 -> inf, r = inf -> 1)."""
    if r == INF:
        return mp.mpf(1)
    return mp.inf if r == 1 else 1 / (1 - 1 / mp.mpf(r))


def _pin_matrices(inp: Lemma39Inputs):
    """Per case: its equality pair, the product, the first random pair of every shape (one draw),
    each with the exponent pairs Lemma 39 reads on it: (r, q), (p, s), (p, q)."""
    for (p, q, r), (A, B), shapes in zip(inp.cases, inp.equality, inp.random, strict=True):
        s = float(conjugate_mp(r))
        mats = [(A, B)] + [(A2[0], B2[0]) for A2, B2 in shapes]
        for A1, B1 in mats:
            yield from ((A1, r, q), (B1, p, s), (A1 @ B1, p, q), (B1, q, r))


def _rel(got, want) -> float:
    return 0.0 if got == want else float(abs(mp.mpf(got) - want) / abs(want))


@claim.check("mixed norm and conjugate = 40-digit evaluation", evidence="formula", agreement=True)
def lemma39_pin(inp: Lemma39Inputs) -> Verdict:
    """mixed_norm and conjugate, the functions Lemma 39's two sides read, against their definitions
    evaluated in mpmath at 40 digits (docs/derivations/lemmas-39-41-42.md): every case's matrices
    and exponent pairs, exponents 1 and inf included; the largest relative gap."""
    gaps = []
    with mp.workdps(PIN_DPS):
        for M, p, q in _pin_matrices(inp):
            gaps.append(
                (_rel(float(inp.norm(M, p, q)), mixed_norm_mp(M, p, q)), f"||.||_{p:g},{q:g}")
            )
        for r in (1, 4 / 3, 1.5, 2, 3, 4, INF):
            want = conjugate_mp(r)
            got = inp.conj(r)
            gap = (0.0 if got == INF else math.inf) if want == mp.inf else _rel(got, want)
            gaps.append((gap, f"conjugate({r:g})"))
    gap, where = max(gaps)
    detail = f"{len(gaps)} evaluations, largest at {where}; relative tolerance {PIN_RTOL:g}"
    return at_most(gap, PIN_RTOL, detail=detail)


def _swapped_rhs(A: torch.Tensor, B: torch.Tensor, p: float, q: float, r: float) -> torch.Tensor:
    """The false form ||A||_{q,r} ||B||_{s,p} (inner and outer exponents exchanged)."""
    return mixed_norm(A, q, r) * mixed_norm(B, conjugate(r), p)


def _doubled_rhs(A: torch.Tensor, B: torch.Tensor, p: float, q: float, r: float) -> torch.Tensor:
    """A right-hand side loose by a factor 2 (still true, no longer tight)."""
    return 2 * holder_rhs(A, B, p, q, r)


claim.fault(
    "inner and outer exponents swapped, ||A||_{q,r} ||B||_{s,p}",
    breaks=(lemma39_holds, lemma39_tight),
    apply=replaced(rhs=_swapped_rhs),
)
claim.fault("right-hand side doubled", breaks=lemma39_tight, apply=replaced(rhs=_doubled_rhs))


def _outer_root_lost(M: torch.Tensor, p: float, q: float) -> torch.Tensor:
    """||M||_{p,q} without the outer 1/q power: sum_i ||M_i||_p^q (max for q = inf)."""
    rows = torch.linalg.vector_norm(M, ord=p, dim=-1)
    return rows.amax(-1) if q == INF else (rows**q).sum(-1)


claim.fault(
    "mixed norm without its outer 1/q power",
    breaks=lemma39_pin,
    apply=replaced(norm=_outer_root_lost),
)
claim.fault(
    "conjugate r/(r + 1)",
    breaks=lemma39_pin,
    apply=replaced(conj=lambda r: 1.0 if r == INF else (INF if r == 1 else r / (r + 1))),
)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        "(p, q, r) = "
        + ", ".join(str(c) for c in inp.cases)
        + f"; random pairs, the equality case, {inp.steps} ascent steps"
    )
)
