"""The set-up claims (verify/claims/setup.py) through their declared structure: Assumptions 1-3,
Definition 2, Lemma 12, the RS-Hadamard codes and the experiments' encoding."""

import math
from fractions import Fraction

import pytest

from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")
_INPUTS = {}


def _claim(cid):
    """The claim and its honest inputs (built once per test session)."""
    claim = all_claims()[cid]
    if cid not in _INPUTS:
        _INPUTS[cid] = claim.inputs(CTX)
    return claim, _INPUTS[cid]


def _fault(claim, start):
    return next(f for f in claim.faults if f.name.startswith(start))


@pytest.mark.parametrize(
    "cid",
    [
        "assumption-3",
        "data-model",
        "assumption-1",
        "assumption-2",
        "lemma-12",
        "rs-hadamard-codes",
        "experimental-encoding",
    ],
)
def test_checks_hold_and_each_fault_fails_its_checks(cid):
    """Every check holds on the honest inputs; every fault makes each named check fail, and returns
    new inputs."""
    claim, inp = _claim(cid)
    for check in claim.checks:
        v = check.run(inp, CTX)
        assert v.holds, (check.name, v)
    for fault in claim.faults:
        broken = fault.apply(inp, CTX)
        assert broken is not inp
        for name in fault.breaks:
            v = claim.check(name).run(broken, CTX)
            assert not v.holds, (fault.name, name, v)


def test_assumption3_headline_and_the_experimental_codes():
    """The headline is Assumption 3's mu <= 1/2; the experiments' codes measure mu > 1/2."""
    claim, inp = _claim("assumption-3")
    assert claim.checks[0].name == "coherence <= 1/2"
    v = claim.check("coherence <= 1/2").run(_fault(claim, "d_e = floor").apply(inp, CTX), CTX)
    assert v.measured > 0.5 and "experimental" in v.detail


def test_assumption3_short_rows_miss_one_by_one_over_d_e_plus_one():
    """Rows scaled by sqrt(d_e / (d_e + 1)): | ||w||^2 - 1 | = 1/(d_e + 1), coherence kept."""
    claim, inp = _claim("assumption-3")
    short = _fault(claim, "rows normalised").apply(inp, CTX)
    d_e = short.books[0][1].d_e
    off = claim.check("unit rows").run(short, CTX).measured
    assert off == pytest.approx(1 / (d_e + 1), rel=1e-5)
    assert claim.check("coherence <= 1/2").run(short, CTX).holds


def test_assumption3_union_bound_straddles_delta():
    """At the exact rule's d_e the union bound is <= delta, at d_e - 1 above it."""
    claim, inp = _claim("assumption-3")
    assert claim.check("union bound <= delta at d_e").run(inp, CTX).measured <= 1
    assert claim.check("union bound > delta at d_e - 1").run(inp, CTX).measured > 1


def test_data_model_draws_and_the_off_by_one_labels():
    """60 hypothesis-drawn batches (quick); the off-by-one labels are far from g(x_t)."""
    claim, inp = _claim("data-model")
    assert len(inp.cases) == 60
    v = claim.check("labels y_i = g(x_t_i)").run(_fault(claim, "labels read").apply(inp, CTX), CTX)
    assert v.measured > 0.1 and v.rounding < 1e-4


def test_assumption1_wide_tokens_measure_c_x_near_2_25():
    """Tokens of standard deviation 1.5 give C_x about 2.25 x 0.97 at d = 16."""
    claim, inp = _claim("assumption-1")
    broken = _fault(claim, "tokens with").apply(inp, CTX)
    assert claim.check("C_x <= 1").run(broken, CTX).measured > 1.4


@pytest.mark.parametrize(
    "d, r, want", [(1, 1, 2 / math.pi), (1, 2, 0.5), (3, 2, 1 / 2), (2, 1, math.pi / 4)]
)
def test_chi_closed_form_hand_values(d, r, want):
    """E|z| = sqrt(2/pi); E||x||^2 = d; E||x|| = sqrt(pi/2) at d = 2."""
    _, inp = _claim("assumption-1")
    assert inp.chi_ratio(d, r) == pytest.approx(want, rel=1e-12)


def test_chi_ratio_largest_at_r_1_and_normal_hand_values():
    """The chi ratio is largest at r = 1 and below 1; E y^2 / 4 = 1/4, (E|y|)^2 = 2/pi."""
    _, inp = _claim("assumption-1")
    for d in (1, 2, 16, 256):
        vals = [inp.chi_ratio(d, r) for r in (1, 1.5, 2, 4, 8, 32)]
        assert max(vals) == vals[0] < 1
    assert inp.normal_ratio(2.0) == pytest.approx(1 / 4)
    assert inp.normal_ratio(1.0) == pytest.approx(2 / math.pi)


def test_assumption2_stated_moments_hand_values():
    """E g^2 as stated at q = 3, d = 4: linear and hermite 1, sqnorm 2, mean d/q, projected 1/q;
    the teacher's (1 + 1/12) / 2 = 13/24."""
    _, inp = _claim("assumption-2")
    want = {"linear": 1.0, "hermite": 1.0, "sqnorm": 2.0, "mean": 4 / 3, "mean-projected": 1 / 3}
    assert {k: f(3, 4) for k, f in inp.stated.items()} == pytest.approx(want)
    assert inp.teacher_closed(3, 4) == pytest.approx(13 / 24)


def test_assumption2_unscaled_teacher_is_about_8_times_too_large():
    """Teachers without 1/sqrt(m) (m = 8): E g^2 about 8 x 13/24."""
    claim, inp = _claim("assumption-2")
    broken = _fault(claim, "a teacher without").apply(inp, CTX)
    assert claim.check("teacher E g^2 = (1 + 1/(qd)) / 2").run(broken, CTX).measured > 2.0


def test_lemma12_slipped_radii():
    """Without the union bound r_x = sqrt(6 e); without concentration token_radius = sqrt(2)."""
    claim, inp = _claim("lemma-12")
    broken = _fault(claim, "r_x without").apply(inp, CTX)
    v = claim.check("max ||x_j|| <= r_x").run(broken, CTX)
    assert v.bound == pytest.approx(math.sqrt(6 * math.e))
    broken = _fault(claim, "token_radius without").apply(inp, CTX)
    v = claim.check("max ||x_j|| <= token_radius").run(broken, CTX)
    assert v.bound == pytest.approx(2**0.5)


def test_rs_codes_reducible_moduli_named():
    """The reducible moduli at m = 4 and 8 are the two tables found with zero divisors."""
    claim, inp = _claim("rs-hadamard-codes")
    broken = _fault(claim, "reducible").apply(inp, CTX)
    v = claim.check("GF(2^m) tables are fields").run(broken, CTX)
    assert v.measured == 2 and "m = [4, 8]" in v.detail


def test_a_reducible_modulus_has_a_nonzero_square_equal_to_zero():
    """x^4 + x^2 + 1 = (x^2 + x + 1)^2: x^2 + x + 1 = 0b111 squares to 0; degree checked."""
    from qstr.constructions.codes import gf_mul_table

    assert gf_mul_table(4, 0b10101)[0b111, 0b111] == 0
    with pytest.raises(ValueError, match="poly must be an int of degree"):
        gf_mul_table(4, 0b111)


def test_experimental_tail_hand_value_and_the_one_sided_tail():
    """89104 / 2^23 per pair, 52.58 of 4950 pairs; the one-sided tail predicts half."""
    claim, inp = _claim("experimental-encoding")
    assert inp.d_e == 23 and inp.pair_tail(23, 0.5) == float(Fraction(89104, 2**23))
    v = claim.check("mean violations = C(N, 2) tail").run(inp, CTX)
    assert v.bound == pytest.approx(52.58, abs=0.01)
    broken = _fault(claim, "the one-sided").apply(inp, CTX)
    v = claim.check("mean violations = C(N, 2) tail").run(broken, CTX)
    assert v.bound == pytest.approx(26.29, abs=0.01)
