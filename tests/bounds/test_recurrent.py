"""bounds/prop8.py, theorem9.py, theorem7.py, transition.py (bounds/recurrent.py re-exports them):
Prop 8 packing constants, Theorem 9 crossover, Theorem 7 explicit bound; Props 26-28: the
parameters picked and the guarantees attached."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from qstr.bounds.interpolation import C36
from qstr.bounds.attention import lemma12_radius
from qstr.bounds.prop8 import (
    chi2_lower_rate,
    euclidean_packing_counterexample,
    log_packing_volume,
    prop8_log_norm_lower_bound,
    prop8_norm_lower_bound,
    prop8_norm_lower_bound_paper,
    prop8_packing,
    prop8_width_lower_bound,
)
from qstr.bounds.theorem7 import (
    Theorem7Params,
    layer_sensitivities,
    prop28_layers,
    prop28_norm2,
    rnn_parameter_lipschitz,
    theorem7_bound,
    theorem7_sample_size,
)
from qstr.bounds.theorem9 import generalising_log_norm2, memoriser_norm2_bound, theorem9_crossover
from qstr.bounds.transformer import loglog_slope
from qstr.bounds.transition import (
    TransitionKnots,
    prop26_transition,
    prop28_rnn,
    teacher_rnn,
    token_radius,
)
from qstr.constructions.codes import (
    build_codebook,
    coherence,
    coherence_report,
    experimental_codebook,
    rs_hadamard_codebook,
)
from qstr.constructions.links import make_link
from qstr.constructions.recurrent import RNNConstruction, rnn_state
from qstr.constructions.task import QSTR
from qstr.verify.adversarial import clip_to_ball
from tests.fixtures import rotated, seeded

F64 = torch.float64


def test_lemma41_volume_and_chernoff_rate():
    assert log_packing_volume(3, 2.0) == pytest.approx(3 * math.log(2))
    assert log_packing_volume(1, 0.5) == pytest.approx(math.log(5))
    assert chi2_lower_rate(0.5) == pytest.approx((0.5 - 1 - math.log(0.5)) / 2)
    assert chi2_lower_rate(0.5) == pytest.approx(0.0965736, abs=1e-6)
    with pytest.raises(ValueError, match="eps"):
        log_packing_volume(3, 0.0)
    with pytest.raises(ValueError, match="a must"):
        chi2_lower_rate(1.0)


def test_chernoff_rate_is_a_valid_tail_bound():
    for k in (5, 50, 500):
        for a in (0.3, 0.5, 0.8):
            assert stats.chi2.cdf(a * k, k) <= math.exp(-k * chi2_lower_rate(a))


def test_prop8_packing_hand_values():
    pk = prop8_packing(64, 0.05)
    E = 63 * chi2_lower_rate(0.5)
    assert pk.M * (pk.M - 1) <= math.exp(E) < (pk.M + 1) * pk.M
    assert pk.M == 21 and pk.M_good == 6  # ceil((1 - 1/2) 21 / 2)
    assert pk.answer_sep == pytest.approx(math.sqrt(63 / 64))
    assert pk.sep == pytest.approx(math.sqrt(63 / 64) - 2 * math.sqrt(0.1))
    assert pk.failure < 1
    assert not pk.vacuous
    assert prop8_packing(16, 0.05).vacuous
    assert prop8_packing(N=64, c=0.05, K=2.0, gamma=0.5) == pk  # every argument by keyword
    big = prop8_packing(2**20, 0.05)
    assert big.log_M_good == pytest.approx(
        (2**20 - 1) * chi2_lower_rate(0.5) / 2 + math.log(0.25), rel=1e-9
    )


def test_prop8_bounds_formulas():
    N, c, UL = 1024, 0.05, 100.0
    pk = prop8_packing(N, c)
    w = prop8_width_lower_bound(N, c, UL)
    assert w == pytest.approx(pk.log_M_good / (2 * math.log1p(2 * math.sqrt(2) * UL / pk.sep)))
    # the width bound grows like N / log(UL)
    assert prop8_width_lower_bound(4 * N, c, UL) > 3.5 * w
    nb = prop8_norm_lower_bound(N, c, 16)
    assert nb == pytest.approx(pk.sep / (2 * math.sqrt(2)) * math.expm1(pk.log_M_good / 32))
    assert math.log(nb) == pytest.approx(prop8_log_norm_lower_bound(N, c, 16))
    # consistency: at UL equal to the norm bound the width bound is exactly d_h
    assert prop8_width_lower_bound(N, c, nb) == pytest.approx(16)
    paper = prop8_norm_lower_bound_paper(N, c, 64)
    assert paper == pytest.approx(
        pk.sep / math.sqrt(2) * math.sqrt(pk.log_M_good / (8 * math.log(257)))
    )
    assert prop8_width_lower_bound(16, c, UL) == 0.0  # vacuous at small N
    # no usable packing (N = 16, c = 0.1): the norm bound is the trivial 0, its log -inf
    assert prop8_log_norm_lower_bound(16, 0.1, 4) == -math.inf
    assert prop8_norm_lower_bound(16, 0.1, 4) == 0.0
    assert prop8_norm_lower_bound(2**20, c, 1) == math.inf


def test_prop8_errors():
    with pytest.raises(ValueError, match="c must be"):
        prop8_packing(64, 0.3)
    with pytest.raises(ValueError, match="K must"):
        prop8_packing(64, 0.05, K=1.0)
    with pytest.raises(ValueError, match="gamma"):
        prop8_packing(64, 0.05, gamma=1.5)
    with pytest.raises(ValueError, match="N must"):
        prop8_packing(1, 0.05)
    with pytest.raises(ValueError, match="UL"):
        prop8_width_lower_bound(64, 0.05, -1.0)
    with pytest.raises(ValueError, match="d_h"):
        prop8_norm_lower_bound(64, 0.05, 0)
    with pytest.raises(ValueError, match="form"):
        generalising_log_norm2(256, 0.05, 10, form="maurey")


def test_euclidean_maurey_bound_fails():
    k, log_k, vol, maurey = euclidean_packing_counterexample(
        128, 2000, generator=torch.Generator().manual_seed(0)
    )
    assert log_k <= vol  # the volume bound holds
    assert (
        log_k > maurey
    )  # ln P(1) > ln(2D + 1) / 1^2: the Euclidean Maurey form (constant 1) is violated


def test_theorem9_memoriser_and_crossover():
    for n in (2, 8, 10, 64, 1000):  # C36 sqrt(K_y) n^3 = lemma36_constant(K_y) n^3 at depth 2
        assert memoriser_norm2_bound(n) == pytest.approx(C36 * math.sqrt(6) * n**3, rel=1e-12)
    assert memoriser_norm2_bound(10, depth=3, K_y=1) == pytest.approx(
        3 * (144 / math.pi * (5 + math.pi / 72)) ** (1 / 3) * 10 ** (7 / 3)
    )
    # crossover inverts the memoriser bound
    lr = math.log(memoriser_norm2_bound(7))
    assert theorem9_crossover(lr) == pytest.approx(7)
    assert theorem9_crossover(-math.inf) == 0.0
    # requirement: depth (UL / r_h)^{2 / depth}
    N, d_h = 4096, 100
    ul = prop8_norm_lower_bound_paper(N, 0.05, d_h)
    assert math.exp(generalising_log_norm2(N, 0.05, d_h)) == pytest.approx(2 * ul)
    assert math.exp(generalising_log_norm2(N, 0.05, d_h, depth=4, r_h=2.0)) == pytest.approx(
        4 * (ul / 2) ** 0.5
    )


def test_theorem9_crossover_power_law():
    Ns = [2**k for k in range(8, 21, 4)]
    s = loglog_slope(lambda N: theorem9_crossover(generalising_log_norm2(N, 0.05, 4 * N)), Ns)
    assert np.all(s > 0.12) and np.all(s < 1 / 6 + 1e-9)
    s_simple = loglog_slope(
        lambda N: theorem9_crossover(math.log(prop28_norm2(N, Theorem7Params(d=4)))), Ns
    )
    assert np.all(s_simple < 0.05)


def test_prop28_layers_shapes_and_radii():
    P = Theorem7Params(q=2, d=3, d_e=16, mu=0.5, m_g=8, r_w=1.5, r_a=2.0)
    trans, out = prop28_layers(100, P, r_x=4.0)
    D_e = 3 + 3 * 16
    assert [l.fan_in for l in trans] == [D_e, 6 + 64, 6 + 2, 12]
    assert [l.width for l in trans] == [6 + 64, 6 + 2, 12, 6]
    assert trans[0].radius == pytest.approx(math.sqrt(6 + 128))
    assert trans[1].radius == pytest.approx(math.sqrt(12 + 2 * (2 + 2.25) / 0.25))
    assert trans[2].radius == pytest.approx(math.sqrt(12 * (2 + 32)))
    assert out[3].radius == pytest.approx(2 * math.sqrt(8) * 1.5)
    assert out[4].radius == pytest.approx(2.0 / math.sqrt(8))
    assert out[0].fan_in == 12 + D_e
    assert trans[0].n_params == (6 + 64) * (D_e + 1) and trans[3].n_params == 6 * 12


def test_theorem7_bound_structure():
    P = Theorem7Params()
    b = theorem7_bound(10**40, 1024, P)
    assert b.total == pytest.approx(b.approximation + b.tail + b.estimation + b.truncation)
    assert b.approximation == P.eps_2nn
    assert b.r_x == pytest.approx(lemma12_radius(P.d, 10**40, 1024))
    assert b.confidence == pytest.approx(1 - P.delta - (1024 * 1e40) ** -0.5)
    # nonincreasing in n on a grid
    totals = [theorem7_bound(10**k, 1024, P).total for k in range(30, 46)]
    assert all(b2 <= b1 + 1e-15 for b1, b2 in zip(totals, totals[1:], strict=False))


def test_theorem7_sample_size_polylog():
    P = Theorem7Params()
    n = theorem7_sample_size(0.1, 256, P)
    assert theorem7_bound(n, 256, P).total <= 0.1 < theorem7_bound(n - 1, 256, P).total
    Ns = [2**k for k in range(4, 21, 4)]
    s = loglog_slope(lambda N: theorem7_sample_size(0.1, N, P), Ns)
    assert np.all(np.diff(s) < 0)
    mids = np.log(np.sqrt(np.array(Ns[:-1], float) * np.array(Ns[1:], float)))
    assert np.all(s <= 9 / mids)


def test_theorem7_errors():
    with pytest.raises(ValueError, match="target"):
        theorem7_sample_size(0.01, 256, Theorem7Params(eps_2nn=0.01))
    with pytest.raises(ValueError, match="mu"):
        Theorem7Params(mu=1.0)
    with pytest.raises(ValueError, match="q must"):
        Theorem7Params(q=0)
    with pytest.raises(ValueError, match="params"):
        theorem7_bound(10, 10, params={"q": 1})
    with pytest.raises(ValueError, match="N must"):
        theorem7_bound(10, 1, Theorem7Params())


def test_packing_vacuous_flag_is_what_the_width_bound_uses():
    """`vacuous` is the one definition: counted packings with M' < 2 or failure >= 1 are vacuous,
    the log path (M_good = -1, too many prompts to count) is not, and the width bound is 0 exactly
    when vacuous."""
    big = prop8_packing(4096, 0.05)
    assert big.M_good == -1 and not big.vacuous and prop8_width_lower_bound(4096, 0.05, 10.0) > 0
    small = prop8_packing(16, 0.05)
    assert small.vacuous and prop8_width_lower_bound(16, 0.05, 10.0) == 0.0


# (moved from the claim prop-8 of verify/claims/prop_8.py: argument handling and branches)


def _accepts_c(N, c, gamma):
    try:
        prop8_packing(N, c, K=2.0, gamma=gamma)
        return True
    except ValueError:
        return False


def test_prop8_packing_accepts_c_up_to_its_boundary():
    """c is accepted up to c_max = a (N - 1) / (2 K N) (s~ > 0), a = 1 - gamma, refused above."""
    for N, gamma in ((50, 0.5), (150, 0.3), (150, 0.5), (150, 0.7), (600, 0.5)):
        c_max = (1 - gamma) * (N - 1) / (2 * 2.0 * N)
        assert _accepts_c(N, c_max * (1 - 1e-9), gamma)
        assert not _accepts_c(N, c_max * (1 + 1e-9), gamma)


def test_prop8_packing_log_branch_past_e60():
    """At N = 623 ((N - 1) I = 60.07 > 60) the packing is in its log branch: M = M' = -1."""
    big = prop8_packing(623, 0.05, K=2.0)
    assert big.M == -1 and big.M_good == -1 and not big.vacuous
    assert prop8_packing(622, 0.05, K=2.0).M > 0


def test_theorem7_params_documented_defaults():
    """Theorem7Params() are the constants docs/derivations/rnn-lower-bounds.md section 4 quotes
    its numbers at (moved from the claim thm-7)."""
    assert Theorem7Params() == Theorem7Params(
        q=1,
        d=4,
        r_a=1.0,
        r_w=1.0,
        m_g=16,
        eps_2nn=0.01,
        C_x=1.0,
        C_y=1.0,
        s=1.0,
        mu=0.5,
        delta=0.05,
        d_e=None,
    )


# ---------------------------------------------------------------------------------------------
# Props 26-28: the knots, eps and r_h picked and the guarantees attached (prop26_transition,
# prop28_rnn, teacher_rnn, token_radius); the weights: tests/constructions/test_recurrent.py
# ---------------------------------------------------------------------------------------------


def test_prop26_transition_errors(book64):
    with pytest.raises(ValueError, match="all zeros"):
        prop26_transition(torch.zeros(8, 4, dtype=F64), 2, 1, eps=0.1, r_x=1.0, mu=0.0)
    with pytest.raises(ValueError, match="coherence"):
        prop26_transition(experimental_codebook(100, generator=seeded(0)), 2, 1, eps=0.1, r_x=1.0)
    with pytest.raises(ValueError, match="eps"):
        prop26_transition(book64, 2, 1, eps=0.0, r_x=1.0)
    with pytest.raises(ValueError, match="eps"):
        prop26_transition(book64, 2, 1, eps=1e-12, r_x=1.0, knots=TransitionKnots(product=3))
    with pytest.raises(ValueError, match="eps must be"):
        prop26_transition(book64, 2, 1, eps=None, r_x=1.0, knots=TransitionKnots(product=3))
    with pytest.raises(ValueError, match="knots"):
        prop26_transition(book64, 2, 1, eps=0.1, r_x=1.0, knots=(3, 3))
    with pytest.raises(ValueError, match="r_x"):
        prop26_transition(book64, 2, 1, eps=0.1, r_x=-1.0)
    with pytest.raises(ValueError, match="q must"):
        prop26_transition(book64, 2, 0, eps=0.1, r_x=1.0)
    with pytest.raises(ValueError, match="omega"):
        prop26_transition(torch.zeros(4), 2, 1, eps=0.1, r_x=1.0)


def test_alphabet_knots_and_eps_tradeoff():
    padded = build_codebook(64, d_e=20, dtype=F64)  # RS-Hadamard zero-padded: entries {0, +-R}
    tr = prop26_transition(padded, 2, 1, eps=0.1, r_x=2.0)
    assert tr.guarantee.product_knots == 5 and tr.guarantee.inner_product_error == 0.0
    rot = rotated(rs_hadamard_codebook(64, dtype=F64))
    coarse = prop26_transition(rot, 2, 1, eps=0.2, r_x=2.0).guarantee
    fine = prop26_transition(rot, 2, 1, eps=0.05, r_x=2.0).guarantee
    assert fine.eps <= 0.05 and coarse.eps <= 0.2
    assert fine.product_knots > coarse.product_knots and fine.gate_knots > coarse.gate_knots
    budget = (
        fine.threshold
        + fine.gate_error
        + 2 * fine.r_x * (fine.inner_product_error + fine.norm_defect)
    )
    assert fine.eps == pytest.approx(budget)
    explicit = prop26_transition(
        rot, 2, 1, eps=None, r_x=2.0, knots=TransitionKnots(product=40, gate=10)
    ).guarantee
    assert (
        explicit.product_knots == 40
        and explicit.gate_knots == 10
        and explicit.eps_requested is None
    )


def test_transition_with_the_knots_given_is_the_one_derived_from_eps(transitions):
    """prop26_transition on the bare (N, d_e) tensor with product_knots, gate_knots and mu given (no
    eps) rebuilds the same dense layers, certified eps, threshold and product certificate."""
    for book, tr in transitions:
        g = tr.guarantee
        other = prop26_transition(
            book.omega.detach().clone(),
            g.d,
            g.q,
            eps=None,
            r_x=g.r_x,
            mu=g.mu,
            knots=TransitionKnots(product=g.product_knots, gate=g.gate_knots),
        )
        h = other.guarantee
        assert (h.product_certificate, h.product_knots, h.gate_knots) == (
            g.product_certificate,
            g.product_knots,
            g.gate_knots,
        )
        assert h.eps == pytest.approx(g.eps, rel=1e-12) and h.threshold == pytest.approx(
            g.threshold, rel=1e-12
        )
        assert len(tr.layers) == len(other.layers)
        for A, B in zip(tr.layers, other.layers, strict=True):
            assert float((A.W - B.W).abs().max()) <= 1e-12
            assert (A.b is None) == (B.b is None)
            assert A.b is None or float((A.b - B.b).abs().max()) <= 1e-12


def test_transition_records_the_eps_asked_and_defaults_to_0_1():
    """``eps_requested`` is the eps asked; prop26_transition's documented default eps is 0.1."""
    padded = build_codebook(64, kind="rs-hadamard", d_e=300, dtype=F64)
    g = prop26_transition(padded, 3, 2, r_x=2.5).guarantee
    assert g.eps_requested == 0.1 and g.eps <= 0.1
    assert prop26_transition(padded, 3, 2, eps=0.2, r_x=2.5).guarantee.eps_requested == 0.2


def test_transition_refuses_coherence_above_half(book64):
    """Prop 26 needs mu <= 1/2 (Assumption 3), up to float rounding: codes of coherence 1/2 + 1.5e-6
    (one row of a rotated RS-Hadamard code moved towards a neighbour) are refused, 1/2 accepted."""
    book = rotated(book64, 26)
    i, j = coherence_report(book.omega).pair
    sign = 1.0 if float(book.omega[i] @ book.omega[j]) > 0 else -1.0
    omega = book.omega.clone()
    omega[i] = omega[i] + 2e-6 * sign * omega[j]
    omega[i] = omega[i] / omega[i].norm()
    assert 1e-7 < coherence(omega) - 0.5 < 1e-5
    with pytest.raises(ValueError):
        prop26_transition(omega, 3, 2, eps=0.1, r_x=2.5)
    assert prop26_transition(book, 3, 2, eps=0.1, r_x=2.5) is not None


def test_rnn_guarantee_records_the_transition_and_r_h():
    """RNNGuarantee: state eps is the transition's certified eps, the same r_x, r_h the
    construction's; prop28_rnn's documented default eps is 0.1 (recorded as asked)."""
    link = make_link("teacher", 2, 3, generator=seeded(280))
    c = prop28_rnn(
        rs_hadamard_codebook(64, dtype=F64), 3, link.two_layer_net(), r_x=token_radius(3, 64 * 64)
    )
    gu, tg = c.guarantee, c.transition.guarantee
    assert gu.state_eps == tg.eps and gu.r_x == tg.r_x and gu.r_h == c.r_h
    assert tg.eps_requested == 0.1 and tg.eps <= 0.1


def test_prop28_rnn_refuses_r_h_below_the_cor27_radius():
    """prop28_rnn refuses r_h below sqrt(q)(r_x + sqrt(d) eps) and accepts it (rel 1e-12 above)."""
    link = make_link("teacher", 2, 2, generator=seeded(289))
    c = prop28_rnn(rs_hadamard_codebook(16, dtype=F64), 2, link.two_layer_net(), eps=0.1, r_x=2.0)
    need = math.sqrt(2) * (2.0 + math.sqrt(2) * c.transition.guarantee.eps)
    kw = dict(q=2, eps=0.1, r_x=2.0)
    with pytest.raises(ValueError):
        prop28_rnn(c.omega, 2, c.g_net, r_h=need * (1 - 1e-6), **kw)
    assert prop28_rnn(c.omega, 2, c.g_net, r_h=need * (1 + 1e-12), **kw).r_h >= need


def test_cli_rnn_file_records_its_config_and_codes():
    """The `qstr construct rnn` state: config (N, d, q) as asked, codes of mu <= 1/2 (Assumption 3),
    eps certified <= asked and recorded, r_h = sqrt(q)(r_x + sqrt(d) eps); its module equals the
    scan (without the output's direct term: tests/verify/claims/test_prop_28.py)."""
    N, d, q, eps = 16, 2, 2, 0.1
    c = teacher_rnn(N, d, q, eps=eps, seed=0)
    cfg = rnn_state(c)["config"]
    assert (cfg["N"], cfg["d"], cfg["q"]) == (N, d, q) and c.guarantee.mu <= 0.5
    tg = c.transition.guarantee
    assert tg.eps <= eps and tg.eps_requested == eps
    assert c.r_h == pytest.approx(
        math.sqrt(q) * (c.guarantee.r_x + math.sqrt(d) * tg.eps), rel=1e-12
    )
    link = make_link("teacher", q, d, generator=seeded(0), width=8)
    p = QSTR(N=N, d=d, link=link, variant="simple").sample(4, generator=seeded(289), dtype=F64)
    x = clip_to_ball(p.x, c.guarantee.r_x)
    with torch.no_grad():
        y = c.module()(c.encode(x, p.t)).reshape(4, N)
    assert float((y - c.predict(x, p.t)).abs().max()) <= 1e-9


def test_teacher_rnn_and_errors(book64):
    c = teacher_rnn(40, 2, 2, eps=0.2, seed=3)
    state = rnn_state(c)
    assert (
        isinstance(c, RNNConstruction)
        and state["config"]["N"] == 40
        and state["config"]["eps"] <= 0.2
    )
    assert state["config"]["r_h"] >= math.sqrt(2) * (
        state["config"]["r_x"] + math.sqrt(2) * state["config"]["eps"]
    )
    c2 = teacher_rnn(40, 2, 2, eps=0.2, seed=3)
    assert torch.equal(c.g_net.W, c2.g_net.W)  # seeded
    with pytest.raises(ValueError, match="q must"):
        teacher_rnn(2, 2, 3)
    with pytest.raises(ValueError, match="eps"):
        teacher_rnn(10, 2, 1, eps=-1.0)
    net = make_link("teacher", 2, 3, generator=seeded(0)).two_layer_net()
    with pytest.raises(ValueError, match="q = 1 does not match"):
        prop28_rnn(book64, 3, net, q=1)
    with pytest.raises(ValueError, match="r_h"):
        prop28_rnn(book64, 3, net, r_h=0.5)
    with pytest.raises(ValueError, match="g_net"):
        prop28_rnn(book64, 3, "net")
    assert token_radius(4, 100) == pytest.approx(2 + math.sqrt(2 * math.log(1e5)))


def test_layer_sensitivities_by_hand_and_in_theorem7():
    """c_l = (prod_{k>l} R_k) sqrt(a_{l-1}^2 + 1), a_l = R_l sqrt(a_{l-1}^2 + 1) (no bias:
    a_{l-1}); Theorem 7's A combines them as sqrt(A_y^2 + ((N - 1) Lam_y A_h)^2)."""
    c = layer_sensitivities([2.0, 3.0, 5.0], [True, True, False], 1.0)
    a1 = 2.0 * math.sqrt(2.0)
    a2 = 3.0 * math.sqrt(a1**2 + 1)
    assert c == pytest.approx([15.0 * math.sqrt(2.0), 5.0 * math.sqrt(a1**2 + 1), a2], rel=1e-15)
    assert rnn_parameter_lipschitz(3.0, 2.0, 0.5, 5) == pytest.approx(5.0, rel=1e-15)


def test_theorem9_crossover_in_logs_never_overflows():
    from qstr.bounds.theorem9 import theorem9_crossover, theorem9_log_crossover  # noqa: PLC0415

    assert theorem9_crossover(-math.inf) == 0.0 and theorem9_log_crossover(-math.inf) == -math.inf
    assert theorem9_crossover(1e6) == math.inf and theorem9_log_crossover(1e6) > 3e5
    lg = theorem9_log_crossover(10.0)
    assert theorem9_crossover(10.0) == pytest.approx(math.exp(lg), rel=1e-15)


def test_counts_beyond_float_range_are_refused_not_overflowed():
    from qstr.bounds.theorem7 import Theorem7Params, theorem7_bound  # noqa: PLC0415
    from qstr.bounds.transformer import Theorem4Params, theorem4_bound  # noqa: PLC0415

    with pytest.raises(ValueError, match="n must be at most 2\\^1023"):
        theorem4_bound(10**400, 16, Theorem4Params.default())
    with pytest.raises(ValueError, match="N must be at most 2\\^1023"):
        theorem7_bound(1000, 10**400, Theorem7Params())


def test_recurrent_re_exports_every_name_it_had():
    """``qstr.bounds.recurrent.X`` keeps working for every name it defined before the split (issue
    56): the same objects as in the modules by result."""
    import qstr.bounds.recurrent as recurrent  # noqa: PLC0415 - the test is about this import
    from qstr.bounds import prop8, theorem7, theorem9, transition  # noqa: PLC0415

    homes = {
        prop8: prop8.__all__ + ["SQRT2"],
        theorem9: theorem9.__all__,
        theorem7: theorem7.__all__,
        transition: transition.__all__ + ["F64"],
    }
    for module, names in homes.items():
        for name in names:
            assert getattr(recurrent, name) is getattr(module, name), (module.__name__, name)
    moved = {n for names in homes.values() for n in names}
    assert set(recurrent.__all__) - moved == {"lemma12_radius", "loglog_slope"}
    assert len(recurrent.__all__) == 34 and all(hasattr(recurrent, n) for n in recurrent.__all__)
