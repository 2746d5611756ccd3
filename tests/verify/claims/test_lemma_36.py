"""The claim lemma-36 of verify/claims/lemma_36.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses

CID = "lemma-36"


def test_lemma36_checks_and_faults(declared):
    d = declared(CID)
    inp, head = d.inputs, d.verdict("||vec||^2 <= C n^3")
    assert {c.N for c in inp.cases} == {8, 64} and {c.depth for c in inp.cases} == {2, 3}
    assert head.measured / head.bound < 0.1


def test_lemma36_bound_check_sees_a_smaller_constant(declared):
    """The headline compares with the bound function in the inputs: 1e-3 n^3 fails."""
    d = declared(CID)
    tiny = dataclasses.replace(d.inputs, bound=lambda n: 1e-3 * n**3)
    assert not d.verdict("||vec||^2 <= C n^3", tiny).holds
