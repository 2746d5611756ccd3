"""Lemma 40 (Appendix D): Var(||x||^2 | Vx) = 2(k - r), by Monte Carlo
(docs/derivations/few-heads.md, section 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Tuple

from qstr.bounds.gaussian import (
    VarianceEstimate,
    conditional_sqnorm_variance,
    mc_conditional_sqnorm_variance,
    random_orthonormal_rows,
)
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, replaced
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding, largest

# (k, r) pairs: r = 0 (no conditioning), small and large r
LEMMA40_CASES = ((1, 0), (6, 2), (20, 7), (40, 39))
FAMILY_CONFIDENCE = 0.999  # Bonferroni over the cases

claim = register(
    Claim(
        "lemma-40",
        Ref("Lemma 40"),
        statement=(
            "Var(||x||^2 | Vx) = 2(k - r) for x ~ N(0, I_k), V with r orthonormal rows (MC, "
            "99.9% family CI)"
        ),
        builds=(mc_conditional_sqnorm_variance,),
        bounds=(conditional_sqnorm_variance,),
        derivation="docs/derivations/few-heads.md",
    )
)


@dataclass(frozen=True)
class Lemma40Inputs:
    """Monte Carlo estimates of Var(||x||^2 | Vx), one per (k, r), and the closed form they test."""

    cases: Tuple[Tuple[int, int], ...]
    estimates: Tuple[VarianceEstimate, ...]
    zcrit: float  # the per-case critical value of the family's confidence (Bonferroni)
    n_terms: int  # summands behind each estimate, for the rounding term
    variance: Callable[[int, int], float] = conditional_sqnorm_variance  # 2 (k - r), Lemma 40


@claim.inputs
def lemma40_inputs(ctx: Context) -> Lemma40Inputs:
    """One estimate per case from ``mc_conditional_sqnorm_variance``
    (docs/derivations/few-heads.md, section 1)."""
    n_outer, n_inner = ctx.pick(quick=(400, 200), full=(2000, 500), gpu=(4000, 200))
    per_case = 1 - (1 - FAMILY_CONFIDENCE) / len(LEMMA40_CASES)
    sizes, dev = dict(n_outer=n_outer, n_inner=n_inner, confidence=per_case), ctx.device
    estimates = []
    for k, r in LEMMA40_CASES:
        V = random_orthonormal_rows(r, k, generator=ctx.generator("lemma-40/V", k, r, device=dev))
        g = ctx.generator("lemma-40/samples", k, r, device=dev)
        estimates.append(mc_conditional_sqnorm_variance(V, generator=g, **sizes))
    from scipy import stats  # noqa: PLC0415 - lazy: scipy takes ~1 s to import

    zcrit = float(stats.norm.ppf(0.5 + per_case / 2))
    return Lemma40Inputs(LEMMA40_CASES, tuple(estimates), zcrit, n_outer + n_inner)


def _rounding(inp: Lemma40Inputs, est: VarianceEstimate, k: int, claimed: float) -> Rounding:
    what = "(n_outer + n_inner + k) eps max(est, 2(k-r))"
    return Rounding(n=inp.n_terms + k, scale=max(est.estimate, claimed), what=what)


@claim.check("family z-scores", evidence="monte-carlo")
def lemma40_zscores(inp: Lemma40Inputs) -> Verdict:
    """The largest |estimate - 2(k - r)| / stderr over the cases is within the family's critical
    value."""
    top, parts, terms = 0.0, [], []
    for (k, r), est in zip(inp.cases, inp.estimates, strict=True):
        claimed = inp.variance(k, r)
        rnd = _rounding(inp, est, k, claimed)
        terms.append(rnd.times(1 / max(est.stderr, 1e-300), "1/stderr"))
        top = max(top, est.zscore(claimed))  # the estimate's own |estimate - value| / stderr
        parts.append(f"k={k} r={r}: {est.estimate:.3f} +- {est.halfwidth:.3f} vs {claimed:g}")
    return at_most(top, inp.zcrit, largest(terms), detail="; ".join(parts))


@claim.check("each interval contains", evidence="monte-carlo")
def lemma40_intervals(inp: Lemma40Inputs) -> Verdict:
    """Every case's own confidence interval (the estimator's record) contains 2(k - r): the largest
    distance to the closed form in half-widths is at most 1."""
    top, terms = 0.0, []
    for (k, r), est in zip(inp.cases, inp.estimates, strict=True):
        claimed = inp.variance(k, r)
        terms.append(_rounding(inp, est, k, claimed).times(1 / est.halfwidth, "1/halfwidth"))
        top = max(top, abs(est.estimate - claimed) / est.halfwidth)
    what = "|estimate - 2(k - r)| / half-width, largest case"
    return at_most(top, 1.0, largest(terms), detail=what)


def _variance_at_rank_plus_one(k: int, r: int) -> float:
    """The closed form at rank r + 1: an off-by-one in the conditioning's degrees of freedom."""
    return conditional_sqnorm_variance(k, min(r + 1, k))


claim.fault(
    "rank r + 1",
    breaks=(lemma40_zscores, lemma40_intervals),
    apply=replaced(variance=_variance_at_rank_plus_one),
)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        "(k, r) = "
        + ", ".join(str(c) for c in inp.cases)
        + f"; {inp.estimates[0].samples} samples each"
    )
)
