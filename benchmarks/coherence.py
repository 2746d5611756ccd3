"""Time the exact coherence (Assumption 3) of Rademacher, RS-Hadamard and generic codebooks.

    python benchmarks/coherence.py            # CPU, N = 8192
    python benchmarks/coherence.py --cuda     # also N = 65536 on CUDA (default when available)

Prints seconds and inner products (unordered pairs x d_e) per second. A script, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from qstr.constructions.codes import coherence, rademacher_codebook, rs_hadamard_codebook  # noqa: E402


def timed(fn, device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    value = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return value, time.perf_counter() - start


def codebooks(N, device):
    g = torch.Generator(device=device.type).manual_seed(0)
    yield "rademacher (sign path)", rademacher_codebook(N, generator=g, device=device).omega
    yield "rs-hadamard (sign path)", rs_hadamard_codebook(N, device=device).omega
    gauss = torch.randn(N, 64, generator=g, device=device, dtype=torch.float64)
    yield "gaussian d_e=64 (float64 path)", gauss / gauss.norm(dim=1, keepdim=True)


def bench(N, device, repeats):
    print(f"\nN = {N} on {device} (torch threads = {torch.get_num_threads()})")
    print(f"{'codebook':32s} {'d_e':>5s} {'mu':>10s} {'seconds':>9s} {'pairs/s':>10s}")
    pairs = N * (N - 1) // 2
    for name, omega in codebooks(N, device):
        coherence(omega[:256])  # warm-up (kernels, BLAS threads)
        best = float("inf")
        for _ in range(repeats):
            mu, seconds = timed(partial(coherence, omega), device)
            best = min(best, seconds)
        print(f"{name:32s} {omega.shape[1]:5d} {mu:10.6f} {best:9.3f} {pairs / best:10.3g}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-n", type=int, default=8192)
    parser.add_argument("--cuda-n", type=int, default=65536)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-cuda", action="store_true")
    args = parser.parse_args(argv)
    bench(args.cpu_n, torch.device("cpu"), args.repeats)
    if torch.cuda.is_available() and not args.no_cuda:
        bench(args.cuda_n, torch.device("cuda"), args.repeats)
    elif not args.no_cuda:
        print("\nCUDA not available: skipped N =", args.cuda_n)
    start = time.perf_counter()
    cb = rs_hadamard_codebook(10**6)
    print(
        f"\nrs_hadamard_codebook(10**6) on cpu: d_e = {cb.d_e}, mu = {cb.mu} "
        "(exact, combinatorial), "
        f"built in {time.perf_counter() - start:.2f} s"
    )


if __name__ == "__main__":
    main()
