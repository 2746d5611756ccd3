"""The GRU step of a paper-size stack (Figure 1's simple-1STR panel: 5 seeds x N = 25..33, GRU 500),
before and after the hand-written backward through time (verify/training/gru_scan.py).

    python benchmarks/gru_step.py          # CUDA only; prints a table, writes nothing
    python benchmarks/gru_step.py --variants   # the step of each scan in VARIANTS, alternated

For both versions ('autograd': autograd through torch's fused cell at every position, the code
before; 'bptt': gru_scan) it measures, in one run on one device:
  * the float64 gradients of one paper-size step, each against the other (relative error);
  * the time of one training step with CUDA graphs, float32 and TF32: (T(60 steps) - T(20)) / 40,
    so recording and warm-up cancel;
  * the time of one test evaluation (10,000 prompts), from runs with and without checks;
  * one check timed directly by both routes of the family (the padded scan, `forward`; one
    member at a time through cuDNN's GRU, `evaluate`, what train_stack runs on CUDA), TF32,
    with the relative difference of their outputs in float64 and in TF32 and the check's floors;
  * the kernel table of three eager TF32 steps (the profile; no test evaluation in it);
and prints the step's two floors: matrix FLOPs over the measured TF32 rate, and the bytes the
recurrence must move (W_hh read once per position forward and once backward, since 50 x 3 MB
does not fit in L2; the gates written and read once) over the measured copy rate.
A script, not a test; benchmarks/gpu_notes.md holds what it printed.
"""

from __future__ import annotations

import os
import sys
import time
from functools import partial

import torch
from torch.profiler import ProfilerActivity, profile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)  # ceilings

from ceilings import ceilings, cuda_median  # noqa: E402

from qstr.verify.experiments import figure1  # noqa: E402
from qstr.verify.experiments.points import (  # noqa: E402
    build_member,
    experimental_dim,
)
from qstr.verify.training import (  # noqa: E402
    StackOptions,
    families,
    train_stack,
)
from qstr.verify.training.adamw import StackedAdamW  # noqa: E402
from qstr.verify.training.families import (  # noqa: E402
    GRUFamily,
    _Family,
    _pad_prompts,
)
from qstr.verify.training.gru_scan import gru_scan  # noqa: E402
from versions.gru_scan_2026_11_27 import gru_scan as gru_scan_v1  # noqa: E402
from qstr.verify.training.stack import (  # noqa: E402
    _tf32,
    _train_step,
    default_eval_elements,
    evaluation_chunk,
)


def autograd_scan(z, WihT, bih, WhhT, bhh):
    """The code before: the input gates of all positions at once, then one fused cell per
    position, differentiated by autograd (which keeps a gradient of W_hh per position)."""
    N, G, B, D = z.shape
    H = WhhT.shape[1]
    gi = torch.baddbmm(bih, z.transpose(0, 1).reshape(G, N * B, D), WihT)
    gi = gi.view(G, N, B, 3 * H).transpose(0, 1).reshape(N, G * B, 3 * H)
    h = z.new_zeros(G * B, H)
    outs = [h.view(G, 1, B, H)]
    for s in range(N):
        gh = torch.baddbmm(bhh, h.view(G, B, H), WhhT).view(G * B, 3 * H)
        h = torch.ops.aten._thnn_fused_gru_cell(gi[s], gh, h)[0]
        outs.append(h.view(G, 1, B, H))
    return torch.cat(outs, 1)


def grouped(size: int):
    """gru_scan over the groups in blocks of ``size``, one after another: a block's W_hh
    (size x 3 MB) can stay in L2 across the positions (a variant measured, not the code)."""

    def scan(z, WihT, bih, WhhT, bhh):
        parts = []
        for g in range(0, z.shape[1], size):
            block = slice(g, g + size)
            parts.append(gru_scan(z[:, block], WihT[block], bih[block], WhhT[block], bhh[block]))
        return torch.cat(parts, 0)

    return scan


# 'v1': the scan of 2026-11-27 (per-position copies of the biases and gate gradients), kept in
# benchmarks/versions/ so that one run times it beside the current code
SCANS = {
    "autograd": autograd_scan,
    "v1": gru_scan_v1,
    "bptt": gru_scan,
    "bptt-groups10": grouped(10),
    "bptt-groups25": grouped(25),
}
VARIANTS = ("v1", "bptt", "bptt-groups10", "bptt-groups25")


def _points():
    return list(figure1.points(seeds=5, models=("rnn",), variants=("simple",)))


def _members(dev, dtype=torch.float32):
    return [build_member(p, device=dev, dtype=dtype) for p in _points()]


def use_scan(name: str) -> None:
    """The scan the GRU family runs from now on in this process: 'autograd' or 'bptt'."""
    families.gru_scan = SCANS[name]


def float64_gradients(dev) -> dict:
    """One paper-size step's gradients in float64 with both scans: max relative error per block."""
    ms = _members(dev, torch.float64)
    fam = GRUFamily(ms)
    P, meta = fam.stack(ms)
    for v in P.values():
        v.requires_grad_(True)
    batch = [_pad_prompts(*m.stream.draw(64), fam.Nmax, fam.qmax) for m in ms]
    x, t, y = (torch.stack(v) for v in zip(*batch, strict=True))
    grads = {}
    for name in SCANS:
        use_scan(name)
        yh = fam.forward(P, meta, x, t)
        loss = ((yh - y) ** 2 * meta["pos_mask"][:, None, :]).sum()
        grads[name] = dict(zip(P, torch.autograd.grad(loss, list(P.values())), strict=True))
    use_scan("bptt")
    b = grads.pop("autograd")
    return {
        name: {k: float((a[k] - b[k]).norm() / b[k].norm().clamp_min(1e-300)) for k in P}
        for name, a in grads.items()
    }


def _train_seconds(dev, steps: int, check_every: int, tf32: bool) -> float:
    ms = _members(dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    train_stack(
        ms,
        StackOptions(
            batch_size=64, check_every=check_every, max_steps=steps, graphs=True, tf32=tf32
        ),
    )
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def step_ms(dev, tf32: bool) -> float:
    return (_train_seconds(dev, 60, 10**6, tf32) - _train_seconds(dev, 20, 10**6, tf32)) / 40 * 1e3


def eval_ms(dev, tf32: bool) -> float:
    """One check of 10,000 test prompts: 40 steps with checks at 10, 20, 30, 40 against 40 steps
    without, which still end with one evaluation of the members left active: 3 checks apart."""
    return (_train_seconds(dev, 40, 10, tf32) - _train_seconds(dev, 40, 10**6, tf32)) / 3 * 1e3


def _test_set(dev, dtype):
    ms = _members(dev, dtype)
    fam = GRUFamily(ms)
    P, meta = fam.stack(ms)
    padded = [_pad_prompts(*m.test, fam.Nmax, fam.qmax) for m in ms]
    x, t, _ = (torch.stack(v) for v in zip(*padded, strict=True))
    return fam, P, meta, x, t


def _check(route, P, meta, x, t, chunk: int) -> torch.Tensor:
    return torch.cat(
        [
            route(P, meta, x[:, s : s + chunk], t[:, s : s + chunk])
            for s in range(0, x.shape[1], chunk)
        ],
        1,
    )


def evaluation_routes(dev, ceil: dict) -> dict:
    """One check of the stack (10,000 test prompts) by the scan and by cuDNN: median times
    (TF32), relative differences (float64; TF32), and the check's FLOP floor."""
    out = {}
    fam, P, meta, x, t = _test_set(dev, torch.float64)
    with torch.no_grad():
        a, b = _check(fam.forward, P, meta, x, t, 500), _check(fam.evaluate, P, meta, x, t, 500)
    mask = meta["pos_mask"][:, None, :]
    out["float64_rel_diff"] = float(((a - b) * mask).norm() / (a * mask).norm())
    del a, b, P, x, t
    fam, P, meta, x, t = _test_set(dev, torch.float32)
    mask = meta["pos_mask"][:, None, :]
    # each route in the chunks train_stack gives it
    room, n = default_eval_elements(P), x.shape[1]
    scan_elements = _Family.evaluation_elements(fam, P)  # what the scan route would hold
    chunks = {
        "scan": max(1, min(n, room // scan_elements)),
        "cudnn": evaluation_chunk(fam, P, n, room),
    }
    out["chunks"] = chunks
    with _tf32(True), torch.no_grad():
        a = _check(fam.forward, P, meta, x, t, chunks["scan"])
        b = _check(fam.evaluate, P, meta, x, t, chunks["cudnn"])
        out["tf32_rel_diff"] = float(((a - b) * mask).norm() / (a * mask).norm())
        del a, b
        for name, route in (("scan", fam.forward), ("cudnn", fam.evaluate)):
            out[f"{name}_ms"] = (
                cuda_median(partial(_check, route, P, meta, x, t, chunks[name]), reps=5) * 1e3
            )
    M, B, N = x.shape[0], x.shape[1], int(meta["N"].max())
    H, D = P["Whh"].shape[-1], P["Wih"].shape[-1]
    flops = 2 * N * 2 * M * B * 3 * H * (D + H)  # input and hidden gates, both directions
    out["flop_floor_ms"] = flops / ceil["matmul_tf32_flops"] * 1e3
    return out


def variants(dev, ceil: dict, reps: int = 2) -> dict:
    """The step (TF32, CUDA graphs) of each scan in VARIANTS, alternated ``reps`` times, with
    each scan's float64 gradients against autograd's and the current scan's kernel table."""
    errs = float64_gradients(dev)
    out = {"float64_rel_err_vs_autograd": errs, "floors": floors(ceil), "tf32_ms": {}}
    out["float64_rel_err_bptt_vs_autograd"] = errs["bptt"]
    for name in VARIANTS:
        print(f"GRU {name}: float64 vs autograd, largest {max(errs[name].values()):.1e}")
    use_scan("bptt")
    step_ms(dev, True)  # untimed: the process's one-time costs (2026-11-27: 87 ms in the first)
    for _ in range(reps):
        for name in VARIANTS:
            use_scan(name)
            out["tf32_ms"].setdefault(name, []).append(step_ms(dev, True))
            print(f"GRU step [{name}]: {out['tf32_ms'][name][-1]:.2f} ms TF32", flush=True)
    use_scan("bptt")
    try:
        out["kernel_table"] = kernel_table(dev)
        print(out["kernel_table"], flush=True)
    except Exception as exc:  # noqa: BLE001 - the timings are kept
        out["kernel_table"] = f"profiler failed: {type(exc).__name__}: {exc}"
    f = out["floors"]
    print(f"floors: {f['flop_floor_ms']:.2f} ms (TF32 FLOPs), {f['byte_floor_ms']:.2f} ms (bytes)")
    return out


def kernel_table(dev, rows: int = 12) -> str:
    """The profile of three eager training steps of the stack (no test evaluation in it)."""
    ms = _members(dev)
    fam = GRUFamily(ms)
    P, meta = fam.stack(ms)
    for v in P.values():
        v.requires_grad_(True)
    lr = torch.tensor([m.lr for m in ms], device=dev)
    opt = StackedAdamW(P, lr, torch.tensor([m.weight_decay for m in ms], device=dev))
    batch = [_pad_prompts(*m.stream.draw(64), fam.Nmax, fam.qmax) for m in ms]
    x, t, y = (torch.stack(v) for v in zip(*batch, strict=True))
    with _tf32(True):
        _train_step(fam, opt, meta, x, t, y, 64)  # warm-up: library handles, allocator
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                _train_step(fam, opt, meta, x, t, y, 64)
            torch.cuda.synchronize()
    return profile_table(prof, rows)


def profile_table(prof, rows: int) -> str:
    """The profiler's kernels by self device time (the sort key's name differs across torch
    versions)."""
    avg = prof.key_averages()
    for key in ("self_device_time_total", "self_cuda_time_total"):
        try:
            return avg.table(sort_by=key, row_limit=rows, max_name_column_width=60)
        except (AttributeError, KeyError):
            continue
    return avg.table(row_limit=rows)


def floors(ceil: dict) -> dict:
    """FLOPs and the fewest bytes of one simple-1STR GRU step (forward and backward)."""
    pts = _points()
    M, N, B = len(pts), max(p.N for p in pts), 64
    H = pts[0].rnn_hidden
    D = max(p.d + (p.q + 1) * _d_e(p.N) for p in pts)  # x, omega_i, omega_{t_1..q}
    G = 2 * M  # two directions per member
    mm = 2 * N * G * B * 3 * H * (D + H)  # forward: input gates and hidden gates
    flops = 3 * mm  # backward: two products per forward product
    whh = G * 3 * H * H * 4  # every W_hh, float32
    gates = N * G * B * 3 * H * 4  # the input gates of every position (as many for their gradient)
    work = N * G * B * 5 * H * 4  # the cell's workspace (r, z, n, gh_n, h)
    # W_hh streamed once per position forward and once backward; the gates and their gradient
    # written once and read once; the workspace written forward and read backward
    nbytes = 2 * N * whh + 4 * gates + 2 * work
    return dict(
        flops=flops,
        bytes=nbytes,
        flop_floor_ms=flops / ceil["matmul_tf32_flops"] * 1e3,
        byte_floor_ms=nbytes / ceil["copy_bytes"] * 1e3,
    )


def _d_e(N):
    return experimental_dim(N)


def trusted(out: dict) -> bool:
    """The hand-written backward agreed with autograd in float64 on this device."""
    errs = out.get("float64_rel_err_bptt_vs_autograd", {})
    return bool(errs) and max(errs.values()) < 1e-10


def report(dev, ceil: dict, scans=tuple(SCANS), profile: bool = True) -> dict:
    """Everything above for the named ``scans`` (the step's times, with ``profile`` the kernel
    tables); the float64 agreement, the floors and the evaluation routes always."""
    errs = float64_gradients(dev)
    out = {
        "members": len(_points()),
        "float64_rel_err_bptt_vs_autograd": errs["bptt"],
        "float64_rel_err_vs_autograd": errs,
    }
    print(
        "GRU step: float64 gradients, bptt vs autograd (relative):",
        ", ".join(f"{k} {v:.1e}" for k, v in out["float64_rel_err_bptt_vs_autograd"].items()),
        flush=True,
    )
    out["floors"] = floors(ceil)
    for name in scans:
        use_scan(name)
        out[name] = r = {"tf32_ms": step_ms(dev, True), "float32_ms": step_ms(dev, False)}
        if profile:
            try:  # a profiler failure must not lose the timings
                r["kernel_table"] = kernel_table(dev)
            except Exception as exc:  # noqa: BLE001
                r["kernel_table"] = f"profiler failed: {type(exc).__name__}: {exc}"
        print(
            f"GRU step [{name}]: {r['tf32_ms']:.2f} ms TF32, {r['float32_ms']:.2f} ms float32 "
            f"(graphs)\n{r.get('kernel_table', '')}",
            flush=True,
        )
    use_scan("bptt")
    out.setdefault("bptt", {})["eval_tf32_ms"] = eval_ms(dev, True)
    f = out["floors"]
    print(
        f"GRU step floors: {f['flops'] / 1e9:.0f} GFLOP -> {f['flop_floor_ms']:.2f} ms at TF32; "
        f"{f['bytes'] / 1e9:.1f} GB -> {f['byte_floor_ms']:.2f} ms at the copy rate; "
        f"one test evaluation (10,000 prompts) {out['bptt']['eval_tf32_ms']:.1f} ms",
        flush=True,
    )
    try:  # a failure here must not lose the step's numbers
        out["evaluation"] = e = evaluation_routes(dev, ceil)
        print(
            f"one check, 10,000 prompts, TF32: scan {e['scan_ms']:.1f} ms, cuDNN "
            f"{e['cudnn_ms']:.1f} ms (FLOP floor {e['flop_floor_ms']:.1f} ms); relative "
            f"difference float64 {e['float64_rel_diff']:.1e}, TF32 {e['tf32_rel_diff']:.1e}",
            flush=True,
        )
    except Exception as exc:  # noqa: BLE001
        out["evaluation"] = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"evaluation routes FAILED: {out['evaluation']['error']}", flush=True)
    return out


if __name__ == "__main__":
    if not torch.cuda.is_available():
        print("gru_step: needs a CUDA device", file=sys.stderr)
        sys.exit(2)

    d = torch.device("cuda")
    if "--variants" in sys.argv[1:]:
        variants(d, ceilings(d))
    else:
        report(d, ceilings(d))
