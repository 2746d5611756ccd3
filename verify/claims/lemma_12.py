"""Lemma 12: every token of n prompts lies in the ball of radius sqrt(3 C_x e d log(n N)), and
within the RNN's token_radius (docs/derivations/theorem4.md, section 1a)."""

import math
from dataclasses import dataclass
from typing import Callable

import torch

from qstr.bounds.attention import lemma12_radius
from qstr.bounds.recurrent import token_radius
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, close, replaced
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
    """Lemma 12: every token lies in the ball of radius r_x = sqrt(3 C_x e d log(n N))."""
    n, N, d = inp.x.shape
    return _max_norm_within(inp, inp.radius(d, n, N), "C_x = 1")


@claim.check("max ||x_j|| <= token_radius", evidence="monte-carlo")
def within_token_radius(inp: Lemma12Inputs) -> Verdict:
    """The constructions' radius sqrt(d) + sqrt(2 ln(n N / delta)) holds for the same tokens."""
    n, N, d = inp.x.shape
    return _max_norm_within(inp, inp.token_radius(d, n * N), f"delta = {DELTA:g}")


@claim.check("r_x as derived", evidence="formula")
def radius_formula(inp: Lemma12Inputs) -> Verdict:
    """r_x = sqrt(3 C_x e d ln(n N)) at C_x = 1 (theorem4.md, 1a)."""
    n, N, d = inp.x.shape
    want = math.sqrt(3 * math.e * d * math.log(n * N))
    return close(inp.radius(d, n, N), want, 1e-12 * want, detail="relative tolerance 1e-12")


@claim.check("token_radius as derived", evidence="formula")
def token_radius_formula(inp: Lemma12Inputs) -> Verdict:
    """token_radius = sqrt(d) + sqrt(2 ln(n N / delta)) (Gaussian concentration, union bound)."""
    n, N, d = inp.x.shape
    want = math.sqrt(d) + math.sqrt(2 * math.log(n * N / DELTA))
    return close(inp.token_radius(d, n * N), want, 1e-12 * want, detail="relative tolerance 1e-12")


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


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: f"{inp.x.shape[0]} prompts of N = {inp.x.shape[1]} tokens, d = {inp.x.shape[2]}"
)
