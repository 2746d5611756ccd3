"""Theorem 6 (conference Theorem 9): FFNs trained with weight decay never beat the floor
1 - n/(N d) on simple-1STR; the Lemma 11 Transformer does (docs/derivations/theorem6.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Callable, List, Tuple

import mpmath as mp
import torch

from qstr.bounds.attention import lemma11, lemma12_radius
from qstr.bounds.feedforward import (
    BayesRiskEstimate,
    embed_direction,
    floor_for_direction,
    mc_bayes_risk,
    mc_bayes_risk_from_training,
    orthonormal_row_basis,
    risk_floor,
    span_distance,
    zcrit,
)
from qstr.constructions.links import Linear
from qstr.verify.claim import (
    Claim,
    Context,
    Ref,
    Vacuity,
    Verdict,
    at_least,
    at_most,
    by_ratio,
    close,
    edited,
    fields_edited,
    mapped,
    replaced,
    worst,
)
from qstr.verify.claims._thm6 import (
    D_TOKEN,
    PIN_DPS,
    Config,
    THM6_CONFIGS,
    Edge,
    MinNormDraws,
    Trained,
    _edges,
    floor_u_mp,
    gen,
    risk_floor_exact,
    train,
    train_stopped,
    transformer_risks,
)
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding
from qstr.verify.training.ffn import FFNTrace, fit_full_batch, make_vec_ffn

FAMILY_CONFIDENCE = 0.999
L11_EPS = 0.01
READOUT_RTOL = 1e-10  # numerical rank of a first layer for the Bayes readout
MC_HALFWIDTH = 0.05  # an informative Monte Carlo: z stderr at most this
# runs stopped after this many steps: the law (1 - lr lambda)^50 = 0.9^50 = 5.2e-3 of ||W_perp(0)||,
# far above rounding; gradient flow's e^{-lambda tau} = e^{-5} = 6.7e-3 is 30% off it
STOPPED_STEPS = 50
# the floors lie in [0, 1]: float64 against exact rationals / 40 digits, absolute; measured gaps
# ~1e-16 (one division, sums of <= 32 squares); 1e-12 is rounding room, not a slipped constant
PIN_ATOL = 1e-12

claim = register(
    Claim(
        "thm-6",
        Ref("Thm 6", "Thm 9"),
        statement="FFNs (first layer on vec x) trained with weight decay keep W in span(x^(1..n)) "
        "(off-span part x(1 - lr*lambda)^k ~ e^{-lambda tau}) and never beat E_u[R] >= "
        "1 - n/(N d); the min-norm linear FFN's risk matches its closed form in risk_floor and "
        "the Bayes risk given the span averages to 1 - n/(N d); the Lemma 11 Transformer beats "
        "the floor",
        builds=(fit_full_batch, make_vec_ffn, lemma11),
        bounds=(
            risk_floor,
            floor_for_direction,
            mc_bayes_risk,
            mc_bayes_risk_from_training,
            span_distance,
        ),
        derivation="docs/derivations/theorem6.md",
    )
)


@claim.bounds_with
def gd_decay(trace: FFNTrace) -> List[float]:
    """prod_k (1 - eta_k lambda) ||W_perp(0)||_F at the recorded steps: the exact GD law of the
    off-span part (theorem6.md section 1)."""
    return trace.predicted_perp


def slipped_floor(n: int, N: int, d: int) -> float:
    """A slipped Theorem 6 floor max(0, 1 - n/d): the sequence length forgotten."""
    return max(0.0, 1.0 - n / d)


@dataclass(frozen=True)
class Thm6Inputs:
    """(a) trained FFNs, (b) Monte Carlo Bayes risks given V x, (c) Lemma 11 Transformers, (d) the
    min-norm branch of Definition 5; the bound functions the checks compare against."""

    configs: Tuple[Config, ...]
    trained: Tuple[Trained, ...]
    stopped: Tuple[Trained, ...]  # each config's first FFN stopped after STOPPED_STEPS steps
    averaged: Tuple[BayesRiskEstimate, ...]  # (b) u averaged, one per config
    fixed: Tuple[Tuple[BayesRiskEstimate, ...], ...]  # (b) u of the config's first model
    edge: Tuple[Edge, ...]  # (b) n = N d, one per (N, d)
    lemma11s: Tuple[object, ...]  # (c) the Lemma 11 Construction per config
    transformer: Tuple[Tuple[float, float], ...]  # (c) its risk (mean, se) per config
    min_norm: Tuple[MinNormDraws, ...]
    z: float  # per-test critical value (Bonferroni over the family)
    test_samples: int  # of each FFN test risk
    mc_samples: int
    risk_floor: Callable[[int, int, int], float] = risk_floor  # Theorem 6's floor 1 - n/(N d)
    span_distance: Callable[[torch.Tensor, torch.Tensor], float] = span_distance  # ||W Pi|| / ||W||
    floor_u: Callable[[torch.Tensor, torch.Tensor, int], float] = floor_for_direction  # (V, u, N)
    # the off-span norm at each record: GD's exact law prod_k (1 - eta_k lambda) ||W_perp(0)||_F
    decay_law: Callable[[FFNTrace], List[float]] = gd_decay

    @property
    def first(self) -> List[Trained]:
        """Each config's first trained model (its u, X, V)."""
        return [next(t for t in self.trained if t.cfg == cfg) for cfg in self.configs]


@claim.builds_with
def transformer_for(cfg: Config, u: torch.Tensor):
    """The Lemma 11 construction for g(x) = <u, x> at eps = 0.01 (theorem6.md section 3)."""
    net = Linear(q=1, d=cfg.d, u=u[None]).two_layer_net()
    r_x = lemma12_radius(cfg.d, max(cfg.n, 2), cfg.N)
    return lemma11(cfg.N, cfg.d, 1, net, eps=L11_EPS, r_x=r_x, device=u.device)


@claim.builds_with
def min_norm_draws(N: int, n: int, K: int, generator: torch.Generator, d: int = D_TOKEN):
    """(R_k, counts n_t (K, N), floor_u(V_k), kappa_max) for K training sets of the min-norm
    linear FFN y_hat = <w_t, vec x>, w_t = pinv(X_t) y_t (docs/derivations/theorem6.md 5)."""
    D = N * d
    dev, f64 = generator.device, torch.float64
    X = torch.randn(K, n, D, generator=generator, dtype=f64, device=dev)
    t = torch.randint(N, (K, n), generator=generator, device=dev)
    u = torch.randn(K, d, generator=generator, dtype=f64, device=dev)
    u = u / u.norm(dim=1, keepdim=True)
    rows = torch.arange(K, device=dev)[:, None], torch.arange(n, device=dev)[None]
    y = (X.reshape(K, n, N, d)[rows[0], rows[1], t] * u[:, None]).sum(-1)
    # prompt i in group t; other groups' rows zeroed (the same min-norm solution)
    mask = (t[:, None, :] == torch.arange(N, device=dev)[None, :, None]).to(f64)  # (K, N, n)
    Xm, ym = X[:, None] * mask[..., None], y[:, None] * mask
    Us, S, Vh = torch.linalg.svd(Xm, full_matrices=False)
    smax = S.max(dim=-1, keepdim=True).values
    keep = S > max(n, D) * torch.finfo(f64).eps * smax
    inv = torch.where(keep, 1.0 / torch.where(keep, S, torch.ones_like(S)), torch.zeros_like(S))
    w = ((Us.transpose(-1, -2) @ ym[..., None]).squeeze(-1) * inv)[..., None, :] @ Vh
    A = torch.zeros(K, N, N, d, dtype=f64, device=dev)
    A[:, torch.arange(N), torch.arange(N)] = u[:, None]  # A[k, t] = P_t u_k
    R = ((A.reshape(K, N, D) - w[:, :, 0]) ** 2).sum(-1).mean(1)  # exact risks
    counts = mask.sum(-1).round().long()
    Q = torch.linalg.qr(X.transpose(1, 2)).Q  # (K, D, n): orthonormal basis of the span
    proj = torch.einsum("kbdr,kd->kbr", Q.reshape(K, N, d, n), u)
    oracle = 1.0 - (proj * proj).sum((1, 2)) / N  # floor_u(V_k)
    kappa = float(torch.where(keep, smax / torch.where(keep, S, smax), torch.zeros_like(S)).max())
    return R, counts, oracle, kappa


def _min_norm(cfg: Config, i: int, K: int, ctx: Context, chunk: int = 4096) -> MinNormDraws:
    """Part (d) at the config's (N, d, n): K training sets, drawn ``chunk`` at a time."""
    g, N, n, d = gen(ctx, "min-norm", i), cfg.N, cfg.n, cfg.d
    parts = [min_norm_draws(N, n, min(chunk, K - k0), g, d) for k0 in range(0, K, chunk)]
    R, counts, oracle = (torch.cat([p[j] for p in parts]) for j in range(3))
    return MinNormDraws(N, n, R, counts, oracle, max(p[3] for p in parts), d)


@claim.scope_with
def thm6_scope(inp: Thm6Inputs) -> str:
    """Every (N, d, n, widths) trained and estimated and the Monte Carlo sizes."""
    cfgs = ", ".join(f"(N={c.N}, d={c.d}, n={c.n}, widths {c.widths})" for c in inp.configs)
    return f"{cfgs}; {inp.mc_samples} Monte Carlo draws, {inp.test_samples} test"


@claim.vacuity_with
def thm6_vacuity(inp: Thm6Inputs) -> Vacuity:
    """Theorem 6's floor 1 - n/(N d) is a risk above 0 for every n < N d: not vacuous at the
    sizes checked (the floor's range over them)."""
    floors = [inp.risk_floor(c.n, c.N, c.d) for c in inp.configs]
    sizes = ", ".join(f"(N={c.N}, d={c.d}, n={c.n})" for c in inp.configs)
    line = f"floor 1 - n/(N d) = {min(floors):.3g}..{max(floors):.3g} > 0 at {sizes}"
    return Vacuity(max(floors) <= 0, line)


@claim.inputs
def thm6_inputs(ctx: Context) -> Thm6Inputs:
    """Trained FFNs, Monte Carlo Bayes risks, Lemma 11 risks, min-norm draws (theorem6.md 3, 5)."""
    configs = ctx.pick(**THM6_CONFIGS)
    steps, test = ctx.pick(quick=1500, full=6000), ctx.pick(quick=4000, full=40000)
    trained = tuple(tr for i, cfg in enumerate(configs) for tr in train(cfg, i, ctx, steps, test))
    stopped = tuple(train_stopped(cfg, i, ctx, STOPPED_STEPS) for i, cfg in enumerate(configs))
    first = [next(t for t in trained if t.cfg == cfg) for cfg in configs]
    # Bonferroni: FFN risks, 3 MC per config in (b), the Transformer, 3 per config in (d)
    z = zcrit(1 - (1 - FAMILY_CONFIDENCE) / (len(trained) + 7 * len(configs)))
    S = ctx.pick(quick=20000, full=200000)
    averaged = tuple(
        mc_bayes_risk_from_training(c.n, c.N, c.d, samples=S, generator=gen(ctx, "mc", i))
        for i, c in enumerate(configs)
    )

    def fixed_u(i: int, tr: Trained, x: bool) -> BayesRiskEstimate:  # tr's own u, x sampled?
        g, c = gen(ctx, "fixed-u", i, x), tr.cfg
        return mc_bayes_risk(tr.V, c.N, c.d, samples=S, u=tr.u, sample_x=x, generator=g)

    fixed = tuple(tuple(fixed_u(i, tr, x) for x in (True, False)) for i, tr in enumerate(first))
    lemma11s = tuple(transformer_for(tr.cfg, tr.u) for tr in first)
    transformer = transformer_risks(lemma11s, first, ctx)
    K, sizes = ctx.pick(quick=3000, full=10000), [(c.N, c.d, c.n) for c in configs]
    # (d) depends on (N, d, n) only: drawn once, at its first config. A set's risk and floor_u(V)
    # spread like 1/(N d): above the largest N d of the d = 3 configs (which draw all K) the sets
    # are cut by that N d / (N d), and the z se stay below the d = 3 ones (theorem6.md, 5)
    ref = max(c.N * c.d for c in configs if c.d == D_TOKEN)
    mn = [
        _min_norm(c, i, K * ref // max(ref, c.N * c.d), ctx)
        for i, c in enumerate(configs)
        if sizes.index(sizes[i]) == i
    ]
    edges = _edges(configs, ctx)
    return Thm6Inputs(
        configs,
        trained,
        stopped,
        averaged,
        fixed,
        edges,
        lemma11s,
        transformer,
        tuple(mn),
        z,
        test,
        S,
    )


def _mc_rounding(inp: Thm6Inputs) -> Rounding:
    n = inp.mc_samples + max(c.N * c.d for c in inp.configs)
    return Rounding(n=n, scale=1.0, what="(samples + N d) eps (risks <= 1)")


def _worst_model(inp: Thm6Inputs, verdict: Callable[[Trained], Verdict], key=None) -> Verdict:
    """The worst over the trained FFNs of ``verdict(model)`` (``worst``'s ``key``)."""
    cases = (
        (f"{tr.cfg.label} m={tr.width} {tr.cfg.activation}", verdict(tr)) for tr in inp.trained
    )
    return worst(cases, key=key)


# ---------------------------------------------------------------- (c) the floor
@claim.check("FFNs never beat floor_u", evidence="monte-carlo")
def ffns_above_floor(inp: Thm6Inputs) -> Verdict:
    """Theorem 6: no trained FFN (test risk + z se), nor the best readout of its first layer W
    (the Bayes risk given W x), beats floor_u(V); the worst relative margin is reported."""
    m = max(max(c.widths) for c in inp.configs)  # a test risk: a mean of squares, width-m nets
    rnd = Rounding(n=inp.test_samples + m, scale=1.0, what="(test samples + m) eps (risk <= 1)")

    def margin(tr: Trained) -> Verdict:
        floor_u = inp.floor_u(tr.V, tr.u, tr.cfg.N)
        readout = inp.floor_u(orthonormal_row_basis(tr.W, rtol=READOUT_RTOL), tr.u, tr.cfg.N)
        detail = (
            f"min(readout {readout:.3f}, risk {tr.risk:.3f}+-{tr.risk_se:.3f} + z se) "
            f"vs floor_u {floor_u:.3f}; m/b < 1 is the trained net's distance from the Bayes "
            "readout, not slack in the floor (a W spanning S reads floor_u exactly: theorem6.md 3)"
        )
        return at_least(min(readout, tr.risk + inp.z * tr.risk_se), floor_u, rnd, detail=detail)

    # ranked by the relative margin (best - floor_u) / floor_u
    return _worst_model(inp, margin, key=lambda v: (v.bound - v.measured) / v.bound)


@claim.check("Lemma 11 Transformer beats floor_u", evidence="monte-carlo")
def transformer_below_floor(inp: Thm6Inputs) -> Verdict:
    """The Lemma 11 Transformer beats the floor: risk + z se < floor_u, largest ratio reported."""
    cases = []
    for (risk, se), tr in zip(inp.transformer, inp.first, strict=True):
        floor_u = inp.floor_u(tr.V, tr.u, tr.cfg.N)
        detail = (
            f"Lemma 11, eps = 0.01: {risk:.2e}+-{inp.z * se:.1e} vs floor_u {floor_u:.3f}; a "
            "separation (the smaller m/b, the wider), not a bound on the Transformer"
        )
        verdict = at_most(risk + inp.z * se, floor_u, _mc_rounding(inp), detail=detail)
        cases.append((tr.cfg.label, verdict))
    return worst(cases, key=by_ratio)  # ranked by (risk + z se) / floor_u


# ---------------------------------------------------------------- (a) the span property
@claim.check("off-span part decays as prod(1 - lr lambda)", evidence="built")
def decay_follows_law(inp: Thm6Inputs) -> Verdict:
    """During training the off-span part is prod_k (1 - eta_k lambda) ||W_perp(0)||: the largest
    deviation, relative to ||W(0)||_F (theorem6.md section 1); the trace's last record is held to
    ||W (I - V^T V)||_F of the trained first layer W, read here."""
    steps = max(tr.trace.final_step for tr in inp.trained)
    width = max(tr.width for tr in inp.trained) + max(c.N * c.d for c in inp.configs)
    rnd = Rounding(n=steps * width, scale=1.0, what="steps (m + N d) eps (relative to ||W(0)||)")

    def deviation(tr: Trained) -> Verdict:  # max_k |perp(k) - law(k)| / ||W(0)||_F
        pairs = zip(tr.trace.perp_norm, inp.decay_law(tr.trace), strict=False)
        W, V = tr.W.double(), tr.V.double().to(tr.W.device)
        built = float(torch.linalg.matrix_norm(W - (W @ V.T) @ V))  # the weights' off-span part
        gap = max(max(abs(a - b) for a, b in pairs), abs(tr.trace.perp_norm[-1] - built))
        detail = f"last record {tr.trace.perp_norm[-1]:.2e} vs the weights' {built:.2e}"
        return at_most(gap / tr.trace.initial_norm, 0.0, rnd, detail=detail)

    return _worst_model(inp, deviation)


@claim.check("span distance at the end", evidence="built")
def span_distance_at_end(inp: Thm6Inputs) -> Verdict:
    """The final W's span distance, read off the weights, equals GD's law
    prod_k (1 - eta_k lambda) ||W_perp(0)||_F / ||W||_F, two-sided, to the rounding term
    steps N d eps ||W(0)||/||W||: for the runs stopped after 50 steps (law ~5e-3 of the start:
    the rate is seen) and the converged runs (law below 1e-20: W in the span to rounding)."""
    gaps = []

    def at_end(tr: Trained) -> Tuple[str, Verdict]:
        final = inp.span_distance(tr.W, tr.X)
        wn = float(torch.linalg.matrix_norm(tr.W.double()))
        predicted, unit = inp.decay_law(tr.trace)[-1] / wn, tr.trace.initial_norm / wn
        if any(tr is t for t in inp.stopped):
            gaps.append(abs(final / predicted - 1))
        n = tr.trace.final_step * tr.cfg.N * tr.cfg.d
        rnd = Rounding(n=n, scale=unit, what="steps N d eps ||W(0)||/||W||")
        detail = (
            f"{tr.trace.span_distance[0]:.2f} -> {final:.3e} "
            f"(law {predicted:.3e}, step {tr.trace.final_step}, tau={tr.trace.times[-1]:g}, "
            f"{tr.trace.stopped})"
        )
        label = f"{tr.cfg.label} m={tr.width} {tr.cfg.activation} at step {tr.trace.final_step}"
        return label, close(final, predicted, 0.0, rnd, detail=detail)

    verdict = worst(map(at_end, (*inp.trained, *inp.stopped)))
    stopped = f"runs stopped at step {STOPPED_STEPS}: largest |final / law - 1| = {max(gaps):.1e}"
    return replace(verdict, detail=f"{verdict.detail}; {stopped}")


# ---------------------------------------------------------------- (b) Bayes risk given V x
def _estimate(inp: Thm6Inputs, label: str, e: BayesRiskEstimate, target: float):
    """(label, the Monte Carlo estimate = target within z se) for ``worst``."""
    tol, rnd = inp.z * e.stderr, _mc_rounding(inp)
    detail = f"{e.estimate:.4f}+-{tol:.4f} vs {target:.4f}"
    return label, close(e.estimate, target, tol, rnd, detail=detail)


@claim.check("Bayes risk given Vx = 1 - n/(Nd)", evidence="monte-carlo")
def bayes_risk_is_floor(inp: Thm6Inputs) -> Verdict:
    """E_u Bayes risk given V x (MC) = risk_floor(n, N, d) = 1 - n/(N d), within z se."""
    return worst(
        _estimate(inp, f"u averaged, {c.label}", e, inp.risk_floor(c.n, c.N, c.d))
        for c, e in zip(inp.configs, inp.averaged, strict=True)
    )


@claim.check("fixed-u Bayes risk = floor_u(V)", evidence="monte-carlo")
def fixed_u_bayes_risk(inp: Thm6Inputs) -> Verdict:
    """For the trained models' own u: the MC Bayes risk given V x (x sampled and x integrated)
    = floor_u(V) (theorem6.md section 2, "Fixed u")."""
    cases = []
    for tr, ests in zip(inp.first, inp.fixed, strict=True):
        floor_u = inp.floor_u(tr.V, tr.u, tr.cfg.N)
        for how, e in zip(("x sampled", "x integrated"), ests, strict=True):
            cases.append(_estimate(inp, f"fixed u, {tr.cfg.label} {how}", e, floor_u))
    return worst(cases)


@claim.check("Monte Carlo half-widths <= 0.05", evidence="monte-carlo")
def mc_informative(inp: Thm6Inputs) -> Verdict:
    """Every Monte Carlo half-width z se of (b) is at most 0.05 (the test has power)."""
    ests = list(inp.averaged) + [e for f in inp.fixed for e in f]
    hws = [inp.z * e.stderr for e in ests]
    what = "0.05 is the claim's power requirement, not a bound of the paper"
    return at_most(
        max(hws), MC_HALFWIDTH, detail=f"{len(hws)} estimates of {inp.mc_samples}; {what}"
    )


@claim.check("no risk left at n = N d", evidence="monte-carlo")
def no_risk_at_nd(inp: Thm6Inputs) -> Verdict:
    """At n = N d the inputs span R^{N d}: the MC Bayes risk is risk_floor(N d, N, d) = 0, at
    every (N, d) checked; the largest estimate is reported."""

    def at(e: Edge) -> Tuple[str, Verdict]:
        target = inp.risk_floor(e.N * e.d, e.N, e.d)
        detail = f"from {e.inputs} inputs"
        verdict = close(e.estimate.estimate, target, 0.0, _mc_rounding(inp), detail=detail)
        return f"N={e.N} d={e.d} n={e.N * e.d}", verdict

    return worst(map(at, inp.edge))


# ---------------------------------------------------------------- (d) the min-norm branch
def _mn_rounding(mn: MinNormDraws) -> Rounding:
    n, kappa = mn.n + mn.N * mn.d, max(1.0, mn.kappa)
    return Rounding(n=n, scale=kappa, what="(n + N d) eps kappa_max (pinv and QR)")


def _se(v: torch.Tensor) -> float:
    return float(v.std() / math.sqrt(v.numel()))


def _worst_draws(inp: Thm6Inputs, verdict: Callable[[MinNormDraws], Verdict], key=None):
    """The worst over the (N, d, n) of part (d) of ``verdict(draws)`` (``worst``'s ``key``)."""
    return worst(((mn.label, verdict(mn)) for mn in inp.min_norm), key=key)


def _mn_close(inp: Thm6Inputs, mn: MinNormDraws, est: float, target: float, se: float):
    """est = target within z se and the rounding term (two-sided)."""
    detail = f"{est:.4f} vs {target:.4f} (z se {inp.z * se:.4f})"
    return close(est, target, inp.z * se, _mn_rounding(mn), detail=detail)


@claim.check("min-norm risk = closed form", evidence="monte-carlo")
def min_norm_closed_form(inp: Thm6Inputs) -> Verdict:
    """The min-norm FFN's mean exact risk = mean (1/N) sum_t risk_floor(n_t, N, d) (paired)."""

    def paired(mn: MinNormDraws) -> Verdict:  # the closed form of E[R | counts], per set
        floors = [inp.risk_floor(j, mn.N, mn.d) for j in range(mn.n + 1)]
        closed = torch.tensor(floors, dtype=torch.float64, device=mn.R.device)[mn.counts].mean(1)
        return _mn_close(inp, mn, float(mn.R.mean()), float(closed.mean()), _se(mn.R - closed))

    return _worst_draws(inp, paired).labelled("mean R vs mean closed form")


@claim.check("mean floor_u(V) = 1 - n/(Nd)", evidence="monte-carlo")
def min_norm_oracle_mean(inp: Thm6Inputs) -> Verdict:
    """The mean over training sets and u of floor_u(V) = risk_floor(n, N, d)."""

    def mean(mn: MinNormDraws) -> Verdict:
        floor = inp.risk_floor(mn.n, mn.N, mn.d)
        return _mn_close(inp, mn, float(mn.oracle.mean()), floor, _se(mn.oracle))

    return _worst_draws(inp, mean).labelled("mean floor_u(V)")


@claim.check("min-norm risk >= own floor_u(V)", evidence="monte-carlo")
def min_norm_above_own_floor(inp: Thm6Inputs) -> Verdict:
    """Every min-norm FFN's risk is at least floor_u(V) of its own training set (random training
    sets; the min-norm weights are solved for and discarded in the inputs: no built module)."""

    def least(mn: MinNormDraws) -> Verdict:
        return at_least(float((mn.R - mn.oracle).min()), 0.0, _mn_rounding(mn))

    worst_set = _worst_draws(inp, least, key=lambda v: -v.measured)  # the least R_k - floor_u
    return worst_set.labelled("min_k (R_k - floor_u(V_k))")


@claim.check("min-norm mean risk >= floor", evidence="monte-carlo")
def min_norm_above_floor(inp: Thm6Inputs) -> Verdict:
    """The min-norm FFN's mean risk + z se is at least risk_floor(n, N, d)."""

    def mean(mn: MinNormDraws) -> Verdict:
        upper, floor = float(mn.R.mean()) + inp.z * _se(mn.R), inp.risk_floor(mn.n, mn.N, mn.d)
        derived = floor / (1 - mn.n / (mn.N**2 * mn.d))  # E R = 1 - n/(N^2 d): theorem6.md 5
        what = f"m/b ~ (1 - n/(N d)) / (1 - n/(N^2 d)) = {derived:.3f} as derived, not slack"
        return at_least(upper, floor, _mn_rounding(mn), detail=what)

    worst_set = _worst_draws(inp, mean, key=lambda v: v.bound - v.measured)  # the least margin
    return worst_set.labelled("mean R + z se")


# ---------------------------------------------------------------- the formulas, pinned
def _floor_points(inp: Thm6Inputs):
    """(n, N, d) of the pin: every config's, its n = 0, N d, N d + 1 edges, and every count
    n_t = 0..n the min-norm closed form reads."""
    pts = {(j, c.N, c.d) for c in inp.configs for j in range(c.n + 1)}
    return sorted(pts | {(j, c.N, c.d) for c in inp.configs for j in (c.N * c.d, c.N * c.d + 1)})


@claim.check("floor and floor_u = exact / 40-digit evaluation", evidence="formula", agreement=True)
def floors_pinned(inp: Thm6Inputs) -> Verdict:
    """risk_floor against max(0, 1 - n/(N d)) in exact rationals at every (n, N, d) the checks
    read; floor_for_direction against (1/N) sum_t ||(I - V^T V) P_t u||^2 at 40 digits for every
    config's first model and V = I (floor 0); the Monte Carlo records' floor 1 - rank/(N d)
    (theorem6.md section 2); the largest absolute gap."""
    gaps = [
        (abs(inp.risk_floor(*p) - float(risk_floor_exact(*p))), f"risk_floor{p}")
        for p in _floor_points(inp)
    ]
    gaps += [
        (abs(e.floor - float(risk_floor_exact(c.n, c.N, c.d))), f"MC record floor, {c.label}")
        for c, e in zip(inp.configs, inp.averaged, strict=True)
    ]
    with mp.workdps(PIN_DPS):
        for tr in inp.first:
            D = tr.cfg.N * tr.cfg.d
            for V, what in ((tr.V, "V"), (torch.eye(D, dtype=torch.float64), "I")):
                want = floor_u_mp(V, tr.u, tr.cfg.N)
                got = inp.floor_u(V.to(tr.V.device), tr.u, tr.cfg.N)
                gaps.append((float(abs(got - want)), f"floor_u({what}), {tr.cfg.label}"))
    gap, where = max(gaps)
    return at_most(gap, PIN_ATOL, detail=f"{len(gaps)} values, largest gap at {where}")


# ---------------------------------------------------------------- faults
def with_target_rows(tr: Trained) -> Trained:
    """The first layer given rows outside the span: the target directions P_t u = e_t kron u."""
    t = torch.arange(tr.cfg.N, device=tr.u.device)
    rows = embed_direction(tr.u[None].double().expand(tr.cfg.N, -1), t, tr.cfg.N)
    return replace(tr, W=torch.cat([tr.W.double(), rows.to(tr.W.device)], dim=0))


stderr_as_std = fields_edited(stderr=lambda e: e.stderr * math.sqrt(e.samples))  # no 1/sqrt(n)
claim.fault(
    "first layer given the rows e_t kron u outside the span",
    breaks=(ffns_above_floor, span_distance_at_end, decay_follows_law),
    apply=mapped("trained", with_target_rows),
)
claim.fault(
    "floor 1 - n/d (sequence length forgotten)",
    breaks=(bayes_risk_is_floor, min_norm_closed_form, min_norm_oracle_mean, floors_pinned),
    apply=replaced(risk_floor=slipped_floor),
)
claim.fault(
    "span distance against n - 1 of the inputs",
    breaks=span_distance_at_end,
    apply=replaced(span_distance=lambda W, X: span_distance(W, X[:-1])),
)
# floor_u(V) = 1 - sum_t ||V_{:, block t} u||^2
claim.fault(
    "floor_u without the 1/N of its average over t",
    breaks=(transformer_below_floor, fixed_u_bayes_risk, floors_pinned),
    apply=replaced(floor_u=lambda V, u, N: 1.0 - N * (1.0 - floor_for_direction(V, u, N))),
)
claim.fault(
    "floor 1 - n/(N d + 1)",
    breaks=floors_pinned,
    apply=replaced(risk_floor=lambda n, N, d: max(0.0, 1.0 - n / (N * d + 1))),
)


@claim.fault(
    "Lemma 11 Transformer with uniform attention (alpha = 0)", breaks=transformer_below_floor
)
def _transformer_attention_off(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    """The Lemma 11 constructions at scale alpha = 0 (uniform attention: with_alpha not applied)."""
    flat = tuple(b.with_alpha(0.0) for b in inp.lemma11s)
    return replace(inp, lemma11s=flat, transformer=transformer_risks(flat, inp.first, ctx))


claim.fault(
    "gradient-flow law e^{-lambda tau} for GD's product",
    breaks=(decay_follows_law, span_distance_at_end),
    apply=replaced(decay_law=attrgetter("exp_perp")),  # e^{-lambda tau} ||W_perp(0)||_F
)
claim.fault(
    "Monte Carlo standard errors without 1/sqrt(samples)",
    breaks=mc_informative,
    apply=edited(
        averaged=lambda es: tuple(map(stderr_as_std, es)),
        fixed=lambda per_config: tuple(tuple(map(stderr_as_std, es)) for es in per_config),
    ),
)


@claim.fault("n = N d estimate from N d - 1 inputs", breaks=no_risk_at_nd)
def _edge_one_short(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    """Each n = N d estimate drawn from N d - 1 training inputs (an off-by-one)."""
    return replace(inp, edge=_edges(inp.configs, ctx, short=1))


claim.fault(
    "min-norm risks averaged over the N d coordinates",
    breaks=(min_norm_above_own_floor, min_norm_above_floor, min_norm_closed_form),
    apply=mapped("min_norm", fields_edited(R=lambda mn: mn.R / (mn.N * mn.d))),
)
