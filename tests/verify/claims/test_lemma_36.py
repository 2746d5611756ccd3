"""The claim lemma-36 of verify/claims/lemma_36.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses

import torch

CID = "lemma-36"


def test_lemma36_checks_and_faults(declared):
    d = declared(CID)
    inp, head = d.inputs, d.verdict("||vec||^2 <= C n^3")
    assert {c.N for c in inp.cases} == {8, 64} and {c.depth for c in inp.cases} == {2, 3}
    gaussian = dataclasses.replace(inp, cases=tuple(c for c in inp.cases if c.kind == "gaussian"))
    assert d.verdict("||vec||^2 <= C n^3", gaussian).ratio < 0.1
    assert head.ratio > 0.5 and "y = +-sqrt 6" in head.detail


def test_lemma36_adversarial_data_meet_the_bounds_premises(declared):
    """The adversarial memorisers: every gap of <v, x_j> in [eps_n, eps_n / 0.95], ||z||^2 <= 2n,
    and the certified bound reached within 0.9."""
    d = declared(CID)
    for c in (c for c in d.inputs.cases if c.kind != "gaussian"):
        direction = c.guarantee.lemma36.direction
        gaps = torch.diff(torch.sort(direction.z).values)
        eps = direction.threshold
        assert eps <= float(gaps.min()) and float(gaps.max()) <= eps / 0.95 * (1 + 1e-9)
        assert direction.z_norm2 <= 2 * c.n
    assert d.verdict("||vec||^2 <= certified bound").ratio > 0.9


def test_lemma36_record_and_constants(declared):
    """The records agree with the built modules; a width off by one, C36 = 2 sqrt(720/pi) fail."""
    d = declared(CID)
    assert d.verdict("record = built module").holds
    c = d.inputs.cases[0]
    off = dataclasses.replace(c, guarantee=dataclasses.replace(c.guarantee, width=c.n + 1))
    assert not d.verdict("record = built module", dataclasses.replace(d.inputs, cases=(off,))).holds
    assert d.verdict("constants = 40-digit evaluation").measured < 1e-14
    assert not d.verdict("constants = 40-digit evaluation", d.broken("C36 without pi/72")).holds


def test_lemma36_bound_check_sees_a_smaller_constant(declared):
    """The headline compares with the bound function in the inputs: 1e-3 n^3 fails."""
    d = declared(CID)
    tiny = dataclasses.replace(d.inputs, bound=lambda n: 1e-3 * n**3)
    assert not d.verdict("||vec||^2 <= C n^3", tiny).holds
