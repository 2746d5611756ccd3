"""Theorem 6 (conference Theorem 9): FFNs trained with weight decay keep their first layer in the
span of the training inputs and so never beat the floor 1 - n/(N d) on simple-1STR (linear link
y = <u, x_t>, x ~ N(0, I_{N d})); the Lemma 11 Transformer does. docs/derivations/theorem6.md.

(a) span property, (b) Monte Carlo Bayes risk given V x, (c) trained FFNs and Transformers
against the floor, (d) the minimum-norm branch of Definition 5 (exact risks, many training sets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
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
from qstr.verify.claim import Check, Claim, Context, Fault, Ref, Verdict, at_least, at_most, close
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


def slipped_floor(n: int, N: int, d: int) -> float:
    """A slipped Theorem 6 floor max(0, 1 - n/d): the sequence length forgotten."""
    return max(0.0, 1.0 - n / d)


def gd_decay(trace: FFNTrace) -> List[float]:
    """prod_k (1 - eta_k lambda) ||W_perp(0)||_F at the recorded steps: the exact GD law of the
    off-span part (theorem6.md section 1)."""
    return trace.predicted_perp


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
    risk_floor: Callable[[int, int, int], float]  # Theorem 6's floor 1 - n/(N d)
    span_distance: Callable[[torch.Tensor, torch.Tensor], float]  # ||W Pi||_F / ||W||_F
    floor_u: Callable[[torch.Tensor, torch.Tensor, int], float]  # floor_for_direction(V, u, N)
    decay_law: Callable[[FFNTrace], List[float]]  # the off-span norm predicted at each record


def _configs(ctx: Context) -> Tuple[Config, ...]:
    return tuple(
        ctx.pick(
            quick=[Config(2, 4, (8, 32)), Config(4, 8, (8, 32))],
            full=[
                Config(2, 4, (8, 32, 128)),
                Config(4, 8, (8, 32, 128)),
                Config(4, 10, (8, 32, 128)),
                Config(8, 16, (16, 64, 256)),
                Config(4, 8, (32,), activation="relu", lr=0.2, backtrack=False),
            ],
        )
    )


def _train(cfg: Config, i: int, ctx: Context, steps: int, test: int) -> Tuple[Trained, ...]:
    """The config's FFNs trained by full-batch GD with weight decay (theorem6.md section 1)."""
    link = make_link(
        "linear", 1, D_TOKEN, generator=ctx.generator("thm-6/link", i, device=ctx.device)
    )
    u = link.u[0]
    data = simple_1str_data(
        cfg.n, cfg.N, D_TOKEN, u, generator=ctx.generator("thm-6/data", i, device=ctx.device)
    )
    V, out = orthonormal_row_basis(data.X), []
    for j, m in enumerate(cfg.widths):
        model = make_vec_ffn(
            cfg.N,
            D_TOKEN,
            (m,),
            activation=cfg.activation,
            generator=ctx.generator("thm-6/init", i, j),
            device=ctx.device,
        )
        trace = fit_full_batch(
            model,
            data,
            weight_decay=LAMBDA,
            lr=cfg.lr,
            max_steps=steps,
            tol=TOL,
            record_every=max(1, steps // 10),
            backtrack=cfg.backtrack,
        )
        risk, se = ffn_test_risk(
            model, u, samples=test, generator=ctx.generator("thm-6/test", i, j, device=ctx.device)
        )
        W = model.first_layer_x_weight().detach().clone()
        out.append(Trained(cfg, m, u, data.X, V, W, trace, risk, se))
    return tuple(out)


def transformer_for(cfg: Config, u: torch.Tensor):
    """The Lemma 11 construction for g(x) = <u, x> at eps = 0.01 (theorem6.md section 3)."""
    link = Linear(q=1, d=D_TOKEN, u=u[None])
    return lemma11(
        cfg.N,
        D_TOKEN,
        1,
        link.two_layer_net(),
        eps=L11_EPS,
        r_x=lemma12_radius(D_TOKEN, max(cfg.n, 2), cfg.N),
        device=u.device,
    )


def transformer_risk(
    built, cfg: Config, u: torch.Tensor, samples: int, generator: torch.Generator
) -> Tuple[float, float]:
    """Test risk (mean, se) of a Lemma 11 construction for g(x) = <u, x> on simple-1STR."""
    data = simple_1str_data(samples, cfg.N, D_TOKEN, u, generator=generator)
    t = data.t[:, :, None].expand(samples, cfg.N, 1).contiguous()
    with torch.no_grad():
        err = ((built.predict(data.x, t) - data.y) ** 2).mean(dim=1)
    return float(err.mean()), float(err.std() / math.sqrt(samples))


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
    g = ctx.generator("thm-6/min-norm", i, device=ctx.device)
    parts = [min_norm_draws(cfg.N, cfg.n, min(chunk, K - k0), g) for k0 in range(0, K, chunk)]
    R, counts, oracle = (torch.cat([p[j] for p in parts]) for j in range(3))
    return MinNormDraws(cfg.N, cfg.n, R, counts, oracle, max(p[3] for p in parts))


def thm6_inputs(ctx: Context) -> Thm6Inputs:
    """Trained FFNs, Monte Carlo Bayes risks, Lemma 11 risks, min-norm draws (theorem6.md 3, 5)."""
    configs = _configs(ctx)
    steps, test = ctx.pick(quick=1500, full=6000), ctx.pick(quick=4000, full=40000)
    trained = tuple(tr for i, cfg in enumerate(configs) for tr in _train(cfg, i, ctx, steps, test))
    first = [next(t for t in trained if t.cfg == cfg) for cfg in configs]
    # Bonferroni: FFN risks, 3 MC per config in (b), the Transformer, 3 per config in (d)
    z = zcrit(1 - (1 - FAMILY_CONFIDENCE) / (len(trained) + 7 * len(configs)))
    S = ctx.pick(quick=20000, full=200000)
    gen = lambda name, *i: ctx.generator(f"thm-6/{name}", *i, device=ctx.device)  # noqa: E731
    averaged = tuple(
        mc_bayes_risk_from_training(c.n, c.N, D_TOKEN, samples=S, generator=gen("mc", i))
        for i, c in enumerate(configs)
    )
    fixed = tuple(
        tuple(
            mc_bayes_risk(
                tr.V,
                tr.cfg.N,
                D_TOKEN,
                samples=S,
                u=tr.u,
                sample_x=sx,
                generator=gen("fixed-u", i, sx),
            )
            for sx in (True, False)
        )
        for i, tr in enumerate(first)
    )
    N0 = configs[0].N  # n = N d training inputs span R^{N d}: no risk left
    edge = _edge(N0 * D_TOKEN, N0, ctx)
    lemma11s = tuple(transformer_for(tr.cfg, tr.u) for tr in first)
    transformer = _transformer_risks(lemma11s, first, ctx)
    K, seen, mn = ctx.pick(quick=3000, full=10000), set(), []
    for i, cfg in enumerate(configs):  # (d) depends on (N, n) only
        if (cfg.N, cfg.n) not in seen:
            seen.add((cfg.N, cfg.n))
            mn.append(_min_norm(cfg, i, K, ctx))
    return Thm6Inputs(
        configs,
        trained,
        averaged,
        fixed,
        edge,
        lemma11s,
        transformer,
        tuple(mn),
        z,
        test,
        S,
        risk_floor,
        span_distance,
        floor_for_direction,
        gd_decay,
    )


def _edge(n: int, N: int, ctx: Context) -> BayesRiskEstimate:
    """The MC Bayes risk given the span of n training inputs (1000 samples)."""
    g = ctx.generator("thm-6/edge", device=ctx.device)
    return mc_bayes_risk_from_training(n, N, D_TOKEN, samples=1000, generator=g)


def _transformer_risks(lemma11s, first, ctx: Context) -> Tuple[Tuple[float, float], ...]:
    """Each construction's test risk on its config's direction u."""
    T = ctx.pick(quick=2000, full=20000)
    return tuple(
        transformer_risk(
            b, tr.cfg, tr.u, T, ctx.generator("thm-6/transformer", tr.cfg.N, device=ctx.device)
        )
        for b, tr in zip(lemma11s, first)
    )


def _first(inp: Thm6Inputs, cfg: Config) -> Trained:
    """The config's first trained model (its u, X, V)."""
    return next(t for t in inp.trained if t.cfg == cfg)


def _ffn_rounding(inp: Thm6Inputs) -> Rounding:
    """A test risk: a mean of squared errors through a width-m net."""
    m = max(max(c.widths) for c in inp.configs)
    return Rounding(n=inp.test_samples + m, scale=1.0, what="(test samples + m) eps (risk <= 1)")


def _mc_rounding(inp: Thm6Inputs) -> Rounding:
    return Rounding(
        n=inp.mc_samples + inp.configs[-1].N * D_TOKEN,
        scale=1.0,
        what="(samples + N d) eps (risks <= 1)",
    )


def _name(tr: Trained) -> str:
    return f"N={tr.cfg.N} n={tr.cfg.n} m={tr.width} {tr.cfg.activation}"


# ---------------------------------------------------------------- (c) the floor


def ffns_above_floor(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """Theorem 6: no trained FFN (test risk + z se), nor the best readout of its first layer W
    (the Bayes risk given W x), beats floor_u(V); the worst relative margin is reported."""
    worst, rows = None, []
    for tr in inp.trained:
        floor_u = inp.floor_u(tr.V, tr.u, tr.cfg.N)
        basis = orthonormal_row_basis(tr.W, rtol=READOUT_RTOL)
        readout = inp.floor_u(basis, tr.u, tr.cfg.N)
        best = min(readout, tr.risk + inp.z * tr.risk_se)
        rows.append(
            f"{_name(tr)}: risk {tr.risk:.3f}+-{tr.risk_se:.3f}, readout {readout:.3f}, "
            f"floor_u {floor_u:.3f}"
        )
        if worst is None or (best - floor_u) / floor_u < (worst[0] - worst[1]) / worst[1]:
            worst = (best, floor_u, _name(tr))
    best, floor_u, name = worst
    detail = f"min(readout, risk + z se) vs floor_u, worst {name}; " + "; ".join(rows)
    return at_least(best, floor_u, _ffn_rounding(inp), detail=detail)


def transformer_below_floor(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """The Lemma 11 Transformer beats the floor: risk + z se < floor_u, largest ratio reported."""
    worst, rows = None, []
    for (risk, se), cfg in zip(inp.transformer, inp.configs):
        tr = _first(inp, cfg)
        floor_u = inp.floor_u(tr.V, tr.u, cfg.N)
        rows.append(f"N={cfg.N}: {risk:.2e}+-{inp.z * se:.1e} vs floor_u {floor_u:.3f}")
        if worst is None or (risk + inp.z * se) / floor_u > worst[0] / worst[1]:
            worst = (risk + inp.z * se, floor_u)
    return at_most(*worst, _mc_rounding(inp), detail="Lemma 11, eps = 0.01; " + "; ".join(rows))


# ---------------------------------------------------------------- (a) the span property


def _decay_deviation(inp: Thm6Inputs, tr: Trained) -> float:
    """max_k |perp(k) - law(k)| / ||W(0)||_F over the recorded steps."""
    law = inp.decay_law(tr.trace)
    return max(abs(a - b) for a, b in zip(tr.trace.perp_norm, law)) / tr.trace.initial_norm


def decay_follows_law(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """During training the off-span part is prod_k (1 - eta_k lambda) ||W_perp(0)||: the largest
    deviation, relative to ||W(0)||_F (theorem6.md section 1)."""
    dev, worst = max(((_decay_deviation(inp, tr), tr) for tr in inp.trained), key=lambda c: c[0])
    steps = max(tr.trace.final_step for tr in inp.trained)
    width = max(tr.width for tr in inp.trained) + max(c.N for c in inp.configs) * D_TOKEN
    rnd = Rounding(n=steps * width, scale=1.0, what="steps (m + N d) eps (relative to ||W(0)||)")
    return at_most(dev, 0.0, rnd, detail=f"worst {_name(worst)}")


def span_distance_at_end(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """The final W's span distance is at most its prediction prod (1 - eta lambda) perp(0)/||W||;
    the largest excess over the prediction in units of ||W(0)||/||W|| is reported."""
    worst, rows = None, []
    for tr in inp.trained:
        final = inp.span_distance(tr.W, tr.X)
        wn = float(torch.linalg.matrix_norm(tr.W.double()))
        predicted, unit = inp.decay_law(tr.trace)[-1] / wn, tr.trace.initial_norm / wn
        rows.append(
            f"{_name(tr)}: {tr.trace.span_distance[0]:.2f} -> {final:.1e} "
            f"(pred {predicted:.1e}, tau={tr.trace.times[-1]:g}, {tr.trace.stopped})"
        )
        if worst is None or (final - predicted) / unit > (worst[0] - worst[1]) / worst[2]:
            worst = (final, predicted, unit)
    final, predicted, unit = worst
    steps = max(tr.trace.final_step for tr in inp.trained)
    rnd = Rounding(
        n=steps * max(c.N for c in inp.configs) * D_TOKEN,
        scale=unit,
        what="steps N d eps ||W(0)||/||W||",
    )
    return at_most(final, predicted, rnd, detail="; ".join(rows))


# ---------------------------------------------------------------- (b) Bayes risk given V x


def _worst_close(cases, rnd: Rounding, detail: str) -> Verdict:
    """cases: (label, estimate, target, tol); the largest |estimate - target| / (tol + term)."""
    label, est, target, tol = max(cases, key=lambda c: abs(c[1] - c[2]) / (c[3] + rnd.term))
    rows = "; ".join(f"{c[0]}: {c[1]:.4f}+-{c[3]:.4f} vs {c[2]:.4f}" for c in cases)
    return close(est, target, tol, rnd, detail=f"{detail}, worst {label}; {rows}")


def bayes_risk_is_floor(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """E_u Bayes risk given V x (MC) = risk_floor(n, N, d) = 1 - n/(N d), within z se."""
    cases = [
        (f"N={c.N} n={c.n}", e.estimate, inp.risk_floor(c.n, c.N, D_TOKEN), inp.z * e.stderr)
        for c, e in zip(inp.configs, inp.averaged)
    ]
    return _worst_close(cases, _mc_rounding(inp), "u averaged")


def fixed_u_bayes_risk(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """For the trained models' own u: the MC Bayes risk given V x (x sampled and x integrated)
    = floor_u(V) (theorem6.md section 2, "Fixed u")."""
    cases = []
    for cfg, ests in zip(inp.configs, inp.fixed):
        tr = _first(inp, cfg)
        floor_u = inp.floor_u(tr.V, tr.u, cfg.N)
        cases += [
            (f"N={cfg.N} {how}", e.estimate, floor_u, inp.z * e.stderr)
            for how, e in zip(("x sampled", "x integrated"), ests)
        ]
    return _worst_close(cases, _mc_rounding(inp), "fixed u")


def mc_informative(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """Every Monte Carlo half-width z se of (b) is at most 0.05 (the test has power)."""
    ests = list(inp.averaged) + [e for f in inp.fixed for e in f]
    hws = [inp.z * e.stderr for e in ests]
    return at_most(max(hws), MC_HALFWIDTH, detail=f"{len(hws)} estimates of {inp.mc_samples}")


def no_risk_at_nd(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """At n = N d the inputs span R^{N d}: the MC Bayes risk is risk_floor(N d, N, d) = 0."""
    N0 = inp.configs[0].N
    target = inp.risk_floor(N0 * D_TOKEN, N0, D_TOKEN)
    return close(
        inp.edge.estimate, target, 0.0, _mc_rounding(inp), detail=f"N={N0} n={N0 * D_TOKEN}"
    )


# ---------------------------------------------------------------- (d) the min-norm branch


def _rounding(mn: MinNormDraws) -> Rounding:
    return Rounding(
        n=mn.n + mn.N * D_TOKEN,
        scale=max(1.0, mn.kappa),
        what="(n + N d) eps kappa_max (pinv and QR)",
    )


def _se(v: torch.Tensor) -> float:
    return float(v.std() / math.sqrt(v.numel()))


def _closed(inp: Thm6Inputs, mn: MinNormDraws) -> torch.Tensor:
    """(1/N) sum_t risk_floor(n_t, N, d) per training set: the closed form of E[R | counts]."""
    table = torch.tensor(
        [inp.risk_floor(j, mn.N, D_TOKEN) for j in range(mn.n + 1)],
        dtype=torch.float64,
        device=mn.R.device,
    )
    return table[mn.counts].mean(1)


def _worst_mn(inp: Thm6Inputs, cases, detail: str) -> Verdict:
    """cases: (mn, estimate, target, se); two-sided, the largest |gap| / (z se + rounding)."""
    mn, est, target, se = max(
        cases, key=lambda c: abs(c[1] - c[2]) / (inp.z * c[3] + _rounding(c[0]).term)
    )
    rows = "; ".join(
        f"N={c[0].N} n={c[0].n}: {c[1]:.4f} vs {c[2]:.4f} (z se {inp.z * c[3]:.4f})" for c in cases
    )
    return close(
        est, target, inp.z * se, _rounding(mn), detail=f"{detail}, worst N={mn.N} n={mn.n}; {rows}"
    )


def min_norm_closed_form(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """The min-norm FFN's mean exact risk = mean (1/N) sum_t risk_floor(n_t, N, d) (paired)."""
    cases = []
    for mn in inp.min_norm:
        closed = _closed(inp, mn)
        cases.append((mn, float(mn.R.mean()), float(closed.mean()), _se(mn.R - closed)))
    return _worst_mn(inp, cases, f"{inp.min_norm[0].R.numel()} training sets")


def min_norm_oracle_mean(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """The mean over training sets and u of floor_u(V) = risk_floor(n, N, d)."""
    cases = [
        (mn, float(mn.oracle.mean()), inp.risk_floor(mn.n, mn.N, D_TOKEN), _se(mn.oracle))
        for mn in inp.min_norm
    ]
    return _worst_mn(inp, cases, "mean floor_u(V)")


def min_norm_above_own_floor(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """Every min-norm FFN's risk is at least floor_u(V) of its own training set."""
    mn = min(inp.min_norm, key=lambda m: float((m.R - m.oracle).min()))
    return at_least(
        float((mn.R - mn.oracle).min()),
        0.0,
        _rounding(mn),
        detail=f"min_k (R_k - floor_u(V_k)), worst N={mn.N} n={mn.n}",
    )


def min_norm_above_floor(inp: Thm6Inputs, ctx: Context) -> Verdict:
    """The min-norm FFN's mean risk + z se is at least risk_floor(n, N, d)."""

    def margin(m):
        return float(m.R.mean()) + inp.z * _se(m.R) - inp.risk_floor(m.n, m.N, D_TOKEN)

    mn = min(inp.min_norm, key=margin)
    return at_least(
        float(mn.R.mean()) + inp.z * _se(mn.R),
        inp.risk_floor(mn.n, mn.N, D_TOKEN),
        _rounding(mn),
        detail=f"mean R + z se, worst N={mn.N} n={mn.n}",
    )


# ---------------------------------------------------------------- faults


def _target_rows(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    """Each first layer given rows outside the span: the target directions P_t u = e_t kron u."""

    def widened(tr: Trained) -> Trained:
        t = torch.arange(tr.cfg.N, device=tr.u.device)
        rows = embed_direction(tr.u[None].double().expand(tr.cfg.N, -1), t, tr.cfg.N)
        return replace(tr, W=torch.cat([tr.W.double(), rows.to(tr.W.device)], dim=0))

    return replace(inp, trained=tuple(widened(tr) for tr in inp.trained))


def _slipped_floor(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    return replace(inp, risk_floor=slipped_floor)


def _span_of_fewer_inputs(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    """A span distance measured against the first n - 1 training inputs (an off-by-one)."""
    return replace(inp, span_distance=lambda W, X: span_distance(W, X[:-1]))


def _floor_u_without_average(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    """floor_u(V) = 1 - sum_t ||V_{:, block t} u||^2: the 1/N of the average over t dropped."""

    def summed(V, u, N):
        return 1.0 - N * (1.0 - floor_for_direction(V, u, N))

    return replace(inp, floor_u=summed)


def _flow_decay(trace: FFNTrace) -> List[float]:
    """The gradient-flow law e^{-lambda tau} ||W_perp(0)||_F in place of GD's product."""
    return trace.exp_perp


def _flow_law(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    return replace(inp, decay_law=_flow_decay)


def _stderr_as_std(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    """Monte Carlo standard errors reported without their 1/sqrt(samples)."""

    def std(e: BayesRiskEstimate) -> BayesRiskEstimate:
        return replace(e, stderr=e.stderr * math.sqrt(e.samples))

    return replace(
        inp,
        averaged=tuple(std(e) for e in inp.averaged),
        fixed=tuple(tuple(std(e) for e in f) for f in inp.fixed),
    )


def _edge_one_short(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    """The n = N d estimate drawn from N d - 1 training inputs (an off-by-one)."""
    N0 = inp.configs[0].N
    return replace(inp, edge=_edge(N0 * D_TOKEN - 1, N0, ctx))


def _risk_averaged_over_coordinates(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    """Exact min-norm risks averaged over the N d coordinates of w_t - P_t u, not summed."""
    return replace(
        inp, min_norm=tuple(replace(mn, R=mn.R / (mn.N * D_TOKEN)) for mn in inp.min_norm)
    )


def _transformer_attention_off(inp: Thm6Inputs, ctx: Context) -> Thm6Inputs:
    """The Lemma 11 constructions at scale alpha = 0 (uniform attention: with_alpha not applied)."""
    first = [_first(inp, cfg) for cfg in inp.configs]
    flat = tuple(b.with_alpha(0.0) for b in inp.lemma11s)
    return replace(inp, lemma11s=flat, transformer=_transformer_risks(flat, first, ctx))


FLOOR, TRANSFORMER = "FFNs never beat floor_u", "Lemma 11 Transformer beats floor_u"
DECAY, SPAN = "off-span part decays as prod(1 - lr lambda)", "span distance at the end"
BAYES, FIXED = "Bayes risk given Vx = 1 - n/(Nd)", "fixed-u Bayes risk = floor_u(V)"
INFORMATIVE, EDGE = "Monte Carlo half-widths <= 0.05", "no risk left at n = N d"
MN_CLOSED, MN_ORACLE = "min-norm risk = closed form", "mean floor_u(V) = 1 - n/(Nd)"
MN_OWN, MN_FLOOR = "min-norm risk >= own floor_u(V)", "min-norm mean risk >= floor"

register(
    Claim(
        id="thm-6",
        ref=Ref("Thm 6", "Thm 9"),
        statement=(
            "FFNs (first layer on vec x) trained with weight decay keep W in span(x^(1..n)) "
            "(off-span part x(1 - lr*lambda)^k ~ e^{-lambda tau}) and never beat E_u[R] >= "
            "1 - n/(N d); the min-norm linear FFN's risk matches its closed form in risk_floor "
            "and the Bayes risk given the span averages to 1 - n/(N d); the Lemma 11 "
            "Transformer beats the floor"
        ),
        inputs=thm6_inputs,
        checks=[
            Check(FLOOR, ffns_above_floor),
            Check(TRANSFORMER, transformer_below_floor),
            Check(DECAY, decay_follows_law),
            Check(SPAN, span_distance_at_end),
            Check(BAYES, bayes_risk_is_floor),
            Check(FIXED, fixed_u_bayes_risk),
            Check(INFORMATIVE, mc_informative),
            Check(EDGE, no_risk_at_nd),
            Check(MN_CLOSED, min_norm_closed_form),
            Check(MN_ORACLE, min_norm_oracle_mean),
            Check(MN_OWN, min_norm_above_own_floor),
            Check(MN_FLOOR, min_norm_above_floor),
        ],
        faults=[
            Fault(
                "first layer given the rows e_t kron u outside the span",
                _target_rows,
                breaks=(FLOOR, SPAN),
            ),
            Fault(
                "floor 1 - n/d (sequence length forgotten)",
                _slipped_floor,
                breaks=(BAYES, MN_CLOSED, MN_ORACLE),
            ),
            Fault(
                "span distance against n - 1 of the inputs", _span_of_fewer_inputs, breaks=(SPAN,)
            ),
            Fault(
                "floor_u without the 1/N of its average over t",
                _floor_u_without_average,
                breaks=(TRANSFORMER, FIXED),
            ),
            Fault(
                "Lemma 11 Transformer with uniform attention (alpha = 0)",
                _transformer_attention_off,
                breaks=(TRANSFORMER,),
            ),
            Fault("gradient-flow law e^{-lambda tau} for GD's product", _flow_law, breaks=(DECAY,)),
            Fault(
                "Monte Carlo standard errors without 1/sqrt(samples)",
                _stderr_as_std,
                breaks=(INFORMATIVE,),
            ),
            Fault("n = N d estimate from N d - 1 inputs", _edge_one_short, breaks=(EDGE,)),
            Fault(
                "min-norm risks averaged over the N d coordinates",
                _risk_averaged_over_coordinates,
                breaks=(MN_OWN, MN_FLOOR, MN_CLOSED),
            ),
        ],
        builds=(fit_full_batch, make_vec_ffn, lemma11, transformer_for, min_norm_draws),
        bounds=(
            risk_floor,
            floor_for_direction,
            mc_bayes_risk,
            mc_bayes_risk_from_training,
            span_distance,
            gd_decay,
        ),
        derivation="docs/derivations/theorem6.md",
    )
)
