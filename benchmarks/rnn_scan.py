"""States of the Prop 28 RNN by the parallel scan vs the literal recurrence, in one run.

    python benchmarks/rnn_scan.py                 # CPU, N = 1e5; CUDA N = 1e6 too when available
    python benchmarks/rnn_scan.py --full-loop     # run the literal loop over all N (slow on CPU)

For each device it builds the construction (RS-Hadamard codes, teacher link, eps), draws one
simple-qSTR prompt and times

* scan (closed form): f(z_i) for all i in chunks by the closed-form transition, then the
  checked prefix sums (``RNNConstruction.states``);
* scan (dense layers): the same prefix sums over f(z_i) computed by the literal four dense
  layers, batched over positions (chunks of positions through the matrices);
* literal loop: ``DeepTransitionBiRNN.states`` (one position at a time, both directions).
  Unless ``--full-loop``, only a prefix of ``--loop-prefix`` positions is run and its time
  scaled by N / prefix (the loop's cost per step does not depend on the step): the printout
  says so. The prefix is also compared with the scan on the same prefix.

Peak memory: CUDA peak allocated per phase; on the CPU the process's peak RSS after each
phase (monotone, so an upper bound for the phases after the first). A script, not a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from qstr.constructions.codes import rs_hadamard_codebook  # noqa: E402
from qstr.constructions.links import make_link  # noqa: E402
from qstr.bounds.transition import prop28_rnn  # noqa: E402
from qstr.constructions.recurrent import projected_prefix  # noqa: E402
from qstr.constructions.task import QSTR  # noqa: E402
from qstr.verify.adversarial import clip_to_ball  # noqa: E402

F64 = torch.float64


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device):
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    seconds = time.perf_counter() - start
    if device.type == "cuda":
        mem = f"peak {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB allocated"
    else:
        mem = (
            f"process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB"
        )
    return out, seconds, mem


def dense_scan(c, x, t, chunk=4096):
    """Prefix sums over f(z_i) computed by the literal dense layers, batched over positions."""
    tr = c.transition
    B, N, _ = x.shape
    omega = c.omega.to(dtype=x.dtype, device=x.device)
    layers = [(W.to(x.device), None if b is None else b.to(x.device)) for W, b in tr.layers]
    F = x.new_empty(B, N, tr.d_h)
    for s in range(0, N, chunk):
        e = min(s + chunk, N)
        z = torch.cat(
            [x[:, s:e], omega[s:e].expand(B, -1, -1)] + [omega[t[:, s:e, k]] for k in range(tr.q)],
            -1,
        )
        u = torch.cat([z.new_zeros(B, e - s, tr.d_h), z], -1)
        h = u
        for i, (W, b) in enumerate(layers):
            h = h @ W.T + (b if b is not None else 0)
            if i < 3:
                h = torch.relu(h)
        F[:, s:e] = h
    return projected_prefix(F, c.r_h)[0], projected_prefix(F, c.r_h, reverse=True)[0]


def bench(N, device, args):
    print(f"\n=== N = {N:,} on {device} (torch threads = {torch.get_num_threads()}) ===")
    (book, c), t_build, _ = timed(lambda: _build(N, device, args), device)
    tg = c.transition.guarantee
    print(
        f"build: {t_build:.2f} s; d_e = {c.d_e}, mu = {tg.mu:g}, widths {c.transition.widths}, "
        f"eps = {tg.eps:.4g}, r_x = {tg.r_x:.3g}, r_h = {c.r_h:.3g}"
    )
    link = make_link(
        "teacher", args.q, args.d, generator=torch.Generator().manual_seed(args.seed)
    ).to(device)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    p = QSTR(N=N, d=args.d, link=link, variant="simple").sample(
        1, generator=gen, device=device, dtype=F64
    )
    P = N if args.full_loop else min(N, args.loop_prefix)
    t = torch.tensor(
        [[P // 3 + k * (P // (3 * args.q)) for k in range(args.q)]], device=device
    ).expand(1, args.q)
    t = t[:, None, :].expand(1, N, args.q)  # simple prompt, targets inside the timed prefix
    x = clip_to_ball(p.x, tg.r_x)

    st, t_scan, mem_scan = timed(lambda: c.states(x, t), device)
    print(
        f"scan (closed form):  {t_scan:8.3f} s   {mem_scan}; "
        f"projection active at {st.projection_active} steps"
    )
    (hf_d, hb_d), t_dense, mem_dense = timed(lambda: dense_scan(c, x, t), device)
    diff_d = max(float((hf_d - st.h_fwd).abs().max()), float((hb_d - st.h_bwd).abs().max()))
    print(
        f"scan (dense layers): {t_dense:8.3f} s   {mem_dense}; "
        f"max |dense - closed form| = {diff_d:.1e}"
    )

    m = c.module(device=device)
    Zp = c.encode(x[:, :P], t[:, :P])
    with torch.no_grad():
        (hf, hb), t_loop, mem_loop = timed(lambda: m.states(Zp), device)
    st_p = c.states(x[:, :P], t[:, :P])
    diff = max(float((hf - st_p.h_fwd).abs().max()), float((hb - st_p.h_bwd).abs().max()))
    same = bool(torch.equal(hf == 0, st_p.h_fwd == 0) and torch.equal(hb == 0, st_p.h_bwd == 0))
    est = t_loop * N / P
    how = "full" if P == N else f"prefix of {P:,} positions, scaled by N/{P:,}"
    print(f"literal loop:        {est:8.3f} s   ({how}; measured {t_loop:.3f} s)   {mem_loop}")
    print(f"loop vs scan on the prefix: max |diff| = {diff:.1e}, identical zero pattern: {same}")
    print(
        f"ratio literal loop / scan (closed form) = {est / t_scan:,.0f}x; "
        f"literal loop / scan (dense layers) = {est / t_dense:,.0f}x"
    )
    tf, tb = c.targets(x, t)
    err = max(float((st.h_fwd - tf).abs().max()), float((st.h_bwd - tb).abs().max()))
    print(
        f"Cor 27 at N = {N:,}: max state error {err:.3g} <= eps {tg.eps:.4g}; "
        "exact zeros before/after target: "
        f"{bool((st.h_fwd[tf == 0] == 0).all() and (st.h_bwd[tb == 0] == 0).all())}"
    )


def _build(N, device, args):
    book = rs_hadamard_codebook(N, dtype=F64, device=device)
    link = make_link("teacher", args.q, args.d, generator=torch.Generator().manual_seed(args.seed))
    c = prop28_rnn(book, args.d, link.two_layer_net(), eps=args.eps)
    _ = c.transition.layers  # materialise the dense layers (cached) inside the build time
    return book, c


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-n", type=int, default=100_000)
    parser.add_argument("--cuda-n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=4)
    parser.add_argument("--q", type=int, default=2)
    parser.add_argument("--eps", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loop-prefix", type=int, default=2000)
    parser.add_argument("--full-loop", action="store_true")
    parser.add_argument("--no-cuda", action="store_true")
    parser.add_argument("--no-cpu", action="store_true")
    args = parser.parse_args(argv)
    if not args.no_cpu:
        bench(args.cpu_n, torch.device("cpu"), args)
    if not args.no_cuda and torch.cuda.is_available():
        bench(args.cuda_n, torch.device("cuda"), args)
    elif not args.no_cuda:
        print("\n(no CUDA device: the N = 1e6 GPU run was skipped)")


if __name__ == "__main__":
    main()
