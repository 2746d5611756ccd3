"""Theorem 6 (conference Theorem 9): FFNs trained with weight decay never beat the floor
1 - n/(N d) on simple-1STR; the Lemma 11 Transformer does (docs/derivations/theorem6.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Callable, List, Tuple

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
from qstr.constructions.links import Linear, make_link
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
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding
from qstr.verify.training.ffn import (
    FFNTrace,
    ffn_test_risk,
    fit_full_batch,
    make_vec_ffn,
    simple_1str_data,
)

D_TOKEN = 3  # token dimension d
LR, LAMBDA = 0.5, 0.2  # GD step size and weight decay (lr * lambda = 0.1 per step)
TOL = 1e-6  # stationarity: ||grad J||_F <= TOL * lambda ||theta||_F
FAMILY_CONFIDENCE = 0.999
L11_EPS = 0.01
READOUT_RTOL = 1e-10  # numerical rank of a first layer for the Bayes readout
MC_HALFWIDTH = 0.05  # an informative Monte Carlo: z stderr at most this

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
class Config:
    N: int
    n: int
    widths: Tuple[int, ...]
    activation: str = "tanh"
    lr: float = LR
    backtrack: bool = True  # ReLU: plain GD (halving on every kink oscillation would stall it)


@dataclass(frozen=True)
class Trained:
    """One FFN trained on its config's data: first layer W, trace, test risk (mean, se)."""

    cfg: Config
    width: int
    u: torch.Tensor
    X: torch.Tensor  # the n training inputs vec x^(i)
    V: torch.Tensor  # orthonormal basis of their span
    W: torch.Tensor
    trace: FFNTrace
    risk: float
    risk_se: float


@dataclass(frozen=True)
class MinNormDraws:
    """Part (d) for one (N, n): K training sets, their exact risks R_k, index counts n_t,
    floor_u(V_k) and the largest condition number of a group's inputs."""

    N: int
    n: int
    R: torch.Tensor
    counts: torch.Tensor
    oracle: torch.Tensor
    kappa: float


@dataclass(frozen=True)
class Thm6Inputs:
    """(a) trained FFNs, (b) Monte Carlo Bayes risks given V x, (c) Lemma 11 Transformers, (d) the
    min-norm branch of Definition 5; the bound functions the checks compare against."""

    configs: Tuple[Config, ...]
    trained: Tuple[Trained, ...]
    averaged: Tuple[BayesRiskEstimate, ...]  # (b) u averaged, one per config
    fixed: Tuple[Tuple[BayesRiskEstimate, ...], ...]  # (b) u of the config's first model
    edge: BayesRiskEstimate  # (b) n = N d
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


def _gen(ctx: Context, name: str, *index: int) -> torch.Generator:
    """The run's generator ``thm-6/<name>`` on its device."""
    return ctx.generator(f"thm-6/{name}", *index, device=ctx.device)


def _train(cfg: Config, i: int, ctx: Context, steps: int, test: int) -> Tuple[Trained, ...]:
    """The config's FFNs trained by full-batch GD with weight decay (theorem6.md section 1)."""
    u = make_link("linear", 1, D_TOKEN, generator=_gen(ctx, "link", i)).u[0]
    data = simple_1str_data(cfg.n, cfg.N, D_TOKEN, u, generator=_gen(ctx, "data", i))
    V, out = orthonormal_row_basis(data.X), []
    gd = dict(weight_decay=LAMBDA, lr=cfg.lr, max_steps=steps, tol=TOL, backtrack=cfg.backtrack)
    for j, m in enumerate(cfg.widths):
        init = ctx.generator("thm-6/init", i, j)  # on the CPU
        model = make_vec_ffn(
            cfg.N, D_TOKEN, (m,), activation=cfg.activation, generator=init, device=ctx.device
        )
        trace = fit_full_batch(model, data, record_every=max(1, steps // 10), **gd)
        risk, se = ffn_test_risk(model, u, samples=test, generator=_gen(ctx, "test", i, j))
        W = model.first_layer_x_weight().detach().clone()
        out.append(Trained(cfg, m, u, data.X, V, W, trace, risk, se))
    return tuple(out)


@claim.builds_with
def transformer_for(cfg: Config, u: torch.Tensor):
    """The Lemma 11 construction for g(x) = <u, x> at eps = 0.01 (theorem6.md section 3)."""
    net = Linear(q=1, d=D_TOKEN, u=u[None]).two_layer_net()
    r_x = lemma12_radius(D_TOKEN, max(cfg.n, 2), cfg.N)
    return lemma11(cfg.N, D_TOKEN, 1, net, eps=L11_EPS, r_x=r_x, device=u.device)


def _transformer_risks(lemma11s, first, ctx: Context) -> Tuple[Tuple[float, float], ...]:
    """Each Lemma 11 construction's test risk (mean, se) on simple-1STR with its config's u."""
    samples, out = ctx.pick(quick=2000, full=20000), []
    for built, tr in zip(lemma11s, first, strict=True):
        g = _gen(ctx, "transformer", tr.cfg.N)
        data = simple_1str_data(samples, tr.cfg.N, D_TOKEN, tr.u, generator=g)
        t = data.t[:, :, None].expand(samples, tr.cfg.N, 1).contiguous()
        with torch.no_grad():
            err = ((built.predict(data.x, t) - data.y) ** 2).mean(dim=1)
        out.append((float(err.mean()), float(err.std() / math.sqrt(samples))))
    return tuple(out)


@claim.builds_with
def min_norm_draws(N: int, n: int, K: int, generator: torch.Generator):
    """(R_k, counts n_t (K, N), floor_u(V_k), kappa_max) for K training sets of the min-norm
    linear FFN y_hat = <w_t, vec x>, w_t = pinv(X_t) y_t (docs/derivations/theorem6.md 5)."""
    d, D = D_TOKEN, N * D_TOKEN
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
    g = _gen(ctx, "min-norm", i)
    parts = [min_norm_draws(cfg.N, cfg.n, min(chunk, K - k0), g) for k0 in range(0, K, chunk)]
    R, counts, oracle = (torch.cat([p[j] for p in parts]) for j in range(3))
    return MinNormDraws(cfg.N, cfg.n, R, counts, oracle, max(p[3] for p in parts))


def _edge(n: int, N: int, ctx: Context) -> BayesRiskEstimate:
    """The MC Bayes risk given the span of n training inputs (1000 samples)."""
    return mc_bayes_risk_from_training(n, N, D_TOKEN, samples=1000, generator=_gen(ctx, "edge"))


@claim.scope_with
def thm6_scope(inp: Thm6Inputs) -> str:
    """The (N, n, widths) trained and estimated, d and the Monte Carlo sizes."""
    cfgs = ", ".join(f"(N={c.N}, n={c.n}, widths {c.widths})" for c in inp.configs)
    return f"d = {D_TOKEN}: {cfgs}; {inp.mc_samples} Monte Carlo draws, {inp.test_samples} test"


@claim.vacuity_with
def thm6_vacuity(inp: Thm6Inputs) -> Vacuity:
    """Theorem 6's floor 1 - n/(N d) is a risk above 0 for every n < N d: not vacuous at the
    sizes checked (the floor's range over them)."""
    floors = [inp.risk_floor(c.n, c.N, D_TOKEN) for c in inp.configs]
    sizes = ", ".join(f"(N={c.N}, n={c.n})" for c in inp.configs)
    line = f"floor 1 - n/(N d) = {min(floors):.3g}..{max(floors):.3g} > 0 at {sizes}, d = {D_TOKEN}"
    return Vacuity(max(floors) <= 0, line)


@claim.inputs
def thm6_inputs(ctx: Context) -> Thm6Inputs:
    """Trained FFNs, Monte Carlo Bayes risks, Lemma 11 risks, min-norm draws (theorem6.md 3, 5)."""
    configs = ctx.pick(
        quick=(Config(2, 4, (8, 32)), Config(4, 8, (8, 32))),
        full=(
            Config(2, 4, (8, 32, 128)),
            Config(4, 8, (8, 32, 128)),
            Config(4, 10, (8, 32, 128)),
            Config(8, 16, (16, 64, 256)),
            Config(4, 8, (32,), activation="relu", lr=0.2, backtrack=False),
        ),
    )
    steps, test = ctx.pick(quick=1500, full=6000), ctx.pick(quick=4000, full=40000)
    trained = tuple(tr for i, cfg in enumerate(configs) for tr in _train(cfg, i, ctx, steps, test))
    first = [next(t for t in trained if t.cfg == cfg) for cfg in configs]
    # Bonferroni: FFN risks, 3 MC per config in (b), the Transformer, 3 per config in (d)
    z = zcrit(1 - (1 - FAMILY_CONFIDENCE) / (len(trained) + 7 * len(configs)))
    S = ctx.pick(quick=20000, full=200000)
    averaged = tuple(
        mc_bayes_risk_from_training(c.n, c.N, D_TOKEN, samples=S, generator=_gen(ctx, "mc", i))
        for i, c in enumerate(configs)
    )

    def fixed_u(i: int, tr: Trained, x: bool) -> BayesRiskEstimate:  # tr's own u, x sampled?
        g = _gen(ctx, "fixed-u", i, x)
        return mc_bayes_risk(tr.V, tr.cfg.N, D_TOKEN, samples=S, u=tr.u, sample_x=x, generator=g)

    fixed = tuple(tuple(fixed_u(i, tr, x) for x in (True, False)) for i, tr in enumerate(first))
    N0 = configs[0].N  # n = N d training inputs span R^{N d}: no risk left
    edge = _edge(N0 * D_TOKEN, N0, ctx)
    lemma11s = tuple(transformer_for(tr.cfg, tr.u) for tr in first)
    transformer = _transformer_risks(lemma11s, first, ctx)
    K, sizes = ctx.pick(quick=3000, full=10000), [(c.N, c.n) for c in configs]
    # (d) depends on (N, n) only: drawn once, at its first config
    mn = [_min_norm(c, i, K, ctx) for i, c in enumerate(configs) if sizes.index((c.N, c.n)) == i]
    return Thm6Inputs(
        configs, trained, averaged, fixed, edge, lemma11s, transformer, tuple(mn), z, test, S
    )


def _mc_rounding(inp: Thm6Inputs) -> Rounding:
    n = inp.mc_samples + inp.configs[-1].N * D_TOKEN
    return Rounding(n=n, scale=1.0, what="(samples + N d) eps (risks <= 1)")


def _worst_model(inp: Thm6Inputs, verdict: Callable[[Trained], Verdict], key=None) -> Verdict:
    """The worst over the trained FFNs of ``verdict(model)`` (``worst``'s ``key``)."""
    label = "N={0.cfg.N} n={0.cfg.n} m={0.width} {0.cfg.activation}"
    return worst(((label.format(tr), verdict(tr)) for tr in inp.trained), key=key)


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
            f"vs floor_u {floor_u:.3f}"
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
        detail = f"Lemma 11, eps = 0.01: {risk:.2e}+-{inp.z * se:.1e} vs floor_u {floor_u:.3f}"
        verdict = at_most(risk + inp.z * se, floor_u, _mc_rounding(inp), detail=detail)
        cases.append((f"N={tr.cfg.N}", verdict))
    return worst(cases, key=by_ratio)  # ranked by (risk + z se) / floor_u


# ---------------------------------------------------------------- (a) the span property
@claim.check("off-span part decays as prod(1 - lr lambda)", evidence="built")
def decay_follows_law(inp: Thm6Inputs) -> Verdict:
    """During training the off-span part is prod_k (1 - eta_k lambda) ||W_perp(0)||: the largest
    deviation, relative to ||W(0)||_F (theorem6.md section 1)."""
    steps = max(tr.trace.final_step for tr in inp.trained)
    width = max(tr.width for tr in inp.trained) + max(c.N for c in inp.configs) * D_TOKEN
    rnd = Rounding(n=steps * width, scale=1.0, what="steps (m + N d) eps (relative to ||W(0)||)")

    def deviation(tr: Trained) -> Verdict:  # max_k |perp(k) - law(k)| / ||W(0)||_F
        pairs = zip(tr.trace.perp_norm, inp.decay_law(tr.trace), strict=False)
        return at_most(max(abs(a - b) for a, b in pairs) / tr.trace.initial_norm, 0.0, rnd)

    return _worst_model(inp, deviation)


@claim.check("span distance at the end", evidence="built")
def span_distance_at_end(inp: Thm6Inputs) -> Verdict:
    """The final W's span distance is at most its prediction prod (1 - eta lambda) perp(0)/||W||;
    the largest excess over the prediction in units of ||W(0)||/||W|| is reported."""
    n = max(tr.trace.final_step for tr in inp.trained) * max(c.N for c in inp.configs) * D_TOKEN

    def excess(tr: Trained) -> Verdict:
        final = inp.span_distance(tr.W, tr.X)
        wn = float(torch.linalg.matrix_norm(tr.W.double()))
        predicted, unit = inp.decay_law(tr.trace)[-1] / wn, tr.trace.initial_norm / wn
        rnd = Rounding(n=n, scale=unit, what="steps N d eps ||W(0)||/||W||")
        detail = (
            f"{tr.trace.span_distance[0]:.2f} -> {final:.1e} "
            f"(pred {predicted:.1e}, tau={tr.trace.times[-1]:g}, {tr.trace.stopped})"
        )
        return at_most(final, predicted, rnd, detail=detail)

    # ranked by the excess in units of ||W(0)||/||W|| (the rounding term is n eps of that unit)
    return _worst_model(inp, excess, key=lambda v: (v.measured - v.bound) / v.rounding)


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
        _estimate(inp, f"u averaged, N={c.N} n={c.n}", e, inp.risk_floor(c.n, c.N, D_TOKEN))
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
            cases.append(_estimate(inp, f"fixed u, N={tr.cfg.N} {how}", e, floor_u))
    return worst(cases)


@claim.check("Monte Carlo half-widths <= 0.05", evidence="monte-carlo")
def mc_informative(inp: Thm6Inputs) -> Verdict:
    """Every Monte Carlo half-width z se of (b) is at most 0.05 (the test has power)."""
    ests = list(inp.averaged) + [e for f in inp.fixed for e in f]
    hws = [inp.z * e.stderr for e in ests]
    return at_most(max(hws), MC_HALFWIDTH, detail=f"{len(hws)} estimates of {inp.mc_samples}")


@claim.check("no risk left at n = N d", evidence="monte-carlo")
def no_risk_at_nd(inp: Thm6Inputs) -> Verdict:
    """At n = N d the inputs span R^{N d}: the MC Bayes risk is risk_floor(N d, N, d) = 0."""
    N0 = inp.configs[0].N
    target = inp.risk_floor(N0 * D_TOKEN, N0, D_TOKEN)
    detail = f"N={N0} n={N0 * D_TOKEN}"
    return close(inp.edge.estimate, target, 0.0, _mc_rounding(inp), detail=detail)


# ---------------------------------------------------------------- (d) the min-norm branch
def _mn_rounding(mn: MinNormDraws) -> Rounding:
    n, kappa = mn.n + mn.N * D_TOKEN, max(1.0, mn.kappa)
    return Rounding(n=n, scale=kappa, what="(n + N d) eps kappa_max (pinv and QR)")


def _se(v: torch.Tensor) -> float:
    return float(v.std() / math.sqrt(v.numel()))


def _worst_draws(inp: Thm6Inputs, verdict: Callable[[MinNormDraws], Verdict], key=None):
    """The worst over the (N, n) of part (d) of ``verdict(draws)`` (``worst``'s ``key``)."""
    return worst(((f"N={mn.N} n={mn.n}", verdict(mn)) for mn in inp.min_norm), key=key)


def _mn_close(inp: Thm6Inputs, mn: MinNormDraws, est: float, target: float, se: float):
    """est = target within z se and the rounding term (two-sided)."""
    detail = f"{est:.4f} vs {target:.4f} (z se {inp.z * se:.4f})"
    return close(est, target, inp.z * se, _mn_rounding(mn), detail=detail)


@claim.check("min-norm risk = closed form", evidence="monte-carlo")
def min_norm_closed_form(inp: Thm6Inputs) -> Verdict:
    """The min-norm FFN's mean exact risk = mean (1/N) sum_t risk_floor(n_t, N, d) (paired)."""

    def paired(mn: MinNormDraws) -> Verdict:  # the closed form of E[R | counts], per set
        floors = [inp.risk_floor(j, mn.N, D_TOKEN) for j in range(mn.n + 1)]
        closed = torch.tensor(floors, dtype=torch.float64, device=mn.R.device)[mn.counts].mean(1)
        return _mn_close(inp, mn, float(mn.R.mean()), float(closed.mean()), _se(mn.R - closed))

    return _worst_draws(inp, paired).labelled(f"{inp.min_norm[0].R.numel()} training sets")


@claim.check("mean floor_u(V) = 1 - n/(Nd)", evidence="monte-carlo")
def min_norm_oracle_mean(inp: Thm6Inputs) -> Verdict:
    """The mean over training sets and u of floor_u(V) = risk_floor(n, N, d)."""

    def mean(mn: MinNormDraws) -> Verdict:
        floor = inp.risk_floor(mn.n, mn.N, D_TOKEN)
        return _mn_close(inp, mn, float(mn.oracle.mean()), floor, _se(mn.oracle))

    return _worst_draws(inp, mean).labelled("mean floor_u(V)")


@claim.check("min-norm risk >= own floor_u(V)", evidence="built")
def min_norm_above_own_floor(inp: Thm6Inputs) -> Verdict:
    """Every min-norm FFN's risk is at least floor_u(V) of its own training set."""

    def least(mn: MinNormDraws) -> Verdict:
        return at_least(float((mn.R - mn.oracle).min()), 0.0, _mn_rounding(mn))

    worst_set = _worst_draws(inp, least, key=lambda v: -v.measured)  # the least R_k - floor_u
    return worst_set.labelled("min_k (R_k - floor_u(V_k))")


@claim.check("min-norm mean risk >= floor", evidence="monte-carlo")
def min_norm_above_floor(inp: Thm6Inputs) -> Verdict:
    """The min-norm FFN's mean risk + z se is at least risk_floor(n, N, d)."""

    def mean(mn: MinNormDraws) -> Verdict:
        upper, floor = float(mn.R.mean()) + inp.z * _se(mn.R), inp.risk_floor(mn.n, mn.N, D_TOKEN)
        return at_least(upper, floor, _mn_rounding(mn))

    worst_set = _worst_draws(inp, mean, key=lambda v: v.bound - v.measured)  # the least margin
    return worst_set.labelled("mean R + z se")


# ---------------------------------------------------------------- faults
def with_target_rows(tr: Trained) -> Trained:
    """The first layer given rows outside the span: the target directions P_t u = e_t kron u."""
    t = torch.arange(tr.cfg.N, device=tr.u.device)
    rows = embed_direction(tr.u[None].double().expand(tr.cfg.N, -1), t, tr.cfg.N)
    return replace(tr, W=torch.cat([tr.W.double(), rows.to(tr.W.device)], dim=0))


stderr_as_std = fields_edited(stderr=lambda e: e.stderr * math.sqrt(e.samples))  # no 1/sqrt(n)
claim.fault(
    "first layer given the rows e_t kron u outside the span",
    breaks=(ffns_above_floor, span_distance_at_end),
    apply=mapped("trained", with_target_rows),
)
claim.fault(
    "floor 1 - n/d (sequence length forgotten)",
    breaks=(bayes_risk_is_floor, min_norm_closed_form, min_norm_oracle_mean),
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
    breaks=(transformer_below_floor, fixed_u_bayes_risk),
    apply=replaced(floor_u=lambda V, u, N: 1.0 - N * (1.0 - floor_for_direction(V, u, N))),
)


@claim.fault(
    "Lemma 11 Transformer with uniform attention (alpha = 0)", breaks=transformer_below_floor
)
def _transformer_attention_off(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    """The Lemma 11 constructions at scale alpha = 0 (uniform attention: with_alpha not applied)."""
    flat = tuple(b.with_alpha(0.0) for b in inp.lemma11s)
    return replace(inp, lemma11s=flat, transformer=_transformer_risks(flat, inp.first, ctx))


claim.fault(
    "gradient-flow law e^{-lambda tau} for GD's product",
    breaks=decay_follows_law,
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
    """The n = N d estimate drawn from N d - 1 training inputs (an off-by-one)."""
    N0 = inp.configs[0].N
    return replace(inp, edge=_edge(N0 * D_TOKEN - 1, N0, ctx))


claim.fault(
    "min-norm risks averaged over the N d coordinates",
    breaks=(min_norm_above_own_floor, min_norm_above_floor, min_norm_closed_form),
    apply=mapped("min_norm", fields_edited(R=lambda mn: mn.R / (mn.N * D_TOKEN))),
)
