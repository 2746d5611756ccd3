"""Tests for verify/experiments/__init__.py: run_experiment and the points functions refuse bad
arguments."""

import pytest

from qstr.verify.experiments import figure1, run_experiment


def test_bad_arguments():
    with pytest.raises(ValueError, match="experiment"):
        run_experiment("figure9", out_dir="unused")
    with pytest.raises(ValueError, match="protocol"):
        run_experiment("figure1", out_dir="unused", protocol="mine")
    with pytest.raises(ValueError, match="overrides"):
        figure1.points(overrides={"N": 3})
    with pytest.raises(ValueError, match="seeds"):
        figure1.points(seeds=[])
