"""Claims about RNN lower bounds and the interpolation lemmas (Section 5.2, Appendix C.3-C.4) and
the RNN upper bound for simple-qSTR (Theorem 7).

lemma-37, lemma-38, lemma-36 -- the interpolation lemmas behind Theorem 9's memoriser
prop-8                        -- the packing mechanism of Prop 8 / Prop 35 (quick) and, in the full
                                 profile, the width of trained GRUs against N (general vs simple)
thm-9                         -- memoriser norm^2 <= C n^3 vs the generalisation requirement; n*(N)
thm-7                         -- the explicit simple-qSTR sample bound is polylogarithmic in N

Derivations: docs/derivations/interpolation.md and docs/derivations/rnn-lower-bounds.md.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Callable, Optional, Tuple

import mpmath
import numpy as np
import torch
from scipy import optimize, stats

from qstr.bounds.recurrent import (
    Theorem7Params,
    generalising_log_norm2,
    lemma12_radius,
    loglog_slope,
    memoriser_norm2_bound,
    prop28_norm2,
    prop8_log_norm_lower_bound,
    prop8_norm_lower_bound_paper,
    prop8_packing,
    prop8_width_lower_bound,
    theorem7_bound,
    theorem7_sample_size,
    theorem9_crossover,
)
from qstr.constructions.codes import build_codebook
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.links import TwoLayerNet
from qstr.bounds.interpolation import (
    LEMMA37_NORM_FACTOR,
    MemoriserGuarantee,
    SlotMemoryGuarantee,
    gap_threshold,
    lemma36_constant,
    lemma36_net,
    lemma37_union_bound,
    lemma38_bound,
    memoriser,
    slot_memory,
)
from qstr.constructions.interpolation import (
    Lemma37Events,
    Lemma38Net,
    MemoriserLayout,
    SeparatingDirection,
    certified_gap,
    evaluate_net,
    interpolate_points,
    interpolate_sorted,
    lemma37_events,
    memorising_rnn,
    parameter_norm2,
    rounding_allowance,
    separating_direction,
    slot_memory_rnn,
)
from qstr.verify.claim import (
    Check,
    Claim,
    Context,
    Fault,
    Ref,
    Verdict,
    at_least,
    at_most,
    close,
    exact,
)
from qstr.verify.registry import register
from qstr.verify.threads import cpu_threads
from qstr.verify.rounding import Rounding

CONFIDENCE = 0.999  # one-sided Clopper-Pearson level used by the probability checks


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds (lower, upper) for a binomial proportion k / n."""
    alpha = 1.0 - confidence
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))
    return lo, hi


# ---------------------------------------------------------------- lemma-37

L37_D = 10


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
    g = ctx.generator("lemma-37/replay", device=ctx.device)
    rx = torch.randn(L37_REPLAY, n, L37_D, generator=g, **kw)
    rv = torch.randn(L37_REPLAY, L37_D, generator=g, **kw)
    rv = rv / rv.norm(dim=1, keepdim=True)
    return Lemma37Inputs(
        n, trials, gap_threshold, x, sd, rx, rv, gaps_as_derived, lemma37_union_bound
    )


L37_REPLAY = 64  # trials replayed against the derived certified gaps


def _lemma37_events(inp: Lemma37Inputs, ctx: Context) -> Lemma37Events:
    return lemma37_events(
        inp.n,
        L37_D,
        trials=inp.trials,
        threshold=inp.threshold(inp.n),
        norm_factor=LEMMA37_NORM_FACTOR,
        generator=ctx.generator("lemma-37/events", device=ctx.device),
    )


def lemma37_success(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """Lemma 37: P(every gap >= eps_n and ||z||^2 <= 2n) >= 1/3 (one-sided Clopper-Pearson)."""
    ev = _lemma37_events(inp, ctx)
    lo, _ = clopper_pearson(ev.joint_ok, ev.trials)
    return at_least(
        lo,
        1 / 3,
        detail=(
            f"n={inp.n}, D={L37_D}, {ev.trials} draws of (x, v): joint success "
            f"{ev.joint_ok / ev.trials:.3f}, its CP{CONFIDENCE:.1%} lower bound measured; "
            "no rounding term: event counts, each gap certified with its float64 allowance"
        ),
    )


def lemma37_union(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """Lemma 37, steps 1-3: P(some gap < eps) is at most the union bound C(n, 2) eps / sqrt(pi)."""
    ev = _lemma37_events(inp, ctx)
    lo, _ = clopper_pearson(ev.trials - ev.gap_ok, ev.trials)
    union = inp.union_bound(inp.n, ev.threshold)
    return at_most(
        lo,
        union,
        detail=(
            f"gap failure {1 - ev.gap_ok / ev.trials:.3f}, CP lower bound against C(n, 2) eps / "
            f"sqrt(pi) = {union:.3f}"
        ),
    )


L37_STEP3_NS = range(2, 1025)  # the lengths at which step 3's union bound at eps_n is evaluated


def lemma37_threshold_union(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """Lemma 37, step 3: at eps_n the union bound C(n, 2) eps_n / sqrt(pi) is (n - 1) / (6 n) < 1/6
    exactly (docs/derivations/interpolation.md); the largest relative gap over n = 2..1024."""
    gap, n = max(
        (abs(inp.union_bound(n, inp.threshold(n)) * 6 * n / (n - 1) - 1), n) for n in L37_STEP3_NS
    )
    return at_most(
        gap,
        0.0,
        Rounding(n=8, scale=1.0, what="8 eps (sqrt, products), relative"),
        detail=f"largest at n={n}: union bound at eps_n against (n - 1) / (6 n)",
    )


def lemma37_constructive_gap(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """The direction found for the fixed sample has a certified gap >= eps_n (recomputed)."""
    gap, _ = certified_gap(inp.sample, inp.direction.v)
    return at_least(
        gap, inp.threshold(inp.n), detail=f"certified_gap(x, v) after {inp.direction.tries} tries"
    )


def lemma37_constructive_norm(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """The direction found for the fixed sample has ||x v||^2 <= 2 n (recomputed)."""
    z = inp.sample @ inp.direction.v
    return at_most(
        float(z @ z),
        2 * inp.n,
        Rounding(n=inp.n * (L37_D + 1), scale=float(z @ z), what="n (D + 1) eps ||z||^2"),
    )


def lemma37_replay_gaps(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """``lemma37_events`` counts the gap events the derived certified gaps give on its own draws
    (threshold at one trial's gap: the allowance's last bits decide)."""
    gaps = inp.derived_gaps(inp.replay_x, inp.replay_v)
    thr = sorted(gaps)[len(gaps) // 2]
    ev = lemma37_events(
        inp.n,
        L37_D,
        trials=len(gaps),
        threshold=thr,
        norm_factor=1.0,
        generator=ctx.generator("lemma-37/replay", device=ctx.device),
    )
    return exact(
        ev.gap_ok,
        sum(gp >= thr for gp in gaps),
        detail=f"{len(gaps)} trials replayed, threshold {thr:.6g} (a trial's own gap)",
    )


def lemma37_replay_norms(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """``lemma37_events`` counts the trials with ||z||^2 <= n (norm factor 1) on its own draws."""
    norms = ((inp.replay_x @ inp.replay_v[:, :, None]).squeeze(-1) ** 2).sum(1)
    ev = lemma37_events(
        inp.n,
        L37_D,
        trials=len(norms),
        threshold=gap_threshold(inp.n),
        norm_factor=1.0,
        generator=ctx.generator("lemma-37/replay", device=ctx.device),
    )
    return exact(ev.norm_ok, int((norms <= inp.n).sum()), detail="norm factor 1")


def lemma37_certified_gap(inp: Lemma37Inputs, ctx: Context) -> Verdict:
    """``certified_gap`` of one trial is its derived Higham gap, bit for bit."""
    want = inp.derived_gaps(inp.replay_x[:1], inp.replay_v[:1])[0]
    return exact(
        certified_gap(inp.replay_x[0], inp.replay_v[0])[0],
        want,
        detail="float gap (1 - u) - 2 gamma_D max sum |x v|",
    )


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
        for z, a in zip(zs, sums)
    ]


def _tenfold_threshold(inp: Lemma37Inputs, ctx: Context) -> Lemma37Inputs:
    """The threshold 10 eps_n in place of Lemma 37's eps_n."""
    return replace(inp, threshold=lambda n: 10 * gap_threshold(n))


def _threshold_without_sqrt_pi(inp: Lemma37Inputs, ctx: Context) -> Lemma37Inputs:
    """eps_n = 1 / (3 n^2): the sqrt(pi) of the N(0, 2) density bound dropped."""
    return replace(inp, threshold=lambda n: 1 / (3 * n * n))


def _one_sided_union(inp: Lemma37Inputs, ctx: Context) -> Lemma37Inputs:
    """The union bound with P(|z_i - z_j| < eps) taken one-sided: C(n, 2) eps / (2 sqrt(pi))."""
    return replace(inp, union_bound=lambda n, eps: lemma37_union_bound(n, eps) / 2)


def _repeated_point(inp: Lemma37Inputs, ctx: Context) -> Lemma37Inputs:
    """The sample filled off by one index: x_1 written where x_0 was meant (a repeated point)."""
    x = inp.sample.clone()
    x[1] = x[0]
    return replace(inp, sample=x)


def _direction_unnormalised(inp: Lemma37Inputs, ctx: Context) -> Lemma37Inputs:
    """The direction v a raw Gaussian (norm ~ sqrt(D)): v scaled by sqrt(D)."""
    v = inp.direction.v * math.sqrt(L37_D)
    return replace(inp, direction=replace(inp.direction, v=v))


def _replay_unnormalised(inp: Lemma37Inputs, ctx: Context) -> Lemma37Inputs:
    """The replay batch redrawn with its v left unnormalised (raw Gaussian rows)."""
    g = ctx.generator("lemma-37/replay", device=ctx.device)
    kw = dict(dtype=torch.float64, device=ctx.device)
    rx = torch.randn(L37_REPLAY, inp.n, L37_D, generator=g, **kw)
    rv = torch.randn(L37_REPLAY, L37_D, generator=g, **kw)
    return replace(inp, replay_x=rx, replay_v=rv)


def _allowance_halved(inp: Lemma37Inputs, ctx: Context) -> Lemma37Inputs:
    """The derived gaps with the factor 2 of the Higham allowance dropped (gamma_D, not 2
    gamma_D)."""
    return replace(inp, derived_gaps=lambda x, v: gaps_as_derived(x, v, allowance=1.0))


register(
    Claim(
        id="lemma-37",
        ref=Ref("Lemma 37", "Lemma 37"),
        statement="n Gaussian points, random unit v: all gaps |<v, x_i - x_j>| >= sqrt(pi)/(3n^2) "
        "and ||z||^2 <= 2n w.p. >= 1/3",
        inputs=lemma37_inputs,
        checks=[
            Check("P(success) >= 1/3", lemma37_success),
            Check("gap failure <= union bound", lemma37_union),
            Check("union bound at eps_n = (n - 1) / (6n)", lemma37_threshold_union),
            Check("constructive gap >= eps_n", lemma37_constructive_gap),
            Check("constructive ||z||^2 <= 2n", lemma37_constructive_norm),
            Check("replayed gap events", lemma37_replay_gaps),
            Check("replayed norm events", lemma37_replay_norms),
            Check("certified gap as derived", lemma37_certified_gap),
        ],
        faults=[
            Fault("threshold 10 eps_n", _tenfold_threshold, breaks=("P(success) >= 1/3",)),
            Fault(
                "eps_n without sqrt(pi)",
                _threshold_without_sqrt_pi,
                breaks=("union bound at eps_n = (n - 1) / (6n)",),
            ),
            Fault(
                "allowance factor 2 dropped",
                _allowance_halved,
                breaks=("replayed gap events", "certified gap as derived"),
            ),
            Fault(
                "union bound one-sided", _one_sided_union, breaks=("gap failure <= union bound",)
            ),
            Fault(
                "sample index off by one",
                _repeated_point,
                breaks=("constructive gap >= eps_n",),
            ),
            Fault(
                "direction unnormalised",
                _direction_unnormalised,
                breaks=("constructive ||z||^2 <= 2n",),
            ),
            Fault(
                "replayed v unnormalised",
                _replay_unnormalised,
                breaks=("replayed norm events",),
            ),
        ],
        builds=(separating_direction, lemma37_events, certified_gap),
        bounds=(gap_threshold, lemma37_union_bound),
        derivation="docs/derivations/interpolation.md",
    )
)

# ---------------------------------------------------------------- lemma-38

L38_EPS = 0.05
L38_TIGHT_TOL = 1e-6  # the alternating-label ratio must equal (16n - 22)/(16n) this closely


@dataclass(frozen=True, eq=False)
class Lemma38Case:
    """Sorted z with every gap >= the certified ``eps``, labels y, and Lemma 38's net for them."""

    z: torch.Tensor
    y: torch.Tensor
    eps: float
    net: Lemma38Net


@dataclass(frozen=True, eq=False)
class Lemma38Inputs:
    """Random cases (gaps eps + Exp(1)), the alternating case (every gap eps) and the bound."""

    cases: Tuple[Lemma38Case, ...]
    alternating: Lemma38Case
    bound: Callable[[torch.Tensor, float], float]  # 16 ||y||^2 / eps^2


def _lemma38_case(z: torch.Tensor, y: torch.Tensor, eps: float) -> Lemma38Case:
    """The net built by ``interpolate_sorted`` at the data's own smallest gap (never above eps:
    the float cumsum may shave an ulp off a gap of exactly eps)."""
    built = min(eps, float(torch.diff(z).min())) * (1 - 1e-9)
    return Lemma38Case(z, y, eps, interpolate_sorted(z, y, built))


def lemma38_inputs(ctx: Context) -> Lemma38Inputs:
    """Random cases n = 2 .. 128 (2048 full) and alternating labels at n = the largest."""
    ns = ctx.pick(quick=(2, 8, 32, 128), full=(2, 8, 32, 128, 512, 2048))
    kw = dict(dtype=torch.float64, device=ctx.device)
    cases = []
    for n in ns:
        g = ctx.generator("lemma-38/data", n, device=ctx.device)
        gaps = L38_EPS + torch.empty(n - 1, **kw).exponential_(generator=g)
        y = torch.randn(n, generator=g, **kw)
        z = torch.cat([torch.zeros(1, **kw), gaps.cumsum(0)]) - 3.0
        cases.append(_lemma38_case(z, y, L38_EPS))
    n = ns[-1]
    alt = _lemma38_case(
        torch.arange(n, **kw) * L38_EPS,
        torch.tensor([(-1.0) ** k for k in range(n)], **kw),
        L38_EPS,
    )
    return Lemma38Inputs(tuple(cases), alt, lemma38_bound)


def _all_cases(inp: Lemma38Inputs):
    return (*inp.cases, inp.alternating)


def _ratio_rounding(n: int) -> Rounding:
    """||a'||^2 / (16 ||y||^2 / eps^2): two n-term sums of squares and the slopes, relative."""
    return Rounding(n=2 * n + 4, scale=1.0, what="(2n + 4) eps x ratio")


def lemma38_ratio(inp: Lemma38Inputs, ctx: Context) -> Verdict:
    """Lemma 38: ||a'||^2 <= 16 ||y||^2 / eps^2 at the certified eps; the worst case over n."""
    ratio, n = max(
        (float(c.net.raw.a @ c.net.raw.a) / inp.bound(c.y, c.eps), len(c.z))
        for c in _all_cases(inp)
    )
    return at_most(ratio, 1.0, _ratio_rounding(n), detail=f"||a'||^2 / bound, worst n = {n}")


def _error(case: Lemma38Case) -> float:
    return float((evaluate_net(case.net.balanced, case.z[:, None]) - case.y).abs().max())


def _allowance(case: Lemma38Case) -> float:
    return max(1e-9, rounding_allowance(case.net.balanced, case.z[:, None]))


def lemma38_exact(inp: Lemma38Inputs, ctx: Context) -> Verdict:
    """Lemma 38: the interpolant is exact, up to its certified float64 rounding (or 1e-9)."""
    worst = max(_all_cases(inp), key=lambda c: _error(c) / _allowance(c))
    return at_most(
        _error(worst),
        _allowance(worst),
        detail=(
            f"max |f(z_k) - y_k| (evaluate_net), worst n = {len(worst.z)}, against max(1e-9, "
            "gamma_(D+m+2) sum |a| (|W| |z| + |b|))"
        ),
    )


def _higham(net, z: torch.Tensor) -> float:
    """gamma_j sum_k |a_k| (|W_k| |z| + |b_k|) at the largest data point, gamma_j = j u / (1 - j u),
    j = D + m + 2, u = 2^-53 (docs/derivations/rounding.md)."""
    u = torch.finfo(torch.float64).eps / 2
    j = net.W.shape[1] + net.W.shape[0] + 2
    mags = (z[:, None].abs() @ net.W.abs().T + net.b.abs()) @ net.a.abs()
    return j * u / (1 - j * u) * float(mags.max())


def lemma38_allowance(inp: Lemma38Inputs, ctx: Context) -> Verdict:
    """The reported float64 allowance is the derived Higham bound (rounding.md), relative 1e-12."""
    gaps = [abs(c.net.rounding / _higham(c.net.balanced, c.z) - 1) for c in _all_cases(inp)]
    return at_most(max(gaps), 1e-12, detail="largest |reported / derived - 1| over the cases")


def _eval1(net, z):
    return torch.relu(z[:, None] * net.W[:, 0] + net.b) @ net.a


def _function_change(case: Lemma38Case) -> float:
    z = case.z
    grid = torch.linspace(float(z[0]) - 1, float(z[-1]) + 1, 2001, dtype=z.dtype, device=z.device)
    raw = _eval1(case.net.raw, grid)
    return float((raw - _eval1(case.net.balanced, grid)).abs().max()) / max(
        1.0, float(raw.abs().max())
    )


def lemma38_same_function(inp: Lemma38Inputs, ctx: Context) -> Verdict:
    """The rebalancing (a / tau, tau w, tau b) keeps the function: relative change <= 1e-9."""
    change, n = max((_function_change(c), len(c.z)) for c in _all_cases(inp))
    return at_most(
        change,
        1e-9,
        detail=f"max |f_raw - f_balanced| / max(1, |f_raw|) on a grid, worst n = {n}",
    )


def _norm2(net) -> float:
    return float(net.a @ net.a + (net.W**2).sum() + net.b @ net.b)


def lemma38_rebalanced(inp: Lemma38Inputs, ctx: Context) -> Verdict:
    """The rebalanced parameter norm^2 is at most the raw one (AM-GM), relative 1e-12."""
    worst = max(_norm2(c.net.balanced) / _norm2(c.net.raw) for c in _all_cases(inp))
    return at_most(worst, 1 + 1e-12, detail="largest ||theta_balanced||^2 / ||theta_raw||^2")


def lemma38_tight(inp: Lemma38Inputs, ctx: Context) -> Verdict:
    """Tightness: alternating labels with every gap eps attain ||a'||^2 / bound = (16n -
    22)/(16n)."""
    c = inp.alternating
    n = len(c.z)
    ratio = float(c.net.raw.a @ c.net.raw.a) / inp.bound(c.y, c.eps)
    tight = (16 * n - 22) / (16 * n)
    return close(ratio, tight, L38_TIGHT_TOL * tight, detail=f"alternating labels, n = {n}")


def _squeezed(case: Lemma38Case) -> Lemma38Case:
    """One gap eps/100 (opposite labels across it) in the middle; the certified eps kept."""
    z, y = case.z.clone(), case.y.clone()
    k = len(z) // 2
    z[k:] -= float(z[k] - z[k - 1]) - case.eps / 100
    y[k - 1], y[k] = 1.0, -1.0
    return _lemma38_case(z, y, case.eps)


def _one_gap_eps_over_100(inp: Lemma38Inputs, ctx: Context) -> Lemma38Inputs:
    """Data with one gap eps/100 checked against the bound at the certified eps."""
    return replace(
        inp, cases=tuple(_squeezed(c) for c in inp.cases), alternating=_squeezed(inp.alternating)
    )


def _each_case(inp: Lemma38Inputs, edit: Callable) -> Lemma38Inputs:
    """Every case (random and alternating) with its net replaced by ``edit(case)``."""

    def one(case):
        return replace(case, net=edit(case))

    return replace(inp, cases=tuple(one(c) for c in inp.cases), alternating=one(inp.alternating))


def _with_nets(case: Lemma38Case, raw: TwoLayerNet, balanced: TwoLayerNet) -> Lemma38Net:
    """The case's record with these nets and the allowance reported for the balanced one."""
    allowance = rounding_allowance(balanced, case.z[:, None])
    return replace(case.net, raw=raw, balanced=balanced, rounding=allowance)


def _first_breakpoint_at_z1(inp: Lemma38Inputs, ctx: Context) -> Lemma38Inputs:
    """c_1 = z_1 in place of z_1 - eps (the first unit's bias b_1 = -c_1 off by eps, raw and
    balanced): f(z_1) = 0 and every f(z_k) is off by a_1 eps = y_1."""

    def edit(case):
        raw, bal, tau = case.net.raw, case.net.balanced, case.net.tau
        shift = torch.zeros_like(raw.b)
        shift[0] = case.eps
        return _with_nets(case, replace(raw, b=raw.b - shift), replace(bal, b=bal.b - tau * shift))

    return _each_case(inp, edit)


def _bias_not_rescaled(inp: Lemma38Inputs, ctx: Context) -> Lemma38Inputs:
    """The rebalancing (a / tau, tau w, b): the bias left unscaled."""

    def edit(case):
        raw, tau = case.net.raw, case.net.tau
        return _with_nets(case, raw, TwoLayerNet(a=raw.a / tau, W=raw.W * tau, b=raw.b))

    return _each_case(inp, edit)


def _tau_inverted(inp: Lemma38Inputs, ctx: Context) -> Lemma38Inputs:
    """The rebalancing by 1 / tau: (a tau, w / tau, b / tau), the same function, norm raised."""

    def edit(case):
        raw, tau = case.net.raw, case.net.tau
        return _with_nets(case, raw, TwoLayerNet(a=raw.a * tau, W=raw.W / tau, b=raw.b / tau))

    return _each_case(inp, edit)


def _gamma_without_2(inp: Lemma38Inputs, ctx: Context) -> Lemma38Inputs:
    """The reported allowance with gamma_(D+m) for gamma_(D+m+2) (the 2 of j dropped)."""
    u = torch.finfo(torch.float64).eps / 2

    def edit(case):
        j = case.net.balanced.W.shape[1] + case.net.balanced.W.shape[0] + 2
        ratio = ((j - 2) / (1 - (j - 2) * u)) / (j / (1 - j * u))
        return replace(case.net, rounding=case.net.rounding * ratio)

    return _each_case(inp, edit)


def _bound_with_8(inp: Lemma38Inputs, ctx: Context) -> Lemma38Inputs:
    """The bound with constant 8 in place of 16 (the factor 2 of ||a||^2 <= 2 sum ... dropped)."""
    return replace(inp, bound=lambda y, eps: lemma38_bound(y, eps) / 2)


register(
    Claim(
        id="lemma-38",
        ref=Ref("Lemma 38", "Lemma 38"),
        statement="sorted scalars with gaps >= eps: exact width-n ReLU interpolant, "
        "||a'||^2 <= 16 ||y||^2/eps^2 (tight), rebalanced",
        inputs=lemma38_inputs,
        checks=[
            Check("||a'||^2 <= 16 ||y||^2 / eps^2", lemma38_ratio),
            Check("exact interpolation", lemma38_exact),
            Check("rounding allowance as derived", lemma38_allowance),
            Check("rebalancing keeps f", lemma38_same_function),
            Check("rebalancing lowers the norm", lemma38_rebalanced),
            Check("alternating labels attain (16n - 22)/(16n)", lemma38_tight),
        ],
        faults=[
            Fault(
                "one gap eps/100", _one_gap_eps_over_100, breaks=("||a'||^2 <= 16 ||y||^2 / eps^2",)
            ),
            Fault(
                "constant 8 for 16",
                _bound_with_8,
                breaks=(
                    "||a'||^2 <= 16 ||y||^2 / eps^2",
                    "alternating labels attain (16n - 22)/(16n)",
                ),
            ),
            Fault(
                "first breakpoint at z_1", _first_breakpoint_at_z1, breaks=("exact interpolation",)
            ),
            Fault(
                "bias not rescaled",
                _bias_not_rescaled,
                breaks=("rebalancing keeps f", "exact interpolation"),
            ),
            Fault("rebalanced by 1 / tau", _tau_inverted, breaks=("rebalancing lowers the norm",)),
            Fault(
                "gamma_(D+m) for gamma_(D+m+2)",
                _gamma_without_2,
                breaks=("rounding allowance as derived",),
            ),
        ],
        builds=(interpolate_sorted,),
        bounds=(lemma38_bound,),
        derivation="docs/derivations/interpolation.md",
    )
)

# ---------------------------------------------------------------- lemma-36 (Theorem 9's memoriser)

L36_D = 3
K_Y = 6.0


def _norm_rounding(gu, model) -> Rounding:
    """||vec theta||^2: a sum of squares of the module's parameters, relative."""
    count = sum(p.numel() for p in model.parameters())
    return Rounding(n=count, scale=gu.norm2, what="(parameter count) eps ||vec||^2")


def _prompts(n: int, N: int, g: torch.Generator, device):
    """General 1STR (q = 1) training prompts in float64: x (n, N, d), t (n, N, 1), y (n, N)."""
    x = torch.randn(n, N, L36_D, generator=g, dtype=torch.float64, device=device)
    t = torch.randint(N, (n, N, 1), generator=g, device=device)
    u = torch.randn(L36_D, generator=g, dtype=torch.float64, device=device)
    u = u / u.norm()
    return x, t, _labels(x, t, u)


def _labels(x, t, u):
    return (x[torch.arange(x.shape[0], device=x.device)[:, None], t[..., 0]] * u).sum(-1)


def _nested_prompts(n: int, Ns, g: torch.Generator, device, position: int):
    """Prompt sets for every N in Ns that agree on the first min(Ns) tokens and on t_position.

    The longer prompts append fresh tokens and redraw t elsewhere, so the n inputs x_position and
    labels y_position the point-wise memoriser sees are identical for every N."""
    x, t, y = _prompts(n, max(Ns), g, device)
    u = torch.randn(L36_D, generator=g, dtype=torch.float64, device=device)
    u = u / u.norm()
    t[:, position, 0] = torch.randint(min(Ns), (n,), generator=g, device=device)
    out = {}
    for N in Ns:
        tN = t[:, :N] % N
        tN[:, position] = t[:, position]
        out[N] = (x[:, :N], tN, _labels(x[:, :N], tN, u))
    return out


def _codes(N: int, device) -> torch.Tensor:
    return build_codebook(N, kind="rs-hadamard", dtype=torch.float64, device=device).omega


def _memoriser_error(model, x, t, y, omega, position):
    Z = rnn_encoding(x, t, omega)
    with torch.no_grad():
        out = model(Z)
    diff = (out - y).abs()
    return float(diff.max() if position == "all" else diff[:, position].max())


def _balance_gap(model) -> float:
    """Relative spread of the squared norms ||W_l||^2 + ||b_l||^2 of the output net's layers: the
    depth rebalancing
    makes them equal (the equality case of AM-GM, where ||vec||^2 is smallest for the function)."""
    sq = [
        float(
            m.weight.detach().pow(2).sum()
            + (0.0 if m.bias is None else m.bias.detach().pow(2).sum())
        )
        for m in model.f_y
        if isinstance(m, torch.nn.Linear)
    ]
    return (max(sq) - min(sq)) / max(sq)


def _bound_gaps(gu, labels: torch.Tensor) -> list:
    """Relative gaps of the reported bounds against interpolation.md: Lemma 36's 2 sqrt(A P), A =
    Lemma 38's ||a'||^2 bound, P = m + 2 ||z||^2 + 2 eps^2; the depth-L rebalanced L (A P
    m^(L-2))^(1/L); the n-only form C36 m^(5/2) ||y|| (the memoriser's and its Lemma 36 net's)."""
    l36, l36_gu = gu.lemma36, gu.lemma36_guarantee
    eps, m = l36.direction.threshold, gu.n_points
    A, P = l36_gu.a_bound, m + 2.0 * l36.direction.z_norm2 + 2.0 * eps**2
    two_layer_bound = 2.0 * math.sqrt(A * P)
    deep_bound = gu.depth * (A * P * float(m) ** (gu.depth - 2)) ** (1.0 / gu.depth)
    n_only = C36_DERIVED * m**2.5 * float(labels.norm())
    return [
        abs(l36_gu.bound - two_layer_bound) / two_layer_bound,
        abs(gu.bound - deep_bound) / deep_bound,
        abs(gu.bound_n - n_only) / n_only,
        abs(l36_gu.bound_n - n_only) / n_only,
    ]


C36_DERIVED = 2.0 * math.sqrt(144.0 / math.pi * (5.0 + math.pi / 72.0))  # interpolation.md


@dataclass(frozen=True, eq=False)
class Lemma36Case:
    """One memoriser: built by ``memoriser`` on n prompts of length N (labels at
    ``position``)."""

    n: int
    N: int
    depth: int
    model: torch.nn.Module
    guarantee: MemoriserGuarantee
    prompts: tuple  # (x, t, y)
    omega: torch.Tensor
    position: object  # 2, or "all"
    labels: torch.Tensor  # the memorised labels


@dataclass(frozen=True, eq=False)
class Lemma36Inputs:
    """The memorisers for n in ns and N in Ns (prompts nested in N) and the bound C n^3."""

    cases: Tuple[Lemma36Case, ...]
    bound: Callable[[int], float]  # C36 sqrt(K_y) n^3


def lemma36_bound(n: int) -> float:
    """Lemma 36's C n^3, C = C36 sqrt(K_y), K_y = 6 (docs/derivations/interpolation.md)."""
    return lemma36_constant(K_Y) * n**3


def _lemma36_case(n, N, depth, prompts, position, ctx) -> Lemma36Case:
    x, t, y = prompts
    omega = _codes(N, ctx.device)
    with cpu_threads(1):
        model, gu = memoriser(
            x,
            y,
            D_in=L36_D + 2 * omega.shape[1],
            position=position,
            layout=MemoriserLayout(depth=depth),
            generator=ctx.generator("lemma-36/memoriser", n, device=ctx.device),
        )
    labels = y[:, position] if position != "all" else y.reshape(-1)
    return Lemma36Case(n, N, depth, model, gu, prompts, omega, position, labels)


def _lemma36_cases(ctx: Context, ns, Ns, position) -> Tuple[Lemma36Case, ...]:
    """Depth 2 for every (n, N); depth 3 once (n = 8, N = the smallest)."""
    cases = []
    for n in ns:
        g = ctx.generator("lemma-36/prompts", n, device=ctx.device)
        sets = _nested_prompts(n, Ns, g, ctx.device, position=2)
        cases += [_lemma36_case(n, N, 2, sets[N], position, ctx) for N in Ns]
        if n == 8:
            cases.append(_lemma36_case(n, Ns[0], 3, sets[Ns[0]], position, ctx))
    return tuple(cases)


def lemma36_inputs(ctx: Context) -> Lemma36Inputs:
    """Memorisers at position 2 for n = 4, 8, 16 (.. 64 full) and N = 8, 64 (.. 512 full)."""
    ns = ctx.pick(quick=(4, 8, 16), full=(4, 8, 16, 32, 64))
    Ns = ctx.pick(quick=(8, 64), full=(8, 64, 512))
    return Lemma36Inputs(_lemma36_cases(ctx, ns, Ns, 2), lemma36_bound)


def _depth2(inp: Lemma36Inputs):
    return [c for c in inp.cases if c.depth == 2]


def lemma36_cn3(inp: Lemma36Inputs, ctx: Context) -> Verdict:
    """Lemma 36: ||vec||^2 <= C n^3 (measured on the module), the worst depth-2 memoriser."""
    c = max(_depth2(inp), key=lambda c: parameter_norm2(c.model) / inp.bound(c.n))
    return at_most(
        parameter_norm2(c.model),
        inp.bound(c.n),
        _norm_rounding(c.guarantee, c.model),
        detail=f"worst n = {c.n}, N = {c.N}; C = C36 sqrt({K_Y:g})",
    )


def _training_error(c: Lemma36Case) -> float:
    x, t, y = c.prompts
    return _memoriser_error(c.model, x, t, y, c.omega, c.position)


def lemma36_exact(inp: Lemma36Inputs, ctx: Context) -> Verdict:
    """Lemma 36: zero training error (float64, 1e-9) at the memorised position."""
    err, n, N, L = max((_training_error(c), c.n, c.N, c.depth) for c in inp.cases)
    return at_most(
        err, 1e-9, detail=f"max |y_hat - y| over the prompts, worst n = {n}, N = {N}, depth {L}"
    )


def lemma36_certified(inp: Lemma36Inputs, ctx: Context) -> Verdict:
    """||vec||^2 is at most the memoriser's certified bound (depth 2 and 3)."""
    c = max(inp.cases, key=lambda c: parameter_norm2(c.model) / c.guarantee.bound)
    return at_most(
        parameter_norm2(c.model),
        c.guarantee.bound,
        _norm_rounding(c.guarantee, c.model),
        detail=f"worst n = {c.n}, N = {c.N}, depth {c.depth}",
    )


def lemma36_n_only(inp: Lemma36Inputs, ctx: Context) -> Verdict:
    """||vec||^2 <= C36 n^(5/2) ||y|| (depth 2), C36 = 2 sqrt((144/pi)(5 + pi/72))."""

    def bound(c):
        return C36_DERIVED * c.guarantee.n_points**2.5 * float(c.labels.norm())

    c = max(_depth2(inp), key=lambda c: parameter_norm2(c.model) / bound(c))
    return at_most(
        parameter_norm2(c.model),
        bound(c),
        _norm_rounding(c.guarantee, c.model),
        detail=f"worst n = {c.n}, N = {c.N}",
    )


def lemma36_bounds_derived(inp: Lemma36Inputs, ctx: Context) -> Verdict:
    """The reported bounds equal their derivation in interpolation.md, relative 1e-12."""
    gap = max(max(_bound_gaps(c.guarantee, c.labels)) for c in inp.cases)
    return at_most(gap, 1e-12, detail="2 sqrt(A P), L (A P m^(L-2))^(1/L), C36 m^(5/2) ||y||")


def lemma36_net_bound(inp: Lemma36Inputs, ctx: Context) -> Verdict:
    """The Lemma 36 net inside each memoriser: ||a||^2 + ||W||^2 + ||b||^2 <= 2 sqrt(A P)."""

    def norm2(c):
        net = c.guarantee.lemma36.net
        return float(net.a @ net.a + (net.W**2).sum() + net.b @ net.b)

    c = max(inp.cases, key=lambda c: norm2(c) / c.guarantee.lemma36_guarantee.bound)
    return at_most(
        norm2(c),
        c.guarantee.lemma36_guarantee.bound,
        Rounding(n=3 * c.guarantee.n_points, scale=norm2(c), what="3 m eps ||theta||^2"),
        detail=f"worst n = {c.n}, N = {c.N}",
    )


def lemma36_balanced(inp: Lemma36Inputs, ctx: Context) -> Verdict:
    """Depth rebalancing: the output layers have equal squared norms (AM-GM's equality case)."""
    gap, n, L = max((_balance_gap(c.model), c.n, c.depth) for c in inp.cases)
    return at_most(
        gap, 1e-9, detail=f"relative spread of ||W_l||^2 + ||b_l||^2, worst n = {n}, depth {L}"
    )


def lemma36_n_free(inp: Lemma36Inputs, ctx: Context) -> Verdict:
    """||vec||^2 does not depend on N (the same n inputs and labels for every N)."""
    spreads = []
    for n in sorted({c.n for c in inp.cases}):
        norms = [parameter_norm2(c.model) for c in _depth2(inp) if c.n == n]
        spreads.append(((max(norms) - min(norms)) / max(norms), n))
    spread, n = max(spreads)
    return at_most(spread, 1e-12, detail=f"relative spread of ||vec||^2 over N, worst n = {n}")


def _every_position(inp: Lemma36Inputs, ctx: Context) -> Lemma36Inputs:
    """Memorise the labels at every position (n N points), at the quick sizes."""
    return replace(inp, cases=_lemma36_cases(ctx, (4, 8, 16), (8, 64), "all"))


def _tokens_one_late(inp: Lemma36Inputs, ctx: Context) -> Lemma36Inputs:
    """Memorisers built on the tokens one position late (x_(i+1) with the labels y_i), checked on
    the prompts as drawn."""

    def one(c):
        x, t, y = c.prompts
        late = _lemma36_case(c.n, c.N, c.depth, (x.roll(-1, dims=1), t, y), c.position, ctx)
        return replace(late, prompts=c.prompts)

    return replace(inp, cases=tuple(one(c) for c in inp.cases))


def _unbalanced(c: Lemma36Case) -> Lemma36Case:
    """The case with tau = 1: the raw Lemma 38 net in f_y (first layer v^T x + b', identities,
    then a') and in the Lemma 36 record, the same function."""
    model = copy.deepcopy(c.model)
    layers = [m for m in model.f_y if isinstance(m, torch.nn.Linear)]
    l36 = c.guarantee.lemma36
    raw = l36.lemma38.raw
    with torch.no_grad():
        tau1 = float(layers[0].weight[0].norm())  # the rows of layer 1 are tau1 v, |v| = 1
        layers[0].weight /= tau1
        layers[0].bias /= tau1
        for mid in layers[1:-1]:
            mid.weight /= float(mid.weight[0, 0])
        layers[-1].weight.copy_(raw.a[None, :])
    W = torch.ones_like(l36.net.W) * l36.direction.v[None, :]
    net = TwoLayerNet(a=raw.a, W=W, b=raw.b)
    l36 = replace(l36, net=net, norm2=float(net.a @ net.a + (W**2).sum() + net.b @ net.b))
    gu = replace(c.guarantee, lemma36=l36, norm2=parameter_norm2(model))
    return replace(c, model=model, guarantee=gu)


def _rebalancing_skipped(inp: Lemma36Inputs, ctx: Context) -> Lemma36Inputs:
    """Lemma 38's and the depth rebalancing skipped (tau = 1): the raw net, norm A + P."""
    return replace(inp, cases=tuple(_unbalanced(c) for c in inp.cases))


def _bound_n_exponent_2(inp: Lemma36Inputs, ctx: Context) -> Lemma36Inputs:
    """The reported n-only bounds with m^2 for m^(5/2): C36 m^2 ||y||."""

    def one(c):
        gu, root = c.guarantee, math.sqrt(c.guarantee.n_points)
        l36_gu = replace(gu.lemma36_guarantee, bound_n=gu.lemma36_guarantee.bound_n / root)
        return replace(
            c, guarantee=replace(gu, bound_n=gu.bound_n / root, lemma36_guarantee=l36_gu)
        )

    return replace(inp, cases=tuple(one(c) for c in inp.cases))


register(
    Claim(
        id="lemma-36",
        ref=Ref("Lemma 36 (Thm 9 memoriser)", "Lemma 36 (Thm 7 memoriser)"),
        statement="interpolating RNN on n general-1STR prompts (labels at one position): zero "
        "training error, ||vec||^2 <= C36 sqrt(6) n^3 (~74.5 n^3) independent of N",
        inputs=lemma36_inputs,
        checks=[
            Check("||vec||^2 <= C n^3", lemma36_cn3),
            Check("zero training error", lemma36_exact),
            Check("||vec||^2 <= certified bound", lemma36_certified),
            Check("||vec||^2 <= C36 n^(5/2) ||y||", lemma36_n_only),
            Check("bounds as derived", lemma36_bounds_derived),
            Check("Lemma 36 net within its bound", lemma36_net_bound),
            Check("output layers balanced", lemma36_balanced),
            Check("||vec||^2 independent of N", lemma36_n_free),
        ],
        faults=[
            Fault(
                "labels at every position",
                _every_position,
                breaks=("||vec||^2 <= C n^3", "||vec||^2 independent of N"),
            ),
            Fault("tokens one position late", _tokens_one_late, breaks=("zero training error",)),
            Fault(
                "rebalancing skipped (tau = 1)",
                _rebalancing_skipped,
                breaks=(
                    "||vec||^2 <= certified bound",
                    "||vec||^2 <= C36 n^(5/2) ||y||",
                    "Lemma 36 net within its bound",
                    "output layers balanced",
                ),
            ),
            Fault(
                "n-only bound m^2 for m^(5/2)", _bound_n_exponent_2, breaks=("bounds as derived",)
            ),
        ],
        builds=(interpolate_points, memorising_rnn),
        bounds=(memoriser, lemma36_net, lemma36_bound, lemma36_constant),
        derivation="docs/derivations/interpolation.md",
    )
)

# ---------------------------------------------------------------- prop-8

P8_C = 0.05  # risk level c of Prop 35
P8_K = 2.0  # good prompts: conditional error <= K c
P8_GAMMA = 0.5  # answer vectors separated by sqrt(2 (1 - gamma) (N-1) / N)
L36_D_P8 = 3  # token dimension of the exact generalising RNN (d >= 3: a slip d + 2 for 2 d shows)
P8_ANSWER_N, P8_ANSWER_D = 256, 4
P8_LOG_N = 623  # (N - 1) I = 60.07: the log branch of prop8_packing, just past its threshold


def _answer_vectors(x: torch.Tensor, u: torch.Tensor, t: torch.Tensor = None) -> torch.Tensor:
    """(M, N) answers at a fixed position as a function of what only z_i carries.

    General 1STR: t_i enters only through z_i, so the answers are (<u, x_k>)_k. Simple-1STR: the
    states know t (it is in every z_k), so the answer does not vary: <u, x_t> repeated N times."""
    if t is None:
        return x @ u
    M, N, _ = x.shape
    return (x[torch.arange(M, device=x.device), t] @ u)[:, None].expand(M, N)


def _pairwise(A: torch.Tensor) -> torch.Tensor:
    D = torch.cdist(A, A)
    iu = torch.triu_indices(A.shape[0], A.shape[0], 1, device=A.device)
    return D[iu[0], iu[1]]


@dataclass(frozen=True, eq=False)
class SlotMemory:
    """The exact generalising RNN of ``slot_memory`` and M prompts sharing x_i."""

    model: torch.nn.Module
    guarantee: SlotMemoryGuarantee
    omega: torch.Tensor
    u: torch.Tensor
    x: torch.Tensor  # (M, N, d), x_i shared
    t: torch.Tensor  # (M, N, 1)
    i: int
    w: torch.Tensor  # (M, 2 d_h): the states (h_fwd, h_bwd) at position i
    P: torch.Tensor  # (M, N): the answer at position i for every value of t_i


@dataclass(frozen=True)
class Prop8Bounds:
    """Prop 8's bound functions (docs/derivations/rnn-lower-bounds.md): the packing, the width
    bound, the volume and paper norm bounds, and the depth-L requirement built on them."""

    packing: Callable  # (N, c, K=, gamma=) -> Prop8Packing
    width: Callable  # (N, c, UL, K=, gamma=) -> the least d_h
    log_norm: Callable  # (N, c, d_h, K=, gamma=) -> ln UL_min, the volume form
    paper: Callable  # (N, c, d_h, K=, gamma=) -> UL_min, the paper's form
    requirement: Callable  # (N, c, d_h, form=, K=, gamma=) -> ln ||vec||^2 over L layers


LIBRARY_BOUNDS = Prop8Bounds(
    prop8_packing,
    prop8_width_lower_bound,
    prop8_log_norm_lower_bound,
    prop8_norm_lower_bound_paper,
    generalising_log_norm2,
)


@dataclass(frozen=True, eq=False)
class Prop8Inputs:
    """Answers of M prompts sharing x_i (t: None for general 1STR), the exact generalising RNN,
    the bound functions, their table over N, and (full) the GRU width scan."""

    x: torch.Tensor
    u: torch.Tensor
    t: Optional[torch.Tensor]
    slot: SlotMemory
    bounds: Prop8Bounds
    table: Tuple[dict, ...]  # the bound functions at N = 2..200 (and N = 100..115 at gamma 0.3)
    widths: Optional[tuple]  # (N, min width, tried) per N, full profile


def _slot_memory(ctx: Context, radius: Callable = lemma12_radius) -> SlotMemory:
    """The slot-memory RNN at r_x = radius(d, M, N) and M prompts sharing x_i."""
    N, M, d = ctx.pick(quick=128, full=256), ctx.pick(quick=24, full=64), L36_D_P8
    g = ctx.generator("prop-8/slot-prompts", device=ctx.device)
    kw = dict(dtype=torch.float64, device=ctx.device)
    omega = _codes(N, ctx.device)
    u = torch.randn(d, generator=g, **kw)
    u = u / u.norm()
    model, gu = slot_memory(omega, u, r_x=radius(d, M, N))
    i = N // 2
    x = torch.randn(M, N, d, generator=g, **kw)
    x[:, i] = x[0, i]
    t = torch.randint(N, (M, N, 1), generator=g, device=ctx.device)
    return SlotMemory(model, gu, omega, u, x, t, i, *_slot_answers(model, omega, x, t, i))


def _bound_table(b: Prop8Bounds) -> tuple:
    """The bound functions over N = 2..200 at gamma = 1/2 and N = 100..115 at gamma = 0.3 (N =
    107..109: M' = 2 good prompts but failure bound just above 1, the boundary case)."""
    rows = []
    for N, gamma in [(N, P8_GAMMA) for N in range(2, 201)] + [(N, 0.3) for N in range(100, 116)]:
        kw = dict(K=P8_K, gamma=gamma)
        rows.append(
            dict(
                N=N,
                gamma=gamma,
                packing=b.packing(N, P8_C, **kw),
                width=b.width(N, P8_C, 10.0, **kw),
                norm2=b.requirement(N, P8_C, 8, form="volume", **kw),
                paper=b.paper(N, P8_C, 4 * N, **kw),
                log_norm={d_h: b.log_norm(N, P8_C, d_h, **kw) for d_h in (1, 8, 4 * N)},
            )
        )
    return tuple(rows)


def prop8_inputs(ctx: Context) -> Prop8Inputs:
    """M prompts of length 256 sharing x_i (general 1STR), the slot-memory RNN and the tables."""
    M = ctx.pick(quick=200, full=1000, gpu=2000)
    g = ctx.generator("prop-8/answer-prompts", device=ctx.device)
    kw = dict(dtype=torch.float64, device=ctx.device)
    x = torch.randn(M, P8_ANSWER_N, P8_ANSWER_D, generator=g, **kw)
    x[:, P8_ANSWER_N // 2] = x[0, P8_ANSWER_N // 2]  # all prompts share x_i
    u = torch.randn(P8_ANSWER_D, generator=g, **kw)
    widths = None if ctx.profile == "quick" else _width_scan(ctx, simple=False)
    bounds = LIBRARY_BOUNDS
    return Prop8Inputs(
        x, u / u.norm(), None, _slot_memory(ctx), bounds, _bound_table(bounds), widths
    )


def _packing(inp: Prop8Inputs, N: int):
    return inp.bounds.packing(N, P8_C, K=P8_K, gamma=P8_GAMMA)


def prop8_answers(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """Prop 35: the answer vectors of prompts sharing x_i are sqrt(2a(N-1)/N) apart (normalised)."""
    M, N, _ = inp.x.shape
    sep = float(_pairwise(_answer_vectors(inp.x, inp.u, inp.t)).min()) / math.sqrt(N)
    pk = _packing(inp, N)
    fail = M * (M - 1) / 2 * math.exp(-(N - 1) * pk.rate)
    task = "general 1STR" if inp.t is None else "simple-1STR"
    return at_least(
        sep,
        pk.answer_sep,
        detail=(
            f"{task}, N = {N}, {M} prompts sharing x_i: min normalised answer separation (failure "
            f"probability <= {fail:.1e}); theory packs M' = e^{pk.log_M_good:.2f} such prompts"
        ),
    )


def _slot_answers(model, omega, x, t, i):
    """States w = (h_fwd, h_bwd) at position i and the answers P (M, N) for every value of t_i."""
    Z = rnn_encoding(x, t, omega)
    with torch.no_grad(), cpu_threads(1):
        h_f, h_b = model.states(Z)
    w = torch.cat([h_f[:, i], h_b[:, i]], dim=-1)  # U = identity on (h_fwd, h_bwd)
    return w, _answers_at(model, omega, Z[:, i], w)


def _answers_at(model, omega, z_i, w):
    """The answers P (M, N) of f_y at the states w when t_i takes every value (only the
    omega_{t_i} block of z_i changes)."""
    N, tail = omega.shape[0], omega.shape[1]
    zk = z_i[:, None, :].repeat(1, N, 1)
    zk[..., z_i.shape[-1] - tail :] = omega[None, :, :]
    hk = w[:, None, :].expand(-1, N, w.shape[-1])
    with torch.no_grad(), cpu_threads(1):
        return model.f_y(torch.cat([hk, zk], dim=-1)).squeeze(-1)


def prop8_conditional_errors(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """The exact generalising RNN has every conditional error e_m <= K c (here 0)."""
    s = inp.slot
    e = ((s.P - s.x @ s.u) ** 2).mean(dim=1)
    return at_most(float(e.max()), P8_K * P8_C, 1e-18, detail="max_m mean_k (P_mk - <u, x_k>)^2")


def prop8_inside(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """The prompts' tokens lie in the r_x ball the RNN is exact on (Lemma 12's radius)."""
    s = inp.slot
    return at_most(float(s.x.norm(dim=-1).max()), s.guarantee.r_x, detail="max ||x_j||")


def prop8_separated(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """Prop 8: the states of the packed prompts are >= s~ / lambda apart."""
    s = inp.slot
    need = _packing(inp, s.omega.shape[0]).sep / s.guarantee.lipschitz
    return at_least(float(_pairwise(s.w).min()), need, detail="min ||w - w'|| against s~ / lambda")


def prop8_chain(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """||P - P'|| / sqrt N <= lambda ||w - w'|| for every pair (f_y is lambda-Lipschitz)."""
    s = inp.slot
    dw, dp = _pairwise(s.w), _pairwise(s.P) / math.sqrt(s.omega.shape[0])
    ratio = float((dp / (s.guarantee.lipschitz * dw + 1e-9)).max())
    return at_most(ratio, 1 + 1e-9, detail="largest ||dP|| / sqrt N / (lambda ||dw|| + 1e-9)")


def prop8_width(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """Prop 8: the RNN's state width d_h is at least the width bound at its UL."""
    gu = inp.slot.guarantee
    UL = gu.U_op * gu.L
    bound = inp.bounds.width(gu.N, P8_C, UL, K=P8_K, gamma=P8_GAMMA)
    return at_least(gu.d_h, bound, detail=f"UL = {UL:.1f}")


def prop8_width_inverts(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """The width bound inverts the volume bound ln M' <= 2 w ln(1 + 2 sqrt2 UL / s~): UL solved
    back from w = the width bound is UL (rnn-lower-bounds.md)."""
    gu = inp.slot.guarantee
    UL = gu.U_op * gu.L
    w = inp.bounds.width(gu.N, P8_C, UL, K=P8_K, gamma=P8_GAMMA)
    pk = _packing(inp, gu.N)
    back = pk.sep / (2 * math.sqrt(2)) * math.expm1(pk.log_M_good / (2 * w)) if w > 0 else math.inf
    return close(back / UL, 1.0, 1e-9, detail=f"UL = {UL:.1f}, solved back {back:.1f}")


def prop8_sphere(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """Exactness on tokens of the r_x sphere (two prompts and their negatives), random t and t_i = i
    (each position asking for its own token: the e_k^+- branch of either sign)."""
    s = inp.slot
    r_x, N = s.guarantee.r_x, s.omega.shape[0]
    xb = s.x[:2] / s.x[:2].norm(dim=-1, keepdim=True) * r_x
    xb = torch.cat([xb, -xb])
    err = 0.0
    for tb in (s.t[:2].repeat(2, 1, 1), torch.arange(N, device=xb.device).expand(4, N)[..., None]):
        with torch.no_grad(), cpu_threads(1):
            yb = s.model(rnn_encoding(xb, tb, s.omega))
        target = torch.gather(xb @ s.u, 1, tb[..., 0])
        err = max(err, float((yb.reshape(target.shape) - target).abs().max()))
    return at_most(err, 1e-9 * r_x, detail="max |y_hat - <u, x_t>|, random t and t_i = i")


def _packing_exists(pk) -> bool:
    """M' >= 2 and M(M-1)/2 e^{-(N-1) I} + e^{-M (1 - 1/K)^2 / 2} < 1 (recomputed from M, I)."""
    if pk.M == -1:  # too many prompts to count: e^{(N-1) I} > e^60
        return True
    frac = 1 - 1 / P8_K
    fail = pk.M * (pk.M - 1) / 2 * math.exp(-(pk.N - 1) * pk.rate) + math.exp(-pk.M * frac**2 / 2)
    return math.ceil(frac * pk.M / 2) >= 2 and fail < 1


def prop8_positive(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """The width bound is positive exactly where Prop 35's packing exists (N = 2..200)."""
    wrong = [
        (r["N"], r["gamma"]) for r in inp.table if (r["width"] > 0) != _packing_exists(r["packing"])
    ]
    first = min(r["N"] for r in inp.table if r["width"] > 0 and r["gamma"] == P8_GAMMA)
    return exact(
        len(wrong),
        0,
        detail=f"lengths where they differ: {wrong[:4]}; positive from N = {first}",
    )


def prop8_norms_vanish(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """Where the width bound is 0 the norm bounds are too (ln = -inf, the paper's form 0), and
    elsewhere the volume norm bound is finite."""

    def consistent(r):
        positive = r["width"] > 0
        return (
            (r["norm2"] > -math.inf) == positive
            and r["norm2"] < math.inf
            and (positive or r["paper"] == 0.0)
        )

    wrong = [(r["N"], r["gamma"]) for r in inp.table if not consistent(r)]
    return exact(len(wrong), 0, detail=f"lengths where they differ: {wrong[:4]}")


def prop8_norms_derived(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """Where the packing exists: the paper's form (s~ / sqrt 2) sqrt(ln M' / (8 ln(16 N + 1))) and
    the volume bound (s~ / (2 sqrt 2)) expm1(ln M' / (2 d_h)) (d_h = 1, 8, 4N), relative."""
    gaps = []
    for r in (r for r in inp.table if r["width"] > 0):
        pk, N = r["packing"], r["N"]
        paper = pk.sep / math.sqrt(2) * math.sqrt(pk.log_M_good / (8 * math.log(16 * N + 1)))
        gaps.append(abs(r["paper"] - paper) / paper)
        for d_h, got in r["log_norm"].items():
            vol = math.log(pk.sep / (2 * math.sqrt(2)) * math.expm1(pk.log_M_good / (2 * d_h)))
            gaps.append(abs(got - vol) / max(1.0, abs(vol)))
    return at_most(max(gaps), 1e-12, detail="largest relative gap (log scale for the volume form)")


def _chernoff_rate(a: float) -> float:
    """sup_theta [ln(1 + 2 theta) / 2 - theta a], the chi^2 lower-tail exponent, numerically."""
    res = optimize.minimize_scalar(
        lambda th: th * a - 0.5 * math.log1p(2 * th),
        bounds=(0.0, 1e6),
        method="bounded",
        options={"xatol": 1e-12},
    )
    return float(-res.fun)


def prop8_rate(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """Prop 35's rate I(a) is the chi^2 Chernoff exponent (numerical maximisation), a = 1 -
    gamma."""
    gap = max(
        abs(inp.bounds.packing(200, 0.01, K=P8_K, gamma=gm).rate / _chernoff_rate(1 - gm) - 1)
        for gm in (0.3, 0.5, 0.7)
    )
    return at_most(gap, 1e-8, detail="largest relative gap, gamma = 0.3, 0.5, 0.7")


def _derived_counts(N: int, rate: float):
    """M = the largest integer with M (M - 1) <= e^{(N-1) I}, M' = ceil((1 - 1/K) M / 2) and the
    failure bound, at 40 digits (rnn-lower-bounds.md section 1)."""
    frac = 1 - 1 / P8_K
    with mpmath.workdps(40):
        X = mpmath.exp((N - 1) * mpmath.mpf(rate))
        M = int(mpmath.floor((1 + mpmath.sqrt(1 + 4 * X)) / 2))
        M = M - 1 if M * (M - 1) > X else M  # guard the floor at an exact square
        fail = float(M * (M - 1) / 2 / X + mpmath.exp(-M * frac * frac / 2))
    return M, math.ceil(frac * M / 2), fail


P8_DERIVED_NS = tuple((N, 0.5) for N in range(2, P8_LOG_N)) + ((150, 0.3), (150, 0.7))


def prop8_counts(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """The packing's M and M' are their 40-digit derivation (N = 2..622)."""
    wrong = []
    for N, gm in P8_DERIVED_NS:
        pk = inp.bounds.packing(N, P8_C, K=P8_K, gamma=gm)
        M, Mg, _ = _derived_counts(N, pk.rate)
        wrong += [(N, gm)] if (pk.M, pk.M_good) != (M, Mg) else []
    return exact(len(wrong), 0, detail=f"lengths where (M, M') differ: {wrong[:4]}")


def prop8_record_derived(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """ln M', the failure bound (relative 1e-9), sqrt(2a(N-1)/N) and s~ = it - 2 sqrt(K c)
    (relative 1e-12) are their derivation (N = 2..622); the largest gap / tolerance."""
    worst = 0.0
    for N, gm in P8_DERIVED_NS:
        pk = inp.bounds.packing(N, P8_C, K=P8_K, gamma=gm)
        _, Mg, fail = _derived_counts(N, pk.rate)
        ans = math.sqrt(2 * (1 - gm) * (N - 1) / N)
        worst = max(
            worst,
            abs(pk.log_M_good - math.log(Mg)) / math.log(Mg) / 1e-12 if Mg > 1 else 0,
            abs(pk.failure / fail - 1) / 1e-9,
            abs(pk.answer_sep / ans - 1) / 1e-12,
            abs(pk.sep / (ans - 2 * math.sqrt(P8_K * P8_C)) - 1) / 1e-12,
        )
    return at_most(worst, 1.0, detail="largest relative gap / its tolerance")


def prop8_log_form(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """Past e^{(N-1) I} > e^60 the log form of ln M' is below the exact one by at most 1e-11."""
    big = inp.bounds.packing(P8_LOG_N, P8_C, K=P8_K)
    frac = 1 - 1 / P8_K
    with mpmath.workdps(40):
        X = mpmath.exp((P8_LOG_N - 1) * mpmath.mpf(big.rate))
        exact_log = float(
            mpmath.log(mpmath.ceil(frac * mpmath.floor((1 + mpmath.sqrt(1 + 4 * X)) / 2) / 2))
        )
    return close(
        exact_log - big.log_M_good,
        0.5e-11,
        0.5e-11,
        detail=f"exact ln M' - log form at N = {P8_LOG_N} (in [0, 1e-11])",
    )


def prop8_width_growth(inp: Prop8Inputs, ctx: Context) -> Verdict:
    """Full profile: the smallest trained GRU width with risk <= c grows with N (at least 4x over
    N = 4..16, monotone) on general 1STR."""
    ws = [w if w else 2 * P8_SCAN["widths"][-1] for _, w, _ in inp.widths]
    mono = all(b >= a for a, b in zip(ws, ws[1:]))
    return at_least(
        ws[-1] / ws[0] if mono else 0.0,
        4.0,
        detail="; ".join(
            f"N={N}: min width {w or '>' + str(P8_SCAN['widths'][-1])}" for N, w, _ in inp.widths
        ),
    )


def _make_gru_batch(N: int, simple: bool, omega: torch.Tensor):
    """Batches (Z', y) of 1STR with d = 1: Z' = (RNN encoding, m_i), m_i = <omega_i, omega_{t_i}> =
    1[t_i = i].

    The scalar m_i stands in for the product gadget of the paper's deep transitions (Prop 26): a
    single-layer GRU gate is affine in its input and cannot compute <omega_i, omega_t> itself, and
    without it even simple-1STR needed widths growing with N in our runs (optimisation, not memory).
    It gives both tasks the same features; only the memory requirement differs.
    """

    def batch(B, g):
        x = torch.randn(B, N, 1, generator=g, device=g.device)
        if simple:
            t = torch.randint(N, (B, 1, 1), generator=g, device=g.device).expand(B, N, 1)
        else:
            t = torch.randint(N, (B, N, 1), generator=g, device=g.device)
        y = x[torch.arange(B, device=g.device)[:, None], t[..., 0], 0]
        match = (t[..., 0] == torch.arange(N, device=g.device)).to(x.dtype)[..., None]
        return torch.cat([rnn_encoding(x, t, omega), match], dim=-1), y

    return batch


P8_SCAN = dict(Ns=(4, 8, 16), widths=(1, 2, 4, 8, 16, 32, 64), steps=800, lr=1e-2, c=0.25)


def _min_width(N: int, simple: bool, ctx: Context) -> tuple[int, list]:
    """Smallest GRU width (per direction) whose trained risk is <= c (ascending scan; 0 if none)."""
    from qstr.constructions.experiment_models import PracticalRNN
    from qstr.verify.training import OnlineFit, fit_online, position_risk

    cfg = P8_SCAN
    omega = build_codebook(N, kind="rs-hadamard", device=ctx.device).omega
    batch = _make_gru_batch(N, simple, omega)
    tried = []
    for w in cfg["widths"]:
        g = ctx.generator("prop-8/gru-simple" if simple else "prop-8/gru", N, w, device=ctx.device)
        model = PracticalRNN(omega.shape[1] * 2 + 2, w, generator=g, device=ctx.device)
        with cpu_threads(1):
            fit_online(model, batch, OnlineFit(cfg["steps"], lr=cfg["lr"]), generator=g)
            risk, _ = position_risk(
                model, batch, n=2048, generator=ctx.generator("prop-8/gru-risk", device=ctx.device)
            )
        tried.append((w, risk))
        if risk <= cfg["c"]:
            return w, tried
    return 0, tried


def _width_scan(ctx: Context, simple: bool) -> tuple:
    """Full profile: (N, smallest trained width with risk <= c (0: none), tried) for each N."""
    return tuple((N, *_min_width(N, simple, ctx)) for N in P8_SCAN["Ns"])


def _simple_1str(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """Simple-1STR answers: the states know t (it is in every z_k), so the answer does not vary."""
    M, N, _ = inp.x.shape
    g = ctx.generator("prop-8/simple-targets", device=ctx.device)
    return replace(inp, t=torch.randint(N, (M,), generator=g, device=inp.x.device))


def _simple_widths(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """The width scan trained on simple-1STR (t the same at every position: no packing needed)."""
    return replace(inp, widths=_width_scan(ctx, simple=True))


def _with_model(slot: SlotMemory, model: torch.nn.Module) -> SlotMemory:
    """The slot memory with ``model`` in place of its RNN, states and answers recomputed."""
    w, P = _slot_answers(model, slot.omega, slot.x, slot.t, slot.i)
    return replace(slot, model=model, w=w, P=P)


def _state_read_scaled(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """f_y reads the states through U = r_h I while the guarantee keeps U_op = 1 and lambda =
    sqrt 2 (a copy of the module, its first output layer's state columns scaled)."""
    s = inp.slot
    model = copy.deepcopy(s.model)
    with torch.no_grad():
        model.f_y[0].weight[:, : 2 * s.guarantee.d_h] *= s.guarantee.r_h
    P = _answers_at(model, s.omega, rnn_encoding(s.x, s.t, s.omega)[:, s.i], s.w)  # same states
    return replace(inp, slot=replace(s, model=model, P=P))


def _transitions_zeroed(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """The transitions left at zero, as in the memoriser (states unused: h = 0 everywhere)."""
    model = copy.deepcopy(inp.slot.model)
    with torch.no_grad():
        for p in (*model.f_fwd.parameters(), *model.f_bwd.parameters()):
            p.zero_()
    return replace(inp, slot=_with_model(inp.slot, model))


def _radius_without_3eCd(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """The slot-memory RNN built at r_x = sqrt(ln(M N)): Lemma 12's factor 3 C_x e d dropped."""
    return replace(inp, slot=_slot_memory(ctx, radius=lambda d, M, N: math.sqrt(math.log(M * N))))


def _misread_unit(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """An e_k^- unit reads relu(-s_2) for relu(xi): wrong only when t_i = i and both are
    negative (a copy of the module, its weight edited)."""
    model = copy.deepcopy(inp.slot.model)
    N = inp.slot.omega.shape[0]
    W = model.f_y[2].weight
    with torch.no_grad():
        W[3 * N : 4 * N, 2 + N], W[3 * N : 4 * N, 2 * N] = W[3 * N : 4 * N, 2 * N].clone(), 0.0
    return replace(inp, slot=replace(inp.slot, model=model))


# The faults' bound functions: Prop 8's derivation (rnn-lower-bounds.md section 1) written out
# again with one slip each, every later function built on the slipped earlier one.


def _slipped_packing(rate_factor=1.0, good_divisor=2.0, error_factor=2.0) -> Callable:
    """``prop8_packing`` as derived, with the rate I(a) times ``rate_factor``, M' = ceil((1 - 1/K)
    M / good_divisor) and s~ = sqrt(2a(N-1)/N) - error_factor sqrt(K c)."""

    def packing(N, c, *, K=2.0, gamma=0.5):
        pk = prop8_packing(N, c, K=K, gamma=gamma)
        rate, frac = rate_factor * pk.rate, 1 - 1 / K
        E, sep = (N - 1) * rate, pk.answer_sep - error_factor * math.sqrt(K * c)
        if E > 60.0:
            log_good = E / 2 + math.log1p(-math.exp(-E / 2)) + math.log(frac / good_divisor)
            return replace(pk, rate=rate, M=-1, M_good=-1, log_M_good=log_good, sep=sep)
        M = int(math.floor(0.5 + math.sqrt(0.25 + math.exp(E))))
        while M > 1 and M * (M - 1) > math.exp(E):
            M -= 1
        good = math.ceil(frac * M / good_divisor)
        fail = M * (M - 1) / 2 * math.exp(-E) + math.exp(-M * frac * frac / 2)
        log_good = math.log(good) if good >= 1 else 0.0
        return replace(pk, rate=rate, M=M, M_good=good, log_M_good=log_good, sep=sep, failure=fail)

    return packing


def _vacuous(pk) -> bool:
    """No packing: M' < 2 or failure bound >= 1 (M' = -1: too many to count, a packing)."""
    return 0 <= pk.M_good < 2 or pk.failure >= 1.0


def _bounds_on(packing, vacuous=_vacuous, norm_vacuous=_vacuous, grow=math.expm1) -> Prop8Bounds:
    """Width, volume and paper norm bounds and the requirement on ``packing``, as derived: the
    width and the norms are 0 (ln: -inf) where ``vacuous`` / ``norm_vacuous``; the volume form
    is (s~ / (2 sqrt 2)) grow(ln M' / (2 d_h))."""
    root2 = math.sqrt(2.0)

    def width(N, c, UL, *, K=2.0, gamma=0.5):
        pk = packing(N, c, K=K, gamma=gamma)
        return 0.0 if vacuous(pk) else pk.log_M_good / (2 * math.log1p(2 * root2 * UL / pk.sep))

    def log_norm(N, c, d_h, *, K=2.0, gamma=0.5):
        pk = packing(N, c, K=K, gamma=gamma)
        if norm_vacuous(pk) or pk.log_M_good <= 0:
            return -math.inf
        return math.log(pk.sep / (2 * root2) * grow(pk.log_M_good / (2 * d_h)))

    def paper(N, c, d_h, *, C_M=8.0, K=2.0, gamma=0.5):
        pk = packing(N, c, K=K, gamma=gamma)
        if norm_vacuous(pk):
            return 0.0
        return pk.sep / root2 * math.sqrt(pk.log_M_good / (C_M * math.log(4 * d_h + 1)))

    def requirement(N, c, d_h, *, depth=2, r_h=1.0, form="volume", K=2.0, gamma=0.5):
        lg = log_norm(N, c, d_h, K=K, gamma=gamma)
        return -math.inf if lg == -math.inf else math.log(depth) + 2 / depth * (lg - math.log(r_h))

    return Prop8Bounds(packing, width, log_norm, paper, requirement)


def _with_bounds(inp: Prop8Inputs, bounds: Prop8Bounds) -> Prop8Inputs:
    """The inputs with these bound functions and their table."""
    return replace(inp, bounds=bounds, table=_bound_table(bounds))


def _rate_without_half(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """The Chernoff rate a - 1 - ln a (its 1/2 dropped), everything after built on it."""
    return _with_bounds(inp, _bounds_on(_slipped_packing(rate_factor=2.0)))


def _good_without_half(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """M' = ceil((1 - 1/K) M) (the 1/2 of half the pairs dropped), in both of ln M's forms."""
    return _with_bounds(inp, _bounds_on(_slipped_packing(good_divisor=1.0)))


def _error_once(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """s~ = sqrt(2a(N-1)/N) - sqrt(K c): the prediction error subtracted for one prompt only."""
    return _with_bounds(inp, _bounds_on(_slipped_packing(error_factor=1.0)))


def _vacuous_without_failure(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """Every bound vacuous only where M' < 2 (the failure bound < 1 not required)."""

    def few(pk):
        return 0 <= pk.M_good < 2

    return _with_bounds(inp, _bounds_on(prop8_packing, vacuous=few, norm_vacuous=few))


def _norms_without_vacuity(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """The norm bounds evaluated where the packing does not exist (the width bound still 0)."""
    bounds = _bounds_on(prop8_packing, norm_vacuous=lambda pk: False)
    return _with_bounds(inp, replace(bounds, width=prop8_width_lower_bound))


def _volume_exp(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """The volume norm bound with exp for expm1 (the -1 of (1 + 2 sqrt2 UL / s~) dropped)."""
    return _with_bounds(inp, _bounds_on(prop8_packing, grow=math.exp))


def _width_ratio_inverted(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """The width bound ln M' / (2 ln(1 + 2 sqrt2 s~ / UL)): the ratio UL / s~ inverted."""

    def width(N, c, UL, *, K=2.0, gamma=0.5):
        pk = prop8_packing(N, c, K=K, gamma=gamma)
        return 0.0 if _vacuous(pk) else pk.log_M_good / (2 * math.log1p(2 * 2**0.5 * pk.sep / UL))

    return _with_bounds(inp, replace(inp.bounds, width=width))


register(
    Claim(
        id="prop-8",
        ref=Ref("Prop 8 (Prop 35)", "Prop 6 (Prop 35)"),
        statement="risk <= c at a position forces the states of e^{Omega(N)} prompts sharing x_i "
        "into "
        "a packing (quick: answer + state separation; full: trained GRU width grows with N)",
        inputs=prop8_inputs,
        checks=[
            Check("answer separation >= sqrt(2a(N-1)/N)", prop8_answers),
            Check("conditional errors <= K c", prop8_conditional_errors),
            Check("tokens inside the r_x ball", prop8_inside),
            Check("states separated by s~/lambda", prop8_separated),
            Check("chain ||dP|| <= lambda ||dw||", prop8_chain),
            Check("d_h >= width bound", prop8_width),
            Check("width bound inverts the volume bound", prop8_width_inverts),
            Check("exact on the r_x sphere", prop8_sphere),
            Check("width bound positive iff the packing exists", prop8_positive),
            Check("norm bounds vanish with the width bound", prop8_norms_vanish),
            Check("norm bounds as derived", prop8_norms_derived),
            Check("rate = Chernoff exponent", prop8_rate),
            Check("M and M' as derived", prop8_counts),
            Check("ln M', failure, separations as derived", prop8_record_derived),
            Check("log form of ln M' as derived", prop8_log_form),
            Check("trained GRU width grows with N", prop8_width_growth, profiles=("full", "gpu")),
        ],
        faults=[
            Fault(
                "simple-1STR answers",
                _simple_1str,
                breaks=("answer separation >= sqrt(2a(N-1)/N)",),
            ),
            Fault("e_k^- unit misreads", _misread_unit, breaks=("exact on the r_x sphere",)),
            Fault(
                "transitions zeroed",
                _transitions_zeroed,
                breaks=("states separated by s~/lambda", "conditional errors <= K c"),
            ),
            Fault(
                "state read U = r_h I",
                _state_read_scaled,
                breaks=("chain ||dP|| <= lambda ||dw||", "conditional errors <= K c"),
            ),
            Fault(
                "r_x without 3 C_x e d",
                _radius_without_3eCd,
                breaks=("tokens inside the r_x ball",),
            ),
            Fault(
                "Chernoff rate without 1/2",
                _rate_without_half,
                breaks=("rate = Chernoff exponent",),
            ),
            Fault(
                "M' without the 1/2",
                _good_without_half,
                breaks=(
                    "M and M' as derived",
                    "ln M', failure, separations as derived",
                    "log form of ln M' as derived",
                ),
            ),
            Fault(
                "s~ with one prediction error",
                _error_once,
                breaks=("ln M', failure, separations as derived",),
            ),
            Fault(
                "vacuous only where M' < 2",
                _vacuous_without_failure,
                breaks=("width bound positive iff the packing exists",),
            ),
            Fault(
                "norm bounds where no packing exists",
                _norms_without_vacuity,
                breaks=("norm bounds vanish with the width bound",),
            ),
            Fault("volume bound exp for expm1", _volume_exp, breaks=("norm bounds as derived",)),
            Fault(
                "width bound with s~ / UL",
                _width_ratio_inverted,
                breaks=("d_h >= width bound", "width bound inverts the volume bound"),
            ),
            Fault(
                "simple-1STR width scan",
                _simple_widths,
                breaks=("trained GRU width grows with N",),
                profiles=("full", "gpu"),
            ),
        ],
        builds=(slot_memory_rnn,),
        bounds=(
            slot_memory,
            generalising_log_norm2,
            prop8_packing,
            prop8_width_lower_bound,
            prop8_log_norm_lower_bound,
            prop8_norm_lower_bound_paper,
        ),
        derivation="docs/derivations/rnn-lower-bounds.md",
    )
)

# ---------------------------------------------------------------- thm-9

T9_NS = tuple(2**k for k in range(8, 21, 2))
T9_DEPTH = 2
T9_D = 4
T9_NS_BUILT = (16, 64, 256, 1024, 4096)  # N grid for norms measured on constructions.recurrent


@dataclass(frozen=True, eq=False)
class Thm9Inputs:
    """The generalisation requirements (ln ||vec||^2 by N, per form), the memoriser bound, the
    crossover n*(N) computed from it, and memorisers built on general-1STR prompts."""

    requirements: dict  # form -> {N: ln ||vec||^2 a generalising RNN needs}
    memoriser_bound: Callable[[int], float]  # C n^3
    crossover: Callable[[float], float]  # n* with memoriser_bound(n*) = e^requirement
    memorisers: Tuple[tuple, ...]  # (n, module, labels at the position)
    requirement: Callable = generalising_log_norm2  # the requirements' function


def _requirements(requirement: Callable = generalising_log_norm2) -> dict:
    """Prop 8's requirement in the paper's (d_h = N d) and the volume (d_h = sqrt N) forms."""

    def paper(N):
        return requirement(N, P8_C, N * T9_D, depth=T9_DEPTH, form="paper")

    def volume(N):
        return requirement(N, P8_C, math.isqrt(N), depth=T9_DEPTH, form="volume")

    return {
        "paper (d_h = N d, uncertified)": {N: paper(N) for N in T9_NS},
        "volume (d_h = sqrt N, rigorous)": {N: volume(N) for N in T9_NS},
    }


def _memoriser_bound(n: int) -> float:
    return memoriser_norm2_bound(n, depth=T9_DEPTH, K_y=K_Y)


def _crossover(log_requirement: float) -> float:
    return theorem9_crossover(log_requirement, depth=T9_DEPTH, K_y=K_Y)


def _memorisers(ctx: Context, ns, position) -> tuple:
    """(n, memoriser, labels at position 5) on n general-1STR prompts of length 64."""
    mems = []
    for n in ns:
        x, t, y = _prompts(n, 64, ctx.generator("thm-9/prompts", n, device=ctx.device), ctx.device)
        with cpu_threads(1):
            model, _ = memoriser(
                x,
                y,
                D_in=L36_D,
                position=position,
                generator=ctx.generator("thm-9/memoriser", n, device=ctx.device),
            )
        mems.append((n, model, y[:, 5]))
    return tuple(mems)


def thm9_inputs(ctx: Context) -> Thm9Inputs:
    """Requirements over N = 2^8..2^20 and memorisers at position 5 for n = 8, 32 (.. 128 full)."""
    mems = _memorisers(ctx, ctx.pick(quick=(8, 32), full=(8, 32, 128)), 5)
    return Thm9Inputs(_requirements(), _memoriser_bound, _crossover, mems)


def thm9_slopes(inp: Thm9Inputs, ctx: Context) -> Verdict:
    """Theorem 9: n*(N) grows like a power of N: every log-log slope >= 1 / (2 (L_y + 4)), the
    smallest over the requirement's forms."""
    worst = []
    for form, logs in inp.requirements.items():
        Ns = sorted(logs)
        slopes = loglog_slope(lambda N: inp.crossover(logs[N]), Ns)
        worst.append((float(np.min(slopes)), form, Ns))
    slope, form, Ns = min(worst)
    return at_least(
        slope,
        0.5 / (T9_DEPTH + 4),
        detail=(
            f"smallest slope: {form}, N = {Ns[0]}..{Ns[-1]}; target 1/(L_y+4) = "
            f"{1 / (T9_DEPTH + 4):.3f}, L_y = {T9_DEPTH}, c = {P8_C}"
        ),
    )


def thm9_memoriser(inp: Thm9Inputs, ctx: Context) -> Verdict:
    """The memoriser side: ||vec||^2 <= C n^3 (on the module), where ||y||^2 <= K_y n holds."""
    rows = [
        (parameter_norm2(m) / inp.memoriser_bound(n), n, m)
        for n, m, y in inp.memorisers
        if float(y @ y) <= K_Y * n
    ]
    if not rows:
        return exact("no memoriser with ||y||^2 <= K_y n", "one at least")
    _, n, m = max(rows, key=lambda r: r[0])
    norm2 = parameter_norm2(m)
    count = sum(p.numel() for p in m.parameters())
    return at_most(
        norm2,
        inp.memoriser_bound(n),
        Rounding(n=count, scale=norm2, what="(parameter count) eps ||vec||^2"),
        detail=f"worst n = {n} of {[r[1] for r in rows]}",
    )


def thm9_constant(inp: Thm9Inputs, ctx: Context) -> Verdict:
    """The memoriser bound at depth 2, K_y = 6 is Lemma 36's C36 sqrt(6) n^3, C36 = 2 sqrt((144/pi)
    (5 + pi/72)) (docs/derivations/interpolation.md)."""
    C = C36_DERIVED * math.sqrt(6.0)
    gap = max(abs(inp.memoriser_bound(n) / (C * n**3) - 1) for n in (2, 8, 64, 1000, 10**6))
    return at_most(gap, 1e-9, detail=f"C = {C:.4f}, n = 2 .. 1e6, largest relative gap")


def thm9_inverts(inp: Thm9Inputs, ctx: Context) -> Verdict:
    """The crossover inverts the memoriser bound: n*(ln memoriser_bound(n)) = n."""
    gap = max(abs(inp.crossover(math.log(inp.memoriser_bound(n))) / n - 1) for n in (10, 1000))
    return at_most(gap, 1e-9, detail="n = 10, 1000, largest relative gap")


def thm9_requirement(inp: Thm9Inputs, ctx: Context) -> Verdict:
    """generalising_log_norm2 = ln L + (2 / L)(ln UL_min - ln r_h) (AM-GM over L layers), both forms
    of UL_min (docs/derivations/rnn-lower-bounds.md)."""
    gaps = []
    for depth, r_h in ((2, 1.0), (3, 2.5)):
        for form, lg in (
            ("paper", math.log(prop8_norm_lower_bound_paper(4096, P8_C, 64))),
            ("volume", prop8_log_norm_lower_bound(4096, P8_C, 64)),
        ):
            want = math.log(depth) + 2.0 / depth * (lg - math.log(r_h))
            got = inp.requirement(4096, P8_C, 64, depth=depth, r_h=r_h, form=form)
            gaps.append(abs(got / want - 1))
    return at_most(max(gaps), 1e-9, detail="N = 4096, d_h = 64, depth 2 and 3")


def _built_prop28_log_norm2(N: int, ctx: Context) -> float:
    """ln ||vec theta||^2 of the Prop 28 RNN of bounds.recurrent.prop28_rnn (on the module)."""
    from qstr.constructions.codes import rs_hadamard_codebook
    from qstr.constructions.links import make_link
    from qstr.bounds.recurrent import prop28_rnn

    g = ctx.generator("thm-9/prop28-link")
    net = make_link("linear", 1, T9_D, generator=g).two_layer_net()
    book = rs_hadamard_codebook(N, dtype=torch.float64)
    with cpu_threads(1):
        rnn = prop28_rnn(book, T9_D, net, eps=0.1).module(device=ctx.device)
        return math.log(parameter_norm2(rnn))


def _simple_built(inp: Thm9Inputs, ctx: Context) -> Thm9Inputs:
    """Simple-1STR: the requirement is the built Prop 28 RNN's ||vec||^2 (N-free, polylog)."""
    logs = {N: _built_prop28_log_norm2(N, ctx) for N in T9_NS_BUILT}
    return replace(inp, requirements={"Prop 28 built (measured ||vec||^2)": logs})


def _simple_radii(inp: Thm9Inputs, ctx: Context) -> Thm9Inputs:
    """Simple-1STR: the requirement is Prop 28's layer-radius norm (bounds.recurrent)."""
    logs = {N: math.log(prop28_norm2(N, Theorem7Params(q=1, d=T9_D))) for N in T9_NS}
    return replace(inp, requirements={"Prop 28 layer radii": logs})


def _bound_n2(inp: Thm9Inputs, ctx: Context) -> Thm9Inputs:
    """The memoriser bound with exponent 2 (C n^2) in place of Lemma 36's n^3; the crossover
    still computed from n^3."""
    return replace(inp, memoriser_bound=lambda n: _memoriser_bound(n) / n)


def _every_position(inp: Thm9Inputs, ctx: Context) -> Thm9Inputs:
    """A memoriser of the labels at every position (n N points, n = 8) in place of position 5."""
    return replace(inp, memorisers=_memorisers(ctx, (8,), "all"))


def _crossover_exponent2(inp: Thm9Inputs, ctx: Context) -> Thm9Inputs:
    """The crossover computed from the exponent 2 (n* = (e^req / C)^(1/2)) in place of 3."""
    C = lemma36_constant(K_Y)
    return replace(inp, crossover=lambda lr: math.exp((lr - math.log(C)) / 2))


def _requirement_without_L(N: int, c: float, d_h: int, *, depth: int = 2, **kw) -> float:
    """The requirement with AM-GM's factor L dropped: (2 / L)(ln UL_min - ln r_h)."""
    return generalising_log_norm2(N, c, d_h, depth=depth, **kw) - math.log(depth)


def _am_gm_without_L(inp: Thm9Inputs, ctx: Context) -> Thm9Inputs:
    """The requirement function and its table with AM-GM's factor L dropped (a constant in
    ln ||vec||^2: the slopes of n*(N) do not see it)."""
    return replace(
        inp, requirement=_requirement_without_L, requirements=_requirements(_requirement_without_L)
    )


def _bound_k5(inp: Thm9Inputs, ctx: Context) -> Thm9Inputs:
    """The memoriser bound and crossover at K_y = 5 (C36 sqrt 5) in place of 6."""
    return replace(
        inp,
        memoriser_bound=lambda n: memoriser_norm2_bound(n, K_y=5.0),
        crossover=lambda lr: theorem9_crossover(lr, K_y=5.0),
    )


register(
    Claim(
        id="thm-9",
        ref=Ref("Thm 9", "Thm 7"),
        statement="memoriser ||vec||^2 <= C n^3 (N-free) vs the Prop 8 requirement: the crossover "
        "n*(N) below which min-norm ERM prefers memorising grows like a power of N",
        inputs=thm9_inputs,
        checks=[
            Check("n*(N) slopes >= 1/(2(L_y+4))", thm9_slopes),
            Check("memoriser ||vec||^2 <= C n^3", thm9_memoriser),
            Check("C = C36 sqrt(6)", thm9_constant),
            Check("crossover inverts the memoriser bound", thm9_inverts),
            Check("requirement = AM-GM over L layers", thm9_requirement),
        ],
        faults=[
            Fault(
                "simple-1STR, Prop 28 built",
                _simple_built,
                breaks=("n*(N) slopes >= 1/(2(L_y+4))",),
            ),
            Fault(
                "simple-1STR, Prop 28 radii",
                _simple_radii,
                breaks=("n*(N) slopes >= 1/(2(L_y+4))",),
            ),
            Fault(
                "memoriser bound C n^2",
                _bound_n2,
                breaks=("C = C36 sqrt(6)", "crossover inverts the memoriser bound"),
            ),
            Fault(
                "crossover from exponent 2",
                _crossover_exponent2,
                breaks=("crossover inverts the memoriser bound",),
            ),
            Fault(
                "memorise every position", _every_position, breaks=("memoriser ||vec||^2 <= C n^3",)
            ),
            Fault("K_y = 5", _bound_k5, breaks=("C = C36 sqrt(6)",)),
            Fault(
                "AM-GM without the factor L",
                _am_gm_without_L,
                breaks=("requirement = AM-GM over L layers",),
            ),
        ],
        builds=(memorising_rnn,),
        bounds=(memoriser, memoriser_norm2_bound, theorem9_crossover, generalising_log_norm2),
        derivation="docs/derivations/rnn-lower-bounds.md",
    )
)

# ---------------------------------------------------------------- thm-7

T7_NS = tuple(2**k for k in range(4, 21, 2))
T7_TARGET = 0.1
T7_DEGREE = 9  # derived polylog degree: n(N) = O((ln N)^9) (docs/derivations/rnn-lower-bounds.md)
T7_AGREE_POINTS = ((10**6, 16), (10**20, 256), (10**38, 4096), (10**41, 2**20), (10**60, 2**30))
T7_ROOT_NS = T7_NS  # n(N) compared with the 40-digit root at these N
T7_VARIANT = dict(
    q=3, d=2, r_a=2.0, r_w=0.5, m_g=8, eps_2nn=0.02, C_x=1.5, C_y=2.0, s=0.5, mu=0.25, delta=0.1
)
# a second parameter set for the bound comparison (q = 1 and C_x = C_y = s = 1 would hide a q <->
# q^2 or C_x slip)
T7_AGREE_RTOL = (
    1e-12  # float64 bound vs the 40-digit mpmath evaluation; the measured gaps are ~1e-15
)
T7_DPS = 40


def _t7_net(radii2, biased, r_in):
    """(Lambda, ||c||, b) of a net with squared layer radii ``radii2`` on inputs of norm <= r_in,
    in mpmath
    (docs/derivations/rnn-lower-bounds.md section 4, item 5): a_0 = r_in, a_l = R_l sqrt(a_{l-1}^2
    + 1) (biased),
    c_l = prod_{k > l} R_k * sqrt(a_{l-1}^2 + 1) (or a_{l-1}), b: the output bound at input 0 via
    R_l (b + 1).
    """
    import mpmath as mp

    R = [mp.sqrt(r2) for r2 in radii2]
    feeds, a = [], r_in
    for Rl, bias in zip(R, biased):
        feeds.append(mp.sqrt(a * a + 1) if bias else a)
        a = Rl * feeds[-1]
    c2 = mp.fsum((mp.fprod(R[l + 1 :]) * feeds[l]) ** 2 for l in range(len(R)))
    b = mp.mpf(0)
    for Rl, bias in zip(R, biased):
        b = Rl * (b + 1) if bias else Rl * b
    return mp.fprod(R), mp.sqrt(c2), b


def t7_code_dim(params: Theorem7Params, N: int) -> int:
    """Theorem 7's code width d_e = ceil(8 ln(N^2 / delta)) (Hoeffding + union bound, Assumption 3)
    in 40-digit
    arithmetic, or params.d_e."""
    import mpmath as mp

    if params.d_e is not None:
        return params.d_e
    with mp.workdps(T7_DPS):
        return int(mp.ceil(8 * mp.log(mp.mpf(N) ** 2 / mp.mpf(params.delta))))


def t7_layers_mp(n, N: int, P: Theorem7Params) -> tuple:
    """(r_x^2, transition layers, output layers) of Prop 28's class in mpmath, each layer (fan_in,
    width, bias, R^2),
    written from docs/derivations/rnn-lower-bounds.md section 4 (piece 1), r_x^2 = 3 C_x e d ln(n
    N).
    """
    import mpmath as mp

    q, d, de, m_g = P.q, P.d, t7_code_dim(P, N), P.m_g
    mu = mp.mpf(P.mu)
    rx2 = 3 * mp.mpf(P.C_x) * mp.e * d * mp.log(mp.mpf(n) * N)
    g2 = (2 + (1 + mu) ** 2) / (1 - mu) ** 2
    qd = q * d
    De = d + (q + 1) * de
    # (fan_in, width, bias, R^2): transition (x2, both directions) and output net
    trans = [
        (De, 2 * d + 2 * q * de, True, mp.mpf(2 * d + 4 * q * de)),
        (2 * d + 2 * q * de, 2 * d + q, True, 4 * d + q * g2),
        (2 * d + q, 2 * qd, True, 2 * qd * (2 + 2 * rx2)),
        (2 * qd, qd, False, mp.mpf(2 * qd)),
    ]
    out = [
        (2 * qd + De, 2 * d + 2 * q * de + 2 * qd, True, mp.mpf(2 * d + 4 * q * de + 4 * qd)),
        (2 * d + 2 * q * de + 2 * qd, 2 * d + q + 2 * qd, True, 4 * d + q * g2 + 4 * qd),
        (2 * d + q + 2 * qd, 4 * qd, True, 2 * qd * (2 + 2 * rx2) + 4 * qd),
        (4 * qd, m_g, True, 4 * m_g * mp.mpf(P.r_w) ** 2),
        (m_g, 1, False, mp.mpf(P.r_a) ** 2 / m_g),
    ]
    return rx2, trans, out


def theorem7_bound_mp(n, N: int, params: Theorem7Params, pieces: bool = False):
    """The Theorem 7 bound at (n, N) in mpmath at the working precision (call inside
    ``mpmath.workdps``), written
    from docs/derivations/rnn-lower-bounds.md section 4 (the class of Prop 28, pieces 1-7)
    independently of
    ``theorem7_bound``: its own r_x = sqrt(3 C_x e d ln(nN)), d_e, layer table, parameter count,
    net constants.
    ``n`` may be real (an mpf): the sample-size check solves bound(n) = target for real n."""
    import mpmath as mp

    P = params
    n, Nv = mp.mpf(n), mp.mpf(N)
    q, d = P.q, P.d
    delta, C_x, C_y, s = (mp.mpf(v) for v in (P.delta, P.C_x, P.C_y, P.s))
    rx2, trans, out = t7_layers_mp(n, N, P)
    rh2 = q * rx2
    rz2 = rx2 + q + 1
    n_params = sum(
        (2 if part is trans else 1) * w * (f + (1 if b else 0))
        for part in (trans, out)
        for f, w, b, _ in part
    )
    R_theta = mp.sqrt(2 * mp.fsum(r2 for *_, r2 in trans) + mp.fsum(r2 for *_, r2 in out))
    _, A_h, _ = _t7_net([r2 for *_, r2 in trans], [b for _, _, b, _ in trans], mp.sqrt(rz2))
    Lam_y, A_y, b_y = _t7_net(
        [r2 for *_, r2 in out], [b for _, _, b, _ in out], mp.sqrt(2 * rh2 + rz2)
    )
    A = mp.sqrt(A_y**2 + ((Nv - 1) * Lam_y * A_h) ** 2)
    beta0 = Lam_y * mp.sqrt(2 * rh2 + q + 1) + b_y

    def m_p(p):  # ||loss||_p <= m_p (piece 3)
        return 2 * ((beta0 + Lam_y * mp.sqrt(2 * p * C_x * d)) ** 2 + C_y * (2 * p) ** (2 * s))

    p = max(mp.mpf(1), mp.log((1 + 4 / delta) * mp.sqrt(n)))
    tau = mp.e * m_p(p)
    log_cov = n_params * mp.log(1 + 4 * R_theta * A * mp.sqrt(n / tau))
    rad = tau / mp.sqrt(n) + tau * mp.sqrt(2 * log_cov / n)
    total = (
        mp.mpf(P.eps_2nn)
        + m_p(2) * Nv ** mp.mpf(-0.25) * n ** mp.mpf(-0.75)
        + 2 * rad
        + 4 * tau * mp.sqrt(mp.log(4 / delta) / (2 * n))
        + (1 + 4 / delta) * tau * mp.exp(-p)
    )
    return {"total": total, "lipschitz": A, "radius": R_theta} if pieces else total


T7_CONST_POINTS = ((10**3, 16), (10**3, 1024), (10**3, 2**20), (10**9, 2**20))


@dataclass(frozen=True, eq=False)
class Thm7Inputs:
    """Theorem 7's record function, Prop 28's norm, and the sample sizes n(N) they give."""

    params: Theorem7Params
    record: Callable  # theorem7_bound(n, N, params) -> Theorem7Bound
    prop28_norm2: Callable  # prop28_norm2(N, params, n=...)
    sizes: dict  # N -> n(N), the smallest n with bound <= T7_TARGET


def _sizes(record, params) -> dict:
    """n(N) for every N: ``theorem7_sample_size`` for the library's record, else the same search."""
    from qstr.bounds.search import smallest_true

    def search(N):
        if record is theorem7_bound:
            return theorem7_sample_size(T7_TARGET, N, params)
        return smallest_true(
            lambda n: record(n, N, params).total <= T7_TARGET, limit=10**300, log_bisect=True
        )

    return {N: search(N) for N in sorted(set(T7_NS) | set(T7_ROOT_NS))}


def thm7_inputs(ctx: Context) -> Thm7Inputs:
    """The default constants of rnn-lower-bounds.md section 4 and n(N) at risk 0.1."""
    return Thm7Inputs(
        Theorem7Params(), theorem7_bound, prop28_norm2, _sizes(theorem7_bound, Theorem7Params())
    )


def _slopes(inp: Thm7Inputs):
    slopes = loglog_slope(inp.sizes.__getitem__, T7_NS)
    mids = np.log(np.sqrt(np.array(T7_NS[:-1], dtype=float) * np.array(T7_NS[1:], dtype=float)))
    return slopes, mids


def thm7_polylog(inp: Thm7Inputs, ctx: Context) -> Verdict:
    """Theorem 7: n(N) = O((ln N)^9): every slope d ln n / d ln N is <= 9 / ln N."""
    slopes, mids = _slopes(inp)
    k = slopes * mids
    return at_most(
        float(k.max()),
        T7_DEGREE,
        detail=(
            f"largest slope x ln N over N = 2^4..2^20 "
            f"(slopes {slopes[0]:.3f} -> {slopes[-1]:.3f}); "
            "a float64 closed form, no rounding term"
        ),
    )


def thm7_decreasing(inp: Thm7Inputs, ctx: Context) -> Verdict:
    """The slopes of n(N) decrease (they tend to 0), up to 1e-9."""
    slopes, _ = _slopes(inp)
    return at_most(float(np.diff(slopes).max()), 1e-9, detail="largest increase between slopes")


def _bound_gap(inp: Thm7Inputs, params: Theorem7Params) -> float:
    with mpmath.workdps(T7_DPS):
        return max(
            float(
                abs(mpmath.mpf(inp.record(n, N, params).total) - theorem7_bound_mp(n, N, params))
                / theorem7_bound_mp(n, N, params)
            )
            for n, N in T7_AGREE_POINTS
        )


def thm7_bound_agrees(inp: Thm7Inputs, ctx: Context) -> Verdict:
    """The float64 bound equals the 40-digit evaluation written from the derivation (default and a
    second set of constants), relative 1e-12."""
    gap = max(_bound_gap(inp, inp.params), _bound_gap(inp, Theorem7Params(**T7_VARIANT)))
    return at_most(
        gap,
        T7_AGREE_RTOL,
        detail=(
            f"(n, N) = {[(f'1e{round(math.log10(a))}', b) for a, b in T7_AGREE_POINTS]}; "
            f"constants: the defaults and {T7_VARIANT}"
        ),
    )


def thm7_confidence(inp: Thm7Inputs, ctx: Context) -> Verdict:
    """The record's confidence is the theorem's 1 - delta - (n N)^(-1/2)."""
    P = inp.params
    gap = max(
        abs(inp.record(n, N, P).confidence - (1 - P.delta - (n * N) ** -0.5))
        for n, N in T7_AGREE_POINTS
    )
    return at_most(gap, T7_AGREE_RTOL, detail="largest absolute gap")


def thm7_root(inp: Thm7Inputs, ctx: Context) -> Verdict:
    """n(N) is the ceiling of the real root n* of theorem7_bound_mp(n) = 0.1 (findroot on ln n):
    |n - n*| / n* <= 1e-12."""
    rows = []
    with mpmath.workdps(T7_DPS):
        for N in T7_ROOT_NS:
            got = inp.sizes[N]
            start = mpmath.log(got) if got and got > 1 else mpmath.mpf(90)  # a starting point only
            root = mpmath.exp(
                mpmath.findroot(
                    lambda ln_n: theorem7_bound_mp(mpmath.exp(ln_n), N, inp.params) - T7_TARGET,
                    start,
                )
            )
            rows.append((float(abs(mpmath.mpf(got) - root) / root), N, got, float(root)))
    gap, N, got, root = max(rows)
    return at_most(gap, T7_AGREE_RTOL, detail=f"worst N = {N}: n = {got:.4e} vs n* = {root:.4e}")


def thm7_constants(inp: Thm7Inputs, ctx: Context) -> Verdict:
    """The record's R_Theta and A = sqrt(A_y^2 + ((N-1) Lambda_y A_h)^2), and Prop 28's norm =
    R_Theta^2, against the 40-digit ones (rnn-lower-bounds.md section 4), relative 1e-12."""
    gap = 0.0
    with mpmath.workdps(T7_DPS):
        for n, N in T7_CONST_POINTS:
            b, ref = inp.record(n, N, inp.params), theorem7_bound_mp(n, N, inp.params, pieces=True)
            R2 = ref["radius"] ** 2
            gap = max(
                gap,
                *(float(abs(getattr(b, k) - ref[k]) / ref[k]) for k in ("lipschitz", "radius")),
                float(abs(inp.prop28_norm2(N, inp.params, n=n) - R2) / R2),
            )
    return at_most(gap, 1e-12, detail="N = 16, 1024, 2^20")


def slipped_theorem7_bound(n: int, N: int, params: Theorem7Params):
    """Theorem 7's record with the factor 2 of 2 Rad dropped (Rad in place of 2 Rad)."""
    b = theorem7_bound(n, N, params)
    return replace(b, total=b.total - b.rademacher)


def _rad_factor_dropped(inp: Thm7Inputs, ctx: Context) -> Thm7Inputs:
    """The bound with Rad in place of 2 Rad, and n(N) searched on it."""
    return replace(
        inp, record=slipped_theorem7_bound, sizes=_sizes(slipped_theorem7_bound, inp.params)
    )


def _lipschitz_off(inp: Thm7Inputs, ctx: Context) -> Thm7Inputs:
    """The record's sample Lipschitz constant A off by a relative 1e-9."""

    def record(n, N, P):
        b = theorem7_bound(n, N, P)
        return replace(b, lipschitz=b.lipschitz * (1 + 1e-9))

    return replace(inp, record=record)


def _one_hot_record(n: int, N: int, params: Theorem7Params):
    """Theorem 7's record with one-hot codes (d_e = N) in place of d_e = ceil(8 ln(N^2 / delta))."""
    return theorem7_bound(n, N, replace(params, d_e=N))


def _one_hot_codes(inp: Thm7Inputs, ctx: Context) -> Thm7Inputs:
    """The bound with code width d_e = N (the parameter count grows like N^2), n(N) searched on
    it."""
    return replace(inp, record=_one_hot_record, sizes=_sizes(_one_hot_record, inp.params))


def _confidence_without_root(inp: Thm7Inputs, ctx: Context) -> Thm7Inputs:
    """The record's confidence 1 - delta: the (n N)^(-1/2) of Lemma 12's event dropped."""

    def record(n, N, P):
        return replace(theorem7_bound(n, N, P), confidence=1 - P.delta)

    return replace(inp, record=record)


def _prop28_off(inp: Thm7Inputs, ctx: Context) -> Thm7Inputs:
    """Prop 28's norm off by a relative 1e-6."""
    return replace(inp, prop28_norm2=lambda N, P, n=1000: 1.000001 * prop28_norm2(N, P, n=n))


register(
    Claim(
        id="thm-7",
        ref=Ref("Thm 7", "Thm 5"),
        statement=f"RNN sample size for simple-qSTR at risk {T7_TARGET} (explicit constants) grows "
        "polylogarithmically in N; the numeric bound and n(N) agree with an independent "
        "40-digit evaluation of the derivation",
        inputs=thm7_inputs,
        checks=[
            Check("slope of n(N) <= 9 / ln N", thm7_polylog),
            Check("slopes decreasing", thm7_decreasing),
            Check("bound = 40-digit evaluation", thm7_bound_agrees),
            Check("confidence = 1 - delta - (nN)^(-1/2)", thm7_confidence),
            Check("n(N) = the real root", thm7_root),
            Check("R_Theta, A and Prop 28's norm as derived", thm7_constants),
        ],
        faults=[
            Fault(
                "factor 2 of 2 Rad dropped",
                _rad_factor_dropped,
                breaks=("bound = 40-digit evaluation", "n(N) = the real root"),
            ),
            Fault(
                "A off by 1e-9",
                _lipschitz_off,
                breaks=("R_Theta, A and Prop 28's norm as derived",),
            ),
            Fault(
                "one-hot codes (d_e = N)",
                _one_hot_codes,
                breaks=("slope of n(N) <= 9 / ln N", "slopes decreasing"),
            ),
            Fault(
                "confidence without (nN)^(-1/2)",
                _confidence_without_root,
                breaks=("confidence = 1 - delta - (nN)^(-1/2)",),
            ),
            Fault(
                "Prop 28 norm off by 1e-6",
                _prop28_off,
                breaks=("R_Theta, A and Prop 28's norm as derived",),
            ),
        ],
        builds=(theorem7_sample_size,),  # the object is n(N): no module is built
        bounds=(theorem7_bound, theorem7_sample_size, prop28_norm2),
        derivation="docs/derivations/rnn-lower-bounds.md",
    )
)
