"""Tests for constructions/validate.py: the argument checks shared by the constructions."""

import pytest
import torch

from qstr.constructions import validate


def test_same_device_treats_a_missing_index_as_the_current_device():
    assert validate.same_device("cpu", torch.device("cpu"))
    assert not validate.same_device("cpu", "meta")
    if torch.cuda.is_available():
        assert validate.same_device(
            torch.Generator(device="cuda").device, torch.zeros(1, device="cuda").device
        )


def test_one_of():
    assert validate.one_of("backend", "math", ("auto", "math")) == "math"
    for bad in ("Math", None, 1, ""):
        with pytest.raises(ValueError, match="backend must be one of 'auto', 'math'"):
            validate.one_of("backend", bad, ("auto", "math"))


@pytest.mark.parametrize("bad", ["10", b"1", True, False])
def test_numbers_are_real_numbers_not_strings_or_bools(bad):
    """Issue 52: float() took "10" and True for a number parameter."""
    with pytest.raises(ValueError) as err:
        validate.positive_float("r_x", bad)
    assert str(err.value) == f"r_x must be a positive number (a real number), got {bad!r}"
    with pytest.raises(ValueError) as err:
        validate.probability("delta", bad)
    assert str(err.value) == f"delta must be a number in (0, 1) (a real number), got {bad!r}"
    assert validate.positive_float("r_x", 10) == 10.0
    assert validate.probability("delta", torch.tensor(0.5)) == 0.5


class OutOfMemoryError(RuntimeError):
    """Named as torch.cuda.OutOfMemoryError is (the check reads the name, so no CUDA is needed)."""


@pytest.mark.parametrize(
    "exc, expected",
    [
        (MemoryError(), "out of memory"),
        (
            RuntimeError(
                "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate "
                "memory: you tried to allocate 3221225472 bytes. Error code 12"
            ),
            "out of memory: an allocation of 3 GiB failed",
        ),
        (
            OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
            "out of memory",
        ),
        (
            MemoryError("tried to allocate 1610612736 bytes"),
            "out of memory: an allocation of 1.5 GiB failed",
        ),
    ],
)
def test_out_of_memory_message_names_what_failed(exc, expected):
    assert validate.out_of_memory_message(exc) == expected


@pytest.mark.parametrize(
    "exc",
    [RuntimeError("mat1 and mat2 shapes cannot be multiplied"), ValueError("allocate 8 bytes")],
)
def test_out_of_memory_message_is_none_for_other_failures(exc):
    assert validate.out_of_memory_message(exc) is None
