"""trend_power's simulation knobs as one record, PowerSimulation (issue 56): the same record and
seed give the same result, every knob reaches the simulation, bad knobs are refused."""

import math

import pytest

from qstr.verify.experiments import analysis
from qstr.verify.experiments.analysis import PowerSimulation
from tests.verify.experiments.test_analysis import _rows

SMALL = PowerSimulation(seeds=(3, 6), n_sim=40, n_perm=39, level=0.1, seed=7)


def _weak():
    return _rows(lambda q: math.exp(0.1 * q), noise=0.3)


def test_the_same_record_gives_the_same_result():
    """Two runs at the same record are identical; the defaults are PowerSimulation()'s."""
    rows = _weak()
    assert analysis.trend_power(rows, "rnn", "transformer", sim=SMALL) == analysis.trend_power(
        rows, "rnn", "transformer", sim=PowerSimulation(**vars(SMALL))
    )
    assert analysis.trend_power(rows, "rnn", "transformer") == analysis.trend_power(
        rows, "rnn", "transformer", sim=PowerSimulation()
    )


def test_every_knob_reaches_the_simulation():
    """The counts tried, the sizes reported and the level are the record's; another seed draws
    other simulated experiments, a looser level finds the trend at least as often."""
    rows = _weak()
    out = analysis.trend_power(rows, "rnn", "transformer", sim=SMALL)
    assert sorted(out["power"]) == [3, 6]
    assert (out["sims"], out["perm"], out["level"]) == (40, 39, 0.1)
    other = analysis.trend_power(
        rows, "rnn", "transformer", sim=PowerSimulation(**{**vars(SMALL), "seed": 8})
    )
    assert other["power"] != out["power"]
    loose = analysis.trend_power(
        rows, "rnn", "transformer", sim=PowerSimulation(**{**vars(SMALL), "level": 0.5})
    )
    assert all(loose["power"][n] >= out["power"][n] for n in (3, 6))


@pytest.mark.parametrize(
    "knobs, message",
    [
        ({"seeds": ()}, "seeds"),
        ({"seeds": (5, 0)}, "seeds"),
        ({"n_sim": 0}, "n_sim"),
        ({"n_perm": 1.5}, "n_perm"),
        ({"level": 1.0}, "level"),
    ],
)
def test_bad_knobs_are_refused(knobs, message):
    with pytest.raises(ValueError, match=message):
        PowerSimulation(**knobs)


def test_sim_must_be_the_record():
    with pytest.raises(ValueError, match="PowerSimulation"):
        analysis.trend_power(_weak(), "rnn", "transformer", sim={"n_sim": 10})
