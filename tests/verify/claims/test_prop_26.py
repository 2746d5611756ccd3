"""Prop 26 (verify/claims/prop_26.py) through its public structure: inputs, named checks and
faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""

import mpmath as mp

from qstr.verify.claims._transition import budget_mp, float_target_error

CID = "prop-26"


def test_prop26_checks_hold(declared):
    d = declared(CID)
    v = d.verdict("target error <= eps")
    assert 0.3 < v.measured / v.bound < 1  # the rotated codes spend the budget (0.82 at seed 0)


def test_prop26_without_rectifier_leaks_and_the_states_grow(declared):
    d = declared(CID)
    inp = d.inputs
    gate = d.broken("rectifying layers 3-4 removed")
    assert all(c.transition is not g.transition for c, g in zip(inp.cases, gate.cases, strict=True))
    assert d.verdict("exactly 0 off target", gate).measured > 0
    v = d.verdict("states within eps at every N", gate)
    assert not v.holds and v.measured > 2 * v.bound
    assert d.verdict("exactly 0 off target").holds  # the honest inputs are untouched


def test_prop26_budget_faults_break_only_their_step(declared):
    d = declared(CID)
    slip = d.broken("s_max without the margin")
    assert not d.verdict("s_max = 1 + nu + delta_1 + margin", slip).holds
    assert d.verdict("b = r_x min(4e, 2e + delta)", slip).holds
    fewer = d.broken("one gate knot fewer")
    assert not d.verdict("knots as derived", fewer).holds


def test_prop26_budget_slips_break_their_step_and_leave_the_record_alone(declared):
    """Each slip of the error budget (docs/derivations/rnn-transition.md, section 4) fails its
    own step only; the honest guarantees are not edited."""
    d = declared(CID)
    slips = {
        "product error h^2/4 (the square's, not the product's)": "product error = h^2/16",
        "delta_1 without its d_e factor": "delta_1 = d_e h^2/16",
        "excess without its max(0, .)": "excess as derived",
        "threshold r_x min(2e, 2e + delta)": "b = r_x min(4e, 2e + delta)",
    }
    for fault, step in slips.items():
        slip = d.broken(fault)
        assert not d.verdict(step, slip).holds, fault
        assert d.verdict("eps = b + r_x delta + 2 r_x (delta_1 + nu)", slip).holds, fault
    assert d.verdict("b = r_x min(4e, 2e + delta)").holds


def test_prop26_dense_slip_and_eps_doubled(declared):
    """A factor 2 dropped from the dense layer 3 separates it from the closed form (the honest
    transitions keep theirs); a transition built for 2 eps certifies more than asked."""
    d = declared(CID)
    inp = d.inputs
    half = d.broken("layer 3 reads delta sum_k H_k (factor 2 dropped)")
    assert all(c.transition is not h.transition for c, h in zip(inp.cases, half.cases, strict=True))
    assert d.verdict("dense layers = closed form", half).measured > 0.1
    assert d.verdict("dense layers = closed form").holds
    v = d.verdict("certified eps <= asked", d.broken("built for twice the eps asked"))
    assert not v.holds and v.measured > 1.5 * v.bound


def test_prop26_thresholds_too_low_and_too_high(declared):
    d = declared(CID)
    low = d.broken("threshold b / 8")
    assert not d.verdict("|gate| <= b off target", low).holds
    assert not d.verdict("exactly 0 off target", low).holds  # the leak passes layer 3
    high = d.broken("threshold 3 b")
    assert not d.verdict("target error <= eps", high).holds


def test_prop26_keeps_its_reference(declared):
    claim = declared(CID).claim
    assert claim.ref.seed == claim.ref.conference == "Prop 26"
    assert claim.derivation == "docs/derivations/rnn-transition.md"


def test_prop26_budget_pinned_at_40_digits(declared):
    """The 40-digit budget is written from the page: on alphabet codes K1 = 3 and delta_1 = 0,
    and eps = b + r_x delta + 2 r_x nu with b = 4 r_x (margin) when mu + delta_1 = 1/2; every
    recorded field sits within 1e-12 of it, and a slipped slope M fails."""
    d = declared(CID)
    inp = d.inputs
    g, facts, omega = inp.guarantees[0], inp.facts[0], inp.codes[0][1]
    b = budget_mp(g, facts, int(omega.shape[1]))
    assert facts[2] == 3 and b["product_knots"] == 3 and b["inner_product_error"] == 0
    with mp.workdps(40):
        want_b = mp.mpf(g.r_x) * 4 * mp.mpf(g.margin)  # e = margin at mu = 1/2, delta_1 = 0
        assert abs(b["threshold"] - want_b) / want_b < mp.mpf(10) ** -30
        assert abs(b["eps"] - (want_b + mp.mpf(g.r_x) * b["gate_delta"])) < mp.mpf(10) ** -30
    assert d.verdict("eps = b + r_x delta + 2 r_x (delta_1 + nu)").measured < 1e-13
    assert not d.verdict("M = 2 r_x / delta", d.broken("M = r_x / delta")).holds


def test_prop26_record_held_to_the_dense_layers(declared):
    d = declared(CID)
    name = "recorded widths and norms = the dense layers'"
    assert d.verdict(name).holds
    assert not d.verdict(name, d.broken("w2 recorded as q K2 d")).holds
    v = d.verdict(name, d.broken("layer 2's recorded norm without"))
    assert not v.holds and "layer 2 fro" in v.detail


def test_prop26_certified_on_the_dense_layers(declared):
    """Quick: the RS-Hadamard N = 16 transition, zeros the point 0 and the target error's
    enclosure far below eps; the float64 fallback on the same transition finds an error inside
    that enclosure (up to its rounding term)."""
    d = declared(CID)
    ((_, tr, om),) = d.inputs.certified
    assert om.shape[0] == 16
    zeros = d.verdict("exactly 0 off target (certified)")
    assert zeros.holds and zeros.certified is True and zeros.enclosure == (0.0, 0.0)
    v = d.verdict("target error <= eps (certified)")
    assert v.holds and v.certified is True and v.bound_enclosure == (tr.guarantee.eps,) * 2
    assert 0 < v.enclosure[0] <= v.enclosure[1] < 1e-6 * tr.guarantee.eps
    f = float_target_error(tr, om)
    assert f.holds and f.measured <= v.enclosure[1] + f.rounding


def test_prop26_certified_faults(declared):
    """The gate opened off target and the dense readout slipped are proved violated; a weight
    on h breaks the zeros' premise (not certified, no fallback: fails)."""
    d = declared(CID)
    zeros, target = "exactly 0 off target (certified)", "target error <= eps (certified)"
    v = d.verdict(zeros, d.broken("every gate bias raised by M/2"))
    assert not v.holds and v.certified is True and v.enclosure[0] > 1.0  # 1.15 at a corner
    v = d.verdict(zeros, d.broken("one first-layer weight on h"))
    assert not v.holds and v.certified is False and "reads h" in v.detail
    for fault in ("layer 3 (G and -G) halved", "moved by 0.05"):
        v = d.verdict(target, d.broken(fault))
        assert not v.holds and v.certified is True and v.enclosure[0] > v.bound_enclosure[1]
    ((_, tr, _),) = d.inputs.certified
    assert d.verdict(target).holds and tr.layers[0].W[0, 0] == 0  # the honest ones untouched
