"""The claim prop-8 of verify/claims/prop_8.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import copy
import dataclasses
import math

import pytest
import torch

from qstr.bounds.prop8 import prop8_width_lower_bound
from qstr.verify.claims import prop_8
from qstr.verify.claims._prop8 import with_default_gamma

CID = "prop-8"


def test_prop8_checks_and_faults(declared):
    d = declared(CID)
    v = d.verdict("answer separation >= sqrt(2a(N-1)/N)")
    assert v.bound == pytest.approx(math.sqrt(255 / 256))
    assert "positive from N = 33" in d.verdict("width bound positive iff the packing exists").detail


def test_prop8_answers_of_simple_1str_do_not_vary(declared):
    """The simple-1STR fault's answers: <u, x_t> repeated N times (normalised separation 0)."""
    d = declared(CID)
    inp, broken = d.inputs, d.broken(d.claim.faults[0].name)
    M = inp.x.shape[0]
    want = (inp.x[torch.arange(M), broken.t] @ inp.u)[:, None]
    assert torch.equal(prop_8._answer_vectors(inp.x, inp.u, broken.t), want.expand(M, 256))


def test_prop8_width_bound_substituted(declared):
    """A width bound 1e4 times the rigorous one (0.32 here) exceeds d_h = N d: the check fails."""
    d = declared(CID)

    def wide(*a, **k):
        return 1e4 * prop8_width_lower_bound(*a, **k)

    big = dataclasses.replace(d.inputs, bounds=dataclasses.replace(d.inputs.bounds, width=wide))
    assert not d.verdict("d_h >= width bound", big).holds


def test_prop8_gru_width_check_runs_only_where_it_trains(declared):
    """The trained-width check and its simple-1STR fault are declared for full and gpu only."""
    claim = declared(CID).claim
    name = "trained GRU width grows with N"
    assert name not in {c.name for c in claim.checks_in("quick")}
    assert claim.check_named(name).profiles == ("full", "gpu")
    assert [f.name for f in claim.faults if name in f.breaks] == ["simple-1STR width scan"]


def test_prop8_width_check_is_vacuous_at_n128_and_reads_the_weights(declared):
    """At N = 128 the width bound (0.32) is <= 1: the check's status is vacuous, and its d_h is the
    built transitions' row count (N d = 384), not the record's."""
    d = declared(CID)
    v = d.verdict("d_h >= width bound")
    assert v.status == "vacuous" and v.bound < 1
    assert v.measured == d.inputs.slot.model.f_fwd[-1].weight.shape[0] == 128 * 3
    record = dataclasses.replace(d.inputs.slot.guarantee, d_h=10**6)
    lied = dataclasses.replace(d.inputs, slot=dataclasses.replace(d.inputs.slot, guarantee=record))
    assert d.verdict("d_h >= width bound", lied).measured == 384
    assert not d.verdict("record = built module", lied).holds


def test_prop8_pins_hold_and_see_a_default(declared):
    """The bound functions agree with the 40-digit evaluation to 1e-12; a default gamma of 0.4 in
    the packing alone is seen by the defaults check."""
    d = declared(CID)
    assert d.verdict("bounds = 40-digit evaluation").measured <= 1e-12
    assert d.verdict("defaults = the page's K = 2, gamma = 1/2, C_M = 8").measured <= 1e-12
    b = d.inputs.bounds
    slipped = dataclasses.replace(b, packing=with_default_gamma(b.packing, 0.4))
    bad = dataclasses.replace(d.inputs, bounds=slipped)
    assert not d.verdict("defaults = the page's K = 2, gamma = 1/2, C_M = 8", bad).holds


def test_prop8_built_checks_run_the_module(declared):
    """Each built check on the slot memory runs the module: one whose forward pieces raise makes
    them crash."""
    d = declared(CID)

    def raising(*a, **k):
        raise RuntimeError("built module evaluated")

    model = copy.deepcopy(d.inputs.slot.model)
    model.f_fwd[0].forward = raising
    model.f_y[0].forward = raising
    broken = dataclasses.replace(d.inputs, slot=dataclasses.replace(d.inputs.slot, model=model))
    for name in (
        "conditional errors <= K c",
        "states separated by s~/lambda",
        "chain ||dP|| <= lambda ||dw||",
    ):
        with pytest.raises(RuntimeError, match="built module evaluated"):
            d.verdict(name, broken)


def test_prop8_binding_checks_run_in_full_only(declared):
    """Where the bound binds (N = 512): the two checks and their faults are full-profile only."""
    claim = declared(CID).claim
    quick = {c.name for c in claim.checks_in("quick")}
    for name in (
        "where it binds (N = 512): d_h >= width bound",
        "where it binds (N = 512): position risk <= c",
    ):
        assert name not in quick and claim.check_named(name).profiles == ("full", "gpu")
    assert prop_8.P8_BIND_N * 1 > 339  # past the onset at c = 0.05
