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
    import torch
    name, cons = export._constructions(CTX)[0]
    x = torch.randn(2, export.EX_N, export.EX_D, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    t = torch.randperm(export.EX_N, generator=torch.Generator().manual_seed(1))[:3].expand(2, export.EX_N, 3)
    Z = cons.encode(x, t)
    with torch.no_grad():
        gaps, gap32 = export._file_and_options(cons, Z, cons.predict(x, t))
    assert max(gaps.values()) < 1e-12 and gap32 < 1e-4, gaps
