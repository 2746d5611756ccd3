"""Lemma 12: every token of n prompts lies in the ball of radius sqrt(3 C_x e d log(n N)), and
within the RNN's token_radius (docs/derivations/theorem4.md, section 1a)."""

import math
from dataclasses import dataclass, replace
from typing import Callable, Tuple

import mpmath as mp
import torch

from qstr.bounds.attention import lemma12_radius
from qstr.bounds.transition import token_radius
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, by_ratio, close, mapped
from qstr.verify.claim import replaced, worst
from qstr.verify.claims import _theorem4_pins as pins
from qstr.verify.claims._theorem4_pins import largest_gap
from qstr.verify.claims._token_laws import GRID_RTOL, TokenLaw, rademacher, sparse_gaussian
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

DELTA = 1e-3  # token_radius's default failure probability
SPARSE_P = 0.2  # the sparse Gaussian's mass: the largest mean max / r_x at n N = 2^17 (0.77)

claim = register(
    Claim(
        "lemma-12",
        Ref("Lemma 12"),
        statement="every token of n prompts lies in the ball of radius sqrt(3 C_x e d log(n N)) "
        "(w.h.p.): Gaussian tokens (C_x = 1), Rademacher and sparse Gaussian tokens at their "
        "exact C_x; Gaussian tokens within the RNN's token_radius",
        bounds=(lemma12_radius, token_radius),
        derivation="docs/derivations/theorem4.md",
    )
)


@dataclass(frozen=True)
class Drawn:
    """n prompts of N tokens of one law of Assumption 1 at its exact C_x."""

    law: TokenLaw
    x: torch.Tensor  # (n, N, d)


@dataclass(frozen=True)
class Lemma12Inputs:
    """n prompts of N Gaussian tokens in R^d (C_x = 1), the same of two other laws at their exact
    C_x, and the two radii they are held to."""

    x: torch.Tensor  # (n, N, d)
    laws: Tuple[Drawn, ...]
    radius: Callable[..., float] = lemma12_radius  # Lemma 12's r_x(d, n, N, C_x = 1)
    token_radius: Callable[[int, int], float] = token_radius  # the RNN's radius(d, n N)


@claim.inputs
def lemma12_inputs(ctx: Context) -> Lemma12Inputs:
    """n = 64 (quick) or 512 prompts of N = 2048 tokens, d = 2: Gaussian, Rademacher at C_x = 2,
    sparse Gaussian at C_x = 1/2 (theorem4.md, section 1a)."""
    n, N, d = ctx.pick(quick=64, full=512), 2048, 2
    g = ctx.generator("lemma-12/tokens", device=ctx.device)
    x = torch.randn(n, N, d, generator=g, dtype=torch.float64, device=ctx.device)
    laws = (rademacher(2.0, d), sparse_gaussian(0.5, d, SPARSE_P))
    drawn = tuple(
        Drawn(law, law.sample((n, N), ctx.generator("lemma-12/law", i, device=ctx.device)))
        for i, law in enumerate(laws)
    )
    return Lemma12Inputs(x, drawn)


def _max_norm_within(x: torch.Tensor, radius: float, detail: str) -> Verdict:
    """max ||x_j|| over every token <= radius, with the norms' rounding term."""
    n, N, d = x.shape
    largest = float(x.norm(dim=-1).max())
    rnd = Rounding(n=d + 1, scale=largest, what="(d + 1) eps max||x||")
    return at_most(largest, radius, rnd, f"max ||x_j||, n={n} x N={N} tokens, d={d}, {detail}")


def _sparse_prediction(law: TokenLaw, n_tokens: int) -> float:
    """The sparse Gaussian's typical max / r_x: sqrt(2 s ln(p n N)) / r_x (its p n N nonzero
    tokens have ||x||^2 ~ s chi^2_2); -> sqrt(2/3) as n N grows at fixed p (the union exponent
    3 of r_x), s -> e d C_x as p -> 0 (the Markov tail's constant)."""
    r_x = math.sqrt(3 * law.C_x * math.e * law.d * math.log(n_tokens))
    return math.sqrt(2 * law.s * math.log(law.p * n_tokens)) / r_x


@claim.check("max ||x_j|| <= r_x", evidence="monte-carlo")
def radius(inp: Lemma12Inputs) -> Verdict:
    """Lemma 12: every token lies in the ball of radius r_x = sqrt(3 C_x e d log(n N)), for
    Gaussian tokens (C_x = 1, the default) and each law at its exact C_x; the largest ratio.
    Gaussian: max ~ sqrt(2 ln(n N)), ratio ~ sqrt(2 / (3 e d)); Rademacher: ||x|| = sqrt(C_x d),
    ratio 1 / sqrt(3 e ln(nN)); the sparse Gaussian attains the Markov tail's constant e C_x d,
    and leaves only the union exponent 3: ratio -> sqrt(2/3) (theorem4.md, 1a)."""
    n, N, d = inp.x.shape
    gaussian = math.sqrt(2 * math.log(n * N)) / inp.radius(d, n, N)
    why = f"C_x = 1; Gaussian prediction sqrt(2 ln(nN)) / r_x = {gaussian:.3f}"
    cases = [("Gaussian", _max_norm_within(inp.x, inp.radius(d, n, N), why))]
    for drawn in inp.laws:
        law = drawn.law
        bound = inp.radius(d, n, N, C_x=law.C_x)
        if law.p is None:
            norm = math.sqrt(law.C_x * d)
            why = f"constant norm sqrt(C_x d) = {norm:.3f}: ratio 1/sqrt(3e ln nN), bounded tokens"
        else:
            why = f"prediction {_sparse_prediction(law, n * N):.3f}, ceiling sqrt(2/3) = 0.816"
        cases.append((law.name, _max_norm_within(drawn.x, bound, why)))
    return worst(cases, key=by_ratio)


@claim.check("each law's C_x = sup_r of its moments", evidence="formula", agreement=True)
def laws_at_their_constant(inp: Lemma12Inputs) -> Verdict:
    """Each law's C_x is its least Assumption 1 constant sup_{r >= 1} (E||x||^r)^{2/r} / (d r):
    the maximum over 4000 log-spaced r in [1, 1e6] in float64 (lgamma; no search, no mpmath)
    equals it within 1e-6 from below (the grid's spacing) and never exceeds it."""
    cases = []
    for drawn in inp.laws:
        law = drawn.law
        on_grid = law.constant_on_grid() / law.C_x
        detail = "max over the r grid of (E||x||^r)^{2/r} / (d r C_x)"
        cases.append((law.name, close(on_grid, 1.0 - GRID_RTOL / 2, GRID_RTOL / 2, detail=detail)))
    return worst(cases)


def _median_max_norm(d: int, n_tokens: int) -> float:
    """The median of the largest of n_tokens N(0, I_d) norms: P(chi^2_d > t^2) = 1 - 2^(-1/n)."""
    with mp.workdps(30):
        level = -mp.expm1(-mp.log(2) / n_tokens)

        def tail(t):
            return mp.gammainc(mp.mpf(d) / 2, t * t / 2, regularized=True) - level

        return float(mp.findroot(tail, mp.sqrt(2 * mp.log(n_tokens))))


@claim.check("max ||x_j|| <= token_radius", evidence="monte-carlo")
def within_token_radius(inp: Lemma12Inputs) -> Verdict:
    """The constructions' radius sqrt(d) + sqrt(2 ln(n N / delta)) holds for the same Gaussian
    tokens; the detail gives the median of the maximum (the ratio a draw reaches: the bound adds
    sqrt(d), E||x|| <= sqrt(d) of Gaussian concentration, and delta's quantile)."""
    n, N, d = inp.x.shape
    median = _median_max_norm(d, n * N) / inp.token_radius(d, n * N)
    why = f"delta = {DELTA:g}; median max / token_radius = {median:.3f} (not pushable)"
    return _max_norm_within(inp.x, inp.token_radius(d, n * N), why)


def _pin_points(inp: Lemma12Inputs):
    """The claim's (d, n, N) and edge ones: n N = 2 (the smallest Lemma 12 allows), d = 1, and
    n N = 1e12 x 2^20 at d = 10."""
    n, N, d = inp.x.shape
    return ((d, n, N), (1, 1, 2), (1, 2, 1), (3, 10_000, 16), (10, 10**12, 2**20))


@claim.check("r_x = 40-digit evaluation", evidence="formula", agreement=True)
def radius_formula(inp: Lemma12Inputs) -> Verdict:
    """r_x = sqrt(3 C_x e d ln(n N)) (theorem4.md, (1a)) against mpmath at 40 digits, at the
    claim's (d, n, N) and edge points, at the default C_x (= 1) and at every law's C_x and
    C_x = 7.5; relative 1e-12."""
    pts = _pin_points(inp)
    pairs = [(inp.radius(*p), lambda p=p: pins.r_x(*p)) for p in pts]
    constants = sorted({drawn.law.C_x for drawn in inp.laws} | {7.5})
    for c in constants:
        pairs += [(inp.radius(*p, C_x=c), lambda p=p, c=c: pins.r_x(*p, C_x=c)) for p in pts]
    gap = largest_gap(pairs)
    detail = f"largest relative gap at (d, n, N) = {pts}, C_x = 1 (default) and {constants}"
    return at_most(gap, pins.PIN_RTOL, detail=detail)


@claim.check("token_radius = 40-digit evaluation", evidence="formula", agreement=True)
def token_radius_formula(inp: Lemma12Inputs) -> Verdict:
    """token_radius = sqrt(d) + sqrt(2 ln(n N / delta)) against mpmath at 40 digits at the same
    points; relative 1e-12."""
    pts = [(d, n * N) for d, n, N in _pin_points(inp)]
    gap = largest_gap((inp.token_radius(*p), lambda p=p: pins.token_radius(*p, DELTA)) for p in pts)
    return at_most(gap, pins.PIN_RTOL, detail=f"largest relative gap at (d, n N) = {pts}")


claim.fault(
    "r_x without the union bound over n N tokens",  # log(n N) -> 1: one token
    breaks=(radius, radius_formula),
    apply=replaced(radius=lambda d, n, N, C_x=1.0: math.sqrt(3 * C_x * math.e * d)),
)
claim.fault(
    "r_x with sqrt(C_x) for C_x",  # a lost power: conservative for C_x < 1, seen by the pin
    breaks=radius_formula,
    apply=replaced(radius=lambda d, n, N, C_x=1.0: lemma12_radius(d, n, N) * C_x**0.25),
)


def _scaled_by_first_moment(drawn: Drawn) -> Drawn:
    """The law scaled so that its r = 1 moment alone meets C_x (the sup's other r ignored):
    the sparse Gaussian's tokens 30x too large in variance; Rademacher's unchanged."""
    law = drawn.law
    first = math.exp(2 * law.log_moment(1.0)) / law.d  # (E||x||)^2 / d at the law's scale
    wide = replace(law, s=law.s * law.C_x / first)
    return Drawn(wide, drawn.x * math.sqrt(wide.s / law.s))


claim.fault(
    "C_x read off the first moment",
    breaks=(radius, laws_at_their_constant),
    apply=mapped("laws", _scaled_by_first_moment),
)
claim.fault(
    "token_radius without its concentration term",  # the mean norm sqrt(d) alone
    breaks=(within_token_radius, token_radius_formula),
    apply=replaced(token_radius=lambda d, n_tokens: math.sqrt(d)),
)
claim.fault(
    "r_x with log2 (n N)",  # a log base slip: conservative by 1.2, seen only by the pin
    breaks=radius_formula,
    apply=replaced(
        radius=lambda d, n, N, C_x=1.0: math.sqrt(3 * C_x * math.e * d * math.log2(n * N))
    ),
)
claim.fault(
    "token_radius with log10 (n N / delta)",  # 1.5 x too small in the root: not conservative
    breaks=token_radius_formula,
    apply=replaced(
        token_radius=lambda d, n_tokens: math.sqrt(d) + math.sqrt(2 * math.log10(n_tokens / DELTA))
    ),
)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        f"{inp.x.shape[0]} prompts of N = {inp.x.shape[1]} tokens, d = {inp.x.shape[2]}; "
        + ", ".join(["Gaussian C_x = 1", *(drawn.law.name for drawn in inp.laws)])
    )
)
