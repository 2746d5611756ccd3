"""Figure 1 (Appendix E): samples to reach the test-MSE threshold vs N for Transformer, RNN and FFN
on 1STR and simple-1STR, with fitted exponents samples ~ N^a. Protocol and quick mode:
docs/experiments.md."""

from __future__ import annotations

import math
from typing import List, Optional


from rich.table import Table

from qstr.verify.experiments import analysis, verdicts
from qstr.verify.experiments.plots import (
    new_figure,
    plot_samples,
    save_figure,
    weight_decay_note,
)
from qstr.verify.experiments.points import MODELS, Point, apply_overrides, as_protocol, seeds_of
from qstr.verify.experiments.results import write_json
from qstr.verify.experiments.base import RunConfig, wide_console

FULL = {"1str": list(range(2, 13, 2)), "simple": list(range(25, 34, 2))}
QUICK = {"1str": [2, 4, 6], "simple": [5, 9, 13]}
THRESHOLD = {"1str": 0.7, "simple": 0.02}
CHECK_EVERY = {"1str": 10, "simple": 100}


def points(
    *,
    quick: bool = False,
    seeds=None,
    protocol: str = "paper",
    overrides: Optional[dict] = None,
    max_samples: Optional[int] = None,
    models=MODELS,
    variants=("1str", "simple"),
    N_values: Optional[dict] = None,
) -> List[Point]:
    """The points of Figure 1 (the protocol: docs/experiments.md)."""
    proto = as_protocol(protocol)
    seeds = seeds_of(seeds, range(2) if quick else range(5))
    grid = N_values or (QUICK if quick else FULL)
    out = []
    for variant in variants:
        if max_samples is not None:
            cap = max_samples // 64
        else:
            cap = {"1str": 3000, "simple": 5000}[variant] if quick else 1_000_000 // 64
        for model in models:
            for N in grid[variant]:
                for seed in seeds:
                    out.append(
                        Point(
                            figure="figure1",
                            protocol=proto.name,
                            model=model,
                            variant=variant,
                            N=N,
                            q=1,
                            seed=seed,
                            d=10,
                            link="linear",
                            lr=1e-3,
                            weight_decay=proto.online_weight_decay(0.1),
                            threshold=THRESHOLD[variant],
                            check_every=CHECK_EVERY[variant],
                            n_test=1000 if quick else 10_000,
                            batch_size=64,
                            max_steps=cap,
                            width=100,
                            rnn_hidden=500,
                            ffn_hidden=(N * 10 * 1, 1000),
                            quick=quick,
                        )
                    )
    return apply_overrides(out, overrides)


def report(rows: List[dict], stem: str, *, protocol: str, quick: bool, cfg: RunConfig) -> None:
    """The fitted exponents in ``<stem>-summary.json``, the figure ``<stem>.png/.pdf``, and the
    summary printed when the run shows progress."""
    summary = summarize(rows, protocol=protocol, quick=quick)
    write_json(stem + "-summary.json", summary)
    plot(rows, stem, protocol=protocol)
    if cfg.progress:
        print_summary(summary, console=cfg.console)
        for line in verdicts.lines(summary):
            (cfg.console or wide_console()).print(line)


def summarize(rows: List[dict], *, protocol: str, quick: bool) -> dict:
    """Fitted exponents (samples ~ N^a, bootstrap 95% interval) and the order at the largest N."""
    out = {
        "figure": "figure1",
        "protocol": protocol,
        "label": as_protocol(protocol).label,
        "quick": quick,
        "fits": analysis.summarize(rows, by="N"),
        "hierarchy": {},
    }
    for variant, per_model in out["fits"].items():
        Nmax = max(int(n) for m in per_model.values() for n in m["per_N"])
        means = {
            m: v["per_N"][str(Nmax)]["mean"]
            for m, v in per_model.items()
            if str(Nmax) in v["per_N"]
        }
        reached = {
            m: v["per_N"][str(Nmax)]["reached"]
            for m, v in per_model.items()
            if str(Nmax) in v["per_N"]
        }
        runs = {
            m: v["per_N"][str(Nmax)]["runs"]
            for m, v in per_model.items()
            if str(Nmax) in v["per_N"]
        }
        order = sorted((m for m in means if means[m] is not None), key=lambda m: means[m])
        ref = means.get("transformer")
        ratios = {
            m: v / ref for m, v in means.items() if m != "transformer" and v is not None and ref
        }
        out["hierarchy"][variant] = {
            "N": Nmax,
            "mean_samples": means,
            "reached": reached,
            "runs": runs,
            "order_fewest_first": order,
            "ratio_to_transformer": ratios,
            "not_reached_by_all": [m for m in means if reached[m] < runs[m]],
        }
    choice = verdicts.weight_decay_choice(rows)
    out["verdicts"] = verdicts.with_choice(verdicts.figure1_verdicts(rows, out["fits"]), choice)
    return out


def _with_ci(fit) -> str:
    """'a [lo, hi]' of a fit, '-' when there is none."""
    if not fit or math.isnan(fit["a"]):
        return "-"
    return f"{fit['a']:.2f} [{fit['ci'][0]:.2f}, {fit['ci'][1]:.2f}]"


def _aic(cmp) -> str:
    """Which of polylog and power law the AIC favours (difference above 2), with k or a."""
    if not cmp or math.isnan(cmp["delta_aic"]):
        return "-"
    d = cmp["delta_aic"]
    if d > 2:
        return f"polylog k={cmp['k']:.1f} ({d:.1f})"
    return f"power ({d:.1f})" if d < -2 else f"either ({d:.1f})"


def print_summary(summary: dict, console=None) -> None:
    console = console or wide_console()
    t = Table(title=f"Figure 1 - {summary['label']}" + (" [quick]" if summary["quick"] else ""))
    for col in (
        "variant",
        "model",
        "a, reached runs (95% CI)",
        "a, capped runs kept",
        "runs",
        "capped",
        "mean samples, largest N",
        "polylog vs power (dAIC)",
    ):
        t.add_column(col)
    for variant, per_model in summary["fits"].items():
        h = summary["hierarchy"][variant]
        for model, v in per_model.items():
            f, m = v["fit"], h["mean_samples"].get(model)
            t.add_row(
                variant,
                model,
                _with_ci(f),
                _with_ci(v.get("censored_fit")),
                str(f["n"] + f["censored"]),
                str(f["censored"]),
                "-" if m is None else f"{m:,.0f} (N={h['N']})",
                _aic(v.get("polylog_vs_power")),
            )
    console.print(t)
    for variant, h in summary["hierarchy"].items():
        line = (
            f"{variant}: at N = {h['N']}, fewest samples first: "
            f"{' < '.join(h['order_fewest_first']) or '-'}"
        )
        if h.get("ratio_to_transformer"):
            line += (
                " (mean samples / transformer's: "
                + ", ".join(f"{m} {v:.2f}" for m, v in sorted(h["ratio_to_transformer"].items()))
                + ")"
            )
        if h["not_reached_by_all"]:
            line += (
                f" (threshold not reached by every seed: {', '.join(h['not_reached_by_all'])}; "
                "their means are over the seeds that reached it)"
            )
        console.print(line)


def plot(rows: List[dict], stem: str, *, protocol: str) -> List[str]:
    fig, axes = new_figure(1, 2, figsize=(10, 4))
    for ax, variant, name in zip(
        axes,
        ("1str", "simple"),
        ("1STR (threshold 0.7)", "simple-1STR (threshold 0.02)"),
        strict=True,
    ):
        rs = [r for r in rows if r["variant"] == variant]
        if rs:
            plot_samples(ax, rs, by="N", title=name)
        else:
            ax.set_title(name + ": no rows")
    fig.suptitle(title(rows, protocol), fontsize=9)
    fig.tight_layout()
    return save_figure(fig, stem)


def title(rows: List[dict], protocol: str) -> str:
    """The figure's title: the protocol, the weight decay if not the paper's, and for quick runs
    the seeds and test prompts the rows have."""
    proto = as_protocol(protocol)
    out = proto.label + weight_decay_note(rows, proto.online_weight_decay(0.1))
    if not (rows and all(r.get("quick") for r in rows)):
        return out
    seeds = len({r["seed"] for r in rows})
    tests = sorted({r["config"]["n_test"] for r in rows if "config" in r})
    sizes = f"{seeds} seed{'s' if seeds != 1 else ''}"
    sizes += "".join(f", {n:,} test prompts" for n in tests[:1])
    return out + f" [quick: smaller N grid, {sizes}]"
