"""The claims of verify/claims/recurrent.py through their public structure: inputs, named checks
and faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""

import pytest

from qstr.verify.claim import Context
from qstr.verify.claims import all_claims
from qstr.verify.claims.recurrent import plain_birnn

CTX = Context(profile="quick")
IDS = ("lemma-22", "lemma-24", "prop-26", "cor-27", "prop-28")


@pytest.fixture(scope="module")
def inputs():
    """Each claim's honest inputs, built once (lazily)."""
    cache = {}

    def get(cid):
        if cid not in cache:
            cache[cid] = all_claims()[cid].inputs(CTX)
        return cache[cid]

    return get


def run(cid, name, inp):
    return all_claims()[cid].check(name).run(inp, CTX)


def broken(cid, fault, inp):
    (f,) = [f for f in all_claims()[cid].faults if f.name == fault]
    return f.apply(inp, CTX)


def test_claims_keep_their_references():
    for cid in IDS:
        c = all_claims()[cid]
        assert c.ref.seed == c.ref.conference and c.ref.seed.split()[-1] == cid.split("-")[-1]
        assert c.derivation == "docs/derivations/rnn-transition.md"


# ---------------------------------------------------------------------- lemma-22


def test_lemma22_sup_error_is_the_certificate_attained(inputs):
    inp = inputs("lemma-22")
    v = run("lemma-22", "sup |P(x,y) - xy| <= h^2/16", inp)
    assert v.holds and v.measured == pytest.approx(v.bound, rel=1e-3)
    assert run("lemma-22", "h^2/16 attained", inp).holds


def test_lemma22_faults_leave_the_honest_inputs_alone(inputs):
    inp = inputs("lemma-22")
    half = broken("lemma-22", "half the knots", inp)
    assert [c.gadget.knots for c in half.cases] == [max(2, c.args[1] // 2) for c in inp.cases]
    assert [c.args for c in half.cases] == [
        c.args for c in inp.cases
    ]  # certified for the full count
    v = run("lemma-22", "sup |P(x,y) - xy| <= h^2/16", half)
    assert not v.holds and v.measured > 3 * v.bound  # h doubles: the error quadruples
    loose = broken("lemma-22", "certificate h^2/8", inp)
    assert run("lemma-22", "sup |P(x,y) - xy| <= h^2/16", loose).holds  # an upper bound still...
    assert not run("lemma-22", "h^2/16 attained", loose).holds  # ...but not attained


# ---------------------------------------------------------------------- lemma-24


def test_lemma24_checks_hold_and_each_fault_breaks_its_own(inputs):
    inp = inputs("lemma-24")
    names = [c.name for c in all_claims()["lemma-24"].checks]
    assert all(run("lemma-24", n, inp).holds for n in names)
    shifted = broken("lemma-24", "band offsets shifted up by M/10", inp)
    assert not run("lemma-24", "G = 0 for s < 1/2", shifted).holds
    assert all(c.gadget.b1 is not s.gadget.b1 for c, s in zip(inp.cases, shifted.cases))
    v = run(
        "lemma-24",
        "sup |G(x,s) - 2x relu(s-1/2)| <= r_x delta",
        broken("lemma-24", "half the knots", inp),
    )
    assert not v.holds and v.measured == pytest.approx(2 * v.bound, rel=1e-3)  # delta doubles


# ---------------------------------------------------------------------- prop-26


def test_prop26_checks_hold(inputs):
    inp = inputs("prop-26")
    for check in all_claims()["prop-26"].checks:
        assert check.run(inp, CTX).holds, check.name
    v = run("prop-26", "target error <= eps", inp)
    assert 0.3 < v.measured / v.bound < 1  # the rotated codes spend the budget (0.82 at seed 0)


def test_prop26_without_rectifier_leaks_and_the_states_grow(inputs):
    inp = inputs("prop-26")
    gate = broken("prop-26", "rectifying layers 3-4 removed", inp)
    assert all(c.transition is not g.transition for c, g in zip(inp.cases, gate.cases))
    assert run("prop-26", "exactly 0 off target", gate).measured > 0
    v = run("prop-26", "states within eps at every N", gate)
    assert not v.holds and v.measured > 2 * v.bound
    assert run("prop-26", "exactly 0 off target", inp).holds  # the honest inputs are untouched


def test_prop26_budget_faults_break_only_their_step(inputs):
    inp = inputs("prop-26")
    slip = broken("prop-26", "s_max without the margin", inp)
    assert not run("prop-26", "s_max = 1 + nu + delta_1 + margin", slip).holds
    assert run("prop-26", "b = r_x min(4e, 2e + delta)", slip).holds
    fewer = broken("prop-26", "one gate knot fewer", inp)
    assert not run("prop-26", "knots as derived", fewer).holds


def test_prop26_budget_slips_break_their_step_and_leave_the_record_alone(inputs):
    """Each slip of the error budget (docs/derivations/rnn-transition.md, section 4) fails its
    own step only; the honest guarantees are not edited."""
    inp = inputs("prop-26")
    slips = {
        "product error h^2/4 (the square's, not the product's)": "product error = h^2/16",
        "delta_1 without its d_e factor": "delta_1 = d_e h^2/16",
        "excess without its max(0, .)": "excess as derived",
        "threshold r_x min(2e, 2e + delta)": "b = r_x min(4e, 2e + delta)",
    }
    for fault, step in slips.items():
        slip = broken("prop-26", fault, inp)
        assert not run("prop-26", step, slip).holds, fault
        assert run("prop-26", "eps = b + r_x delta + 2 r_x (delta_1 + nu)", slip).holds, fault
    assert run("prop-26", "b = r_x min(4e, 2e + delta)", inp).holds


def test_prop26_dense_slip_and_eps_doubled(inputs):
    """A factor 2 dropped from the dense layer 3 separates it from the closed form (the honest
    transitions keep theirs); a transition built for 2 eps certifies more than asked."""
    inp = inputs("prop-26")
    half = broken("prop-26", "layer 3 reads delta sum_k H_k (factor 2 dropped)", inp)
    assert all(c.transition is not h.transition for c, h in zip(inp.cases, half.cases))
    assert run("prop-26", "dense layers = closed form", half).measured > 0.1
    assert run("prop-26", "dense layers = closed form", inp).holds
    v = run(
        "prop-26", "certified eps <= asked", broken("prop-26", "built for twice the eps asked", inp)
    )
    assert not v.holds and v.measured > 1.5 * v.bound


def test_prop26_thresholds_too_low_and_too_high(inputs):
    inp = inputs("prop-26")
    low = broken("prop-26", "threshold b / 8", inp)
    assert not run("prop-26", "|gate| <= b off target", low).holds
    assert not run("prop-26", "exactly 0 off target", low).holds  # the leak passes layer 3
    high = broken("prop-26", "threshold 3 b", inp)
    assert not run("prop-26", "target error <= eps", high).holds


# ---------------------------------------------------------------------- cor-27


def test_cor27_checks_hold_and_the_error_is_flat_in_N(inputs):
    inp = inputs("cor-27")
    for check in all_claims()["cor-27"].checks:
        assert check.run(inp, CTX).holds, check.name
    assert [c.N for c in inp.cases][:4] == [100, 1000, 10_000, 100_000]


def test_cor27_small_r_h_clips_the_states(inputs):
    inp = inputs("cor-27")
    small = broken("cor-27", "r_h = sqrt(q) r_x / 2", inp)
    (c,) = small.cases
    assert c.N == 1000 and c.rnn is not inp.cases[1].rnn and inp.cases[1].rnn.r_h > c.rnn.r_h
    v = run("cor-27", "state error <= eps at every N", small)
    assert not v.holds and v.measured > 10 * v.bound
    assert run("cor-27", "projection inactive", small).measured > 0


def test_cor27_off_by_one_scan_and_eps_doubled(inputs):
    """Inclusive prefix sums put x_{t_l} into the state at i = t_l, where it must be 0; an RNN
    built for 2 eps certifies more than asked."""
    inp = inputs("cor-27")
    incl = broken("cor-27", "inclusive prefix sums (index off by one)", inp)
    assert run("cor-27", "exactly 0 off target", incl).measured > 0
    assert not run("cor-27", "state error <= eps at every N", incl).holds
    assert run("cor-27", "exactly 0 off target", inp).holds
    twice = broken("cor-27", "built for twice the eps asked", inp)
    v = run("cor-27", "certified eps <= asked", twice)
    assert not v.holds and v.measured > 1.5 * v.bound


def test_cor27_perturbed_module_is_a_copy(inputs):
    """Gate bands from 0 in the loop module: it leaves the scan, its zeros move, and the honest
    module keeps its weights."""
    inp = inputs("cor-27")
    early = broken("cor-27", "module gate bands from 0, not 1/2", inp)
    assert early.module is not inp.module
    assert run("cor-27", "module zeros = scan zeros", early).measured > 0
    assert run("cor-27", "module loop = scan", inp).holds


# ---------------------------------------------------------------------- prop-28


def test_prop28_checks_hold(inputs):
    inp = inputs("prop-28")
    for check in all_claims()["prop-28"].checks:
        assert check.run(inp, CTX).holds, check.name
    v = run("prop-28", "|y_hat - g(x_t)| <= Lip sqrt(qd) eps", inp)
    assert 0.01 < v.measured / v.bound < 0.5  # the rotated code spends part of the budget


def test_plain_recurrence_runs_the_saved_file_like_the_module_and_projects_like_it(inputs):
    """plain_birnn (the reader of docs/formats.md) on the first case's file: the module's outputs,
    and with r_h below Cor 27's radius, the module's projected outputs."""
    import torch

    from qstr.constructions.recurrent import module_from_state

    c = inputs("prop-28").cases[0]
    y, active = plain_birnn(c.state, c.x, c.t)
    with torch.no_grad():
        y_module = module_from_state(c.state)(c.rnn.encode(c.x, c.t)).reshape(y.shape)
    assert active == 0 and float((y - y_module).abs().max()) <= 1e-10
    small = dict(c.state, config=dict(c.state["config"], r_h=0.1 * c.rnn.guarantee.r_x))
    y2, active2 = plain_birnn(small, c.x, c.t)
    with torch.no_grad():
        y2_module = module_from_state(small)(c.rnn.encode(c.x, c.t)).reshape(y.shape)
    assert active2 > 0 and float((y2 - y2_module).abs().max()) <= 1e-10
    assert float((y2 - c.rnn.predict(c.x, c.t)).abs().max()) > 1e-3  # clipped states change y


def test_prop28_faults(inputs):
    inp = inputs("prop-28")
    general = broken("prop-28", "general qSTR prompts", inp)
    v = run("prop-28", "|y_hat - g(x_t)| <= Lip sqrt(qd) eps", general)
    assert not v.holds and v.measured > 1.5 * v.bound
    for fault in ("saved layer 1 in (z, h) order", "saved output without the direct term"):
        b = broken("prop-28", fault, inp)
        assert b.cases[0].state is not inp.cases[0].state
        v = run("prop-28", "plain recurrence on the file = scan", b)
        assert not v.holds and v.measured > 1e5 * v.rounding
    assert run(
        "prop-28", "plain recurrence on the file = scan", inp
    ).holds  # honest inputs untouched


def test_output_layers_without_direct_term_are_the_scan_without_it(inputs):
    """The prop-28 falsifier's output net: layer 4 with the f(z_i) columns zero (the rest of f_y
    as built), run as a module, is the scan without the direct term; its other layers are the
    construction's."""
    import torch

    from qstr.constructions.recurrent import module_from_state
    from qstr.verify.claims.recurrent import _output_layers_without_direct_term

    c = inputs("prop-28").cases[0]
    layers = _output_layers_without_direct_term(c.rnn)
    honest = c.rnn.output_layers
    assert all(layers[k]["W"] is honest[k].W for k in (0, 1, 2, 4))
    W4 = honest[3].W.clone()
    W4[:, : c.rnn.transition.widths[2]] = 0.0  # layer 4 reads (f(z_i), v+, v-): f(z_i) first
    assert torch.equal(layers[3]["W"], W4)
    state = dict(c.state, output=layers)
    with torch.no_grad():
        y = module_from_state(state)(c.rnn.encode(c.x, c.t)).reshape(c.x.shape[:2])
    assert float((y - c.rnn.predict(c.x, c.t, output_gate=False)).abs().max()) <= 1e-9


def test_prop28_perturbed_module_and_file_are_copies(inputs):
    """Gate bands from 0 in the loop module and a file saved in float32 leave the scan; the
    honest module and file keep their weights."""
    inp = inputs("prop-28")
    early = broken("prop-28", "module gate bands from 0, not 1/2", inp)
    assert early.module is not inp.module
    assert run("prop-28", "module = scan", early).measured > 1e-3
    f32 = broken("prop-28", "saved in float32", inp)
    assert f32.cases[0].state is not inp.cases[0].state
    assert not run("prop-28", "reloaded files = scan", f32).holds
    assert run("prop-28", "module = scan", inp).holds
    assert run("prop-28", "reloaded files = scan", inp).holds


def test_prop28_record_slips(inputs):
    """The bound at the asked eps, r_h without sqrt(d) eps and a CLI built for 2 eps each fail
    their check; the honest constructions keep their records."""
    inp = inputs("prop-28")
    slips = {
        "bound at the eps asked, not the certified": "bound = Lip sqrt(qd) eps",
        "r_h without sqrt(d) eps": "r_h = sqrt(q)(r_x + sqrt(d) eps)",
        "CLI built for twice the eps asked": "certified eps <= asked",
    }
    for fault, check in slips.items():
        assert not run("prop-28", check, broken("prop-28", fault, inp)).holds, fault
        assert run("prop-28", check, inp).holds, check
