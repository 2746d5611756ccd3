"""Values behind the set-up claims (verify/claims/setup.py): Assumptions 1-3 and Lemma 12."""
import math

import pytest
import torch

from qstr.constructions.codes import rademacher_codebook
from qstr.constructions.links import make_link
from qstr.verify.claims import setup
from qstr.verify.registry import Context

CTX = Context(profile="quick")


@pytest.mark.parametrize("d, r, want", [(1, 1, 2 / math.pi), (1, 2, 0.5), (3, 2, 1 / 2), (2, 1, math.pi / 4)])
def test_chi_moment_ratio_hand_values(d, r, want):
    # E|z| = sqrt(2/pi); E||x||^2 = d; E||x|| for d = 2 is sqrt(pi/2)
    assert setup._chi_moment_ratio(d, r) == pytest.approx(want, rel=1e-12)


def test_chi_ratio_is_below_one_and_largest_at_r_1():
    for d in (1, 2, 16, 256):
        vals = [setup._chi_moment_ratio(d, r) for r in (1, 1.5, 2, 4, 8, 32)]
        assert max(vals) == vals[0] < 1


def test_assumption1_falsifier_is_caught_by_both_tests():
    out = setup._assumption1(CTX, scale=1.5)
    assert not out.holds and float(out.measured.split("= ")[1]) > 1.4  # 2.25 x 0.968 at d = 16


@pytest.mark.parametrize("name, want", [("linear", 1.0), ("hermite", 1.0), ("sqnorm", 2.0), ("mean", 4 / 3),
                                        ("mean-projected", 1 / 3)])
def test_second_moments_as_stated(name, want):
    link = make_link(name, 3, 4, generator=torch.Generator().manual_seed(0))
    xt = torch.randn(200_000, 3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    m, se = setup._second_moment(link, xt)
    assert setup.A2_SECOND_MOMENT[name](3, 4) == pytest.approx(want)
    assert abs(m - want) <= 6 * se and se < 0.02 * max(want, 1)


def test_each_link_slip_is_caught_on_its_own():
    for case in setup._slipped_links(CTX):
        assert not setup._assumption2(CTX, links=[case]).holds, case[0]
    assert not setup._assumption2(CTX, links=[], teacher=setup._unscaled_teacher).holds
    assert setup._assumption2(CTX).holds


def test_teacher_second_moment_averaged_over_draws():
    """The random teacher's E g^2 over its draws is (1 + 1/(q d)) / 2 = 13/24 at q = 3, d = 4 (a precise run here)."""
    draw = lambda g: make_link("teacher", 3, 4, generator=g)  # noqa: E731
    m, se = setup.teacher_second_moment(draw, 3, 4, torch.Generator().manual_seed(5), n_x=64)
    assert abs(m - 13 / 24) <= 6 * se and se < 0.03
    m_bad, _ = setup.teacher_second_moment(setup._unscaled_teacher, 3, 4, torch.Generator().manual_seed(5))
    assert m_bad > 2.0  # 8 x 13/24 in expectation


def test_lemma12_radius_and_its_falsifier():
    ok, bad = setup._lemma12(CTX), setup._lemma12(CTX, union_bound=False)
    assert ok.holds and not bad.holds
    assert bad.bound == f"<= r_x = {math.sqrt(6 * math.e):.3f}"
    assert "token_radius" in ok.detail and "1.414 holds: False" in bad.detail  # each slipped radius exceeded


def test_field_tables_and_a_reducible_modulus():
    from qstr.constructions.codes import MAX_M, gf_mul_table

    assert all(setup._zero_divisor_free(gf_mul_table(m)) for m in range(1, MAX_M + 1))
    table = gf_mul_table(4, 0b10101)  # (x^2 + x + 1)^2: x^2 + x + 1 = 0b111 is a zero divisor
    assert not setup._zero_divisor_free(table) and table[0b111, 0b111] == 0  # a nonzero square is zero
    with pytest.raises(ValueError, match="poly must be an int of degree"):
        gf_mul_table(4, 0b111)


def test_rs_codes_claim_and_its_falsifier():
    assert setup._rs_codes(CTX).holds
    bad = setup._rs_codes(CTX, polys={4: 0b10101})
    assert not bad.holds and "except [4]" in bad.detail


def test_experimental_tail_hand_value_and_falsifier():
    from fractions import Fraction

    assert setup._tail_by_counting(23, 0.5) == Fraction(89104, 2 ** 23)  # 2 (C(23,18) + ... + C(23,23)) / 2^23
    assert 4950 * float(setup._tail_by_counting(23, 0.5)) == pytest.approx(52.58, abs=0.01)
    half = setup._experimental(CTX, tail=lambda d_e, mu: float(setup._tail_by_counting(d_e, mu)) / 2)
    assert not half.holds and setup._experimental(CTX).holds


def test_rs_codes_and_experimental_encoding_report_value_and_limit():
    """value/limit (--json measured_value/bound_value) are finite floats, value <= limit exactly when the check holds."""
    for out in (setup._rs_codes(CTX), setup._rs_codes(CTX, polys={4: 0b10101}), setup._experimental(CTX),
                setup._experimental(CTX, tail=lambda d_e, mu: float(setup._tail_by_counting(d_e, mu)) / 2)):
        assert isinstance(out.value, float) and isinstance(out.limit, float)
        assert math.isfinite(out.value) and math.isfinite(out.limit)
        assert (out.value <= out.limit) == out.holds
    assert setup._rs_codes(CTX, polys={4: 0b10101}).value == 1.0  # one reducible table, the codes still agree


def test_normal_moment_ratio_hand_values():
    assert setup._normal_moment_ratio(2.0) == pytest.approx(1 / 4)  # E y^2 = 1, / 2^2
    assert setup._normal_moment_ratio(1.0) == pytest.approx(2 / math.pi)  # (E|y|)^2 = 2/pi


# ---------------------------------------------------------------- declared claims

from qstr.verify.claims import all_claims  # noqa: E402


def _claim(cid):
    claim = all_claims()[cid]
    return claim, claim.inputs(CTX)


def test_assumption3_checks_hold_and_each_fault_fails_its_checks():
    """Every check of assumption-3 holds; every fault makes each of its named checks fail."""
    claim, inp = _claim("assumption-3")
    for check in claim.checks:
        assert check.run(inp, CTX).holds, check.name
    for fault in claim.faults:
        broken = fault.apply(inp, CTX)
        for name in fault.breaks:
            assert not claim.check(name).run(broken, CTX).holds, (fault.name, name)


def test_assumption3_experimental_codes_exceed_one_half_and_short_rows_are_seen():
    """The experiments' codes measure mu = 17/23 at this seed; short rows miss 1 by 1/(d_e + 1)."""
    claim, inp = _claim("assumption-3")
    faults = {f.name: f for f in claim.faults}
    v = claim.check("coherence <= 1/2").run(
        faults["d_e = floor(5 ln N) at N = 100 (the experiments)"].apply(inp, CTX), CTX)
    assert v.measured > 0.5 and "experimental" in v.detail
    short = faults["rows normalised by sqrt(d_e + 1)"].apply(inp, CTX)
    d_e = short.books[0][1].d_e
    v = claim.check("unit rows").run(short, CTX)
    assert v.measured == pytest.approx(1 / (d_e + 1), rel=1e-5)


def test_assumption3_headline_is_the_coherence_and_faults_leave_inputs_alone():
    """The first check is Assumption 3's inequality; a fault returns new inputs."""
    claim, inp = _claim("assumption-3")
    assert claim.checks[0].name == "coherence <= 1/2"
    books = inp.books
    for fault in claim.faults:
        assert fault.apply(inp, CTX) is not inp
    assert inp.books is books and claim.check("coherence <= 1/2").run(inp, CTX).measured <= 0.5 + 1e-12


def _holds_and_caught(cid):
    claim, inp = _claim(cid)
    for check in claim.checks:
        v = check.run(inp, CTX)
        assert v.holds, (check.name, v)
    for fault in claim.faults:
        broken = fault.apply(inp, CTX)
        for name in fault.breaks:
            v = claim.check(name).run(broken, CTX)
            assert not v.holds, (fault.name, name, v)
    return claim, inp


def test_data_model_checks_hold_and_each_fault_is_caught():
    """Definition 2 on hypothesis-drawn tasks: every check holds, every fault is caught."""
    claim, inp = _holds_and_caught("data-model")
    assert len(inp.cases) == 60


def test_data_model_off_by_one_labels_are_far_off():
    """The off-by-one sampler's labels differ from g(x_t) by far more than rounding."""
    claim, inp = _claim("data-model")
    fault = next(f for f in claim.faults if "off-by-one" in f.name)
    v = claim.check("labels y_i = g(x_t_i)").run(fault.apply(inp, CTX), CTX)
    assert v.measured > 0.1 and v.rounding < 1e-4


def test_assumption1_checks_hold_and_each_fault_is_caught():
    """Assumption 1's checks hold; wide tokens, wide labels and a shifted closed form are caught."""
    claim, inp = _holds_and_caught("assumption-1")
    fault = next(f for f in claim.faults if f.name.startswith("tokens"))
    assert claim.check("C_x <= 1").run(fault.apply(inp, CTX), CTX).measured > 1.4  # 2.25 x 0.97


@pytest.mark.parametrize("d, r, want", [(1, 1, 2 / math.pi), (1, 2, 0.5), (3, 2, 1 / 2),
                                        (2, 1, math.pi / 4)])
def test_chi_closed_form_hand_values(d, r, want):
    """E|z| = sqrt(2/pi); E||x||^2 = d; E||x|| = sqrt(pi/2) at d = 2."""
    _, inp = _claim("assumption-1")
    assert inp.chi_ratio(d, r) == pytest.approx(want, rel=1e-12)


def test_chi_ratio_is_below_one_and_largest_at_r_1_and_normal_hand_values():
    """The chi ratio is largest at r = 1 and below 1; E y^2 / 4 = 1/4, (E|y|)^2 = 2/pi."""
    _, inp = _claim("assumption-1")
    for d in (1, 2, 16, 256):
        vals = [inp.chi_ratio(d, r) for r in (1, 1.5, 2, 4, 8, 32)]
        assert max(vals) == vals[0] < 1
    assert inp.normal_ratio(2.0) == pytest.approx(1 / 4)
    assert inp.normal_ratio(1.0) == pytest.approx(2 / math.pi)


def test_assumption2_checks_hold_and_each_slip_is_caught_on_its_own():
    """The links' second moments, the teacher's and the exact nets hold; each slip is caught."""
    claim, inp = _holds_and_caught("assumption-2")
    assert {name for name, _ in inp.links} >= {"linear", "hermite", "sqnorm", "mean", "teacher"}


def test_assumption2_stated_moments_hand_values():
    """E g^2 as stated at q = 3, d = 4: linear and hermite 1, sqnorm 2, mean d/q, projected 1/q;
    the teacher's (1 + 1/12) / 2 = 13/24."""
    _, inp = _claim("assumption-2")
    want = {"linear": 1.0, "hermite": 1.0, "sqnorm": 2.0, "mean": 4 / 3, "mean-projected": 1 / 3}
    assert {k: f(3, 4) for k, f in inp.stated.items()} == pytest.approx(want)
    assert inp.teacher_closed(3, 4) == pytest.approx(13 / 24)


def test_lemma12_checks_hold_and_the_slipped_radii_are_exceeded():
    """Both radii hold and equal their formulas; each slipped radius (sqrt(6e), sqrt(2)) is exceeded."""
    claim, inp = _holds_and_caught("lemma-12")
    faults = {f.name: f for f in claim.faults}
    v = claim.check("max ||x_j|| <= r_x").run(
        faults["r_x without the union bound over n N tokens"].apply(inp, CTX), CTX)
    assert v.bound == pytest.approx(math.sqrt(6 * math.e))
    v = claim.check("max ||x_j|| <= token_radius").run(
        faults["token_radius without its concentration term"].apply(inp, CTX), CTX)
    assert v.bound == pytest.approx(math.sqrt(2))


def test_rs_codes_checks_hold_and_each_fault_is_caught():
    """Fields, the two coherences and the guarantee hold; each fault fails its check."""
    claim, inp = _holds_and_caught("rs-hadamard-codes")
    fault = next(f for f in claim.faults if f.name.startswith("reducible"))
    v = claim.check("GF(2^m) tables are fields").run(fault.apply(inp, CTX), CTX)
    assert v.measured == 2 and "m = [4, 8]" in v.detail


def test_a_reducible_modulus_has_a_nonzero_square_equal_to_zero():
    """x^4 + x^2 + 1 = (x^2 + x + 1)^2: x^2 + x + 1 = 0b111 squares to 0; degree checked."""
    from qstr.constructions.codes import gf_mul_table

    assert gf_mul_table(4, 0b10101)[0b111, 0b111] == 0
    with pytest.raises(ValueError, match="poly must be an int of degree"):
        gf_mul_table(4, 0b111)
