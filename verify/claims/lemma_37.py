"""Lemma 37: n Gaussian points projected on a random unit v are eps_n-separated with ||z||^2 <= 2n
with probability >= 1/3 (docs/derivations/interpolation.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import mpmath
import torch

from qstr.bounds.interpolation import LEMMA37_NORM_FACTOR, gap_threshold, lemma37_union_bound
from qstr.constructions.interpolation import Lemma37Events, SeparatingDirection, certified_gap
from qstr.constructions.interpolation import lemma37_events, separating_direction
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_least, at_most, edited, exact
from qstr.verify.claim import by_ratio, replaced, worst
from qstr.verify.claims._interpolation import PIN_DPS, PIN_RTOL, collinear_points
from qstr.verify.claims._interpolation import mp_gap_threshold, mp_union_bound, relative_gap
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

CONFIDENCE = 0.999  # one-sided Clopper-Pearson level used by the probability checks
L37_D = 10
L37_REPLAY = 64  # trials replayed against the derived certified gaps
L37_STEP3_NS = range(2, 1025)  # the lengths at which step 3's union bound at eps_n is evaluated
L37_ADV_D = 3  # the adversarial sample's dimension: P(|<v, w>| >= 0.95) = 0.05 per draw of v
L37_ADV_NORM = 1.96  # its sum of squared positions, in units of n (||z||^2 <= 1.96 n < 2n)

claim = register(
    Claim(
        "lemma-37",
        Ref("Lemma 37"),
        statement="n Gaussian points, random unit v: all gaps |<v, x_i - x_j>| >= sqrt(pi)/(3n^2) "
        "and ||z||^2 <= 2n w.p. >= 1/3",
        builds=(separating_direction, lemma37_events, certified_gap),
        bounds=(gap_threshold, lemma37_union_bound),
        derivation="docs/derivations/interpolation.md",
    )
)


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds (lower, upper) for a binomial proportion k / n."""
    alpha = 1.0 - confidence
    from scipy import stats  # noqa: PLC0415 - lazy: scipy takes ~1 s to import

    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))
    return lo, hi


def gaps_as_derived(x: torch.Tensor, v: torch.Tensor, allowance: float = 2.0) -> list:
    """Lemma 37's certified gaps of T trials x (T, n, D), v (T, D) (interpolation.md, Higham Thm
    3.1): sorted z = x v, float gap (1 - u) - 2 gamma_D max_j sum_k |x_jk v_k|, gamma_D = D u /
    (1 - D u), u = 2^-53 (``allowance`` times gamma_D: 2 as derived)."""
    u, D = torch.finfo(torch.float64).eps / 2, x.shape[-1]
    gamma = D * u / (1 - D * u)
    zs = (x @ v[:, :, None]).squeeze(-1)
    sums = (x.abs() @ v.abs()[:, :, None]).squeeze(-1)
    return [
        float(torch.diff(torch.sort(z).values).min()) * (1 - u) - allowance * float(gamma * a.max())
        for z, a in zip(zs, sums, strict=True)
    ]


@dataclass(frozen=True, eq=False)
class Lemma37Inputs:
    """Lemma 37's draws: the event counts' sizes, one fixed Gaussian sample with the direction
    ``separating_direction`` found for it, a replay batch, and the gap threshold eps_n."""

    n: int
    trials: int
    threshold: Callable[[int], float]  # eps_n = sqrt(pi) / (3 n^2)
    sample: torch.Tensor  # (n, D): the fixed sample of the constructive version
    direction: SeparatingDirection  # found for ``sample`` at the threshold eps_n
    replay_x: torch.Tensor  # (T, n, D): the draws lemma37_events makes, replayed
    replay_v: torch.Tensor  # (T, D)
    derived_gaps: Callable  # the certified gaps as derived (gaps_as_derived)
    union_bound: Callable[[int, float], float]  # C(n, 2) eps / sqrt(pi)
    # collinear points spaced eps_n / 0.95 at ||z||^2 ~ 1.96 n, and the direction found for them
    adversarial: tuple = ()
    norm_factor: float = LEMMA37_NORM_FACTOR  # Lemma 37's 2 (Markov)


def _replay(ctx: Context, n: int):
    """The draws of ``lemma37_events`` on its replay generator: x (T, n, D), then v (T, D)."""
    g = ctx.generator("lemma-37/replay", device=ctx.device)
    kw = dict(dtype=torch.float64, device=ctx.device)
    x = torch.randn(L37_REPLAY, n, L37_D, generator=g, **kw)
    return x, torch.randn(L37_REPLAY, L37_D, generator=g, **kw)


@claim.inputs
def lemma37_inputs(ctx: Context) -> Lemma37Inputs:
    """The sample and its direction (50 tries fail with probability <= (2/3)^50), and the replay
    batch of ``lemma37_events`` (each chunk draws x, then v): docs/derivations/interpolation.md."""
    n = ctx.pick(quick=24, full=64)
    trials = ctx.pick(quick=1500, full=20000, gpu=15000)
    kw = dict(dtype=torch.float64, device=ctx.device)
    x = torch.randn(n, L37_D, generator=ctx.generator("lemma-37/sample", device=ctx.device), **kw)
    sd = separating_direction(
        x,
        threshold=gap_threshold(n),
        norm_factor=LEMMA37_NORM_FACTOR,
        max_tries=50,
        generator=ctx.generator("lemma-37/directions", device=ctx.device),
    )
    rx, rv = _replay(ctx, n)
    rv = rv / rv.norm(dim=1, keepdim=True)
    adv = collinear_points(n, L37_ADV_D, L37_ADV_NORM * n, ctx.device)
    adv_sd = separating_direction(
        adv,
        threshold=gap_threshold(n),
        norm_factor=LEMMA37_NORM_FACTOR,
        max_tries=1000,  # fails with probability 0.95^1000 < 1e-22
        generator=ctx.generator("lemma-37/adversarial", device=ctx.device),
    )
    return Lemma37Inputs(
        n, trials, gap_threshold, x, sd, rx, rv, gaps_as_derived, lemma37_union_bound, (adv, adv_sd)
    )


def _samples(inp: Lemma37Inputs) -> list:
    """(name, sample, direction): the Gaussian sample and the adversarial one (interpolation.md,
    'Slack': every gap within eps_n / 0.95, ||z||^2 near 2n)."""
    rows = [("Gaussian", inp.sample, inp.direction)]
    return rows + ([("collinear", *inp.adversarial)] if inp.adversarial else [])


def _events(
    inp: Lemma37Inputs, ctx: Context, name: str, trials: int, threshold: float, norm_factor: float
) -> Lemma37Events:
    """``lemma37_events`` at the inputs' n on the generator ``name``."""
    g = ctx.generator(name, device=ctx.device)
    return lemma37_events(
        inp.n, L37_D, trials=trials, threshold=threshold, norm_factor=norm_factor, generator=g
    )


def _counted(inp: Lemma37Inputs, ctx: Context) -> Lemma37Events:
    """The event counts of Lemma 37 at eps_n and norm factor 2."""
    return _events(
        inp, ctx, "lemma-37/events", inp.trials, inp.threshold(inp.n), LEMMA37_NORM_FACTOR
    )


@claim.check("P(success) >= 1/3", evidence="monte-carlo")
def lemma37_success(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """Lemma 37: P(every gap >= eps_n and ||z||^2 <= 2n) >= 1/3 (one-sided Clopper-Pearson)."""
    ev = _counted(inp, ctx)
    lo, _ = clopper_pearson(ev.joint_ok, ev.trials)
    detail = (
        f"n={inp.n}, D={L37_D}, {ev.trials} draws of (x, v): joint success "
        f"{ev.joint_ok / ev.trials:.3f}, its CP{CONFIDENCE:.1%} lower bound measured; "
        "no rounding term: event counts, each gap certified with its float64 allowance; "
        f"slack: 1/3 = 1 - 1/6 - 1/2, the gap failure {1 - ev.gap_ok / ev.trials:.3f} near its "
        f"1/6, the norm failure {1 - ev.norm_ok / ev.trials:.4f} against Markov's 1/2 "
        "(interpolation.md, 'Slack')"
    )
    return at_least(lo, 1 / 3, detail=detail)


@claim.check("gap failure <= union bound", evidence="monte-carlo")
def lemma37_union(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """Lemma 37, steps 1-3: P(some gap < eps) is at most the union bound C(n, 2) eps / sqrt(pi)."""
    ev = _counted(inp, ctx)
    lo, _ = clopper_pearson(ev.trials - ev.gap_ok, ev.trials)
    union = inp.union_bound(inp.n, ev.threshold)
    detail = f"gap failure {1 - ev.gap_ok / ev.trials:.3f}, CP lower bound against C(n, 2) eps / "
    return at_most(lo, union, detail=f"{detail}sqrt(pi) = {union:.3f}")


@claim.check("union bound at eps_n = (n - 1) / (6n)", evidence="formula")
def lemma37_threshold_union(inp: Lemma37Inputs) -> Verdict:
    """Lemma 37, step 3: at eps_n the union bound C(n, 2) eps_n / sqrt(pi) is (n - 1) / (6 n) < 1/6
    exactly (docs/derivations/interpolation.md); the largest relative gap over n = 2..1024."""
    rounding = Rounding(n=8, scale=1.0, what="8 eps (sqrt, products), relative")
    what = "union bound at eps_n against (n - 1) / (6 n)"
    ratios = ((n, inp.union_bound(n, inp.threshold(n)) * 6 * n / (n - 1)) for n in L37_STEP3_NS)
    return worst((f"n={n}", at_most(abs(r - 1), 0.0, rounding, detail=what)) for n, r in ratios)


@claim.check("constructive gap >= eps_n", evidence="built")
def lemma37_constructive_gap(inp: Lemma37Inputs) -> Verdict:
    """The direction found for the fixed sample (Gaussian, and the adversarial collinear one) has
    a certified gap >= eps_n (recomputed)."""

    def one(x, sd):
        gap, _ = certified_gap(x, sd.v)
        return at_least(gap, inp.threshold(inp.n), detail=f"certified_gap after {sd.tries} tries")

    return worst(((name, one(x, sd)) for name, x, sd in _samples(inp)), key=lambda v: v.ratio)


@claim.check("constructive ||z||^2 <= 2n", evidence="built")
def lemma37_constructive_norm(inp: Lemma37Inputs) -> Verdict:
    """The direction found for the fixed sample (Gaussian, and the adversarial collinear one) has
    ||x v||^2 <= 2 n (recomputed)."""

    def one(x, sd):
        z = x @ sd.v
        rnd = Rounding(n=inp.n * (x.shape[1] + 1), scale=float(z @ z), what="n (D+1) eps ||z||^2")
        return at_most(float(z @ z), inp.norm_factor * inp.n, rnd)

    return worst(((name, one(x, sd)) for name, x, sd in _samples(inp)), key=by_ratio)


L37_PIN_UNION = ((2, 1e-3), (24, 0.05), (64, 1e-6), (1024, 0.1))


@claim.check(
    "eps_n, union bound, norm factor = 40-digit evaluation", evidence="formula", agreement=True
)
def lemma37_pinned(inp: Lemma37Inputs) -> Verdict:
    """eps_n = sqrt(pi) / (3 n^2) (n = 2..1024), the union bound C(n, 2) 2 eps / sqrt(4 pi) at
    eps_n and at other eps, and the norm factor 2 against their 40-digit evaluation from
    interpolation.md, relative 1e-12."""
    with mpmath.workdps(PIN_DPS):
        gaps = [
            (f"eps_{n}", relative_gap(inp.threshold(n), mp_gap_threshold(n))) for n in L37_STEP3_NS
        ]
        gaps += [
            (
                f"union n={n}, eps_n",
                relative_gap(
                    inp.union_bound(n, inp.threshold(n)),
                    mp_union_bound(n, float(mp_gap_threshold(n))),
                ),
            )
            for n in (2, inp.n, 1024)
        ]
        gaps += [
            (f"union n={n}, eps={e:g}", relative_gap(inp.union_bound(n, e), mp_union_bound(n, e)))
            for n, e in L37_PIN_UNION
        ]
    gaps.append(("norm factor", relative_gap(inp.norm_factor, mpmath.mpf(2))))
    label, gap = max(gaps, key=lambda g: g[1])
    return at_most(gap, PIN_RTOL, detail=f"{len(gaps)} values; largest at {label}")


@claim.check("replayed gap events", evidence="formula")
def lemma37_replay_gaps(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """``lemma37_events`` counts the gap events the derived certified gaps give on its own draws
    (threshold at one trial's gap: the allowance's last bits decide)."""
    gaps = inp.derived_gaps(inp.replay_x, inp.replay_v)
    thr = sorted(gaps)[len(gaps) // 2]
    ev = _events(inp, ctx, "lemma-37/replay", len(gaps), thr, 1.0)
    what = f"{len(gaps)} trials replayed, threshold {thr:.6g} (a trial's own gap)"
    return exact(ev.gap_ok, sum(gp >= thr for gp in gaps), detail=what)


@claim.check("replayed norm events", evidence="formula")
def lemma37_replay_norms(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """``lemma37_events`` counts the trials with ||z||^2 <= n (norm factor 1) on its own draws."""
    norms = ((inp.replay_x @ inp.replay_v[:, :, None]).squeeze(-1) ** 2).sum(1)
    ev = _events(inp, ctx, "lemma-37/replay", len(norms), gap_threshold(inp.n), 1.0)
    return exact(ev.norm_ok, int((norms <= inp.n).sum()), detail="norm factor 1")


@claim.check("certified gap as derived", evidence="formula")
def lemma37_certified_gap(inp: Lemma37Inputs) -> Verdict:
    """``certified_gap`` of one trial is its derived Higham gap, bit for bit."""
    want = inp.derived_gaps(inp.replay_x[:1], inp.replay_v[:1])[0]
    got = certified_gap(inp.replay_x[0], inp.replay_v[0])[0]
    return exact(got, want, detail="float gap (1 - u) - 2 gamma_D max sum |x v|")


# the threshold 10 eps_n in place of Lemma 37's eps_n
claim.fault(
    "threshold 10 eps_n",
    breaks=lemma37_success,
    apply=replaced(threshold=lambda n: 10 * gap_threshold(n)),
)
# eps_n = 1 / (3 n^2): the sqrt(pi) of the N(0, 2) density bound dropped
claim.fault(
    "eps_n without sqrt(pi)",
    breaks=(lemma37_threshold_union, lemma37_pinned),
    apply=replaced(threshold=lambda n: 1 / (3 * n * n)),
)
# the derived gaps with the factor 2 of the Higham allowance dropped (gamma_D, not 2 gamma_D)
claim.fault(
    "allowance factor 2 dropped",
    breaks=(lemma37_replay_gaps, lemma37_certified_gap),
    apply=replaced(derived_gaps=lambda x, v: gaps_as_derived(x, v, allowance=1.0)),
)
# the union bound with P(|z_i - z_j| < eps) taken one-sided: C(n, 2) eps / (2 sqrt(pi))
claim.fault(
    "union bound one-sided",
    breaks=lemma37_union,
    apply=replaced(union_bound=lambda n, eps: lemma37_union_bound(n, eps) / 2),
)


# the union bound with the N(0, 1) density 1 / sqrt(2 pi) for z_i - z_j ~ N(0, 2)'s 1 / sqrt(4 pi)
claim.fault(
    "union bound with the N(0, 1) density",
    breaks=(lemma37_pinned, lemma37_threshold_union),
    apply=replaced(union_bound=lambda n, eps: lemma37_union_bound(n, eps) * math.sqrt(2)),
)
# Markov's norm factor taken as 3 (P(||z||^2 > 3n) <= 1/3 read for the lemma's 2n)
claim.fault("norm factor 3", breaks=lemma37_pinned, apply=replaced(norm_factor=3.0))


@claim.fault("sample index off by one", breaks=lemma37_constructive_gap)
def _repeated_point(inp: Lemma37Inputs) -> Lemma37Inputs:
    """The sample filled off by one index: x_1 written where x_0 was meant (a repeated point)."""
    x = inp.sample.clone()
    x[1] = x[0]
    return replace(inp, sample=x)


# the direction v a raw Gaussian (norm ~ sqrt(D)): v scaled by sqrt(D)
claim.fault(
    "direction unnormalised",
    breaks=lemma37_constructive_norm,
    apply=edited(direction=lambda d: replace(d, v=d.v * math.sqrt(L37_D))),
)


@claim.fault("replayed v unnormalised", breaks=lemma37_replay_norms)
def _replay_unnormalised(inp: Lemma37Inputs, ctx: Context) -> Lemma37Inputs:
    """The replay batch redrawn with its v left unnormalised (raw Gaussian rows)."""
    rx, rv = _replay(ctx, inp.n)
    return replace(inp, replay_x=rx, replay_v=rv)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: f"n = {inp.n}, d = {inp.sample.shape[1]}; {inp.trials} trials"
)
