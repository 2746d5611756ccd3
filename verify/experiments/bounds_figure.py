"""The paper's explicit sample bounds beside Figure 1's measured samples: Theorem 4's Transformer
upper bound, Theorem 7's RNN upper bound and Theorem 6's FFN floor N d against N, each upper
bound's crossover below the floor marked: the N from which the explicit bound, as derived,
separates its model from the FFN (docs/experiments.md, "The bounds beside the experiments")."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import List, Sequence

from qstr.bounds.theorem7 import Theorem7Params, theorem7_sample_size
from qstr.bounds.theorem9 import generalising_log_norm2, theorem9_log_crossover
from qstr.bounds.transformer import Theorem4Params, ffn_sample_size, theorem4_sample_size
from qstr.verify.experiments.plots import COLORS, LABELS, new_figure, save_figure
from qstr.verify.experiments.results import write_json

RISK = 0.1  # the risk the bounds guarantee (the claims thm-4 and thm-7 use the same)
K_MAX = 200  # the bounds are drawn for N = 2^1 .. 2^K_MAX
P8_RISK = 0.05  # Theorem 9's position risk c (the claim thm-9's)
K_Y = 6.0  # ||y||^2 <= K_y n, the memoriser's label hypothesis (the claim thm-9's)


def bound_curves(d: int, q: int = 1, k_max: int = K_MAX) -> dict:
    """Theorem 4's and Theorem 7's least n for risk RISK and Theorem 6's N d at N = 2^1..2^k_max,
    at Theorem4Params.default() and Theorem7Params() with the given (q, d); and for each upper
    bound the least N = 2^k where it falls below N d (None if it does not by 2^k_max)."""
    p4 = replace(Theorem4Params.default(), q=q, d=d)
    p7 = Theorem7Params(q=q, d=d)
    ks = list(range(1, k_max + 1))
    curves = {
        "thm4": [theorem4_sample_size(RISK, 2**k, p4) for k in ks],
        "thm7": [theorem7_sample_size(RISK, 2**k, p7) for k in ks],
        "thm6": [ffn_sample_size(2**k, d) for k in ks],
    }
    crossing = {
        name: next(
            (2**k for k, n, f in zip(ks, curves[name], curves["thm6"], strict=True) if n < f), None
        )
        for name in ("thm4", "thm7")
    }
    log10_thm9 = [theorem9_log10_samples(2**k) for k in ks]
    log10_thm9 = [None if v == -math.inf else v for v in log10_thm9]  # None: vacuous
    return {
        "log2_N": ks,
        "risk": RISK,
        "q": q,
        "d": d,
        "samples": curves,
        "below_ffn_from": crossing,
        "thm9": {
            "log10_n": log10_thm9,
            "position_risk": P8_RISK,
            "width": "d_h = isqrt(N)",
            "at_least_one_from": next(
                (2**k for k, v in zip(ks, log10_thm9, strict=True) if v is not None and v >= 0),
                None,
            ),
            "above_ffn_from": next(
                (
                    2**k
                    for k, v, f in zip(ks, log10_thm9, curves["thm6"], strict=True)
                    if v is not None and v > math.log10(f)
                ),
                None,
            ),
        },
    }


def theorem9_log10_samples(N: int) -> float:
    """log10 of Theorem 9's n*(N) at hidden width d_h = isqrt(N), the rigorous (volume) form of
    Prop 8's requirement at position risk P8_RISK, depth 2: below n* min-norm ERM prefers the
    memoriser (docs/derivations/rnn-lower-bounds.md, section 3). -inf where it is vacuous."""
    log_req = generalising_log_norm2(N, P8_RISK, math.isqrt(N), depth=2, form="volume")
    return theorem9_log_crossover(log_req, depth=2, K_y=K_Y) / math.log(10.0)


def _measured(rows: Sequence[dict]) -> dict:
    """Mean samples to the threshold per (variant, model) and N, over the runs that reached it."""
    out: dict = {}
    for r in rows:
        if r["samples"] is not None:
            out.setdefault((r["variant"], r["model"]), {}).setdefault(r["N"], []).append(
                r["samples"]
            )
    return {k: {n: sum(v) / len(v) for n, v in sorted(per.items())} for k, per in out.items()}


def report(rows: List[dict], stem: str) -> dict:
    """``<stem>-summary.json`` (the curves and crossovers) and ``<stem>.png/.pdf``: the bounds at
    the rows' token dimension and q = 1, with the rows' mean samples to their thresholds."""
    d = {r["config"]["d"] for r in rows}
    if len(d) != 1:
        raise ValueError(f"the rows mix token dimensions {sorted(d)}")
    curves = bound_curves(d.pop())
    write_json(stem + "-summary.json", curves)
    _plot(curves, _measured(rows), {r["variant"]: r["threshold"] for r in rows}, stem)
    return curves


def _plot(curves: dict, measured: dict, thresholds: dict, stem: str) -> List[str]:
    fig, ax = new_figure(figsize=(8, 5))
    N = [2.0**k for k in curves["log2_N"]]
    s, risk = curves["samples"], curves["risk"]
    styles = {
        "thm4": ("transformer", f"Theorem 4: Transformer, n for risk {risk} (upper bound)"),
        "thm7": ("rnn", f"Theorem 7: RNN, simple-qSTR, n for risk {risk} (upper bound)"),
        "thm6": ("ffn", "Theorem 6: FFN needs n >= N d (lower bound)"),
    }
    for name, (model, label) in styles.items():
        ax.plot(N, s[name], color=COLORS[model], label=label)
    for name, at in curves["below_ffn_from"].items():
        if at is not None:
            ax.axvline(at, color=COLORS[styles[name][0]], ls=":", lw=1)
            ax.annotate(
                f"below N d from 2^{at.bit_length() - 1}",
                (at, s["thm6"][0]),
                rotation=90,
                fontsize=7,
                va="bottom",
            )
    t9 = curves["thm9"]
    shown = [
        (n, v) for n, v in zip(N, t9["log10_n"], strict=True) if v is not None and 0 <= v < 300
    ]
    if shown:
        ax.plot(
            [n for n, _ in shown],
            [10.0**v for _, v in shown],
            color=COLORS["rnn"],
            ls="--",
            label=f"Theorem 9: min-norm RNN, d_h = sqrt N, needs n >= n*(N) (lower bound, "
            f"position risk {t9['position_risk']})",
        )
    markers = {"1str": "o", "simple": "s"}
    for (variant, model), per in sorted(measured.items()):
        ax.scatter(
            list(per),
            list(per.values()),
            color=COLORS[model],
            marker=markers[variant],
            s=14,
            label=f"measured {LABELS[model]}, {variant} (test MSE {thresholds[variant]:g})",
        )
    ax.set_xscale("log", base=2)
    ticks = list(range(0, curves["log2_N"][-1] + 1, 32))
    ax.set_xticks([2.0**k for k in ticks], [f"$2^{{{k}}}$" for k in ticks])
    ax.set_yscale("log")
    ax.set_ylim(top=max(max(v) for v in s.values()) * 1e12)
    ax.set_xlabel("N")
    ax.set_ylabel("samples")
    ax.set_title(
        f"The explicit bounds (q = {curves['q']}, d = {curves['d']}) and Figure 1's measured "
        f"samples.\nDifferent quantities: n guaranteeing risk {risk}, against the samples a run "
        "took to reach a test threshold.",
        fontsize=8,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    return save_figure(fig, stem)
