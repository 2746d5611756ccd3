"""Definition 2, the data model (verify/claims/data_model.py) through its declared structure."""

import pytest

from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")


@pytest.fixture(scope="module")
def declared():
    """The claim and its honest inputs (built once per module)."""
    claim = all_claims()["data-model"]
    return claim, claim.inputs(CTX)


def _fault(claim, start):
    return next(f for f in claim.faults if f.name.startswith(start))


def test_checks_hold_and_each_fault_fails_its_checks(declared):
    """Every check holds on the honest inputs; every fault makes each named check fail, and returns
    new inputs."""
    claim, inp = declared
    for check in claim.checks:
        v = check.run(inp, CTX)
        assert v.holds, (check.name, v)
    for fault in claim.faults:
        broken = fault.apply(inp, CTX)
        assert broken is not inp
        for name in fault.breaks:
            v = claim.check_named(name).run(broken, CTX)
            assert not v.holds, (fault.name, name, v)


def test_data_model_draws_and_the_off_by_one_labels(declared):
    """60 hypothesis-drawn batches (quick); the off-by-one labels are far from g(x_t)."""
    claim, inp = declared
    assert len(inp.cases) == 60
    broken = _fault(claim, "labels read").apply(inp, CTX)
    v = claim.check_named("labels y_i = g(x_t_i)").run(broken, CTX)
    assert v.measured > 0.1 and v.rounding < 1e-4
