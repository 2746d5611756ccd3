"""CPU thread control and the C allocator's setting, shared by the claims and the experiments."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from typing import Optional


@contextlib.contextmanager
def cpu_threads(n: Optional[int]):
    """Run a block with ``n`` CPU intra-op threads, restoring the caller's setting afterwards.

    The checks are many small tensor operations; on 2 shared cores one thread was measured
    5x faster than two for the whole quick profile (25 s against 145 s)."""
    import torch  # noqa: PLC0415 - the CLI imports this module; its --help loads no torch

    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameter numbers


def keep_freed_memory(limit: int = 1 << 30) -> bool:
    """Let glibc's allocator keep freed memory for reuse: blocks below ``limit`` bytes come from
    its heap instead of fresh mappings, and it returns no memory to the system below 2 ``limit``.
    A training step frees and allocates the same large activations every step; with the default
    each one arrives as new pages the kernel must zero (docs/experiments.md, "Measured"). For this
    process only, so ``qstr`` and its Dask workers call it, not the library on import. Returns
    False where the C library is not glibc (nothing is changed)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # no C library found, or not glibc
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, limit)) and bool(mallopt(M_TRIM_THRESHOLD, 2 * limit))
