"""Prop 28 (verify/claims/prop_28.py) through its public structure: inputs, named checks and
faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""

import mpmath
import torch

from qstr.constructions.recurrent import module_from_state
from qstr.verify.claims.prop_28 import _output_layers_without_direct_term, net_lipschitz
from qstr.verify.claims.prop_28 import plain_birnn

CID = "prop-28"


def test_prop28_checks_hold(declared):
    d = declared(CID)
    v = d.verdict("|y_hat - g(x_t)| <= Lip sqrt(qd) eps")
    assert 0.01 < v.measured / v.bound < 0.5  # the rotated code spends part of the budget


def test_plain_recurrence_runs_the_saved_file_like_the_module_and_projects_like_it(declared):
    """plain_birnn (the reader of docs/formats.md) on the first case's file: the module's outputs,
    and with r_h below Cor 27's radius, the module's projected outputs."""
    c = declared(CID).inputs.cases[0]
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


def test_prop28_faults(declared):
    d = declared(CID)
    inp = d.inputs
    general = d.broken("general qSTR prompts")
    v = d.verdict("|y_hat - g(x_t)| <= Lip sqrt(qd) eps", general)
    assert not v.holds and v.measured > 1.5 * v.bound
    for fault in ("saved layer 1 in (z, h) order", "saved output without the direct term"):
        b = d.broken(fault)
        assert b.cases[0].state is not inp.cases[0].state
        v = d.verdict("plain recurrence on the file = scan", b)
        assert not v.holds and v.measured > 1e5 * v.rounding
    assert d.verdict("plain recurrence on the file = scan").holds  # honest inputs untouched


def test_output_layers_without_direct_term_are_the_scan_without_it(declared):
    """The prop-28 falsifier's output net: layer 4 with the f(z_i) columns zero (the rest of f_y
    as built), run as a module, is the scan without the direct term; its other layers are the
    construction's."""
    c = declared(CID).inputs.cases[0]
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


def test_prop28_perturbed_module_and_file_are_copies(declared):
    """Gate bands from 0 in the loop module and a file saved in float32 leave the scan; the
    honest module and file keep their weights."""
    d = declared(CID)
    inp = d.inputs
    early = d.broken("module gate bands from 0, not 1/2")
    assert early.module is not inp.module
    assert d.verdict("module = scan", early).measured > 1e-3
    f32 = d.broken("saved in float32")
    assert f32.cases[0].state is not inp.cases[0].state
    assert not d.verdict("reloaded files = scan", f32).holds
    assert d.verdict("module = scan").holds
    assert d.verdict("reloaded files = scan").holds


def test_prop28_record_slips(declared):
    """The bound at the asked eps, r_h without sqrt(d) eps and a CLI built for 2 eps each fail
    their check; the honest constructions keep their records."""
    d = declared(CID)
    slips = {
        "bound at the eps asked, not the certified": "bound = Lip sqrt(qd) eps",
        "r_h without sqrt(d) eps": "r_h = sqrt(q)(r_x + sqrt(d) eps)",
        "CLI built for twice the eps asked": "certified eps <= asked",
    }
    for fault, check in slips.items():
        assert not d.verdict(check, d.broken(fault)).holds, fault
        assert d.verdict(check).holds, check


def test_prop28_keeps_its_reference(declared):
    claim = declared(CID).claim
    assert claim.ref.seed == claim.ref.conference == "Prop 28"
    assert claim.derivation == "docs/derivations/rnn-transition.md"


def test_prop28_record_held_to_the_module(declared):
    """The guarantee's widths, r_h and Lip equal the loaded modules' (the first case's and the
    CLI file's); a record whose output widths leave out the carry fails, and so does r_h without
    sqrt(d) eps; the pinned Lip is a 40-digit value."""
    d = declared(CID)
    name = "recorded widths, r_h and Lip = the module's"
    assert d.verdict(name).holds
    assert not d.verdict(name, d.broken("output widths recorded without")).holds
    assert not d.verdict(name, d.broken("r_h without sqrt(d) eps")).holds
    lip = net_lipschitz(d.inputs.cases[0].rnn)
    assert (
        isinstance(lip, mpmath.mpf)
        and abs(lip - d.inputs.cases[0].rnn.guarantee.lipschitz) < 1e-12 * lip
    )
