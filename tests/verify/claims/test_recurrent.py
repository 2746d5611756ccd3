"""Registration of verify/claims/recurrent.py (tests/verify/claims/test_registered.py runs every claim, on the CPU
and, with CUDA, the whole gpu profile)."""
import qstr.verify.claims.recurrent  # noqa: F401  (registers the claims)
from qstr.verify.claims import REGISTRY

IDS = ("lemma-22", "lemma-24", "prop-26", "cor-27", "prop-28")


def test_claims_are_registered_with_references():
    for cid in IDS:
        c = REGISTRY[cid]
        assert c.ref_seed and c.ref_conference and c.falsifier_statement



def test_eps_as_asked_rejects_a_looser_certificate():
    from types import SimpleNamespace as NS

    import qstr.verify.claims.recurrent as rec

    assert rec._eps_as_asked(NS(eps=0.0999, eps_requested=0.1), 0.1)
    assert not rec._eps_as_asked(NS(eps=0.25, eps_requested=0.1), 0.1)  # e.g. a third of the gate knots
    assert not rec._eps_as_asked(NS(eps=0.05, eps_requested=0.2), 0.1)


def test_prop26_transition_certifies_the_asked_eps():
    import qstr.verify.claims.recurrent as rec
    from qstr.constructions.codes import rs_hadamard_codebook
    from qstr.constructions.recurrent import build_transition

    tr = build_transition(rs_hadamard_codebook(64), rec.P26_D, rec.P26_Q, eps=rec.P26_EPS, r_x=rec.P26_RX)
    assert rec._eps_as_asked(tr.guarantee, rec.P26_EPS)


def test_gadget_outcome_is_two_sided():
    import qstr.verify.claims.recurrent as rec
    from qstr.verify.rounding import Rounding

    rnd = Rounding(n=1, scale=1.0, what="test")
    assert rec._gadget_outcome([("a", {"s": 1.0}, 1.0, rnd)]).holds
    assert not rec._gadget_outcome([("a", {"s": 0.5}, 1.0, rnd)]).holds  # bound inflated 2x (h^2/8)
    assert not rec._gadget_outcome([("a", {"s": 1.5}, 1.0, rnd)]).holds
