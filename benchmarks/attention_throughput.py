"""Throughput of the Lemma 11 construction: prompt-positions per second, measured side by side.

For each N it times, in one run and on one device:
  * fast   -- Construction.fast_predict (block-sparse Q = alpha c^2 omega_t, K = omega, V = x,
              scaled_dot_product_attention in query chunks: O(chunk N) memory, fused kernels on
              CUDA);
  * naive  -- MergedAttention on the full encoding with the N x N softmax materialised
              (skipped when its score tensor would not fit in the memory budget);
  * matmul -- the device's dense matrix-multiply rate, to express the fast path as a fraction of it.
Prints seconds, positions/s, the fast/naive speed-up, and achieved FLOP/s over the matmul rate.

    python benchmarks/attention_throughput.py            # CPU: N = 1024, 4096
    python benchmarks/attention_throughput.py --device cuda --N 4096 65536 --dtype float32
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import torch

from qstr.bounds.attention import lemma11, lemma12_radius
from qstr.constructions.links import make_link
from qstr.constructions.task import QSTR


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, repeats=3):
    fn()  # warm-up
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def matmul_rate(device, dtype, n=2048):
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return 2 * n**3 / timed(lambda: a @ b, device)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--N", type=int, nargs="+", default=None)
    ap.add_argument("--d", type=int, default=4)
    ap.add_argument("--q", type=int, default=2)
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument(
        "--naive-budget-gb", type=float, default=4.0, help="skip naive when its scores exceed this"
    )
    args = ap.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    Ns = args.N or ([4096, 65536] if device.type == "cuda" else [1024, 4096])
    rate = matmul_rate(device, dtype)
    print(
        f"device {device} ({torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}), "
        f"{args.dtype}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
        f"matmul {rate / 1e9:.1f} GFLOP/s"
    )
    print(
        f"{'N':>7} {'d_e':>4} {'fast s':>9} {'pos/s fast':>11} {'naive s':>9} {'pos/s naive':>11} "
        f"{'speed-up':>8} {'fast/matmul':>11}"
    )
    gen = torch.Generator(device=device.type).manual_seed(0)
    for N in Ns:
        link = make_link("linear", args.q, args.d, generator=torch.Generator().manual_seed(1))
        cons = lemma11(
            N,
            args.d,
            args.q,
            link.two_layer_net(),
            eps=0.05,
            r_x=lemma12_radius(args.d, 10_000, N),
            dtype=dtype,
            device=device,
        )
        p = QSTR(N=N, d=args.d, link=link).sample(args.B, generator=gen, device=device, dtype=dtype)
        positions = args.B * N
        with torch.no_grad():
            t_fast = timed(partial(cons.fast_predict, p.x, p.t, chunk=args.chunk), device)
            flops = 2 * args.B * args.q * N * N * (cons.d_e + args.d)  # scores + weighted values
            score_bytes = args.B * args.q * N * N * torch.finfo(dtype).bits // 8
            if score_bytes <= args.naive_budget_gb * 2**30:
                t_naive = timed(partial(cons.predict, p.x, p.t), device, repeats=1)
                naive = f"{t_naive:9.3f} {positions / t_naive:11.3g} {t_naive / t_fast:8.1f}"
            else:
                naive = f"{'skipped':>9} {'(memory)':>11} {'-':>8}"
        print(
            f"{N:7d} {cons.d_e:4d} {t_fast:9.3f} {positions / t_fast:11.3g} {naive} "
            f"{flops / t_fast / rate:11.3f}"
        )


if __name__ == "__main__":
    main()
