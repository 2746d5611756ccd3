"""Claims about the auxiliary lemmas (Section 6 / Appendix C): Lemma 40 here."""
from __future__ import annotations

from scipy import stats

from bounds.gaussian import conditional_sqnorm_variance, mc_conditional_sqnorm_variance, random_orthonormal_rows
from verify.registry import Claim, Context, Outcome, register

# (k, r) pairs: r = 0 (no conditioning), small and large r
LEMMA40_CASES = ((1, 0), (6, 2), (20, 7), (40, 39))
FAMILY_CONFIDENCE = 0.999  # Bonferroni over the cases


def _lemma40(ctx: Context, rank_shift: int) -> Outcome:
    """Monte Carlo Var(||x||^2 | Vx) against 2(k - r - rank_shift), each within its interval."""
    n_outer, n_inner = ctx.pick(quick=(400, 200), full=(2000, 500))
    per_case = 1 - (1 - FAMILY_CONFIDENCE) / len(LEMMA40_CASES)
    zcrit = stats.norm.ppf(0.5 + per_case / 2)
    worst, parts = 0.0, []
    for i, (k, r) in enumerate(LEMMA40_CASES):
        V = random_orthonormal_rows(r, k, generator=ctx.generator(40 + i))
        est = mc_conditional_sqnorm_variance(V, n_outer=n_outer, n_inner=n_inner,
                                             generator=ctx.generator(400 + i), confidence=per_case)
        claimed = conditional_sqnorm_variance(k, min(r + rank_shift, k))
        z = est.zscore(claimed)
        worst = max(worst, z)
        parts.append(f"k={k} r={r}: {est.estimate:.3f} +- {est.halfwidth:.3f} vs {claimed:g}")
    return Outcome(measured=f"max |z| = {worst:.2f}", bound=f"|z| <= {zcrit:.2f}", holds=worst <= zcrit,
                   detail="; ".join(parts))


register(Claim(
    id="lemma-40", ref_seed="Lemma 40", ref_conference="Lemma 40",
    statement="Var(||x||^2 | Vx) = 2(k - r) for x ~ N(0, I_k), V with r orthonormal rows (MC, 99.9% family CI)",
    check=lambda ctx: _lemma40(ctx, 0), falsifier=lambda ctx: _lemma40(ctx, 1),
    falsifier_statement="the same estimates tested against a wrong rank r + 1",
))
