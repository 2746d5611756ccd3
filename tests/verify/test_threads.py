"""Tests for verify/threads.py: the thread count restored, the allocator set on glibc."""

import platform

import torch

from qstr.verify.threads import cpu_threads, keep_freed_memory


def test_cpu_threads_restores_the_callers_setting():
    before = torch.get_num_threads()
    with cpu_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with cpu_threads(None):
        assert torch.get_num_threads() == before


def test_keep_freed_memory_applies_on_glibc_and_nowhere_else():
    """glibc's mallopt accepts both settings (it returns 1); elsewhere nothing is changed."""
    glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert keep_freed_memory() is glibc
    assert keep_freed_memory(1 << 26) is glibc  # again, and another limit: still accepted
