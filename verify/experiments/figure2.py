"""Figure 2 (Appendix E): the trained W_Q^T W_K at N = 100 and the share of its squared mass in the
Lemma 11 block (query slot 0 against key position). Protocol and quick mode:
docs/experiments.md."""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import torch
from matplotlib.patches import Rectangle

from qstr.constructions.layout import token_layout
from qstr.verify.experiments import verdicts
from qstr.verify.experiments.plots import new_figure, save_figure
from qstr.verify.experiments.points import Point, apply_overrides, as_protocol, seeds_of
from qstr.verify.experiments.results import write_json
from qstr.verify.experiments.base import RunConfig, wide_console
from qstr.verify.files import save_torch


def _whole(name: str, value, least: int) -> int:
    """``value`` as an integer >= ``least`` (Figure 2's options), else ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return value


def points(
    *,
    quick: bool = False,
    seeds=None,
    protocol: str = "paper",
    overrides: Optional[dict] = None,
    N=None,
    n_train=None,
    epochs=None,
) -> List[Point]:
    proto = as_protocol(protocol)
    seeds = seeds_of(seeds, [0])
    N = 100 if N is None else _whole("N", N, 2)
    n_train = (10_000 if quick else 50_000) if n_train is None else _whole("n_train", n_train, 1)
    epochs = (5 if quick else 20) if epochs is None else _whole("epochs", epochs, 1)
    steps_per_epoch = -(-n_train // 64)
    pts = [
        Point(
            figure="figure2",
            protocol=proto.name,
            model="transformer",
            variant="simple" if proto.published else "1str",
            N=N,
            q=1,
            seed=s,
            d=10,
            link="linear",
            lr=1e-3,
            weight_decay=0.2,
            threshold=None,
            check_every=steps_per_epoch,
            n_test=1000 if quick else 10_000,
            batch_size=64,
            max_steps=epochs * steps_per_epoch,
            width=100,
            n_train=n_train,
            epoch_loss_threshold=0.05,
            quick=quick,
        )
        for s in seeds
    ]
    return apply_overrides(pts, overrides)


def block_stats(A: torch.Tensor, d: int, q: int, d_e: int) -> dict:
    """Squared-Frobenius share of the Lemma 11 block (query slot0 x key pos) of each head."""
    lay = token_layout(d, q, d_e)
    out = []
    for h in range(A.shape[0]):
        M = A[h].double()
        blk = M[lay["slot0"], lay["pos"]]
        tot = float((M**2).sum())
        bm = float((blk**2).sum())
        diag = float((torch.diagonal(blk) ** 2).sum())
        # how the mass splits over all (query block, key block) pairs
        blocks = {
            f"{a}|{b}": float((M[lay[a], lay[b]] ** 2).sum()) / tot
            for a in lay.names
            for b in lay.names
        }
        out.append(
            {
                "block_mass": bm / tot,
                "chance_block_mass": d_e * d_e / lay.dim**2,
                "diag_mass": diag / bm if bm > 0 else float("nan"),
                "chance_diag_mass": 1 / d_e,
                "block_diag_mean": float(torch.diagonal(blk).mean()),
                "block_offdiag_rms": float(
                    ((blk - torch.diag(torch.diagonal(blk))) ** 2).sum().div(d_e * d_e - d_e).sqrt()
                ),
                "mass_by_block": blocks,
            }
        )
    return {
        "heads": out,
        "block_mass": out[0]["block_mass"] if len(out) == 1 else [o["block_mass"] for o in out],
    }


def row_fields(stem: str):
    """``(point, result) -> dict``: a row's block numbers from its trained model, whose merged
    W_Q^T W_K is saved in ``<stem>-seed<s>.pt``. The rows need the trained models, so Figure 2
    trains in this process whatever ``jobs`` and ``scheduler`` say."""
    os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)

    def extra(p: Point, r):
        A = r.model.merged_qk().detach().cpu()
        path = f"{stem}-seed{p.seed}.pt"
        save_torch(
            path,
            {
                "merged_qk": A,
                "point_id": p.point_id,
                "layout": token_layout(p.d, p.q, p.config["d_e"]).blocks,
            },
        )
        stats = block_stats(A, p.d, p.q, p.config["d_e"])
        return {
            "block_mass": stats["block_mass"],
            "block_stats": stats["heads"],
            "matrix_file": os.path.basename(path),
            "epochs": r.steps / p.check_every,
        }

    return extra


def report(rows: List[dict], stem: str, *, protocol: str, quick: bool, cfg: RunConfig) -> None:
    """The figures ``<stem>.png/.pdf``, the block numbers in ``<stem>-summary.json``, printed
    when the run shows progress."""
    plot(rows, stem, out_dir=os.path.dirname(stem), protocol=protocol)
    summary = {
        "figure": "figure2",
        "protocol": protocol,
        "label": as_protocol(protocol).label_for("figure2"),
        "quick": quick,
        "block_mass": {r["seed"]: r["block_mass"] for r in rows},
        "chance_block_mass": rows[0]["block_stats"][0]["chance_block_mass"] if rows else None,
        "diag_mass": {r["seed"]: r["block_stats"][0]["diag_mass"] for r in rows},
        "test_mse": {r["seed"]: r["test_mse"] for r in rows},
        # the positional codes the runs drew: Assumption 3 asks mu <= 1/2 (docs/experiments.md)
        "code_mu": {r["seed"]: r.get("code_mu") for r in rows},
        "code_pairs_above_half": {r["seed"]: r.get("code_pairs_above_half") for r in rows},
    }
    summary["verdicts"] = verdicts.figure2_verdicts(summary)
    write_json(stem + "-summary.json", summary)
    if cfg.progress:
        c = cfg.console or wide_console()
        for r in rows:
            s = r["block_stats"][0]
            c.print(
                f"figure2 seed {r['seed']}: block (query slot0 x key pos) "
                f"holds {s['block_mass']:.1%} of ||W_Q^T W_K||_F^2 "
                f"(no structure: {s['chance_block_mass']:.1%}); diagonal share of the block "
                f"{s['diag_mass']:.1%} (no structure: {s['chance_diag_mass']:.1%}); "
                f"test MSE {r['test_mse']:.4f} "
                f"after {r['epochs']:.0f} passes" + _assumption3(r)
            )
        for line in verdicts.lines(summary):
            c.print(line)


def _assumption3(r: dict) -> str:
    """'; codes violate Assumption 3 (mu = M > 1/2, K pairs)' when the run's codes did."""
    mu = r.get("code_mu")
    if mu is None or mu <= 0.5:
        return ""
    return f"; codes violate Assumption 3 (mu = {mu:.2f} > 1/2, {r['code_pairs_above_half']} pairs)"


def plot(rows: List[dict], stem: str, *, out_dir: str, protocol: str) -> List[str]:
    """The first row's trained W_Q^T W_K with its blocks, and the block shares of every row; not
    drawn, with a note, when no row's matrix file is in ``out_dir`` (removed after training)."""
    kept = [r for r in rows if os.path.isfile(os.path.join(out_dir, r["matrix_file"]))]
    if not kept:
        if rows:
            print(
                f"qstr: note: the trained matrices ({rows[0]['matrix_file']}, ...) are not in "
                f"{out_dir or '.'}: the figure is not drawn; run the same qstr reproduce "
                "command to train them again",
                file=sys.stderr,
            )
        return []
    r = kept[0]
    A = torch.load(os.path.join(out_dir, r["matrix_file"]))["merged_qk"][0].abs()
    lay = token_layout(r["config"]["d"], r["config"]["q"], r["config"]["d_e"])
    fig, axes = new_figure(1, 2, figsize=(11, 5), gridspec_kw={"width_ratios": [1.25, 1]})
    ax = axes[0]
    im = ax.imshow(A.numpy(), cmap="viridis", interpolation="nearest")
    edges = []
    pos = 0
    for name, size in lay.blocks:
        edges.append((pos, size, name))
        pos += size
    for start, _, _ in edges[1:]:
        ax.axhline(start - 0.5, color="w", lw=0.8)
        ax.axvline(start - 0.5, color="w", lw=0.8)
    ticks = [s + (n - 1) / 2 for s, n, _ in edges]
    ax.set_xticks(ticks, [nm for _, _, nm in edges])
    ax.set_yticks(ticks, [nm for _, _, nm in edges])
    ax.set_xlabel("key coordinate (z_j)")
    ax.set_ylabel("query coordinate (z_i)")
    qs, ps = lay["slot0"], lay["pos"]
    ax.add_patch(
        Rectangle(
            (ps.start - 0.5, qs.start - 0.5),
            ps.stop - ps.start,
            qs.stop - qs.start,
            fill=False,
            ec="r",
            lw=1.5,
        )
    )
    fig.colorbar(im, ax=ax, fraction=0.046)
    s = r["block_stats"][0]
    ax.set_title(
        f"|W_Q^T W_K| (seed {r['seed']}, N = {r['N']}); red: Lemma 11 block\n"
        f"block holds {s['block_mass']:.1%} of the squared Frobenius norm (no structure: "
        f"{s['chance_block_mass']:.1%})",
        fontsize=9,
    )
    ax = axes[1]
    blk = torch.load(os.path.join(out_dir, r["matrix_file"]))["merged_qk"][0][qs, ps]
    im = ax.imshow(
        blk.numpy(), cmap="RdBu_r", vmin=-float(blk.abs().max()), vmax=float(blk.abs().max())
    )
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_title(
        f"signed block (query slot0 x key pos): diagonal holds {s['diag_mass']:.1%}\n"
        f"of its mass (no structure: {s['chance_diag_mass']:.1%}); Lemma 11: alpha * I",
        fontsize=9,
    )
    ax.set_xlabel("key pos coordinate")
    ax.set_ylabel("query slot0 coordinate")
    fig.suptitle(
        as_protocol(protocol).label_for("figure2")
        + f"; test MSE {r['test_mse']:.3f}"
        + (" [quick: 10,000 training prompts]" if r.get("quick") else ""),
        fontsize=9,
    )
    fig.tight_layout()
    return save_figure(fig, stem)
