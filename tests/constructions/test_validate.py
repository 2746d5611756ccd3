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
