"""Theorem 6's claim (verify/claims/thm_6.py): its configurations, the FFNs trained on them, the
Lemma 11 risks and the n = N d edge (docs/derivations/theorem6.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Tuple

import mpmath as mp
import sympy
import torch

from qstr.bounds.feedforward import (
    BayesRiskEstimate,
    mc_bayes_risk_from_training,
    orthonormal_row_basis,
)
from qstr.constructions.links import make_link
from qstr.verify.claim import Context
from qstr.verify.training.ffn import (
    FFNTrace,
    ffn_test_risk,
    fit_full_batch,
    make_vec_ffn,
    simple_1str_data,
)

D_TOKEN = 3  # the token dimension d of the first configurations
LR, LAMBDA = 0.5, 0.2  # GD step size and weight decay (lr * lambda = 0.1 per step)
TOL = 1e-6  # stationarity: ||grad J||_F <= TOL * lambda ||theta||_F


@dataclass(frozen=True)
class Config:
    """One (N, d, n): FFNs of the given widths trained on n prompts of length N, tokens in R^d."""

    N: int
    n: int
    widths: Tuple[int, ...]
    d: int = D_TOKEN
    activation: str = "tanh"
    lr: float = LR
    backtrack: bool = True  # ReLU: plain GD (halving on every kink oscillation would stall it)

    @property
    def label(self) -> str:
        return f"N={self.N} d={self.d} n={self.n}"


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
    """Part (d) for one (N, d, n): K training sets, their exact risks R_k, index counts n_t,
    floor_u(V_k) and the largest condition number of a group's inputs."""

    N: int
    n: int
    R: torch.Tensor
    counts: torch.Tensor
    oracle: torch.Tensor
    kappa: float
    d: int = D_TOKEN

    @property
    def label(self) -> str:
        return f"N={self.N} d={self.d} n={self.n} ({self.R.numel()} training sets)"


@dataclass(frozen=True)
class Edge:
    """The Monte Carlo Bayes risk given the span of ``inputs`` training inputs at one (N, d):
    n = N d inputs span R^{N d}, no risk is left."""

    N: int
    d: int
    inputs: int
    estimate: BayesRiskEstimate


def gen(ctx: Context, name: str, *index: int) -> torch.Generator:
    """The run's generator ``thm-6/<name>`` on its device."""
    return ctx.generator(f"thm-6/{name}", *index, device=ctx.device)


def train(cfg: Config, i: int, ctx: Context, steps: int, test: int) -> Tuple[Trained, ...]:
    """The config's FFNs trained by full-batch GD with weight decay (theorem6.md section 1)."""
    u = make_link("linear", 1, cfg.d, generator=gen(ctx, "link", i)).u[0]
    data = simple_1str_data(cfg.n, cfg.N, cfg.d, u, generator=gen(ctx, "data", i))
    V, out = orthonormal_row_basis(data.X), []
    gd = dict(weight_decay=LAMBDA, lr=cfg.lr, max_steps=steps, tol=TOL, backtrack=cfg.backtrack)
    for j, m in enumerate(cfg.widths):
        init = ctx.generator("thm-6/init", i, j)  # on the CPU
        model = make_vec_ffn(
            cfg.N, cfg.d, (m,), activation=cfg.activation, generator=init, device=ctx.device
        )
        trace = fit_full_batch(model, data, record_every=max(1, steps // 10), **gd)
        risk, se = ffn_test_risk(model, u, samples=test, generator=gen(ctx, "test", i, j))
        W = model.first_layer_x_weight().detach().clone()
        out.append(Trained(cfg, m, u, data.X, V, W, trace, risk, se))
    return tuple(out)


def train_stopped(cfg: Config, i: int, ctx: Context, steps: int) -> Trained:
    """The config's first FFN (same data, same initialisation) trained for only ``steps`` steps:
    its off-span part prod_k (1 - eta_k lambda) ||W_perp(0)||_F still far above rounding (no test
    risk is drawn: nan)."""
    u = make_link("linear", 1, cfg.d, generator=gen(ctx, "link", i)).u[0]
    data = simple_1str_data(cfg.n, cfg.N, cfg.d, u, generator=gen(ctx, "data", i))
    model = make_vec_ffn(
        cfg.N,
        cfg.d,
        (cfg.widths[0],),
        activation=cfg.activation,
        generator=ctx.generator("thm-6/init", i, 0),
        device=ctx.device,
    )
    gd = dict(weight_decay=LAMBDA, lr=cfg.lr, max_steps=steps, tol=TOL, backtrack=cfg.backtrack)
    trace = fit_full_batch(model, data, record_every=steps, **gd)
    W = model.first_layer_x_weight().detach().clone()
    V = orthonormal_row_basis(data.X)
    return Trained(cfg, cfg.widths[0], u, data.X, V, W, trace, math.nan, math.nan)


def transformer_risks(lemma11s, first, ctx: Context) -> Tuple[Tuple[float, float], ...]:
    """Each Lemma 11 construction's test risk (mean, se) on simple-1STR with its config's u."""
    samples, out = ctx.pick(quick=2000, full=20000), []
    for built, tr in zip(lemma11s, first, strict=True):
        N, d = tr.cfg.N, tr.cfg.d
        g = gen(ctx, "transformer", *((N,) if d == D_TOKEN else (N, d)))
        data = simple_1str_data(samples, N, d, tr.u, generator=g)
        t = data.t[:, :, None].expand(samples, N, 1).contiguous()
        with torch.no_grad():
            err = ((built.predict(data.x, t) - data.y) ** 2).mean(dim=1)
        out.append((float(err.mean()), float(err.std() / math.sqrt(samples))))
    return tuple(out)


def edge(cfg: Config, i: int, ctx: Context, short: int = 0) -> Edge:
    """The MC Bayes risk given the span of N d - ``short`` training inputs (1000 samples) at the
    config's (N, d)."""
    N, d, g = cfg.N, cfg.d, gen(ctx, "edge", *((i,) if i else ()))  # config 0: its first seed
    n = N * d - short
    return Edge(N, d, n, mc_bayes_risk_from_training(n, N, d, samples=1000, generator=g))


# the configurations each profile runs (quick, full; gpu runs full's)
THM6_CONFIGS = dict(
    quick=(Config(2, 4, (8, 32)), Config(4, 8, (8, 32)), Config(8, 16, (16,), d=4)),
    full=(
        Config(2, 4, (8, 32, 128)),
        Config(4, 8, (8, 32, 128)),
        Config(4, 10, (8, 32, 128)),
        Config(8, 16, (16, 64, 256)),
        Config(4, 8, (32,), activation="relu", lr=0.2, backtrack=False),
        # the grid N in {6, 8} x d in {4, 5} at n = N d / 2 (floor 1/2)
        *(Config(N, N * d // 2, (16, 64), d=d) for N in (6, 8) for d in (4, 5)),
    ),
)


def _edges(configs, ctx: Context, short: int = 0) -> Tuple[Edge, ...]:
    """n = N d - ``short`` training inputs, once per (N, d): at short = 0 they span R^{N d}."""
    Nd = [(c.N, c.d) for c in configs]
    return tuple(edge(c, i, ctx, short) for i, c in enumerate(configs) if Nd.index(Nd[i]) == i)


# ---------------------------------------------------------------- the pin's second code path
PIN_DPS = 40


def risk_floor_exact(n: int, N: int, d: int) -> sympy.Rational:
    """Theorem 6's floor max(0, 1 - n / (N d)) in exact rationals (theorem6.md section 2)."""
    return max(sympy.Integer(0), 1 - sympy.Rational(n, N * d))


def floor_u_mp(V: torch.Tensor, u: torch.Tensor, N: int):
    """floor_u(V) = (1/N) sum_t ||(I - V^T V) P_t u||^2 in mpmath at the working precision, the
    projection applied to the vector P_t u = e_t kron u entry by entry (theorem6.md section 2,
    "Fixed u"); V's and u's float64 entries exact."""
    Vm = [[mp.mpf(x) for x in row] for row in V.double().cpu().tolist()]
    um = [mp.mpf(x) for x in u.double().cpu().tolist()]
    d, D = len(um), N * len(um)
    total = mp.mpf(0)
    for t in range(N):
        a = [mp.mpf(0)] * D
        a[t * d : (t + 1) * d] = um
        Va = [mp.fsum(row[t * d + i] * um[i] for i in range(d)) for row in Vm]
        proj = [a[j] - mp.fsum(Vm[r][j] * Va[r] for r in range(len(Vm))) for j in range(D)]
        total += mp.fsum(x * x for x in proj)
    return total / N
