"""GF(2^m) and the RS-Hadamard codes (constructions/rs_hadamard.py): field axioms, the coherence
guarantee and its exact value, the dimension rule, the star and zero-padded codes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from qstr.constructions import rs_hadamard
from qstr.constructions.codes import build_codebook, coherence
from qstr.constructions.rs_hadamard import (
    IRREDUCIBLE,
    gf_mul_table,
    rs_hadamard_codebook,
    rs_hadamard_coherence,
    rs_hadamard_dim,
    star_codebook,
)
from tests.constructions.test_coherence import brute_gram


# --------------------------------------------------------------------------- GF(2^m)


def slow_gf_mul(a, b, m, poly):
    r = 0
    while b:
        if b & 1:
            r ^= a
        b >>= 1
        a <<= 1
        if a >> m & 1:
            a ^= poly
    return r


def field_violations(table, rng, samples=20_000):
    """Return the list of field axioms the table (with XOR addition) breaks."""
    n = table.shape[0]
    bad = []
    if not (table == table.T).all():
        bad.append("commutative")
    if not (table[1] == np.arange(n)).all() or (table[0] != 0).any():
        bad.append("identity/zero")
    if n > 1 and not (table[1:, 1:] == 1).any(axis=1).all():
        bad.append("inverse")
    if n <= 16:
        a, b, c = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), np.arange(n)))
    else:
        a, b, c = rng.integers(0, n, (3, samples))
    if (table[table[a, b], c] != table[a, table[b, c]]).any():
        bad.append("associative")
    if (table[a, b ^ c] != (table[a, b] ^ table[a, c])).any():
        bad.append("distributive")
    return bad


@pytest.mark.parametrize("m", range(1, 11))
def test_gf_table_is_a_field(m):
    table, rng = gf_mul_table(m), np.random.default_rng(m)
    assert table.shape == (2**m, 2**m) and not table.flags.writeable
    assert field_violations(table, rng) == []
    a, b = rng.integers(0, 2**m, (2, 300))
    assert all(
        table[x, y] == slow_gf_mul(int(x), int(y), m, IRREDUCIBLE[m])
        for x, y in zip(a, b, strict=True)
    )
    nonzero = np.sort(table[1:, 1:], axis=1)  # each nonzero row is a permutation of the units
    assert (nonzero == np.arange(1, 2**m)).all()


@pytest.mark.parametrize("m, poly", [(4, 0b10001), (4, 0b10101), (8, 0b100000001), (3, 0b1001)])
def test_gf_check_catches_reducible_polynomial(m, poly):
    assert "inverse" in field_violations(
        rs_hadamard._clmul_table(m, poly), np.random.default_rng(0)
    )


# --------------------------------------------------------------------------- RS-Hadamard


@pytest.mark.parametrize("N", [1, 2, 3, 4, 5, 17, 64, 65, 300, 1000])
@pytest.mark.parametrize("mu", [0.5, 0.25, 1 / 8])
def test_rs_hadamard_guarantees(N, mu):
    cb = rs_hadamard_codebook(N, mu=mu)
    p = cb.params
    n, k = p["n"], p["k"]
    assert cb.kind == "rs-hadamard" and cb.d_e == n * n == rs_hadamard_dim(N, mu) and cb.N == N
    assert p["guaranteed_mu"] == (k - 1) / n <= mu and n**k >= N
    omega = cb.omega.double()
    assert ((omega**2).sum(dim=1) == 1).all()  # dyadic entries: exact
    gram = omega @ omega.T
    off = gram[~torch.eye(N, dtype=torch.bool)]
    assert (off >= 0).all() and ((off * n) == (off * n).round()).all()  # agreements / n
    assert cb.mu == coherence(cb.omega) == (float(off.max()) if N > 1 else 0.0)
    assert cb.mu <= p["guaranteed_mu"]
    assert torch.unique(cb.omega, dim=0).shape[0] == N


def test_rs_hadamard_agreement_identity():
    m, k, N = 2, 3, 64
    sym = rs_hadamard._rs_symbols(np.arange(N), m, k)
    gram = rs_hadamard_codebook(N).omega.double()
    agree = (sym[:, None, :] == sym[None, :, :]).sum(-1)
    assert np.array_equal((gram @ gram.T * 4).round().numpy().astype(int), agree)
    # differences i XOR j over i != j < N are exactly [1, 2^L)
    for N in range(2, 70):
        xors = {i ^ j for i in range(N) for j in range(N) if i != j}
        assert xors == set(range(1, 1 << (N - 1).bit_length()))


def test_rs_hadamard_dimension_table():
    def brute_dim(N, mu):  # independent statement of the rule
        for m in range(1, 11):
            n = 2**m
            if n ** (math.floor(mu * n) + 1) >= N:
                return n * n

    edges = {4: 4, 5: 16, 64: 16, 65: 64, 32768: 64, 32769: 256, 16**9: 256, 16**9 + 1: 1024}
    for N, d in edges.items():
        assert rs_hadamard_dim(N) == d == brute_dim(N, 0.5)
    for N in [1, 2, 16, 17, 512, 513, 10**6, 16**5 + 1, 10**9]:
        assert rs_hadamard_dim(N, 0.25) == brute_dim(N, 0.25)
    assert [rs_hadamard_dim(N, 0.25) for N in (16, 17, 512, 513)] == [16, 64, 64, 256]
    with pytest.raises(ValueError, match="mu"):
        rs_hadamard_dim(2 * 10**6, 0.001)  # GF(2^10): 1024^2 words at most


def test_rs_hadamard_large_n_exact_coherence():
    cb = rs_hadamard_codebook(4096)
    assert cb.mu == coherence(cb.omega) == rs_hadamard_coherence(4096, 3, 4) == 3 / 8
    assert rs_hadamard_coherence(10**6, 4, 5) <= 4 / 16
    sym = rs_hadamard._rs_symbols(np.arange(10**6, dtype=np.int64), 4, 5)
    assert sym.shape == (10**6, 16) and sym.max() < 16


def test_rs_hadamard_small_mu_for_sparse_averaging():
    q = 4
    cb = rs_hadamard_codebook(1000, mu=1 / (2 * q))
    assert cb.mu <= cb.params["guaranteed_mu"] <= 1 / (2 * q)
    assert cb.mu == coherence(cb.omega)


def test_rs_hadamard_dim_documented_table():
    """rs_hadamard_dim at mu = 1/2 (n^(n/2 + 1) >= N), the docstring's table at both sides of each
    edge: N <= 4 -> 4, <= 64 -> 16, <= 32768 -> 64, <= 16^9 -> 256, 16^9 + 1 -> 1024."""
    dims = [rs_hadamard_dim(N) for N in (4, 5, 64, 65, 32768, 32769, 16**9, 16**9 + 1)]
    assert dims == [4, 16, 16, 64, 64, 256, 256, 1024]


def test_rs_hadamard_record_for_n_squared_words():
    """rs_hadamard_codebook(n^2, mu = 1/n) records m and guaranteed_mu = (k - 1)/n; one word has
    coherence 0 (from rs-hadamard-codes)."""
    for m in range(1, 6):
        n = 2**m
        book = rs_hadamard_codebook(n * n, mu=1.0 / n)
        k = book.params["k"]
        assert book.params["m"] == m and book.params["guaranteed_mu"] == (k - 1) / n
        assert rs_hadamard_coherence(1, m, k) == 0.0


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: rs_hadamard_codebook(0), "N"),
        (lambda: rs_hadamard_codebook(10, mu=-0.5), "mu"),
        (lambda: rs_hadamard_dim(10, mu=1.0), "mu"),
    ],
)
def test_bad_arguments_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ---------------------------------------------------------------- star and zero-padded codes


@pytest.mark.parametrize("N, mu", [(16, 0.5), (40, 0.25)])
def test_star_codebook_meets_every_code_at_mu_and_records_its_shape(N, mu):
    cb = star_codebook(N, mu=mu)
    G = cb.omega @ cb.omega.T
    assert torch.allclose(G[0, 1:], torch.full((N - 1,), mu, dtype=G.dtype), atol=1e-12)
    assert cb.mu == pytest.approx(mu, abs=1e-12) and cb.kind == "custom"
    assert cb.params == {"N": N, "d_e": cb.omega.shape[1], "star_mu": mu}
    assert cb.omega.shape[0] == N and cb.d_e == cb.omega.shape[1]


def test_zero_padded_rs_hadamard_keeps_its_sign_columns():
    """build_codebook(64, d_e=300): the largest 4^m' <= 300 (256) sign columns, then zeros."""
    padded = build_codebook(64, kind="rs-hadamard", d_e=300, dtype=torch.float64)
    assert padded.d_e == 300
    assert bool((padded.omega[:, 256:] == 0).all()) and bool((padded.omega[:, :256] != 0).all())
    assert abs(padded.mu - float(brute_gram(padded.omega).max())) <= 1e-12
