"""Lemma 12: every token of n prompts lies in the ball of radius sqrt(3 C_x e d log(n N)), and
within the RNN's token_radius (docs/derivations/theorem4.md, section 1a)."""

import math
from dataclasses import dataclass
from typing import Callable

import torch

from qstr.bounds.attention import lemma12_radius
from qstr.bounds.recurrent import token_radius
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, replaced
from qstr.verify.claims import _theorem4_pins as pins
from qstr.verify.claims._theorem4_pins import largest_gap
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

DELTA = 1e-3  # token_radius's default failure probability

claim = register(
    Claim(
        "lemma-12",
        Ref("Lemma 12"),
        statement="every token of n prompts lies in the ball of radius sqrt(3 C_x e d log(n N)) "
        "(w.h.p.), and within the RNN's token_radius",
        bounds=(lemma12_radius, token_radius),
        derivation="docs/derivations/theorem4.md",
    )
)


@dataclass(frozen=True)
class Lemma12Inputs:
    """n prompts of N Gaussian tokens in R^d (C_x = 1), and the two radii they are held to."""

    x: torch.Tensor  # (n, N, d)
    radius: Callable[[int, int, int], float] = lemma12_radius  # Lemma 12's r_x(d, n, N)
    token_radius: Callable[[int, int], float] = token_radius  # the RNN's radius(d, n N)


@claim.inputs
def lemma12_inputs(ctx: Context) -> Lemma12Inputs:
    """n = 64 (quick) or 512 prompts of N = 2048 tokens, d = 2 (theorem4.md, section 1a)."""
    n, N, d = ctx.pick(quick=64, full=512), 2048, 2
    g = ctx.generator("lemma-12/tokens", device=ctx.device)
    x = torch.randn(n, N, d, generator=g, dtype=torch.float64, device=ctx.device)
    return Lemma12Inputs(x)


def _max_norm_within(inp: Lemma12Inputs, radius: float, detail: str) -> Verdict:
    """max ||x_j|| over every token <= radius, with the norms' rounding term."""
    n, N, d = inp.x.shape
    largest = float(inp.x.norm(dim=-1).max())
    rnd = Rounding(n=d + 1, scale=largest, what="(d + 1) eps max||x||")
    return at_most(largest, radius, rnd, f"max ||x_j||, n={n} x N={N} tokens, d={d}, {detail}")


@claim.check("max ||x_j|| <= r_x", evidence="monte-carlo")
def radius(inp: Lemma12Inputs) -> Verdict:
    """Lemma 12: every token lies in the ball of radius r_x = sqrt(3 C_x e d log(n N)). For
    Gaussian tokens max ||x_j|| ~ sqrt(2 ln(n N)), so the ratio is about sqrt(2 / (3 e d)): the
    bound's slack is its Markov tail at C_x d (e) and its union exponent 3 (theorem4.md, 1a)."""
    n, N, d = inp.x.shape
    gaussian = math.sqrt(2 * math.log(n * N)) / inp.radius(d, n, N)
    why = f"C_x = 1; Gaussian prediction sqrt(2 ln(nN)) / r_x = {gaussian:.3f} (not pushable)"
    return _max_norm_within(inp, inp.radius(d, n, N), why)


@claim.check("max ||x_j|| <= token_radius", evidence="monte-carlo")
def within_token_radius(inp: Lemma12Inputs) -> Verdict:
    """The constructions' radius sqrt(d) + sqrt(2 ln(n N / delta)) holds for the same tokens."""
    n, N, d = inp.x.shape
    return _max_norm_within(inp, inp.token_radius(d, n * N), f"delta = {DELTA:g}")


def _pin_points(inp: Lemma12Inputs):
    """The claim's (d, n, N) and edge ones: n N = 2 (the smallest Lemma 12 allows), d = 1, and
    n N = 1e12 x 2^20 at d = 10."""
    n, N, d = inp.x.shape
    return ((d, n, N), (1, 1, 2), (1, 2, 1), (3, 10_000, 16), (10, 10**12, 2**20))


@claim.check("r_x = 40-digit evaluation", evidence="formula")
def radius_formula(inp: Lemma12Inputs) -> Verdict:
    """r_x = sqrt(3 C_x e d ln(n N)) at C_x = 1 (theorem4.md, (1a)) against mpmath at 40 digits,
    at the claim's (d, n, N) and edge points; relative 1e-12."""
    pts = _pin_points(inp)
    gap = largest_gap((inp.radius(*p), lambda p=p: pins.r_x(*p)) for p in pts)
    return at_most(gap, pins.PIN_RTOL, detail=f"largest relative gap at (d, n, N) = {pts}")


@claim.check("token_radius = 40-digit evaluation", evidence="formula")
def token_radius_formula(inp: Lemma12Inputs) -> Verdict:
    """token_radius = sqrt(d) + sqrt(2 ln(n N / delta)) against mpmath at 40 digits at the same
    points; relative 1e-12."""
    pts = [(d, n * N) for d, n, N in _pin_points(inp)]
    gap = largest_gap((inp.token_radius(*p), lambda p=p: pins.token_radius(*p, DELTA)) for p in pts)
    return at_most(gap, pins.PIN_RTOL, detail=f"largest relative gap at (d, n N) = {pts}")


claim.fault(
    "r_x without the union bound over n N tokens",  # log(n N) -> 1: one token
    breaks=(radius, radius_formula),
    apply=replaced(radius=lambda d, n, N: math.sqrt(3 * math.e * d)),
)
claim.fault(
    "token_radius without its concentration term",  # the mean norm sqrt(d) alone
    breaks=(within_token_radius, token_radius_formula),
    apply=replaced(token_radius=lambda d, n_tokens: math.sqrt(d)),
)
claim.fault(
    "r_x with log2 (n N)",  # a log base slip: conservative by 1.2, seen only by the pin
    breaks=radius_formula,
    apply=replaced(radius=lambda d, n, N: math.sqrt(3 * math.e * d * math.log2(n * N))),
)
claim.fault(
    "token_radius with log10 (n N / delta)",  # 1.5 x too small in the root: not conservative
    breaks=token_radius_formula,
    apply=replaced(
        token_radius=lambda d, n_tokens: math.sqrt(d) + math.sqrt(2 * math.log10(n_tokens / DELTA))
    ),
)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: f"{inp.x.shape[0]} prompts of N = {inp.x.shape[1]} tokens, d = {inp.x.shape[2]}"
)
