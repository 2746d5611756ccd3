"""Tests for verify/experiments/plots.py: what a figure's title says about its rows."""

from qstr.verify.experiments.plots import weight_decay_note


def _rows(*wds):
    return [{"config": {"weight_decay": w}} for w in wds]


def test_weight_decay_note_only_for_a_departure_from_the_protocol():
    assert weight_decay_note(_rows(0.1, 0.1), 0.1) == ""
    assert weight_decay_note([], 0.1) == ""
    assert weight_decay_note(_rows(0.01), 0.1) == "; weight decay 0.01 (the protocol: 0.1)"
    both = weight_decay_note(_rows(0.1, 0.01), 0.1)
    assert both == "; weight decay 0.01, 0.1 (the protocol: 0.1)"
