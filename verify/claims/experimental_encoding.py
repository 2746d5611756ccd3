"""Appendix E's encoding: at d_e = floor(5 ln N), N = 100, about 52.6 of 4950 code pairs exceed
1/2, the exact pair tail (docs/derivations/codebooks.md (b))."""

import math
from dataclasses import dataclass, replace
from typing import Callable, Tuple

import torch

from qstr.constructions.codes import coherence_report, experimental_codebook, rademacher_codebook
from qstr.constructions.codes import rademacher_pair_tail
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_least, close, exact, replaced
from qstr.verify.claims._codebooks import CODEBOOKS, one_sided_pair_tail, tail_by_counting
from qstr.verify.registry import register

N = 100

claim = register(
    Claim(
        "experimental-encoding",
        Ref("Appendix E"),
        statement="the experiments' d_e = floor(5 ln N) at N = 100: about 52.6 of 4950 code pairs "
        "exceed 1/2 (exact tail = sign-pattern count = Monte Carlo)",
        builds=(experimental_codebook,),
        bounds=(rademacher_pair_tail,),
        derivation=CODEBOOKS,
    )
)


@dataclass(frozen=True)
class ExperimentalInputs:
    """Independent draws of the experiments' codebook (N = 100, d_e = 23), as built, and the pair
    tail that predicts how many of their pairs exceed 1/2 (codebooks.md (b))."""

    codes: Tuple[torch.Tensor, ...]  # each draw's (N, d_e) codes omega
    d_e: int
    pair_tail: Callable[[int, float], float] = rademacher_pair_tail


@claim.inputs
def experimental_inputs(ctx: Context) -> ExperimentalInputs:
    """R = 300 (quick) or 3000 draws of experimental_codebook(100), each its own generator."""

    books = []
    for r in range(ctx.pick(quick=300, full=3000)):
        g = ctx.generator("experimental-encoding/draw", r, device=ctx.device)
        books.append(experimental_codebook(N, device=ctx.device, generator=g))
    return ExperimentalInputs(tuple(b.omega for b in books), books[0].d_e)


def violations(codes: Tuple[torch.Tensor, ...]) -> Tuple[int, ...]:
    """Pairs with |<w_i, w_j>| > 1/2 in each codebook, counted on its codes (coherence_report)."""
    return tuple(coherence_report(omega, 0.5).n_violations for omega in codes)


@claim.check("mean violations = C(N, 2) tail", evidence="monte-carlo")
def mean_violations(inp: ExperimentalInputs) -> Verdict:
    """The mean number of pairs above 1/2 per draw = C(N, 2) P(|<w_i, w_j>| > 1/2) (about 52.58),
    within 6 standard errors."""
    counts = violations(inp.codes)
    R, pairs = len(counts), N * (N - 1) // 2
    mean = sum(counts) / R
    se = math.sqrt(sum((c - mean) ** 2 for c in counts) / (R - 1) / R)
    detail = f"N = {N}, d_e = {inp.d_e}, {R} draws, se {se:.2g}, tolerance 6 se"
    return close(mean, pairs * inp.pair_tail(inp.d_e, 0.5), 6 * se, detail=detail)


@claim.check("pair tail = sign-pattern count", evidence="exact")
def tail(inp: ExperimentalInputs) -> Verdict:
    """The pair tail at d_e = 23 = the sign-pattern count 89104 / 2^23 (codebooks.md (b))."""
    count = tail_by_counting(inp.d_e, 0.5)
    return exact(inp.pair_tail(inp.d_e, 0.5), float(count), detail=f"count {count}")


@claim.check("every draw violates Assumption 3", evidence="built")
def every_draw(inp: ExperimentalInputs) -> Verdict:
    """Every draw violates Assumption 3: the fewest pairs above 1/2 in a draw, counted on the
    built codes, is at least 1."""
    counts = violations(inp.codes)
    return at_least(min(counts), 1, detail=f"fewest violating pairs of {len(counts)} draws")


claim.fault(
    "the one-sided tail",
    breaks=(mean_violations, tail),
    apply=replaced(pair_tail=one_sided_pair_tail),
)


@claim.fault("draws at the exact rule's d_e", breaks=every_draw)
def _exact_rule_draws(inp: ExperimentalInputs, ctx: Context) -> ExperimentalInputs:
    """Ten draws at the exact rule's d_e (rademacher_codebook, N = 100): no pair above 1/2."""

    codes = []
    for r in range(10):
        g = ctx.generator("experimental-encoding/rule", r, device=ctx.device)
        codes.append(rademacher_codebook(N, device=ctx.device, generator=g).omega)
    return replace(inp, codes=tuple(codes))


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: f"{len(inp.codes)} draws of experimental_codebook(100), d_e = {inp.d_e}"
)
