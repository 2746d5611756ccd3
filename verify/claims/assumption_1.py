"""Assumption 1: sampled tokens have E[||x||^r]^(1/r) <= sqrt(C_x d r) with C_x <= 1, the Monte
Carlo moments matching the chi and normal closed forms (docs/derivations/theorem4.md)."""

import math
from dataclasses import dataclass, replace
from typing import Callable, Tuple

from qstr.constructions.links import CallableLink, make_link
from qstr.constructions.task import QSTR, MomentReport, moment_check
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, close, replaced, worst
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

ORDERS = (1.0, 2.0, 3.0, 4.0)
DIMS = (1, 4, 16)
TOL = 0.05  # Monte Carlo: the r = 4 ratio's standard error over B N = 25,600 draws: ~1 %


def chi_moment_ratio(d: int, r: float) -> float:
    """E[||x||^r]^(2/r) / (d r) for x ~ N(0, I_d):
    E||x||^r = 2^(r/2) Gamma((d + r)/2) / Gamma(d/2)."""
    log_m = (r / 2) * math.log(2) + math.lgamma((d + r) / 2) - math.lgamma(d / 2)
    return math.exp(2 * log_m / r) / (d * r)


def normal_moment_ratio(r: float, s: float = 1.0) -> float:
    """E[|y|^r]^(2/r) / r^(2s) for y ~ N(0, 1): E|y|^r = 2^(r/2) Gamma((r + 1)/2) / sqrt(pi)."""
    log_m = (r / 2) * math.log(2) + math.lgamma((r + 1) / 2) - 0.5 * math.log(math.pi)
    return math.exp(2 * log_m / r) / r ** (2 * s)


claim = register(
    Claim(
        "assumption-1",
        Ref("Assumption 1"),
        statement="sampled tokens: E[||x||^r]^(1/r) <= sqrt(C_x d r) with C_x <= 1, Monte Carlo = "
        "chi closed form",
        builds=(QSTR.sample, moment_check),
        bounds=(chi_moment_ratio, normal_moment_ratio),
        derivation="docs/derivations/theorem4.md",
    )
)


@dataclass(frozen=True)
class Assumption1Inputs:
    """moment_check reports of the qSTR sampler (linear link: y ~ N(0, 1)) per d, and the closed
    forms they are compared with."""

    reports: Tuple[Tuple[int, MomentReport], ...]  # (d, report)
    chi_ratio: Callable[[int, float], float] = chi_moment_ratio
    normal_ratio: Callable[[float], float] = normal_moment_ratio


def _reports(ctx: Context, task=QSTR, link=lambda linear: linear):
    """moment_check of task(N=64, d, link(a linear link)) per d (B = 400 prompts, quick)."""
    B, reports = ctx.pick(quick=400, full=4000), []
    for d in DIMS:
        linear = make_link("linear", 1, d, generator=ctx.generator("assumption-1/link", d))
        g = ctx.generator("assumption-1/tokens", d, device=ctx.device)
        sampled = task(N=64, d=d, link=link(linear))
        report = moment_check(sampled, B=B, orders=ORDERS, device=ctx.device, generator=g)
        reports.append((d, report))
    return tuple(reports)


@claim.inputs
def assumption1_inputs(ctx: Context) -> Assumption1Inputs:
    """Monte Carlo token and label moments at r = 1..4, d = 1, 4, 16 (Assumption 1)."""
    return Assumption1Inputs(_reports(ctx))


@claim.check("C_x <= 1", evidence="monte-carlo")
def c_x(inp: Assumption1Inputs) -> Verdict:
    """Assumption 1 with C_x = 1: E[||x||^r]^(1/r) <= sqrt(d r), the largest measured ratio."""
    cases = []
    for d, rep in inp.reports:
        rnd = Rounding(n=rep.samples, scale=rep.C_x, what="(B N) eps C_x")
        verdict = at_most(rep.C_x, 1.0, rnd, detail="C_x = max_r E||x||^r^(2/r) / (d r)")
        cases.append((f"d = {d}, {rep.samples} tokens", verdict))
    return worst(cases)


def _ratios(inp: Assumption1Inputs, column: int, closed) -> Verdict:
    """Monte Carlo / closed form = 1 within TOL, the worst (d, r)."""
    rows = [(d, row[0], row[column]) for d, rep in inp.reports for row in rep.per_order]
    return worst(
        (f"d = {d}, r = {r:g}", close(mc / closed(d, r), 1.0, TOL, detail="MC / closed form"))
        for d, r, mc in rows
    )


@claim.check("token moments = chi closed form", evidence="monte-carlo")
def tokens(inp: Assumption1Inputs) -> Verdict:
    """Token moments E[||x||^r]^(2/r) / (d r): Monte Carlo = the chi closed form, within 5%."""
    return _ratios(inp, 1, inp.chi_ratio)


@claim.check("label moments = normal closed form", evidence="monte-carlo")
def labels(inp: Assumption1Inputs) -> Verdict:
    """Label moments E[|y|^r]^(2/r) / r^2 (y ~ N(0, 1)): Monte Carlo = the normal closed form."""
    return _ratios(inp, 2, lambda d, r: inp.normal_ratio(r))


class _Scaled(QSTR):
    """A sampler drawing x ~ N(0, 1.5^2 I) by mistake."""

    def sample_tokens(self, B, *, generator, device, dtype):
        return 1.5 * super().sample_tokens(B, generator=generator, device=device, dtype=dtype)


@claim.fault("tokens with standard deviation 1.5", breaks=(c_x, tokens))
def _tokens_of_sd_1_5(inp: Assumption1Inputs, ctx: Context) -> Assumption1Inputs:
    """Tokens drawn with standard deviation 1.5 instead of 1."""
    return replace(inp, reports=_reports(ctx, task=_Scaled))


@claim.fault("labels with standard deviation 1.5", breaks=labels)
def _labels_of_sd_1_5(inp: Assumption1Inputs, ctx: Context) -> Assumption1Inputs:
    """A linear link whose direction has norm 1.5: labels ~ N(0, 2.25)."""

    def wide(linear):
        return CallableLink(q=1, d=linear.d, fn=lambda xt: 1.5 * linear(xt))

    return replace(inp, reports=_reports(ctx, link=wide))


claim.fault(
    "the chi closed form at d + 1",
    breaks=tokens,
    apply=replaced(chi_ratio=lambda d, r: chi_moment_ratio(d + 1, r)),
)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: "Monte Carlo moments r = 1..4 at d = " + ", ".join(str(d) for d, _ in inp.reports)
)
