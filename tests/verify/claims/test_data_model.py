"""Definition 2, the data model (verify/claims/data_model.py) through its declared structure."""

import numpy as np
import pytest

from qstr.verify.claims.data_model import _cells, _chi_square

CID = "data-model"


def test_data_model_draws_and_the_off_by_one_labels(declared):
    """60 hypothesis-drawn batches (quick); the off-by-one labels are far from g(x_t)."""
    d = declared(CID)
    assert len(d.inputs.cases) == 60
    v = d.verdict("labels y_i = g(x_t_i)", d.broken("labels read"))
    assert v.measured > 0.1 and v.rounding < 1e-4


def test_data_model_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()


def test_the_uniformity_tests_cover_every_index_rule_with_enough_per_cell(declared):
    """The four samplers (uniform, distinct, simple, few-heads) each have >= 75 draws expected per
    tuple cell, and both tests report power 1 against the off-by-one sampler."""
    d = declared(CID)
    rules = {(t.variant, t.indices) for t, _ in d.inputs.uniform}
    assert rules == {
        ("general", "uniform"),
        ("general", "distinct"),
        ("simple", "uniform"),
        ("general", "few-heads"),
    }
    for task, B in d.inputs.uniform:
        tuples = B * (
            1 if task.variant == "simple" else task.N // (2 if task.indices == "few-heads" else 1)
        )
        assert tuples / int((_cells(task) > 0).sum()) >= 75
    for name in ("t uniform over [N] (chi-square)", "t_i uniform over its tuples (chi-square)"):
        assert "power 1.0000 against the off-by-one sampler" in d.verdict(name).detail


def test_the_chi_square_on_hand_counts():
    """Counts equal to their expectation give 0; a count in an impossible cell fails; the bound is
    the chi-square's 1 - 1e-6 quantile (df = 3: 30.66)."""
    p0 = np.array([0.25, 0.25, 0.25, 0.25, 0.0])
    v = _chi_square(np.array([5, 5, 5, 5, 0]), p0, p0, "hand")
    assert v.holds and v.measured == 0 and v.bound == pytest.approx(30.664, abs=1e-3)
    assert not _chi_square(np.array([5, 5, 5, 5, 1]), p0, p0, "hand").holds


def test_the_off_by_one_and_broadcast_samplers_are_seen(declared):
    """Never the last token: both tests fail; one index broadcast to the q slots: the entries stay
    uniform (the entries test cannot see it), the tuples test fails."""
    d = declared(CID)
    off = d.broken("an off-by-one sampler")
    assert not d.verdict("t uniform over [N] (chi-square)", off).holds
    assert not d.verdict("t_i uniform over its tuples (chi-square)", off).holds
    wide = d.broken("broadcast")
    assert d.verdict("t uniform over [N] (chi-square)", wide).holds
    assert not d.verdict("t_i uniform over its tuples (chi-square)", wide).holds
