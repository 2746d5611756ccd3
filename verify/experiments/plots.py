"""Figures of the experiments: samples to the threshold against N (or q), one line per model."""

from __future__ import annotations

from typing import List, Optional, Sequence

import torch
from matplotlib.figure import Figure

from qstr.verify.experiments.points import MODELS
from qstr.verify.files import write_atomic


COLORS = {"transformer": "#1b9e77", "rnn": "#d95f02", "ffn": "#7570b3"}


LABELS = {"transformer": "Transformer", "rnn": "RNN (GRU)", "ffn": "FFN"}


def plot_samples(
    ax, rows: Sequence[dict], *, by: str = "N", cap: Optional[float] = None, title: str = ""
):
    """Mean samples over the seeds that reached the threshold, per model, against ``by``, with a
    95% bootstrap interval of that mean (seeds resampled; asymmetric, so it stays positive on the
    log axis); runs that never reached the threshold are drawn as open triangles at the step cap
    (a lower bound)."""
    g = torch.Generator().manual_seed(0)
    for model in MODELS:
        rs = [r for r in rows if r["model"] == model]
        if not rs:
            continue
        xs = sorted({r[by] for r in rs})
        mean, lo, hi, xm = [], [], [], []
        for v in xs:
            got = [r["samples"] for r in rs if r[by] == v and r["samples"] is not None]
            if got:
                t = torch.tensor(got, dtype=torch.float64)
                boot = t[torch.randint(len(got), (2000, len(got)), generator=g)].mean(1)
                q = torch.quantile(boot, torch.tensor([0.025, 0.975], dtype=torch.float64))
                xm.append(v)
                mean.append(float(t.mean()))
                lo.append(mean[-1] - float(q[0]))
                hi.append(float(q[1]) - mean[-1])
        if xm:
            ax.errorbar(
                xm,
                mean,
                yerr=[lo, hi],
                color=COLORS[model],
                marker="o",
                capsize=3,
                label=LABELS[model],
            )
        miss = [(r[by], r["steps"] * r["config"]["batch_size"]) for r in rs if r["samples"] is None]
        if miss:
            ax.scatter(
                [m[0] for m in miss],
                [m[1] for m in miss],
                marker="^",
                facecolors="none",
                edgecolors=COLORS[model],
                label=f"{LABELS[model]}: not reached (cap)",
            )
    ax.set_yscale("log")
    ax.set_xticks(sorted({r[by] for r in rows}))
    ax.set_xlabel(by)
    ax.set_ylabel("samples to threshold")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def weight_decay_note(rows: Sequence[dict], protocol_value: float) -> str:
    """``", weight decay W (the protocol: V)"`` when the rows were trained at another weight decay
    than the protocol's (``qstr reproduce --weight-decay``), else empty."""
    used = sorted({r["config"]["weight_decay"] for r in rows})
    if not used or used == [protocol_value]:
        return ""
    return f"; weight decay {', '.join(f'{w:g}' for w in used)} (the protocol: {protocol_value:g})"


def new_figure(nrows: int = 1, ncols: int = 1, *, figsize, **kw):
    """A matplotlib Figure and its axes (``Figure.subplots``), drawn without pyplot: no backend is
    chosen and no figure is left open, whatever session imports the package."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kw)


def save_figure(fig, stem: str) -> List[str]:
    paths = [f"{stem}.png", f"{stem}.pdf"]
    write_atomic(paths[0], lambda fh: fig.savefig(fh, format="png", dpi=150, bbox_inches="tight"))
    write_atomic(paths[1], lambda fh: fig.savefig(fh, format="pdf", bbox_inches="tight"))
    return paths
