"""Values behind the export-roundtrip claim (verify/claims/export.py)."""
import pytest

from qstr.verify.claims import export
from qstr.verify.registry import Context

CTX = Context(profile="quick")


def test_reloaded_models_match_the_built_ones_to_rounding():
    out = export._export(CTX)
    assert out.holds and float(out.measured.split("= ")[1]) < 1e-12


@pytest.mark.parametrize("slip", [export._forgot_head_dim_scale, export._heads_swapped])
def test_each_export_slip_is_caught_with_a_large_error(slip):
    out = export._export(CTX, slip=slip)
    assert not out.holds and float(out.measured.split("= ")[1]) > 0.1


def test_file_loaders_and_bias_options_match_the_built_module():
    ok, line = export._file_and_options(CTX)
    assert ok and "load_multihead(file)" in line, line
