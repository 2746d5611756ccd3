"""The export-roundtrip claim (verify/claims/export_roundtrip.py) through its declared checks and
faults."""

import pytest

from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")
CLAIM = all_claims()["export-roundtrip"]


@pytest.fixture(scope="module")
def honest():
    return CLAIM.inputs(CTX)


@pytest.mark.parametrize("name", [c.name for c in CLAIM.checks])
def test_each_check_holds_on_the_saved_and_reloaded_modules(honest, name):
    v = CLAIM.check_named(name).run(honest, CTX)
    assert v.holds and v.relation == "<=" and v.rounding > 0, v
    assert v.measured <= (1e-12 if v.dtype == "float64" else 1e-5), v


def test_the_export_is_a_file_read_back_and_names_its_worst_case(honest):
    assert any("load_multihead(file)" in c.name for c in honest.cases)
    v = CLAIM.check_named("nn.MultiheadAttention = built").run(honest, CTX)
    assert "worst" in v.detail and "rounding term" in v.detail


@pytest.mark.parametrize("fault", CLAIM.faults, ids=lambda f: f.name)
def test_each_fault_fails_its_checks_by_a_large_error(honest, fault):
    broken = fault.apply(honest, CTX)
    for name in fault.breaks:
        v = CLAIM.check_named(name).run(broken, CTX)
        assert not v.holds and v.measured > 0.1, (name, v)
    # the honest inputs are left as they were
    assert CLAIM.check_named(fault.breaks[0]).run(honest, CTX).holds
