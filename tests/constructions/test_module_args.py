"""Tests of the arguments every nn.Module of constructions/ takes (constructions/module_args.py:
sizes and widths, dtype, generator, input checks, chunk), through the models' constructors and
forward passes."""

from __future__ import annotations

import pytest
import torch

from qstr.constructions.experiment_models import PracticalRNN, PracticalTransformer, build_practical
from qstr.constructions.paper_models import DeepTransitionBiRNN, MergedAttention, VecFFN

F64 = torch.float64


# ============================================================ argument errors


@pytest.mark.parametrize(
    "ctor, name",
    [
        (lambda v: MergedAttention(v, 1, 1), "D_e"),
        (lambda v: MergedAttention(2, v, 1), "H"),
        (lambda v: MergedAttention(2, 1, v), "m"),
        (lambda v: MergedAttention(2, 1, 1, out_dim=v), "out_dim"),
        (
            lambda v: DeepTransitionBiRNN(v, 1, transition_widths=(), output_widths=(), r_h=1),
            "D_in",
        ),
        (lambda v: DeepTransitionBiRNN(1, v, transition_widths=(), output_widths=(), r_h=1), "d_h"),
        (
            lambda v: DeepTransitionBiRNN(1, 1, transition_widths=(2, v), output_widths=(), r_h=1),
            r"transition_widths\[1\]",
        ),
        (
            lambda v: DeepTransitionBiRNN(1, 1, transition_widths=(), output_widths=(v,), r_h=1),
            r"output_widths\[0\]",
        ),
        (lambda v: DeepTransitionBiRNN(1, 1, transition_widths=(), output_widths=(), r_h=v), "r_h"),
        (lambda v: VecFFN(v, 1, 1), "N"),
        (lambda v: VecFFN(2, v, 1), "d"),
        (lambda v: VecFFN(2, 1, v), "q"),
        (lambda v: VecFFN(2, 1, 1, hidden=(v,)), r"hidden\[0\]"),
        (lambda v: PracticalTransformer(v, 1), "D_e"),
        (lambda v: PracticalTransformer(2, v), "q"),
        (lambda v: PracticalTransformer(2, 1, width=v), "width"),
        (lambda v: PracticalRNN(v, 2), "D_in"),
        (lambda v: PracticalRNN(2, v), "hidden"),
        (lambda v: build_practical("transformer", N=v, d=1, q=1, d_e=1), "N"),
    ],
)
@pytest.mark.parametrize("value", [0, -3])
def test_bad_sizes_raise_value_error_naming_argument(ctor, name, value):
    with pytest.raises(ValueError, match=name):
        ctor(value)


def test_bad_non_integer_sizes_and_r_h():
    with pytest.raises(ValueError, match="D_e"):
        MergedAttention(2.5, 1, 1)
    with pytest.raises(ValueError, match="H"):
        MergedAttention(2, True, 1)
    with pytest.raises(ValueError, match="r_h"):
        DeepTransitionBiRNN(1, 1, transition_widths=(), output_widths=(), r_h=float("nan"))
    with pytest.raises(ValueError, match="r_h"):
        DeepTransitionBiRNN(1, 1, transition_widths=(), output_widths=(), r_h="big")
    with pytest.raises(ValueError, match="dtype"):
        MergedAttention(2, 1, 1, dtype=torch.int64)
    with pytest.raises(ValueError, match="generator"):
        MergedAttention(2, 1, 1, generator=3)


def _models():
    return [
        (MergedAttention(3, 2, 4, dtype=F64), lambda m, Z: m(Z)),
        (MergedAttention(3, 2, 4, dtype=F64), lambda m, Z: m.heads(Z)),
        (MergedAttention(3, 2, 4, dtype=F64), lambda m, Z: m.attention(Z)),
        (
            DeepTransitionBiRNN(
                3, 2, transition_widths=(3,), output_widths=(3,), r_h=1.0, dtype=F64
            ),
            lambda m, Z: m(Z),
        ),
        (
            DeepTransitionBiRNN(
                3, 2, transition_widths=(3,), output_widths=(3,), r_h=1.0, dtype=F64
            ),
            lambda m, Z: m.states(Z),
        ),
        (PracticalTransformer(3, 2, width=4, dtype=F64), lambda m, Z: m(Z)),
        (PracticalRNN(3, 4, dtype=F64), lambda m, Z: m(Z)),
    ]


@pytest.mark.parametrize("idx", range(7))
def test_forward_rejects_nan_wrong_shape_and_dtype(idx):
    model, call = _models()[idx]
    Z = torch.randn(2, 4, 3, dtype=F64)
    call(model, Z)  # fine
    bad = Z.clone()
    bad[1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        call(model, bad)
    with pytest.raises(ValueError, match="Z must have shape"):
        call(model, torch.randn(2, 4, 5, dtype=F64))
    with pytest.raises(ValueError, match="Z must have shape"):
        call(model, torch.randn(4, 3, dtype=F64))
    with pytest.raises(ValueError, match="dtype"):
        call(model, Z.float())
    with pytest.raises(ValueError, match="length N >= 1"):
        call(model, torch.randn(2, 0, 3, dtype=F64))


def test_chunk_must_be_positive():
    model = MergedAttention(3, 1, 2)
    with pytest.raises(ValueError, match="chunk"):
        model(torch.randn(1, 4, 3), chunk=0)
