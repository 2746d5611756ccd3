"""Tests for verify/registry.py: how run_claim scores a claim whose falsifier passes or whose check crashes,
and that a claim run with the same seed gives the same numbers."""
from qstr.verify.claims import all_claims
from qstr.verify.registry import Claim, Context, Outcome, run_claim


def test_a_claim_whose_falsifier_passes_fails():
    ok = Outcome(1.0, "<= 2", True)
    c = Claim("fake", "-", "-", "1 <= 2", check=lambda ctx: ok, falsifier=lambda ctx: ok, falsifier_statement="none")
    r = run_claim(c, Context())
    assert r.holds and not r.falsifier_caught and not r.passed


def test_a_crashing_check_fails_and_is_reported():
    def boom(ctx):
        raise RuntimeError("kaput")

    c = Claim("fake", "-", "-", "s", check=boom, falsifier=boom, falsifier_statement="none")
    r = run_claim(c, Context())
    assert not r.holds and not r.falsifier_caught and "kaput" in r.error


def test_same_seed_same_numbers():
    a = run_claim(all_claims()["lemma-41"], Context(profile="quick", seed=3))
    b = run_claim(all_claims()["lemma-41"], Context(profile="quick", seed=3))
    assert a.measured == b.measured and a.detail == b.detail
