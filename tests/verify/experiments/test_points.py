"""Tests for verify/experiments/points.py: one trained model per Point -- the paper and published
protocols, codebooks per seed, point ids."""

import dataclasses
import math

import pytest
import torch

from qstr.constructions.experiment_models import PracticalFFN
from qstr.constructions.published_models import EncodedFFN
from qstr.verify.experiments import Execution, figure1, run_experiment
from qstr.verify.experiments.points import Point, build_member, model_bytes


@pytest.mark.parametrize(
    "protocol,variant,test_simple",
    [
        ("paper", "1str", False),
        ("paper", "simple", True),
        ("published", "1str", True),
        ("published", "simple", True),
    ],
)
def test_test_prompts_follow_training_variant(protocol, variant, test_simple):
    """Paper: test prompts from the training variant. Published code: always simple prompts."""
    p = Point(
        figure="figure1",
        protocol=protocol,
        model="transformer",
        variant=variant,
        N=6,
        q=1,
        seed=0,
        n_test=50,
        width=8,
    )
    m = build_member(p)
    t = m.test[1]
    constant = bool((t == t[:, :1]).all())
    assert constant == test_simple
    assert p.test_variant == ("simple" if test_simple else variant)
    x, tt, _ = m.stream.draw(50)  # training prompts are the training variant in both protocols
    assert bool((tt == tt[:, :1]).all()) == (variant == "simple")
    assert m.c == (1.0 if protocol == "published" else math.sqrt(10))


def test_published_protocol_choices():
    pts = figure1.points(protocol="published", seeds=[0, 1])
    assert {p.weight_decay for p in pts} == {0.01}
    assert {p.weight_decay for p in figure1.points(seeds=[0])} == {0.1}
    a, b = (
        build_member(
            Point(
                figure="figure1",
                protocol="published",
                model="ffn",
                variant="1str",
                N=4,
                q=1,
                seed=s,
                n_test=8,
                ffn_hidden=(8, 8),
            )
        )
        for s in (0, 1)
    )
    assert torch.equal(a.omega, b.omega)  # one codebook per N for all seeds, as the published code

    assert isinstance(a.model, EncodedFFN)
    c, d = (
        build_member(
            Point(
                figure="figure1",
                protocol="paper",
                model="ffn",
                variant="1str",
                N=4,
                q=1,
                seed=s,
                n_test=8,
                ffn_hidden=(8, 8),
            )
        )
        for s in (0, 1)
    )
    assert not torch.equal(c.omega, d.omega)


def test_matmul_option_keeps_float32_ids_and_separates_tf32_rows(tmp_path):
    """The float32 default leaves point ids as they were; tf32 points get their own ids and
    stacks; tf32 is refused off CUDA with one clear error."""
    p = figure1.points(quick=True, seeds=1)[0]
    assert "matmul" not in p.config
    t = dataclasses.replace(p, matmul="tf32")
    assert (
        t.point_id != p.point_id and t.stack_group != p.stack_group and t.config["matmul"] == "tf32"
    )
    with pytest.raises(ValueError, match="matmul"):
        dataclasses.replace(p, matmul="bf16")
    with pytest.raises(ValueError, match="needs device='cuda'"):
        run_experiment(
            "figure1",
            out_dir=str(tmp_path),
            quick=True,
            execution=Execution(matmul="tf32", progress=False),
        )


def test_ffn_input_paper_protocol_reads_the_encoded_tokens():
    """Protocol 2: the paper protocol's FFN reads vec(x_i, omega_i, omega_t) at c = 1; the
    scaled encoding and Theorem 6's one-hot input are ablations with their own point ids; the
    record's c is the c the model reads (the Transformer's sqrt(d/q), 1 for the RNN)."""
    kw = dict(
        figure="figure1",
        protocol="paper",
        model="ffn",
        variant="simple",
        N=5,
        q=1,
        seed=0,
        n_test=8,
        ffn_hidden=(8, 8),
    )
    enc, scaled, onehot = (
        Point(**kw, ffn_input=f) for f in ("encoded", "encoded-scaled", "onehot")
    )
    assert Point(**kw) == enc
    m_enc, m_scaled, m_onehot = (build_member(p) for p in (enc, scaled, onehot))
    assert isinstance(m_enc.model, EncodedFFN) and isinstance(m_scaled.model, EncodedFFN)
    assert isinstance(m_onehot.model, PracticalFFN)
    assert (m_enc.c, m_scaled.c) == (1.0, math.sqrt(10))
    assert len({enc.point_id, scaled.point_id, onehot.point_id}) == 3
    for model in ("transformer", "rnn", "ffn"):
        p = dataclasses.replace(enc, model=model, width=8, rnn_hidden=4)
        c = math.sqrt(10) if model == "transformer" else 1.0
        assert p.config["c"] == build_member(p).c == c


def test_ffn_input_checked():
    kw = dict(figure="figure1", model="ffn", variant="simple", N=5, q=1, seed=0)
    with pytest.raises(ValueError, match="ffn_input must be one of"):
        Point(protocol="paper", ffn_input="binary", **kw)
    with pytest.raises(ValueError, match="published protocol's FFN"):
        Point(protocol="published", ffn_input="onehot", **kw)


@pytest.mark.parametrize(
    "seeds, needle",
    [
        ("12", "a count or a list of integers, got '12'"),
        ([1.7], "integers in \\[0, 2\\^63\\), got 1.7"),
        ([2**70], "integers in \\[0, 2\\^63\\)"),
        ([True], "integers in"),
        ([0, 0], "seed 0 is given twice"),
        ([], "must not be empty"),
        (10**6, "a count from 1 to 1000"),
        (0, "a count from 1 to 1000"),
    ],
)
def test_seeds_that_are_not_distinct_integers_in_range_are_refused(seeds, needle):
    from qstr.verify.experiments.points import seeds_of  # noqa: PLC0415

    with pytest.raises(ValueError, match=needle):
        seeds_of(seeds, [0])


def test_numpy_integers_and_ranges_are_seeds():
    import numpy as np  # noqa: PLC0415

    from qstr.verify.experiments.points import seeds_of  # noqa: PLC0415

    assert seeds_of(np.arange(3), [0]) == [0, 1, 2] and seeds_of(range(2, 4), [0]) == [2, 3]


@pytest.mark.parametrize(
    "override, needle",
    [
        ({"lr": float("nan")}, "lr must be a finite number > 0, got nan"),
        ({"n_test": 0}, "n_test must be an integer >= 1, got 0"),
        ({"max_steps": 2.5}, "max_steps must be an integer >= 1, got 2.5"),
        ({"threshold": -1.0}, "threshold must be None or a finite number >= 0"),
        ({"threshold": float("inf")}, "threshold must be None or a finite number >= 0"),
        ({"ffn_hidden": (0, 8)}, "ffn_hidden must be integers >= 1"),
    ],
)
def test_an_override_out_of_range_is_refused_with_its_own_name(override, needle):
    from qstr.verify.experiments import figure1  # noqa: PLC0415

    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        figure1.points(quick=True, overrides=override)


@pytest.mark.parametrize("option", ["N", "epochs", "n_train"])
def test_figure2_options_at_zero_are_refused_not_replaced_by_defaults(option):
    from qstr.verify.experiments import figure2  # noqa: PLC0415

    with pytest.raises(ValueError, match=f"{option} must be an integer >= "):
        figure2.points(quick=True, **{option: 0})


@pytest.mark.parametrize("protocol", ["paper", "published"])
def test_model_bytes_counts_the_built_models_parameters_four_times(protocol):
    """model_bytes (the memory check's model term) = 4 x (parameters of the member's built model)
    x bytes per number: weights, gradients and AdamW's two moments; one point of each model."""
    pts = figure1.points(quick=True, seeds=1, protocol=protocol)
    for model in ("transformer", "rnn", "ffn"):
        p = next(p for p in pts if p.model == model)
        n = sum(t.numel() for t in build_member(p).model.parameters())
        assert model_bytes(p) == 16 * n and model_bytes(p, torch.float64) == 32 * n
