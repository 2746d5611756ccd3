"""The RS-Hadamard codes (verify/claims/rs_hadamard_codes.py) through its declared structure."""

import pytest

from qstr.constructions import rs_hadamard
from qstr.constructions.codes import build_codebook, gf_mul_table, rs_hadamard_codebook

CID = "rs-hadamard-codes"


def test_rs_codes_reducible_moduli_named(declared):
    """The reducible moduli at m = 4 and 8 are the two tables found with zero divisors."""
    d = declared(CID)
    v = d.verdict("GF(2^m) tables are fields", d.broken("reducible"))
    assert v.measured == 2 and "m = [4, 8]" in v.detail


def test_a_reducible_modulus_has_a_nonzero_square_equal_to_zero():
    """x^4 + x^2 + 1 = (x^2 + x + 1)^2: x^2 + x + 1 = 0b111 squares to 0; degree checked."""
    assert gf_mul_table(4, 0b10101)[0b111, 0b111] == 0
    with pytest.raises(ValueError, match="poly must be an int of degree"):
        gf_mul_table(4, 0b111)


def test_rs_codes_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()


def _rule_k_minus_2(N, mu, m_min=1):
    """The parameter rule with k - 2 <= mu n (one root fewer than a degree < k allows)."""
    for m in range(m_min, 11):
        n, k = 1 << m, 1
        while n**k < N:
            k += 1
        if k - 2 <= mu * n:
            return m, n, k
    return None


def test_the_builder_refuses_a_slipped_parameter_rule(monkeypatch):
    """With the rule k - 2 <= mu n, N = 65 would get n = 4, k = 4 (mu 3/4): the builder and
    build_codebook re-check (k - 1)/n against the mu asked and refuse; honest, both serve N = 65
    within mu = 1/2."""
    assert rs_hadamard_codebook(65).mu <= 0.5
    assert build_codebook(65, kind="rs-hadamard").mu <= 0.5
    monkeypatch.setattr(rs_hadamard, "_rs_parameters", _rule_k_minus_2)
    for build in (rs_hadamard_codebook, lambda N: build_codebook(N, kind="rs-hadamard")):
        with pytest.raises(ValueError, match=r"\(k - 1\)/n .* = 0.75 above mu"):
            build(65)


def test_the_sweep_finds_the_slipped_rule_at_n_65(declared):
    """The rule k - 2 <= mu n first exceeds mu = 1/2 at N = 5 (n = 2, k = 3: mu 1); the sweep's
    worst case is an exact coherence above the mu asked."""
    d = declared(CID)
    v = d.verdict("the builder's rule: mu <= mu asked, every N <= 2^16", d.broken("k - 2 <= mu n"))
    assert not v.holds and v.measured > v.bound


def test_the_quick_sweep_holds_every_interval_end_and_the_full_one_every_n(declared):
    """Quick sweeps N = 2^j, 2^j + 1 (m, k, L are constant on (2^j, 2^(j+1)]); the full profile
    every N = 2..2^16; at mu = 1/2 the largest exact coherence is attained (= 1/2)."""
    d = declared(CID)
    assert all(set(ns) >= {2, 3, 64, 65, 2**16} for _, ns in d.inputs.sweep)
    v = d.verdict("the builder's rule: mu <= mu asked, every N <= 2^16")
    assert v.holds and v.measured == v.bound
