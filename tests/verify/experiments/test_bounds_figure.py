"""Tests for verify/experiments/bounds_figure.py: the paper's explicit sample bounds beside
Figure 1's rows, and where each upper bound falls below the FFN floor."""

import json

import pytest

from qstr.bounds.transformer import Theorem4Params, theorem4_sample_size
from qstr.verify.experiments import bounds_figure
from qstr.verify.experiments.bounds_figure import bound_curves


def test_curves_and_the_crossover_below_the_ffn_floor():
    """Theorem 4's n(N) at d = 10 first drops below N d at N = 2^70 (the curve is evaluated, not
    assumed): the crossing is the first k with n < N d, and every point before it is above."""
    c = bound_curves(10, k_max=80)
    n4, ffn = c["samples"]["thm4"], c["samples"]["thm6"]
    k = c["below_ffn_from"]["thm4"].bit_length() - 1
    assert k == 70 and n4[k - 1] < ffn[k - 1]  # index k - 1 holds N = 2^k
    assert all(a >= b for a, b in zip(n4[: k - 1], ffn[: k - 1], strict=True))
    assert c["below_ffn_from"]["thm7"] is None  # Theorem 7's crossing lies beyond 2^80
    assert ffn[:3] == [20, 40, 80] and all(x < y for x, y in zip(n4, n4[1:], strict=False))
    p4 = Theorem4Params.default()
    assert n4[3] == theorem4_sample_size(0.1, 16, type(p4)(**{**vars(p4), "q": 1, "d": 10}))


def test_report_writes_the_summary_and_refuses_mixed_dimensions(tmp_path, monkeypatch):
    monkeypatch.setattr(bounds_figure, "K_MAX", 8)
    monkeypatch.setattr(bounds_figure, "bound_curves", lambda d, q=1: bound_curves(d, q, k_max=8))
    rows = [
        dict(variant="1str", model=m, N=n, samples=100 * n, threshold=0.7, config={"d": 10})
        for m in ("transformer", "rnn", "ffn")
        for n in (2, 4)
    ]
    bounds_figure.report(rows, str(tmp_path / "b"))
    s = json.loads((tmp_path / "b-summary.json").read_text())
    assert s["d"] == 10 and s["log2_N"] == list(range(1, 9))
    assert (tmp_path / "b.png").exists() and (tmp_path / "b.pdf").exists()
    rows[0]["config"] = {"d": 4}
    with pytest.raises(ValueError, match="token dimensions"):
        bounds_figure.report(rows, str(tmp_path / "c"))


def test_theorem9_curve_is_the_claims_crossover_in_logs():
    """Theorem 9's n*(N) at d_h = sqrt N is the thm-9 claim's rigorous crossover (575 at 2^20),
    at least 1 from N = 2^16 as the claim's vacuity line says, and finite in logs where n*
    itself is far beyond float range (2^64: about 10^(1.5e7))."""
    from qstr.verify.claims import thm_9  # noqa: PLC0415 - the claim's own requirement

    c = bound_curves(10, k_max=64)
    t9 = c["thm9"]
    assert t9["at_least_one_from"] == 2**16 and t9["log10_n"][0] is None  # vacuous at N = 2
    want = thm_9._crossover(thm_9._requirements()["volume (d_h = sqrt N, rigorous)"][2**20])
    assert 10 ** t9["log10_n"][19] == pytest.approx(want, rel=1e-12) and 570 < want < 580
    assert 1.4e7 < t9["log10_n"][63] < 1.6e7
    assert t9["above_ffn_from"] == 2**23  # where n* first exceeds N d
