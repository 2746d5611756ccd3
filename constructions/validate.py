"""Argument checks every layer may import: one clear ``ValueError`` naming the argument.

The CLI turns these into a one-line message and exit status 2.
"""

from __future__ import annotations

import math
import os
import re
from typing import Optional

import torch


def positive_int(name: str, value, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise ``ValueError`` unless it is an integer
    >= ``minimum``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int,))
        and not (hasattr(value, "__index__"))
    ):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


FLOAT_COUNT_MAX = 2**1023  # counts a bound evaluates in float64 (n, N): at most this (9e307)


def float_count(name: str, value, minimum: int = 1) -> int:
    """:func:`positive_int` for a count a bound evaluates in float64: at most 2^1023 (beyond it
    float(value) overflows), else ``ValueError``."""
    value = positive_int(name, value, minimum)
    if value > FLOAT_COUNT_MAX:
        raise ValueError(
            f"{name} must be at most 2^1023 (the bound is evaluated in float64), got about "
            f"2^{value.bit_length() - 1}"
        )
    return value


SEED_MAX = 2**63 - 1  # seeds: integers in [0, 2**63 - 1] (the CLI's --seed takes the same range)


def seed(name: str, value) -> int:
    """Return ``value`` as an int, or raise ``ValueError`` unless it is an integer in
    [0, 2**63 - 1]."""
    if (
        isinstance(value, bool)
        or not hasattr(value, "__index__")
        or not 0 <= int(value) <= SEED_MAX
    ):
        raise ValueError(f"{name} must be an integer in [0, 2**63 - 1], got {value!r}")
    return int(value)


def _not_text(name: str, value, what: str) -> None:
    """A ValueError if ``value`` is a string or a bool: ``float()`` would take "10" and True, but a
    number parameter takes real numbers only."""
    if isinstance(value, (str, bytes, bool)):
        raise ValueError(f"{name} must be {what} (a real number), got {value!r}")


def probability(name: str, value, *, open_left: bool = True, open_right: bool = True) -> float:
    """Return ``value`` as a float in (0, 1) (ends closed where asked), else ``ValueError``."""
    _not_text(name, value, "a number in (0, 1)")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    lo_ok = value > 0 if open_left else value >= 0
    hi_ok = value < 1 if open_right else value <= 1
    if not (math.isfinite(value) and lo_ok and hi_ok):
        lo = "(" if open_left else "["
        hi = ")" if open_right else "]"
        raise ValueError(f"{name} must lie in {lo}0, 1{hi}, got {value}")
    return value


def positive_float(name: str, value, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a finite float > 0 (or >= 0), else ``ValueError``."""
    _not_text(name, value, "a positive number")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    ok = value >= 0 if allow_zero else value > 0
    if not (math.isfinite(value) and ok):
        rel = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {rel}, got {value}")
    return value


def one_of(name: str, value, allowed) -> str:
    """``value`` if it is one of ``allowed`` (strings), else a ValueError naming them."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def finite_tensor(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """Raise ``ValueError`` if ``tensor`` holds NaN or infinity."""
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise ValueError(f"{name} contains NaN or infinite entries")
    return tensor


def shape(name: str, tensor: torch.Tensor, expected: tuple) -> torch.Tensor:
    """Check ``tensor.shape`` against ``expected`` (``None`` matches any size)."""
    got = tuple(tensor.shape)
    if len(got) != len(expected) or any(
        e is not None and g != e for g, e in zip(got, expected, strict=True)
    ):
        want = "(" + ", ".join("*" if e is None else str(e) for e in expected) + ")"
        raise ValueError(f"{name} must have shape {want}, got {got}")
    return tensor


FLOAT_DTYPES = (torch.float32, torch.float64)


def float_dtype(name: str, dtype) -> torch.dtype:
    """Accept torch.float32 / torch.float64 (or the strings 'float32' / 'float64')."""
    given = dtype
    if isinstance(dtype, str):  # "float64" or "torch.float64"
        dtype = getattr(torch, dtype.removeprefix("torch."), None)
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be torch.float32 or torch.float64, got {given!r}")
    return dtype


def device_of(name: str, device) -> torch.device:
    """Parse a device argument; CUDA requested without CUDA available is a ``ValueError``."""
    try:
        device = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"{name} must be a torch device such as 'cpu' or 'cuda', got {device!r}"
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={device} requested but CUDA is not available on this machine")
    return device


def same_device(a, b) -> bool:
    """True when devices ``a`` and ``b`` are the same: same type and index, a missing CUDA index
    meaning the current device (``torch.Generator(device='cuda').device`` has none, a CUDA
    tensor's has one)."""
    return _resolved(torch.device(a)) == _resolved(torch.device(b))


def _resolved(device: torch.device) -> tuple:
    if device.type == "cpu":
        return ("cpu", None)
    index = device.index
    if index is None and device.type == "cuda" and torch.cuda.is_available():
        index = torch.cuda.current_device()
    return (device.type, 0 if index is None else index)


def generator(name: str, value) -> torch.Generator:
    """A ``torch.Generator`` (not a seed, a numpy generator or None)."""
    if not isinstance(value, torch.Generator):
        raise ValueError(
            f"{name} must be a torch.Generator, got {type(value).__name__}; "
            f"for example torch.Generator().manual_seed(0)"
        )
    return value


def generator_on(name: str, generator, device: torch.device) -> torch.Generator:
    """The generator must live on ``device`` (we never move randomness across devices)."""
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"{name} must be a torch.Generator, got {type(generator).__name__}")
    if not same_device(generator.device, device):
        raise ValueError(
            f"{name} lives on {generator.device} but sampling was asked on {device}; "
            f"make it with torch.Generator(device='{device}')"
        )
    return generator


def fits_in_memory(what: str, nbytes: int, device) -> None:
    """Refuse with ``ValueError`` (before allocating) when about ``nbytes`` cannot fit in the
    memory now available on ``device`` (RAM for the CPU, free memory for CUDA)."""
    free = available_memory(device)
    if free is not None and nbytes > free:
        raise ValueError(
            f"{what} needs about {_bytes(nbytes)} of memory, more than the {_bytes(free)} available"
        )


def out_of_memory_message(exc: BaseException) -> Optional[str]:
    """What failed, when ``exc`` is an allocation failure (Python's, torch's CPU or CUDA allocator)
    that :func:`fits_in_memory` did not foresee, as one line; else None."""
    text = str(exc)
    if not (
        isinstance(exc, MemoryError)
        or type(exc).__name__ == "OutOfMemoryError"
        or "can't allocate memory" in text
    ):
        return None
    asked = re.search(r"allocate (\d+) bytes", text)
    if asked is None:
        return "out of memory"
    return f"out of memory: an allocation of {int(asked.group(1)) / 2**30:.3g} GiB failed"


def available_memory(device) -> Optional[int]:
    """Bytes available for new tensors on ``device`` (None when unknown)."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
