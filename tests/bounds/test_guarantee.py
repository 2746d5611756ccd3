"""Tests for bounds/guarantee.py: the Guarantee record the attention heads attach and the scalar
helpers both heads' closed forms share, on hand-computed values."""

import io
import math
from types import SimpleNamespace

import pytest
import torch

from qstr.bounds.guarantee import Guarantee, _logistic, _real, _weight_norms


def _record(**changes) -> Guarantee:
    fields = dict(
        error_bound=0.25,
        alpha=3.0,
        gap=4.5,
        leak=0.125,
        mu=0.5,
        r_x=2.0,
        c=1.5,
        N=16,
        q=2,
        d=3,
        d_e=8,
        lipschitz=1.0,
        eps_2nn=0.5,
        weight_norms={"W_QK": (2.0, 4.0), "W": 3.0, "a": 5.0, "b": 0.0},
        assumptions=("one", "two"),
    )
    return Guarantee(**{**fields, **changes})


def test_end_to_end_adds_the_link_error():
    assert _record().end_to_end_bound == 0.75
    assert _record(eps_2nn=0.0).end_to_end_bound == 0.25


def test_as_dict_is_plain_and_survives_a_weights_only_load():
    """Tuples become lists, numpy and torch scalars plain numbers; torch.load(weights_only=True)
    reads the saved dict back equal."""
    g = _record(alpha=torch.tensor(3.0, dtype=torch.float64), N=torch.tensor(16), H=2)
    record = g.as_dict()
    assert record["weight_norms"] == {"W_QK": [2.0, 4.0], "W": 3.0, "a": 5.0, "b": 0.0}
    assert record["assumptions"] == ["one", "two"] and record["kind"] == "lemma11"
    assert type(record["alpha"]) is float and type(record["N"]) is int and record["H"] == 2
    assert record["end_to_end_bound"] == 0.75
    buf = io.BytesIO()
    torch.save(record, buf)
    buf.seek(0)
    assert torch.load(buf, weights_only=True) == record


@pytest.mark.parametrize("z", [-30.0, -1.0, 0.0, 0.5, 30.0])
def test_logistic_is_the_logistic(z):
    assert _logistic(z) == pytest.approx(1 / (1 + math.exp(-z)), rel=1e-15)
    assert _logistic(z) + _logistic(-z) == pytest.approx(1.0, rel=1e-15)


def test_logistic_does_not_overflow():
    assert _logistic(1000.0) == 1.0 and _logistic(-1000.0) == 0.0
    assert _logistic(-700.0) == pytest.approx(math.exp(-700.0), rel=1e-12)


def test_real_accepts_numbers_and_names_the_argument_otherwise():
    assert _real("mu", 1) == 1.0 and _real("mu", torch.tensor(0.25)) == 0.25
    for bad, said in ((None, "a real number"), ("x", "a real number"), (math.inf, "finite")):
        with pytest.raises(ValueError, match=f"^mu must be {said}"):
            _real("mu", bad)
    with pytest.raises(ValueError, match="^gap must be finite, got nan$"):
        _real("gap", math.nan)


def test_weight_norms_are_the_frobenius_norms():
    f64 = torch.float64
    model = SimpleNamespace(
        H=2,
        W_QK=torch.stack([torch.eye(4, dtype=f64), 2 * torch.eye(4, dtype=f64)]),
        W=torch.ones(3, 4, dtype=f64),
        a=torch.tensor([[3.0, 4.0]], dtype=f64),
        b=torch.zeros(3, dtype=f64),
    )
    norms = _weight_norms(model)  # a BLAS may sum the squares in another order: to 1e-15
    assert set(norms) == {"W_QK", "W", "a", "b"} and norms["b"] == 0.0
    assert norms["W_QK"] == pytest.approx((2.0, 4.0), rel=1e-15)
    assert norms["W"] == pytest.approx(math.sqrt(12), rel=1e-15)
    assert norms["a"] == pytest.approx(5.0, rel=1e-15)
