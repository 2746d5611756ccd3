"""Arguments every ``nn.Module`` of the toolkit takes: seeded weight draws, dtype, widths, input
checks. The model modules (``paper_models``, ``experiment_models``, ``published_models``) import
them.

Weights come from torch's global RNG, or with ``generator=`` from a forked RNG seeded from it, on
the CPU: the global RNG is left untouched and every device gets the same weights (:func:`seeded`).
"""

from __future__ import annotations

import contextlib

import torch

from qstr.constructions.validate import (
    FLOAT_DTYPES,
    finite_tensor,
    float_dtype,
    positive_int,
    shape,
)

__all__ = ["seeded", "model_dtype", "width_tuple", "output_dim", "check_input", "chunk_rows"]


@contextlib.contextmanager
def seeded(generator):
    """Run the body with the CPU RNG seeded from ``generator`` (no-op when ``None``).

    With ``None`` the weights come from torch's global RNG (so ``torch.manual_seed`` fixes them);
    with a ``torch.Generator`` one seed is drawn from it and the weights are built from that seed
    in a forked RNG, so the global RNG is left untouched. Weights are always drawn on the CPU and
    then moved to ``device``: the same seed gives the same weights on every device.
    """
    if generator is None:
        yield
        return
    if not isinstance(generator, torch.Generator):
        raise ValueError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}"
        )
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device).item())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def model_dtype(dtype) -> torch.dtype:
    return torch.get_default_dtype() if dtype is None else float_dtype("dtype", dtype)


def width_tuple(name: str, widths) -> tuple:
    """A tuple of positive ints (possibly empty)."""
    if isinstance(widths, (int,)) and not isinstance(widths, bool):
        widths = (widths,)
    try:
        widths = tuple(widths)
    except TypeError:
        raise ValueError(f"{name} must be a tuple of integers >= 1, got {widths!r}") from None
    return tuple(positive_int(f"{name}[{k}]", w) for k, w in enumerate(widths))


def output_dim(value) -> int:
    return positive_int("out_dim", value)


def check_input(name: str, Z, last: int, dtype: torch.dtype) -> torch.Tensor:
    """Z must be a finite (B, N, last) tensor of the model's dtype, B >= 1, N >= 1."""
    if not isinstance(Z, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(Z).__name__}")
    shape(name, Z, (None, None, last))
    if Z.shape[0] < 1 or Z.shape[1] < 1:
        raise ValueError(
            f"{name} must have batch size >= 1 and length N >= 1, got shape {tuple(Z.shape)}"
        )
    if Z.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be float32 or float64, got {Z.dtype}")
    if Z.dtype != dtype:
        raise ValueError(
            f"{name} has dtype {Z.dtype} but the model is {dtype}; "
            f"convert one of them (model.to({Z.dtype}) or {name}.to({dtype}))"
        )
    finite_tensor(name, Z)
    return Z


def chunk_rows(chunk, N: int) -> int:
    return N if chunk is None else positive_int("chunk", chunk)
