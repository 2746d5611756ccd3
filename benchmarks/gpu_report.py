"""The GPU numbers in one call: ceilings, Lemma 11 against its roofline, the Prop 28 RNN states
at N = 10^6, the GRU training step (gru_step.py) and all of Figure 1 at the paper's sizes.

    python benchmarks/gpu_report.py --out DIR                    # everything (CUDA)
    python benchmarks/gpu_report.py --out DIR --skip-figure1     # the kernels only (about a minute)
    python benchmarks/gpu_report.py --out DIR --figure1-matmul float32 tf32

Every number is measured in this run on this device: the matrix-product rate (random
8192^3 operands, float32 with and without TF32, float16) and the device-to-device copy rate
(bytes read plus bytes written) are the ceilings the Lemma 11 forward is compared with.
Roofline time of a Lemma 11 forward = max(FLOPs / matmul rate, bytes / copy rate), with
FLOPs = 2 B H N^2 (d_e + d) (scores over the d_e code coordinates, then the d value columns)
and bytes = x, t, the codes and y_hat each moved once. Timings are medians over CUDA events
after a warm-up. Writes ``report.json`` (every number) and the Figure 1 rows under ``--out``.
A script, not a test; see benchmarks/gpu_notes.md for what was measured and tried.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from functools import partial

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import gru_step  # noqa: E402
import rnn_scan  # noqa: E402
from ceilings import ceilings, cuda_median  # noqa: E402

from qstr.bounds.attention import lemma11, lemma12_radius  # noqa: E402
from qstr.constructions.links import make_link  # noqa: E402
from qstr.constructions.task import QSTR  # noqa: E402
from qstr.verify.adversarial import clip_to_ball  # noqa: E402
from qstr.verify.experiments import (  # noqa: E402
    Execution,
    run_experiment,
)
from qstr.verify.experiments import run as run_mod  # noqa: E402
from qstr.verify.training import stack as stack_mod  # noqa: E402

PUBLISHED_S_PER_SEED = 295.0  # the published experiment code on one H100, both panels, one seed
TARGET_FIGURE1_S = 60.0  # all of Figure 1 on one H100 (the target was 75 s until 2026-11-27)


def lemma11_rows(dev, ceil: dict, Ns, qs, d: int = 4, B: int = 1) -> list:
    """Lemma 11's fast forward (float32) per (N, q): time, FLOP/s, bytes/s, roofline fraction,
    and the error against the float64 construction on the same prompt."""
    rows = []
    for q in qs:
        for N in Ns:
            link = make_link("linear", q, d, generator=torch.Generator().manual_seed(1))
            kw = dict(eps=0.05, r_x=lemma12_radius(d, 10_000, N), device=dev)
            c32 = lemma11(N, d, q, link.two_layer_net(), dtype=torch.float32, **kw)
            g = torch.Generator(device=dev).manual_seed(N + q)
            p = QSTR(N=N, d=d, link=link).sample(B, generator=g, device=dev, dtype=torch.float64)
            x32 = p.x.float()
            with torch.no_grad():
                sec = cuda_median(partial(c32.fast_predict, x32, p.t), reps=5)
                chunked = cuda_median(partial(c32.fast_predict, x32, p.t, chunk=1024), reps=3)
                y32 = c32.fast_predict(x32, p.t).double()
                c64 = lemma11(N, d, q, link.two_layer_net(), dtype=torch.float64, **kw)
                y64 = c64.fast_predict(p.x, p.t, chunk=2048)
            H, d_e = c32.H, c32.d_e
            flops = 2 * B * H * N * N * (d_e + d)
            nbytes = 4 * B * N * d + 8 * B * N * q + 4 * N * d_e + 4 * B * N
            roof = max(flops / ceil["matmul_float32_flops"], nbytes / ceil["copy_bytes"])
            rows.append(
                dict(
                    N=N,
                    q=q,
                    d=d,
                    d_e=d_e,
                    H=H,
                    seconds=sec,
                    seconds_chunk1024=chunked,
                    flops_per_s=flops / sec,
                    bytes_per_s=nbytes / sec,
                    roofline_s=roof,
                    roofline_fraction=roof / sec,
                    fraction_of_tf32_matmul=flops / sec / ceil["matmul_tf32_flops"],
                    rel_err_vs_float64=float((y32 - y64).norm() / y64.norm()),
                    max_abs_err_vs_float64=float((y32 - y64).abs().max()),
                    error_bound=c32.guarantee.error_bound,
                )
            )
            print(
                f"lemma11 N={N:6d} q={q} d_e={d_e:3d}: {sec * 1e3:8.2f} ms "
                f"(chunk 1024: {chunked * 1e3:8.2f} ms), "
                f"{flops / sec / 1e12:6.2f} TFLOP/s, "
                f"{rows[-1]['roofline_fraction']:.1%} of roofline, "
                f"rel err vs float64 {rows[-1]['rel_err_vs_float64']:.1e}",
                flush=True,
            )
            c32 = c64 = None  # freed before the next size
            torch.cuda.empty_cache()
    return rows


def rnn_states(dev, N: int = 1_000_000) -> dict:
    """Prop 28's bidirectional RNN states at N positions (closed-form scan, float64)."""
    args = argparse.Namespace(d=4, q=2, eps=0.1, seed=0)
    t0 = time.perf_counter()
    book, c = rnn_scan._build(N, dev, args)
    torch.cuda.synchronize()
    build = time.perf_counter() - t0
    link = make_link(
        "teacher", args.q, args.d, generator=torch.Generator(device=dev).manual_seed(0)
    )
    g = torch.Generator(device=dev).manual_seed(0)
    p = QSTR(N=N, d=args.d, link=link, variant="simple").sample(
        1, generator=g, device=dev, dtype=torch.float64
    )
    x = clip_to_ball(p.x, c.transition.guarantee.r_x)
    sec = cuda_median(lambda: c.states(x, p.t), reps=3, warmup=1)
    st = c.states(x, p.t)
    tf, tb = c.targets(x, p.t)
    err = max(float((st.h_fwd - tf).abs().max()), float((st.h_bwd - tb).abs().max()))
    out = dict(
        N=N, seconds=sec, build_seconds=build, max_state_error=err, eps=c.transition.guarantee.eps
    )
    print(
        f"RNN states N={N:,}: {sec:.3f} s (build {build:.2f} s); "
        f"max state error {err:.3g} <= eps {out['eps']:.3g}",
        flush=True,
    )
    return out


def segments_summary(dev, top: int = 8) -> str:
    """Where reserved device memory sits: per pool, segments, reserved and allocated GiB; then the
    ``top`` segments with the most reserved-but-unallocated memory and their live blocks."""
    segs = [
        s for s in torch.cuda.memory_snapshot() if s["device"] == dev.index or dev.index is None
    ]
    gib = 2.0**30
    pools: dict = {}
    for s in segs:
        k = str(s.get("segment_pool_id"))
        n, tot, alloc = pools.get(k, (0, 0, 0))
        pools[k] = (n + 1, tot + s["total_size"], alloc + s["allocated_size"])
    lines = [
        f"pool {k}: {n} segments, {t / gib:.2f} GiB reserved, {a / gib:.2f} GiB allocated"
        for k, (n, t, a) in sorted(pools.items(), key=lambda kv: -kv[1][1])
    ]
    segs.sort(key=lambda s: s["allocated_size"] - s["total_size"])
    for s in segs[:top]:
        live = sorted((b["size"] for b in s["blocks"] if b["state"] != "inactive"), reverse=True)
        lines.append(
            f"segment {s['total_size'] / gib:.2f} GiB ({s['segment_type']}, pool "
            f"{s.get('segment_pool_id')}, expandable {s.get('is_expandable')}): "
            f"{len(live)} live blocks, largest MiB "
            + ", ".join(f"{b / 2**20:.1f}" for b in live[:6])
        )
    return "\n".join(lines)


def figure1(dev, out_dir: str, matmul: str, seeds: int, check_breakdown: bool = False) -> dict:
    """All of Figure 1 at the paper's sizes (both panels, 10,000 test prompts), timed; with
    ``check_breakdown`` each test check is synchronized and timed apart (the total then
    includes those synchronizations: a breakdown, not the figure's time)."""
    d = os.path.join(out_dir, f"figure1-{matmul}")
    plain = run_mod.train_points

    checks = {"s": 0.0, "n": 0}
    test_mse = stack_mod._Stack.test_mse

    def timed_check(self):  # the test checks' share of a stack (synchronized before and after)
        torch.cuda.synchronize(dev)
        c0 = time.perf_counter()
        mse = test_mse(self)
        torch.cuda.synchronize(dev)
        checks["s"] += time.perf_counter() - c0
        checks["n"] += 1
        return mse

    def logged(pts, *args, **kw):  # the device memory after each stack (after it, untimed)
        checks.update(s=0.0, n=0)
        s0 = time.perf_counter()
        out = plain(pts, *args, **kw)
        gib = 2.0**30
        key = f"{pts[0].variant}/{pts[0].model}"
        breakdown[key] = {
            "wall_s": time.perf_counter() - s0,
            "checks_s": checks["s"],
            "checks": checks["n"],
        }
        print(
            f"  stack {key} x{len(pts)}: {breakdown[key]['wall_s']:.1f} s, of which "
            f"{checks['n']} test checks {checks['s']:.1f} s; reserved "
            f"{torch.cuda.memory_reserved(dev) / gib:.1f} GiB, allocated "
            f"{torch.cuda.memory_allocated(dev) / gib:.1f} GiB, peak "
            f"{torch.cuda.max_memory_allocated(dev) / gib:.1f} GiB",
            flush=True,
        )
        return out

    breakdown: dict = {}
    run_mod.train_points = logged
    if check_breakdown:
        stack_mod._Stack.test_mse = timed_check
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    try:
        ex = Execution(device=dev, progress=False, matmul=matmul)
        rows = run_experiment("figure1", out_dir=d, seeds=seeds, execution=ex)
    finally:
        run_mod.train_points = plain
        stack_mod._Stack.test_mse = test_mse
    torch.cuda.synchronize()
    total = time.perf_counter() - t0
    stacks = {}
    for r in rows:
        k = f"{r['variant']}/{r['model']}"
        stacks[k] = max(stacks.get(k, 0.0), r["wall_s"])
    by_arch = {
        m: sum(v for k, v in stacks.items() if k.endswith("/" + m))
        for m in ("transformer", "rnn", "ffn")
    }
    reached = sum(r["samples"] is not None for r in rows)
    print(
        f"Figure 1 ({matmul}, {seeds} seeds, {len(rows)} models, {reached} reached): "
        f"{total:.1f} s wall; "
        f"by architecture "
        + ", ".join(f"{m} {s:.1f} s" for m, s in by_arch.items())
        + f"; target {TARGET_FIGURE1_S:.0f} s, "
        f"published code ~{PUBLISHED_S_PER_SEED * seeds:.0f} s",
        flush=True,
    )
    return dict(
        matmul=matmul,
        seeds=seeds,
        models=len(rows),
        reached=reached,
        wall_s=total,
        stacks_s=stacks,
        by_architecture_s=by_arch,
        breakdown=breakdown,
        check_breakdown=check_breakdown,
        ratio_to_target=total / TARGET_FIGURE1_S,
        speedup_vs_published=PUBLISHED_S_PER_SEED * seeds / total,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--N", type=int, nargs="+", default=[4096, 16384, 65536])
    ap.add_argument("--q", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--rnn-N", type=int, default=1_000_000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument(
        "--figure1-matmul", nargs="+", default=["float32", "tf32"], choices=["float32", "tf32"]
    )
    ap.add_argument("--skip-figure1", action="store_true")
    ap.add_argument(
        "--check-breakdown",
        action="store_true",
        help="time each test check of Figure 1 apart (adds synchronizations)",
    )
    ap.add_argument(
        "--skip-gru", action="store_true", help="skip the GRU step (benchmarks/gru_step.py)"
    )
    ap.add_argument(
        "--gru-current",
        action="store_true",
        help="time only the current GRU scan, without its kernel table",
    )
    ap.add_argument("--skip-kernels", action="store_true", help="skip Lemma 11 and the RNN states")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_report: needs a CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    os.makedirs(args.out, exist_ok=True)
    report = {
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    path = os.path.join(args.out, "report.json")

    def save():
        with open(path, "w") as fh:
            json.dump(report, fh, indent=2)

    sections = [("ceilings", lambda: ceilings(dev))]
    if not args.skip_kernels:
        sections += [
            ("lemma11", lambda: lemma11_rows(dev, report["ceilings"], args.N, args.q)),
            ("rnn_states", lambda: rnn_states(dev, args.rnn_N)),
        ]
    if not args.skip_gru:
        gru_kw = {"scans": ("bptt",), "profile": False} if args.gru_current else {}
        sections.append(("gru_step", lambda: gru_step.report(dev, report["ceilings"], **gru_kw)))
    if not args.skip_figure1:
        for mm in args.figure1_matmul:
            sections.append(
                (
                    f"figure1_{mm}",
                    lambda mm=mm: figure1(dev, args.out, mm, args.seeds, args.check_breakdown),
                )
            )
    for name, fn in sections:
        try:
            report[name] = fn()
        except Exception as exc:  # noqa: BLE001 - one failed section must not lose the others
            report[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"{name}: FAILED {type(exc).__name__}: {exc}", flush=True)
            if isinstance(exc, torch.cuda.OutOfMemoryError):  # which pools hold the memory
                report[name]["memory_summary"] = torch.cuda.memory_summary(dev, abbreviated=True)
                report[name]["segments"] = segments_summary(dev)
                print(
                    report[name]["memory_summary"], report[name]["segments"], sep="\n", flush=True
                )
        if name == "gru_step" and not gru_step.trusted(report[name]):
            # Figure 1 is still timed, on the code before, and the report says so
            gru_step.use_scan("autograd")
            report["figure1_gru_scan"] = "autograd (gru_scan failed its float64 check here)"
            print("GRU step: gru_scan NOT trusted on this device; Figure 1 runs the code before")
        save()
    c = report["ceilings"]
    print(f"\n{report['device']}, torch {report['torch']}, {report['date']}")
    if "error" not in c:
        print(
            f"ceilings: matmul float32 {c['matmul_float32_flops'] / 1e12:.1f}, "
            f"tf32 {c['matmul_tf32_flops'] / 1e12:.1f}, "
            f"float16 {c['matmul_float16_flops'] / 1e12:.1f} TFLOP/s; "
            f"copy {c['copy_bytes'] / 1e12:.2f} TB/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
