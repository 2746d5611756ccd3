"""Scaling fits of the experiments: samples ~ N^a by least squares in log-log and by a censored
likelihood (runs stopped at the cap kept as right-censored), local slopes between successive N,
a polylog fit beside the power law, and paired ratios; bootstrap intervals throughout
(docs/experiments.md, "Fits")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from scipy import optimize, stats

from qstr.verify.experiments.points import MODELS


def fit_exponent(
    N: Sequence[float],
    samples: Sequence[Optional[float]],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """Fit samples ~ C N^a by least squares on (log N, log samples); bootstrap interval for a.

    Points with ``samples`` None (threshold not reached within the step cap) are left out and
    counted in ``censored`` (the fit is then biased low: say so when it is non-zero). The
    bootstrap resamples points within each N value (stratified), so every N stays in.
    Returns {a, log_C, ci: [lo, hi], n, censored, N_values}; a is NaN with < 2 distinct N.
    """
    pts = [(float(n), float(s)) for n, s in zip(N, samples, strict=True) if s is not None and s > 0]
    censored = sum(1 for s in samples if s is None)
    Ns = sorted({n for n, _ in pts})
    out = {"n": len(pts), "censored": censored, "N_values": Ns, "level": level}
    if len(Ns) < 2:
        return out | {"a": math.nan, "log_C": math.nan, "ci": [math.nan, math.nan]}
    x = torch.tensor([math.log(n) for n, _ in pts], dtype=torch.float64)
    y = torch.tensor([math.log(s) for _, s in pts], dtype=torch.float64)

    def ls(xv, yv):
        xm, ym = xv.mean(-1, keepdim=True), yv.mean(-1, keepdim=True)
        a = ((xv - xm) * (yv - ym)).sum(-1) / ((xv - xm) ** 2).sum(-1)
        return a, (ym.squeeze(-1) - a * xm.squeeze(-1))

    a, b = ls(x, y)
    g = torch.Generator().manual_seed(seed)
    strata = [torch.tensor([i for i, (n, _) in enumerate(pts) if n == v]) for v in Ns]
    idx = torch.cat(
        [s[torch.randint(len(s), (n_boot, len(s)), generator=g)] for s in strata], dim=1
    )
    ab, _ = ls(x[idx], y[idx])
    ab = ab[torch.isfinite(ab)]
    lo, hi = torch.quantile(
        ab, torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    ).tolist()
    return out | {"a": float(a), "log_C": float(b), "ci": [lo, hi]}


def _tobit(x: np.ndarray, y: np.ndarray, cens: np.ndarray) -> np.ndarray:
    """Maximum likelihood (a, b, log sigma) of y = b + a x + sigma eps, eps ~ N(0, 1), where y is
    observed exactly when ``cens`` is False and only known to exceed y when it is True (the
    negative log-likelihood with its gradient: z^2 / 2 + log sigma per observed run,
    -log P(eps > z) per censored one, z = (y - mu) / sigma)."""

    def nll(p):
        mu, sd = p[1] + p[0] * x, math.exp(p[2])
        z = (y - mu) / sd
        logsf = stats.norm.logsf(z[cens])
        mills = np.exp(stats.norm.logpdf(z[cens]) - logsf)  # phi / (1 - Phi) at z
        d_mu, d_log_sd = np.empty_like(z), np.empty_like(z)
        d_mu[~cens], d_log_sd[~cens] = -z[~cens] / sd, 1.0 - z[~cens] ** 2
        d_mu[cens], d_log_sd[cens] = -mills / sd, -mills * z[cens]
        value = (0.5 * z[~cens] ** 2).sum() + (~cens).sum() * p[2] - logsf.sum()
        return value, np.array([(d_mu * x).sum(), d_mu.sum(), d_log_sd.sum()])

    A = np.stack([x, np.ones_like(x)], 1)
    (a0, b0), *_ = np.linalg.lstsq(A, y, rcond=None)
    sd0 = max(float(np.std(y - A @ np.array([a0, b0]))), 1e-3)
    p0 = np.array([a0, b0, math.log(sd0)])
    bounds = [(None, None), (None, None), (math.log(1e-6), math.log(1e3))]
    return optimize.minimize(nll, p0, jac=True, method="L-BFGS-B", bounds=bounds).x


def fit_censored_exponent(  # noqa: PLR0913 - the data and the bootstrap's knobs
    N: Sequence[float],
    samples: Sequence[Optional[float]],
    caps: Sequence[float],
    *,
    n_boot: int = 400,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """Fit samples ~ C N^a with the runs that stopped at their cap kept as right-censored (a
    Tobit model on log samples: log s = log C + a log N + sigma eps, a censored run contributing
    P(log s > log cap)), by maximum likelihood; bootstrap interval for a (runs resampled within
    each N). Without a capped run this is :func:`fit_exponent` (the same maximum; its interval).
    ``caps``: each run's cap (max_steps x batch_size). Returns {a, log_C, sigma, ci, n,
    censored, N_values, level}; a is NaN with < 2 distinct N or no run reaching."""
    x = np.log(np.asarray(N, dtype=float))
    cens = np.array([s is None for s in samples])
    y = np.log(np.array([c if s is None else s for s, c in zip(samples, caps, strict=True)], float))
    Ns = sorted(set(map(float, N)))
    out = {"n": len(y), "censored": int(cens.sum()), "N_values": Ns, "level": level}
    if len(Ns) < 2 or cens.all():
        return out | {"a": math.nan, "log_C": math.nan, "sigma": math.nan, "ci": [math.nan] * 2}
    a, b, log_sd = (float(v) for v in _tobit(x, y, cens))
    if not cens.any():  # no capped run: the likelihood's maximum is least squares', so its fit
        ls = fit_exponent(N, samples, seed=seed, level=level)
        return out | {"a": ls["a"], "log_C": ls["log_C"], "sigma": math.exp(log_sd), "ci": ls["ci"]}
    rng = np.random.default_rng(seed)
    strata = [np.flatnonzero(np.isclose(x, math.log(v))) for v in Ns]
    boot = []
    for _ in range(n_boot):
        idx = np.concatenate([rng.choice(s, len(s)) for s in strata])
        if not cens[idx].all():
            boot.append(_tobit(x[idx], y[idx], cens[idx])[0])
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2]).tolist()
    return out | {"a": a, "log_C": b, "sigma": math.exp(log_sd), "ci": [lo, hi]}


def local_slopes(
    N: Sequence[float],
    samples: Sequence[Optional[float]],
    caps: Sequence[float],
    *,
    n_boot: int = 2000,
    seed: int = 0,
) -> List[dict]:
    """Between successive values of N: the slope of log geometric-mean samples in log N, with a
    95% bootstrap interval (runs resampled within each N). A censored run enters at its cap, so
    the slope is a lower bound when the larger N has censored runs (``bound`` "lower"), an upper
    bound when only the smaller one has ("upper"), and ``None`` when neither has."""
    Ns = sorted(set(map(float, N)))
    runs = {v: [] for v in Ns}
    for n, s, c in zip(N, samples, caps, strict=True):
        runs[float(n)].append((math.log(c if s is None else s), s is None))
    rng = np.random.default_rng(seed)
    out = []
    for lo_N, hi_N in zip(Ns, Ns[1:], strict=False):
        ylo = np.array([y for y, _ in runs[lo_N]])
        yhi = np.array([y for y, _ in runs[hi_N]])
        dx = math.log(hi_N / lo_N)
        slope = (yhi.mean() - ylo.mean()) / dx
        blo = ylo[rng.integers(len(ylo), size=(n_boot, len(ylo)))].mean(1)
        bhi = yhi[rng.integers(len(yhi), size=(n_boot, len(yhi)))].mean(1)
        ci = np.quantile((bhi - blo) / dx, [0.025, 0.975]).tolist()
        c_lo, c_hi = any(c for _, c in runs[lo_N]), any(c for _, c in runs[hi_N])
        bound = "lower" if c_hi else ("upper" if c_lo else None)
        out.append({"N": [lo_N, hi_N], "slope": float(slope), "ci": ci, "bound": bound})
    return out


def polylog_vs_power(N: Sequence[float], samples: Sequence[Optional[float]]) -> dict:
    """On the runs that reached: least squares of log samples on log N (power law, samples ~ C
    N^a) and on log log N (polylog, samples ~ C (log N)^k). Both have two parameters, so the
    difference of their AIC is n ln(RSS_power / RSS_polylog): above 0 favours the polylog,
    above 2 clearly. Needs N > 1 at two values at least (else NaN)."""
    pts = [(float(n), float(s)) for n, s in zip(N, samples, strict=True) if s is not None]
    y = np.log([s for _, s in pts])
    nan = {"a": math.nan, "k": math.nan, "delta_aic": math.nan, "n": len(pts)}
    if len({n for n, _ in pts}) < 2 or min(n for n, _ in pts) <= 1:
        return nan

    def rss(xv):
        A = np.stack([xv, np.ones_like(xv)], 1)
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        return float(coef[0]), float(((y - A @ coef) ** 2).sum())

    a, rss_pow = rss(np.log([n for n, _ in pts]))
    k, rss_poly = rss(np.log(np.log([n for n, _ in pts])))
    delta = len(pts) * math.log(rss_pow / rss_poly) if rss_poly > 0 else math.inf
    return {
        "a": a,
        "k": k,
        "rss_power": rss_pow,
        "rss_polylog": rss_poly,
        "delta_aic": delta,
        "n": len(pts),
    }


def summarize(rows: Sequence[dict], *, by: str = "N") -> Dict[str, Dict[str, dict]]:
    """Per (variant, model): fitted exponent of samples in ``by`` and per-value means."""
    out: Dict[str, Dict[str, dict]] = {}
    for variant in sorted({r["variant"] for r in rows}):
        out[variant] = {}
        for model in MODELS:
            rs = [r for r in rows if r["variant"] == variant and r["model"] == model]
            if not rs:
                continue
            xs, ss = [r[by] for r in rs], [r["samples"] for r in rs]
            fit = fit_exponent(xs, ss)
            per = {}
            for v in sorted({r[by] for r in rs}):
                ss = [r["samples"] for r in rs if r[by] == v]
                got = [s for s in ss if s is not None]
                per[str(v)] = {
                    "mean": (sum(got) / len(got)) if got else None,
                    "median": (sorted(got)[len(got) // 2] if got else None),
                    "reached": len(got),
                    "runs": len(ss),
                }
            out[variant][model] = {"fit": fit, f"per_{by}": per} | _shape(rs, by)
    return out


def _shape(rs: Sequence[dict], by: str) -> dict:
    """The shape of one model's curve: the censored fit, local slopes, the fit without the
    smallest value of ``by``, and the polylog fit beside the power law."""
    xs, ss = [r[by] for r in rs], [r["samples"] for r in rs]
    caps = [_cap_samples(r) for r in rs]
    smallest = min(xs)
    rest = [(x, s) for x, s in zip(xs, ss, strict=True) if x != smallest]
    return {
        "censored_fit": fit_censored_exponent(xs, ss, caps),
        "local_slopes": local_slopes(xs, ss, caps),
        f"fit_without_smallest_{by}": fit_exponent([x for x, _ in rest], [s for _, s in rest]),
        "polylog_vs_power": polylog_vs_power(xs, ss),
    }


def _cap_samples(r: dict) -> float:
    """A row's samples, or for a run censored at its cap the cap (max_steps x batch_size): a
    lower bound on the samples it would have needed."""
    if r["samples"] is not None:
        return float(r["samples"])
    return float(r["config"]["max_steps"] * r["config"]["batch_size"])


def _slope(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Least-squares slopes of the rows of y (..., k) on x (k,)."""
    xc = x - x.mean()
    return ((y - y.mean(-1, keepdim=True)) * xc).sum(-1) / (xc**2).sum()


def _paired_logs(rows: Sequence[dict], num: str, den: str, by: str):
    """The values of ``by`` and {seed: {value: log(samples[num] / samples[den])}} over the seeds
    where both models ran on the same prompts (a capped run at its cap)."""
    key = {(r["model"], r[by], r["seed"]): r for r in rows}
    values = sorted({r[by] for r in rows if r["model"] in (num, den)})
    logs: Dict[int, Dict[float, float]] = {}
    for m, v, s in key:
        if m == num and (den, v, s) in key:
            ratio = _cap_samples(key[(num, v, s)]) / _cap_samples(key[(den, v, s)])
            logs.setdefault(s, {})[v] = math.log(ratio)
    return values, logs


def paired_gap(  # noqa: PLR0913 - the figure's rows, the two models, and the statistics' knobs
    rows: Sequence[dict],
    num: str,
    den: str,
    *,
    by: str = "q",
    n_boot: int = 4000,
    n_perm: int = 20000,
    seed: int = 0,
) -> dict:
    """Paired comparison of two models trained on the same prompts (same seed): per value of
    ``by``, the geometric mean over seeds of samples[num] / samples[den] with a bootstrap
    interval (seeds resampled); and whether log of that ratio grows with ``by``: the
    least-squares slope of the per-value mean log ratio, with a one-sided permutation p-value
    (the ``by`` labels permuted within each seed; docs/experiments.md, "Does it reproduce?").

    Censored runs stay in at their cap (``censored`` counts them): a censored ``num`` makes its
    ratio a lower bound, a censored ``den`` an upper bound. Only seeds with both models at every
    value of ``by`` enter the trend test."""
    key = {(r["model"], r[by], r["seed"]): r for r in rows}
    values, logs = _paired_logs(rows, num, den, by)
    out: dict = {"per": {}, "by": by, "num": num, "den": den}
    g = torch.Generator().manual_seed(seed)
    for v in values:
        seeds = sorted(s for s, d in logs.items() if v in d)
        if not seeds:
            continue
        pairs = [(key[(num, v, s)], key[(den, v, s)]) for s in seeds]
        lr = torch.tensor([logs[s][v] for s in seeds], dtype=torch.float64)
        boot = lr[torch.randint(len(lr), (n_boot, len(lr)), generator=g)].mean(1)
        lo, hi = torch.quantile(boot, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
        out["per"][str(v)] = {
            "geo_mean": math.exp(lr.mean().item()),
            "ci": [math.exp(lo), math.exp(hi)],
            "pairs": len(lr),
            "censored": sum((a["samples"] is None) + (b["samples"] is None) for a, b in pairs),
        }
    full = sorted(s for s, d in logs.items() if len(d) == len(values))
    if len(values) < 2 or len(full) < 2:
        return out | {"trend": None}
    y = torch.tensor([[logs[s][v] for v in values] for s in full], dtype=torch.float64)
    x = torch.tensor([float(v) for v in values], dtype=torch.float64)
    observed = _slope(x, y.mean(0)).item()
    perm = torch.argsort(torch.rand(n_perm, *y.shape, generator=g), dim=-1)
    slopes = _slope(x, torch.gather(y.expand(n_perm, -1, -1), 2, perm).mean(1))
    p = (1 + int((slopes >= observed - 1e-12).sum())) / (1 + n_perm)
    return out | {
        "trend": {"slope_log_ratio": observed, "p_one_sided": p, "seeds": len(full), "perm": n_perm}
    }


@dataclass(frozen=True)
class PowerSimulation:
    """The knobs of :func:`trend_power`'s simulated experiments: the seed counts to try, the
    simulations per count, the permutations per test, the test's level and the generator's seed."""

    seeds: Tuple[int, ...] = (5, 10, 15, 20, 30)
    n_sim: int = 200
    n_perm: int = 199
    level: float = 0.05
    seed: int = 0

    def __post_init__(self):
        counts = tuple(self.seeds)
        if not counts or any(
            isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in counts
        ):
            raise ValueError(
                f"seeds must be a non-empty sequence of positive counts, got {counts!r}"
            )
        for name in ("n_sim", "n_perm"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must lie in (0, 1), got {self.level!r}")
        object.__setattr__(self, "seeds", counts)


def trend_power(
    rows: Sequence[dict],
    num: str,
    den: str,
    *,
    by: str = "q",
    sim: PowerSimulation = PowerSimulation(),
) -> dict:
    """Power of :func:`paired_gap`'s one-sided trend test at ``sim.level`` for each count in
    ``sim.seeds``, at the measured effect: a simulated experiment draws that many seeds with
    replacement from the measured ones (each seed's log ratios at every value of ``by``
    together, so the pairing and the spread across seeds are kept) and runs the test with
    ``sim.n_perm`` permutations, ``sim.n_sim`` times. Returns {"power": {count: share with
    p <= level}, "seeds_needed": the least count with power >= 0.8 (None if none),
    "from_seeds": the seeds measured}."""
    if not isinstance(sim, PowerSimulation):
        raise ValueError(f"sim must be a PowerSimulation, got {type(sim).__name__}")
    seeds, n_sim, n_perm, level = sim.seeds, sim.n_sim, sim.n_perm, sim.level
    values, logs = _paired_logs(rows, num, den, by)
    full = sorted(s for s, d in logs.items() if len(d) == len(values))
    out = {"from_seeds": len(full), "level": level, "sims": n_sim, "perm": n_perm}
    if len(values) < 2 or len(full) < 2:
        return out | {"power": {}, "seeds_needed": None}
    y = torch.tensor([[logs[s][v] for v in values] for s in full], dtype=torch.float64)
    x = torch.tensor([float(v) for v in values], dtype=torch.float64)
    g = torch.Generator().manual_seed(sim.seed)
    power = {}
    for n in seeds:
        yb = y[torch.randint(len(full), (n_sim, n), generator=g)]  # (sims, n, values)
        observed = _slope(x, yb.mean(1))  # (sims,)
        perm = torch.argsort(torch.rand(n_sim, n_perm, n, len(values), generator=g), dim=-1)
        shuffled = torch.gather(yb[:, None].expand(-1, n_perm, -1, -1), 3, perm)
        slopes = _slope(x, shuffled.mean(2))  # (sims, perm)
        p = (1 + (slopes >= observed[:, None] - 1e-12).sum(1)) / (1 + n_perm)
        power[n] = float((p <= level).double().mean())
    needed = next((n for n in seeds if power[n] >= 0.8), None)
    return out | {"power": power, "seeds_needed": needed}


def gehan_scores(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Gehan's scores of interval-known values [lo, hi] (an exact value has lo = hi, a censored one
    an infinite end): #{j certainly below i} - #{j certainly above i} (docs/experiments.md)."""
    below = (hi[None, :] < lo[:, None]).sum(1)
    above = (lo[None, :] > hi[:, None]).sum(1)
    return (below - above).astype(float)


def censored_trend(x: Sequence[float], lo: np.ndarray, hi: np.ndarray, *, n_perm=20000, seed=0):
    """One-sided trend test of values known within [lo, hi] (seeds x len(x)) in x: the statistic
    sum (x_v - mean x) Gehan score, its p by permuting x's labels within each seed."""
    s = gehan_scores(lo.ravel(), hi.ravel()).reshape(lo.shape)
    xc = np.asarray(x, float) - np.mean(x)
    observed = float((s * xc).sum())
    rng = np.random.default_rng(seed)
    perm = rng.permuted(np.broadcast_to(xc, (n_perm, *s.shape)), axis=-1)
    stats_ = (perm * s).sum((1, 2))
    return {"stat": observed, "p": float((1 + (stats_ >= observed - 1e-9).sum()) / (1 + n_perm))}


def t_power(effect: float, sd: float, n: int, level: float = 0.05) -> float:
    """Power of the one-sided one-sample t test at ``level`` with n values of spread sd when the
    mean is ``effect`` (noncentral t, ncp = effect sqrt(n) / sd)."""
    if n < 2 or not sd > 0:
        return math.nan
    crit = stats.t.ppf(1 - level, n - 1)
    return float(stats.nct.sf(crit, n - 1, effect * math.sqrt(n) / sd))


def holm(ps: Sequence[float], families: Sequence) -> List[float]:
    """Holm's step-down adjusted p-values over the distinct ``families`` (tests of one family
    share their data, so they count once: a repeat takes its family's multiplier)."""
    m = len(set(families))
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    seen: list = []
    out, running = [0.0] * len(ps), 0.0
    for i in order:
        if families[i] not in seen:
            seen.append(families[i])
        running = max(running, min(1.0, (m - seen.index(families[i])) * ps[i]))
        out[i] = running
    return out


def lack_of_fit(N: Sequence[float], y: Sequence[float]) -> dict:
    """Pure-error F test of the line y = b + a log N against the per-N means (replicates at each
    N): p small rejects the power law samples ~ C N^a (y: log samples)."""
    x, y = np.log(np.asarray(N, float)), np.asarray(y, float)
    groups = [y[np.isclose(x, v)] for v in np.unique(x)]
    k, n = len(groups), len(y)
    if k < 3 or n <= k:
        return {"F": math.nan, "p": math.nan, "k": k, "n": n}
    A = np.stack([x, np.ones_like(x)], 1)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    rss = float(((y - A @ coef) ** 2).sum())
    pure = float(sum(((g - g.mean()) ** 2).sum() for g in groups))
    F = ((rss - pure) / (k - 2)) / (pure / (n - k)) if pure > 0 else math.inf
    return {"F": F, "p": float(stats.f.sf(F, k - 2, n - k)), "k": k, "n": n}


def end_ratio(N, y, *, n_boot: int = 4000, seed: int = 0) -> dict:
    """exp(mean y at the largest N - mean y at the smallest N) (y: log samples) with a bootstrap
    95% interval from the per-N means (runs resampled within each N)."""
    N, y = np.asarray(N, float), np.asarray(y, float)
    top, bot = y[N == N.max()], y[N == N.min()]
    rng = np.random.default_rng(seed)
    bt = top[rng.integers(len(top), size=(n_boot, len(top)))].mean(1)
    bb = bot[rng.integers(len(bot), size=(n_boot, len(bot)))].mean(1)
    lo, hi = np.quantile(bt - bb, [0.025, 0.975])
    return {"ratio": math.exp(top.mean() - bot.mean()), "ci": [math.exp(lo), math.exp(hi)]}
