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
