"""Scaling fits of the experiments: samples ~ N^a by least squares in log-log,
bootstrap intervals."""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence

import torch

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


def summarize(rows: Sequence[dict], *, by: str = "N") -> Dict[str, Dict[str, dict]]:
    """Per (variant, model): fitted exponent of samples in ``by`` and per-value means."""
    out: Dict[str, Dict[str, dict]] = {}
    for variant in sorted({r["variant"] for r in rows}):
        out[variant] = {}
        for model in MODELS:
            rs = [r for r in rows if r["variant"] == variant and r["model"] == model]
            if not rs:
                continue
            fit = fit_exponent([r[by] for r in rs], [r["samples"] for r in rs])
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
            out[variant][model] = {"fit": fit, f"per_{by}": per}
    return out


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
    values = sorted({r[by] for r in rows if r["model"] in (num, den)})
    out: dict = {"per": {}, "by": by, "num": num, "den": den}
    logs: Dict[int, Dict[float, float]] = {}
    g = torch.Generator().manual_seed(seed)
    for v in values:
        seeds = sorted(s for (m, b, s) in key if m == num and b == v and (den, v, s) in key)
        if not seeds:
            continue
        pairs = [(key[(num, v, s)], key[(den, v, s)]) for s in seeds]
        lr = torch.tensor(
            [math.log(_cap_samples(a) / _cap_samples(b)) for a, b in pairs], dtype=torch.float64
        )
        for s, x in zip(seeds, lr.tolist(), strict=True):
            logs.setdefault(s, {})[v] = x
        boot = lr[torch.randint(len(lr), (n_boot, len(lr)), generator=g)].mean(1)
        lo, hi = torch.quantile(boot, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
        out["per"][str(v)] = {
            "geo_mean": math.exp(lr.mean().item()),
            "ci": [math.exp(lo), math.exp(hi)],
            "pairs": len(lr),
            "censored": sum((a["samples"] is None) + (b["samples"] is None) for a, b in pairs),
        }
    full = [s for s, d in logs.items() if len(d) == len(values)]
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
