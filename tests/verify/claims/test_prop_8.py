"""The claim prop-8 of verify/claims/prop_8.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses
import math

import pytest
import torch

from qstr.bounds.recurrent import prop8_width_lower_bound
from qstr.verify.claims import prop_8

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
