"""The device's two ceilings, measured where the benchmarks run: matrix-product FLOP/s
(random 8192^3 operands; float32, TF32, float16) and device-to-device copy bytes/s (read plus
written), with the CUDA-event median timer the GPU benchmarks share. A helper, not a test."""

from __future__ import annotations

import statistics
from functools import partial

import torch


def cuda_median(fn, *, reps: int = 10, warmup: int = 2) -> float:
    """Median seconds of ``fn()`` timed with CUDA events, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return statistics.median(times)


def ceilings(dev) -> dict:
    """Matrix-product FLOP/s (float32 exact, TF32, float16) and copy bytes/s, measured here."""
    n = 8192
    out = {}
    for name, dtype, tf32 in (
        ("float32", torch.float32, False),
        ("tf32", torch.float32, True),
        ("float16", torch.float16, False),
    ):
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            out[f"matmul_{name}_flops"] = (
                2 * n**3 / cuda_median(partial(torch.matmul, a, b), reps=5)
            )
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
        a = b = None  # the operands freed before the next dtype
    src = torch.randn(2**28, device=dev)  # 1 GiB
    dst = torch.empty_like(src)
    out["copy_bytes"] = 2 * src.numel() * 4 / cuda_median(lambda: dst.copy_(src))
    return out
