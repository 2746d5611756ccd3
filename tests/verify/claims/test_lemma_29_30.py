"""Lemmas 29 and 30 (verify/claims/lemma_29_30.py) through their public structure: the built RNN's
states under parameter changes, the nets' sensitivities (test_registered.py runs every fault)."""

import math

import mpmath as mp

from qstr.bounds.theorem7 import layer_sensitivities, rnn_parameter_lipschitz, rnn_state_gain

SCAN = "scan: ||h_i - h'_i|| <= sum_{j<i} ||f(z_j) - f'(z_j)|| (h not read)"


def test_lemma29_state_changes_add_up_exactly_when_aligned(declared):
    """Lowering the rectifier's offsets moves every transition output off target alike: the
    state's change is then the whole sum the bound allows (the check's worst ratio is 1)."""
    d = declared("lemma-29")
    v = d.verdict(SCAN)
    assert v.holds and abs(v.measured / v.bound - 1) < 1e-6
    assert "not Lemma 29" in v.detail  # the detail says what the check tests
    broken = d.verdict(SCAN, d.broken("no accumulation"))
    assert not broken.holds and broken.measured > 10 * broken.bound  # N = 32 positions add up


def test_lemma29_output_bound_needs_the_states(declared):
    d = declared("lemma-29")
    v = d.verdict("|y_i - y'_i| <= f_y's term + Lip(f_y) ||state change||")
    assert v.holds and 0 < v.measured < v.bound
    assert not d.verdict(
        "|y_i - y'_i| <= f_y's term + Lip(f_y) ||state change||", d.broken("states forgotten")
    ).holds


def test_lemma30_holds_and_is_loose_on_the_transition(declared):
    """The radii-product constants hold with a wide margin on the built transition (its gate
    layer's norm is about 1.8e3), even along the top singular pairs, and the detail says why."""
    d = declared("lemma-30")
    v = d.verdict("transition: ||f(u) - f'(u)|| <= sum_l c_l ||Delta_l||_F")
    assert v.holds and v.measured < 0.1 * v.bound and "far inside" in v.detail
    broken = d.broken("without the input norm")
    assert not d.verdict("transition: ||f(u) - f'(u)|| <= sum_l c_l ||Delta_l||_F", broken).holds


def test_lemma29_30_changes_keep_the_class(declared):
    """No change makes a transition read h (its first layer's h columns stay untouched), and the
    honest inputs survive every fault."""
    c = declared("lemma-29").inputs.cases[0]
    d_h = c.honest[0].shape[-1]
    for _, change in c.changes:
        for k, v in change.items():
            if k in ("f_fwd.0.weight", "f_bwd.0.weight"):
                assert not v[:, :d_h].any()
    declared("lemma-29").faults_leave_the_honest_inputs()
    declared("lemma-30").faults_leave_the_honest_inputs()


def test_lemma30_rank_one_members_attain_c_l(declared):
    """On rank-one members the bound is attained up to the later layers' a / sqrt(a^2 + 1), and
    every layer's c_l without the biases' 1 fails there (the short input: 0.1 against 1.005)."""
    d = declared("lemma-30")
    v = d.verdict("rank-one members: c_l attained")
    assert v.holds and 0.95 < v.measured / v.bound <= 1 + 1e-9
    broken = d.verdict("rank-one members: c_l attained", d.broken("c_l without the biases"))
    assert not broken.holds and broken.measured > 1.05 * broken.bound


def test_lemma30_singular_pairs_push_the_built_ratio(declared):
    """The changes along the layers' top singular pairs move the built nets more, relative to
    the bound, than every random change."""
    d = declared("lemma-30")
    v = d.verdict("transition: ||f(u) - f'(u)|| <= sum_l c_l ||Delta_l||_F")
    assert "singular pair" in v.detail
    names = [n for n, _ in d.inputs.cases[0].changes]
    assert sum("singular" in n for n in names) == 8  # f_fwd layers 2-4, f_y layers 1-5


def test_pins_against_an_independent_evaluation(declared):
    """The pins hold at 1e-12 and see a slip of one part in 1e9 of c_l's input norm, and the
    reference itself agrees with a hand evaluation of a two-layer net."""
    v = declared("lemma-30").verdict("c_l = 40-digit evaluation")
    assert v.holds and v.measured < 1e-13
    assert declared("lemma-29").verdict("A = 40-digit evaluation").holds
    c = layer_sensitivities([2.0, 3.0], [True, False], 1.0)
    assert math.isclose(c[0], 3 * math.sqrt(2.0), rel_tol=1e-15)  # R_2 sqrt(1 + 1)
    assert math.isclose(c[1], 2 * math.sqrt(2.0), rel_tol=1e-15)  # a_1 = R_1 sqrt(2)
    A = rnn_parameter_lipschitz(3.0, 2.0, 1.0, 3)
    with mp.workdps(40):
        assert abs(A - mp.sqrt(9 + 16)) < 1e-14  # sqrt(A_y^2 + ((N - 1) Lam A_h)^2) = 5


def test_lemma29_paper_class_compounds_through_h(declared):
    """The member reading h (f + h / N) is exactly (1/N)-Lipschitz in h; its states' changes meet
    the compounded bound, with equality at the aligned change, and the sum without the factor
    1 + 1/N per step fails there; A's pin covers Lip_h = 1/N."""
    d = declared("lemma-29")
    member = d.inputs.cases[1]
    assert member.lip_h == 1 / 32
    name = "paper's class: ||h_i - h'_i|| <= sum_{j<i} (1 + Lip_h)^{i-1-j} ||Delta f_j||"
    v = d.verdict(name)
    assert v.holds and abs(v.measured / v.bound - 1) < 1e-9
    broken = d.verdict(name, d.broken("no compounding through h"))
    assert not broken.holds and broken.measured > 1.01 * broken.bound
    assert not d.verdict("A = 40-digit evaluation", d.broken("A without the compounding")).holds


def test_rnn_state_gain_sums_the_compounding():
    """S = sum_{j<N-1} (1 + L)^j: N - 1 at L = 0, and below (e - 1) N at L = 1/N."""
    assert rnn_state_gain(0.0, 32) == 31
    S = rnn_state_gain(1 / 32, 32)
    assert math.isclose(S, sum((1 + 1 / 32) ** j for j in range(31)), rel_tol=1e-13)
    assert 31 < S < (math.e - 1) * 32
