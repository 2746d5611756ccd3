"""Fixtures shared by the tests of verify/experiments: tiny models and a tiny Figure 1 grid."""

import pytest


@pytest.fixture
def tiny():
    """Overrides for tiny models, so that a whole "figure" trains in seconds."""
    return {"width": 8, "rnn_hidden": 8, "ffn_hidden": (8, 8), "n_test": 64, "max_steps": 30}


@pytest.fixture
def tiny_grid():
    """A two-point 1STR and one-point simple-1STR grid of N for Figure 1."""
    return {"1str": [2, 3], "simple": [3]}
