"""The claims of verify/claims/recurrent.py through their public structure: inputs, named checks
and faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""
import pytest

from qstr.verify.claim import Context
from qstr.verify.claims import all_claims

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
    assert [c.args for c in half.cases] == [c.args for c in inp.cases]  # certified for the full count
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
    v = run("lemma-24", "sup |G(x,s) - 2x relu(s-1/2)| <= r_x delta", broken("lemma-24", "half the knots", inp))
    assert not v.holds and v.measured == pytest.approx(2 * v.bound, rel=1e-3)  # delta doubles
