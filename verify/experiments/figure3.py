"""Figure 3 (Appendix E): samples vs the sparsity q (Hermite link, N = 7) for Transformer, RNN and
FFN, and the gap RNN / Transformer, FFN / Transformer per q. Protocol and quick mode:
docs/experiments.md."""

from __future__ import annotations

from typing import List, Optional


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

N_FIG3 = 7


def points(
    *,
    quick: bool = False,
    seeds=None,
    protocol: str = "paper",
    overrides: Optional[dict] = None,
    q_values=None,
    max_samples: Optional[int] = None,
    models=MODELS,
) -> List[Point]:
    proto = as_protocol(protocol)
    seeds = seeds_of(seeds, range(2) if quick else range(5))
    qs = list(q_values or ([1, 2, 3] if quick else [1, 2, 3, 4]))
    cap = (max_samples // 64) if max_samples else (4000 if quick else 2_000_000 // 64)
    out = []
    for model in models:
        for q in qs:
            for seed in seeds:
                out.append(
                    Point(
                        figure="figure3",
                        protocol=proto.name,
                        model=model,
                        variant="qstr",
                        N=N_FIG3,
                        q=q,
                        seed=seed,
                        d=10,
                        link="hermite",
                        lr=1e-4,
                        weight_decay=proto.online_weight_decay(0.1),
                        threshold=0.88,
                        check_every=10,
                        n_test=1000 if quick else 10_000,
                        batch_size=64,
                        max_steps=cap,
                        width=100,
                        rnn_hidden=(64 if quick else 500) * q,
                        ffn_hidden=(N_FIG3 * 10 * q, 256 if quick else 1000),
                        quick=quick,
                    )
                )
    return apply_overrides(out, overrides)


def report(rows: List[dict], stem: str, *, protocol: str, quick: bool, cfg: RunConfig) -> None:
    """The gaps and fitted exponents in ``<stem>-summary.json``, the figure ``<stem>.png/.pdf``,
    and both printed when the run shows progress."""
    summary = summarize(rows, protocol=protocol, quick=quick)
    write_json(stem + "-summary.json", summary)
    plot(rows, stem, protocol=protocol)
    if cfg.progress:
        c = cfg.console or wide_console()
        for q, g in summary["gap"].items():
            parts = ", ".join(f"{k} {v:.2f}" if v is not None else f"{k} -" for k, v in g.items())
            c.print(f"figure3 q = {q}: mean samples ratio {parts}")
        for name, pg in summary["paired"].items():
            per = ", ".join(
                f"q={q} {v['geo_mean']:.2f} [{v['ci'][0]:.2f}, {v['ci'][1]:.2f}]"
                for q, v in pg["per"].items()
            )
            tr = pg["trend"]
            test = (
                "no trend test (fewer than 2 seeds or values of q)"
                if tr is None
                else f"log-ratio slope {tr['slope_log_ratio']:.3f} per q, one-sided paired "
                f"permutation p = {tr['p_one_sided']:.2g} ({tr['seeds']} seeds)"
            )
            verdict = "grows with q" if pg["grows"] else "not shown to grow with q"
            c.print(f"figure3 {name}, paired by seed (geometric mean): {per}; {test}: {verdict}")
        for m, f in summary["fits"].get("qstr", {}).items():
            fit = f["fit"]
            a = (
                "-"
                if fit["a"] != fit["a"]
                else f"{fit['a']:.2f} [{fit['ci'][0]:.2f}, {fit['ci'][1]:.2f}]"
            )
            c.print(f"figure3 {m}: samples ~ q^a, a = {a} ({fit['censored']} runs not reached)")
        for line in verdicts.lines(summary):
            c.print(line)


def summarize(rows: List[dict], *, protocol: str, quick: bool) -> dict:
    fits = analysis.summarize(rows, by="q")
    gap = {}
    per = fits.get("qstr", {})
    qs = sorted({r["q"] for r in rows})
    for q in qs:
        tr = per.get("transformer", {}).get("per_q", {}).get(str(q), {}).get("mean")
        g = {}
        for m in ("rnn", "ffn"):
            v = per.get(m, {}).get("per_q", {}).get(str(q), {}).get("mean")
            g[f"{m}/transformer"] = (v / tr) if (v is not None and tr) else None
        gap[str(q)] = g
    out = {
        "figure": "figure3",
        "protocol": protocol,
        "label": as_protocol(protocol).label_for("figure3"),
        "quick": quick,
        "fits": fits,
        "gap": gap,
        "paired": {f"{m}/transformer": paired(rows, m) for m in ("rnn", "ffn")},
    }
    out["verdicts"] = verdicts.with_choice(
        verdicts.figure3_verdicts(rows), verdicts.weight_decay_choice(rows)
    )
    return out


def paired(rows: List[dict], model: str) -> dict:
    """``model`` against the Transformer on the same prompts with the verdict ``grows``
    (verdicts.gap_trend), and the trend test's power at 5-30 seeds from these rows
    (analysis.trend_power)."""
    out = verdicts.gap_trend(rows, model, "q")
    sim = analysis.PowerSimulation(level=verdicts.ALPHA)
    out["power"] = analysis.trend_power(rows, model, "transformer", by="q", sim=sim)
    return out


def plot(rows: List[dict], stem: str, *, protocol: str) -> List[str]:
    fig, ax = new_figure(figsize=(5.5, 4))
    plot_samples(ax, rows, by="q", title=f"qSTR, N = {N_FIG3}, Hermite link (threshold 0.88)")
    ax.set_xticks(sorted({r["q"] for r in rows}))
    quick = bool(rows) and all(r.get("quick") for r in rows)
    proto = as_protocol(protocol)
    fig.suptitle(
        proto.label_for("figure3")
        + weight_decay_note(rows, proto.online_weight_decay(0.1))
        + (" [quick]" if quick else ""),
        fontsize=7,
    )
    fig.tight_layout()
    return save_figure(fig, stem)
