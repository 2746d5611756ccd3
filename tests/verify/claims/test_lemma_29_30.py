"""Lemmas 29 and 30 (verify/claims/lemma_29_30.py) through their public structure: the built RNN's
states under parameter changes, the nets' sensitivities (test_registered.py runs every fault)."""


def test_lemma29_state_changes_add_up_exactly_when_aligned(declared):
    """Lowering the rectifier's offsets moves every transition output off target alike: the
    state's change is then the whole sum the bound allows (the check's worst ratio is 1)."""
    d = declared("lemma-29")
    v = d.verdict("||h_i - h'_i|| <= sum_{j<i} ||f(z_j) - f'(z_j)||")
    assert v.holds and abs(v.measured / v.bound - 1) < 1e-6
    broken = d.verdict(
        "||h_i - h'_i|| <= sum_{j<i} ||f(z_j) - f'(z_j)||", d.broken("no accumulation")
    )
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
    layer's norm is about 1.8e3)."""
    d = declared("lemma-30")
    v = d.verdict("transition: ||f(u) - f'(u)|| <= sum_l c_l ||Delta_l||_F")
    assert v.holds and v.measured < 1e-2 * v.bound
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
