"""Where a stacked training step's time goes on CUDA (Figure 1's simple-1STR FFN and GRU stacks,
25 members, TF32, CUDA graphs): the replayed step on the device, the host's work around it,
and whole steps of ``train_stack``.

    python benchmarks/stack_step.py [--steps 400] [--json FILE] [--profile] [--layouts]
        [--prefetch 16 [128]]

For each stack, side by side in one run:
* ``replay_ms``: the recorded step alone, median of CUDA-event times over 50 replays on one
  batch (the device's time for a step: no host work in it);
* ``host_batch_us``: the host's time to hand out one step's prompts (``_Stack.batch``, refills
  included, averaged over 4 x prefetch steps; the device work it enqueues is not waited for);
* ``train_ms[prefetch]``: wall time per step of ``train_stack`` without test checks,
  (T(2 S) - T(S)) / S, for each ``--prefetch`` (the prompts are the same).
* ``--layouts``: the FFN's replayed step with its layers as einsum (the weight gradients come
  out transposed and the fused AdamW copies them) against ``stacked_linear`` (gradients in the
  weights' layout), alternated twice (einsum, linear, einsum, linear) so that the spread of
  one version is seen beside the difference.
A step is bound by the host when ``train_ms`` is well above ``replay_ms``. A script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from qstr.verify.experiments import figure1
from qstr.verify.experiments.points import build_member
from qstr.verify.training import families, train_stack
from qstr.verify.training.stack import StackOptions, _Stack, _tf32
from qstr.verify.training.stacked_linear import stacked_linear

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)  # ceilings, gru_step
from ceilings import cuda_median  # noqa: E402
from gru_step import profile_table  # noqa: E402


def _members(model: str, dev):
    pts = figure1.points(seeds=5, models=(model,), variants=("simple",))
    return [build_member(p, device=dev, dtype=torch.float32) for p in pts]


def _replay_and_host(model: str, dev) -> dict:
    opts = StackOptions(check_every=10**6, graphs=True, tf32=True)
    with _tf32(True):
        st = _Stack(_members(model, dev), opts)
        st.train_step(*st.batch())  # eager, then recorded
        assert st.graph is not None, "the step did not record"
        x, t, y = st.batch()
        replay = cuda_median(lambda: st.graph(x, t, y), reps=50)
        torch.cuda.synchronize(dev)
        n = 4 * opts.prefetch
        t0 = time.perf_counter()
        for _ in range(n):
            st.batch()
        host = (time.perf_counter() - t0) / n
        torch.cuda.synchronize(dev)
    return {"replay_ms": replay * 1e3, "host_batch_us": host * 1e6}


def _train_seconds(model: str, dev, steps: int, prefetch: int) -> float:
    ms = _members(model, dev)
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    train_stack(
        ms,
        StackOptions(check_every=10**6, max_steps=steps, prefetch=prefetch, graphs=True, tf32=True),
    )
    torch.cuda.synchronize(dev)
    return time.perf_counter() - t0


def step_ms(model: str, dev, steps: int, prefetch: int) -> float:
    """Wall time per step of train_stack: (T(2 S) - T(S)) / S (build and recording cancel),
    after one untimed run (on 2026-11-27 the first run of the GRU stack carried a one-time cost
    larger than S steps, and the difference came out negative)."""
    _train_seconds(model, dev, max(2, steps // 10), prefetch)
    a = _train_seconds(model, dev, steps, prefetch)
    b = _train_seconds(model, dev, 2 * steps, prefetch)
    return (b - a) / steps * 1e3


def kernel_table(model: str, dev, rows: int = 14) -> str:
    """The device kernels of three eager steps of the stack (no test check), by self time."""
    with _tf32(True):
        st = _Stack(_members(model, dev), StackOptions(check_every=10**6, graphs=False))
        batches = [st.batch() for _ in range(4)]
        st.train_step(*batches[0])  # warm-up: library handles, the allocator
        torch.cuda.synchronize(dev)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for b in batches[1:]:
                st.train_step(*b)
            torch.cuda.synchronize(dev)
    return profile_table(prof, rows)


def _einsum_linear(h, W, b=None):
    """The FFN layers as they were before ``stacked_linear``: einsum, then the bias."""
    y = torch.einsum("mbi,moi->mbo", h, W)
    return y if b is None else y + b[:, None, :]


def layouts(dev) -> dict:
    """The FFN stack's replayed step with einsum layers and with ``stacked_linear``, alternated."""
    out = {"einsum": [], "stacked_linear": []}
    for name in ("einsum", "stacked_linear", "einsum", "stacked_linear"):
        layer = _einsum_linear if name == "einsum" else stacked_linear
        saved = families.stacked_linear
        families.stacked_linear = layer
        try:
            out[name].append(_replay_and_host("ffn", dev)["replay_ms"])
        finally:
            families.stacked_linear = saved
        print(f"ffn step with {name} layers: {out[name][-1]:.3f} ms", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400, help="S for the FFN; the GRU takes S / 4")
    ap.add_argument("--json")
    ap.add_argument("--prefetch", type=int, nargs="+", default=[16])
    ap.add_argument(
        "--layouts", action="store_true", help="the FFN step: einsum against stacked_linear"
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also print each stack's kernel table (three eager steps)",
    )
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("stack_step: needs a CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    out = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__}
    if args.layouts:
        out["ffn_layouts_replay_ms"] = layouts(dev)
    for model, steps in (("ffn", args.steps), ("rnn", max(10, args.steps // 4))):
        r = out[model] = _replay_and_host(model, dev)
        r["train_ms"] = {pf: step_ms(model, dev, steps, pf) for pf in args.prefetch}
        print(
            f"simple-1STR {model} x25: replayed step {r['replay_ms']:.3f} ms; host batch "
            f"{r['host_batch_us']:.0f} us; train_stack per step: "
            + ", ".join(f"prefetch {k} {v:.3f} ms" for k, v in r["train_ms"].items()),
            flush=True,
        )
        if args.profile:
            try:  # a profiler failure must not lose the timings
                r["kernel_table"] = kernel_table(model, dev)
            except Exception as exc:  # noqa: BLE001
                r["kernel_table"] = f"profiler failed: {type(exc).__name__}: {exc}"
            print(r["kernel_table"], flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
