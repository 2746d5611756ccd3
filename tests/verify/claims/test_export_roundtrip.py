"""The export-roundtrip claim (verify/claims/export_roundtrip.py) through its declared checks and
faults."""

import pytest

from qstr.verify.claims import all_claims

CID = "export-roundtrip"
CLAIM = all_claims()[CID]


@pytest.mark.parametrize("name", [c.name for c in CLAIM.checks])
def test_each_check_holds_on_the_saved_and_reloaded_modules(declared, name):
    v = declared(CID).verdict(name)
    assert v.holds and v.relation == "<=" and v.rounding > 0, v
    assert v.measured <= (1e-12 if v.dtype == "float64" else 1e-5), v


def test_the_export_is_a_file_read_back_and_names_its_worst_case(declared):
    d = declared(CID)
    assert any("load_multihead(file)" in c.name for c in d.inputs.cases)
    v = d.verdict("nn.MultiheadAttention = built")
    assert "worst" in v.detail and "rounding term" in v.detail


@pytest.mark.parametrize("fault", CLAIM.faults, ids=lambda f: f.name)
def test_each_fault_fails_its_checks_by_a_large_error(declared, fault):
    d = declared(CID)
    broken = fault.apply(d.inputs, d.ctx)
    for name in fault.breaks:
        v = d.verdict(name, broken)
        assert not v.holds and v.measured > 0.1, (name, v)
    # the honest inputs are left as they were
    assert d.verdict(fault.breaks[0]).holds
