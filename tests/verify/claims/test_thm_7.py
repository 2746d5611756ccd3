"""The claim thm-7 of verify/claims/thm_7.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses
import math

import mpmath
import pytest

from qstr.bounds.theorem7 import Theorem7Params, theorem7_bound
from qstr.bounds.transformer import default_code_dim, ffn_sample_size
from qstr.verify.ball import NOT_CERTIFIED, Certified, Enclosure
from qstr.verify.certified import faults
from qstr.verify.claims import thm_7
from qstr.verify.claims._class_member import built_constants, frobenius


CID = "thm-7"


def test_thm7_checks_and_faults(declared):
    d = declared(CID)
    assert (
        d.verdict("n(N) = the real root").measured < 1e-13
    )  # float64 vs 40 digits: ~1e-15 measured
    assert d.claim.checks[0].name == "slope of n(N) <= 9 / ln N"


def test_theorem7_bound_mp_hand_values():
    P = Theorem7Params()
    for N in (2, 16, 1000, 2**20):
        assert thm_7.t7_code_dim(P, N) == default_code_dim(N, P.delta)
    assert thm_7.t7_code_dim(Theorem7Params(d_e=33), 10**6) == 33
    with mpmath.workdps(40):
        v = thm_7.theorem7_bound_mp(10**40, 4096, P)
    assert float(v) == pytest.approx(theorem7_bound(10**40, 4096, P).total, rel=1e-13)
    assert float(v) > P.eps_2nn


def test_thm7_rad_fault_passes_the_slope_test(declared):
    """The factor-2 slip keeps n(N) polylogarithmic: only the comparison with the independent
    evaluation catches it (n(N) about 4x smaller)."""
    d = declared(CID)
    broken = d.broken("factor 2 of 2 Rad dropped")
    assert d.verdict("slope of n(N) <= 9 / ln N", broken).holds
    assert d.verdict("n(N) = the real root", broken).measured > 0.5


def test_thm7_slope_test_catches_a_linear_requirement(declared):
    """n(N) = N d (the feed-forward requirement) fails the polylog slope test."""
    d = declared(CID)
    linear = dataclasses.replace(d.inputs, sizes={N: ffn_sample_size(N, 4) for N in d.inputs.sizes})
    assert not d.verdict("slope of n(N) <= 9 / ln N", linear).holds


@pytest.mark.parametrize("slip", ["hoeffding", "tail_exponent", "truncation"])
def test_planted_slip_in_theorem7_bound_fails_the_comparison(declared, slip):
    """Three more slips of the bound, put in the inputs as the record function."""

    def planted(n, N, params):
        b = theorem7_bound(n, N, params)
        dev = math.sqrt(math.log(4.0 / params.delta) / (2.0 * n))
        # hoeffding: 3 tau dev, the Hoeffding term for theta* forgotten
        delta_total = {
            "hoeffding": -b.tau * dev,
            "tail_exponent": b.tail * (N**-0.25 - 1.0),  # N^{-1/2} for N^{-1/4}
            "truncation": b.truncation,
        }[slip]  # 2 (1 + 4/delta) tau e^{-p}
        return dataclasses.replace(b, total=b.total + delta_total)

    d = declared(CID)
    broken = dataclasses.replace(d.inputs, record=planted)
    assert not d.verdict("bound = 40-digit evaluation", broken).holds


def test_thm7_record_read_back_from_the_member(declared):
    """The record's R_Theta, A, r_x, r_h and d_e equal those read from the built member's weights
    (g_net's hidden layer at its Assumption 2 radius, which the member's own norm stays below),
    and a record counting one transition direction in R_Theta fails."""
    d = declared(CID)
    name = "record's R_Theta, A, r_x, r_h, d_e = the built member's"
    assert d.verdict(name).holds
    built = built_constants(d.inputs.member)
    hidden = d.inputs.member.linears("f_y")[3]
    assert frobenius(hidden) < 0.5 * built["radius"]  # one layer of many
    broken = d.verdict(name, d.broken("R_Theta with one transition direction"))
    assert not broken.holds and broken.measured > 0.1


def test_thm7_on_the_paper_class(declared):
    """The paper's class (transitions read h, (1/N)-Lipschitz in it) needs a few percent more
    samples than the class without h and stays polylogarithmic; one-hot codes break that too."""
    d = declared(CID)
    name = "paper's class (transitions read h): slope of n(N) <= 9 / ln N"
    v = d.verdict(name)
    assert v.holds and "x the class without h's" in v.detail
    P = Theorem7Params()
    a, b = (
        theorem7_bound(10**39, 1024, P),
        theorem7_bound(10**39, 1024, Theorem7Params(reads_h=True)),
    )
    assert b.lipschitz > 2 * a.lipschitz and b.n_params > a.n_params and b.total > a.total
    assert not d.verdict(name, d.broken("one-hot codes")).holds


CERTIFIED = "bound = its enclosure (certified)"


def _straddling(points, params, *, rtol, record):
    """A certified computation whose enclosures straddle the tolerance: the fallback decides."""
    gap = Enclosure(0.0, 2 * rtol)
    return Certified("forced", gap, Enclosure(rtol, rtol), NOT_CERTIFIED, len(points), 0.0, "")


def test_thm7_certified_decides_at_every_constants_set(declared):
    """The float64 bound within 1e-12 of its enclosure at the three constants sets, decided by the
    enclosures: the largest gap is a few float64 roundings, the enclosure as narrow as 1e-30."""
    v = declared(CID).verdict(CERTIFIED)
    assert v.holds and v.certified and v.bound == thm_7.T7_AGREE_RTOL
    assert {label for label, _ in v.cases} == {"defaults", "variant", "reads_h"}
    lo, hi = v.enclosure
    assert 0 < lo <= hi < 4e-15 and hi - lo < 1e-30
    assert all(row.certified and row.measured < 4e-15 for _, row in v.cases)


def test_thm7_certified_straddling_falls_back_to_the_40_digit_check(declared, monkeypatch):
    """Where the enclosures straddle, the 40-digit comparison decides, labelled as such: it holds
    on the honest record and fails on a total slipped by 1e-9."""
    d = declared(CID)
    monkeypatch.setattr(thm_7, "certified_theorem7_agreement", _straddling)
    v = d.verdict(CERTIFIED)
    assert v.holds and v.certified is False and "the float64 check decides" in v.detail
    assert v.measured < 1e-13 and v.enclosure == (0.0, 2 * thm_7.T7_AGREE_RTOL)
    slipped = dataclasses.replace(d.inputs, record=faults.theorem7_total_scaled(theorem7_bound))
    assert not d.verdict(CERTIFIED, slipped).holds
