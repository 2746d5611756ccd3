"""Cor 27 (verify/claims/cor_27.py) through its public structure: inputs, named checks and
faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""

import pytest

from qstr.verify.claim import Context
from qstr.verify.claims import all_claims

CTX = Context(profile="quick")
CLAIM = all_claims()["cor-27"]


@pytest.fixture(scope="module")
def inp():
    """The claim's honest inputs, built once."""
    return CLAIM.inputs(CTX)


def run(name, inputs):
    return CLAIM.check_named(name).run(inputs, CTX)


def broken(fault, inputs):
    return CLAIM.fault_named(fault).apply(inputs, CTX)


def test_cor27_keeps_its_reference():
    assert CLAIM.ref.seed == CLAIM.ref.conference == "Cor 27"
    assert CLAIM.derivation == "docs/derivations/rnn-transition.md"


def test_cor27_checks_hold_and_the_error_is_flat_in_N(inp):
    for check in CLAIM.checks:
        assert check.run(inp, CTX).holds, check.name
    assert [c.N for c in inp.cases][:4] == [100, 1000, 10_000, 100_000]


def test_cor27_small_r_h_clips_the_states(inp):
    small = broken("r_h = sqrt(q) r_x / 2", inp)
    (c,) = small.cases
    assert c.N == 1000 and c.rnn is not inp.cases[1].rnn and inp.cases[1].rnn.r_h > c.rnn.r_h
    v = run("state error <= eps at every N", small)
    assert not v.holds and v.measured > 10 * v.bound
    assert run("projection inactive", small).measured > 0


def test_cor27_off_by_one_scan_and_eps_doubled(inp):
    """Inclusive prefix sums put x_{t_l} into the state at i = t_l, where it must be 0; an RNN
    built for 2 eps certifies more than asked."""
    incl = broken("inclusive prefix sums (index off by one)", inp)
    assert run("exactly 0 off target", incl).measured > 0
    assert not run("state error <= eps at every N", incl).holds
    assert run("exactly 0 off target", inp).holds
    twice = broken("built for twice the eps asked", inp)
    v = run("certified eps <= asked", twice)
    assert not v.holds and v.measured > 1.5 * v.bound


def test_cor27_perturbed_module_is_a_copy(inp):
    """Gate bands from 0 in the loop module: it leaves the scan, its zeros move, and the honest
    module keeps its weights."""
    early = broken("module gate bands from 0, not 1/2", inp)
    assert early.module is not inp.module
    assert run("module zeros = scan zeros", early).measured > 0
    assert run("module loop = scan", inp).holds
