"""Positional codebooks (Assumption 3): exact coherence, Rademacher rules, RS-Hadamard codes."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qstr.bounds.codebooks import rademacher_dim
from qstr.constructions import codes, provenance
from qstr.constructions.codes import (
    Codebook,
    build_codebook,
    coherence,
    coherence_report,
    experimental_codebook,
    experimental_dim,
    gf_mul_table,
    rademacher,
    rademacher_codebook,
    require_coherence,
    rs_hadamard_codebook,
    rs_hadamard_coherence,
    rs_hadamard_dim,
)

FAST = settings(max_examples=60, deadline=None)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------- brute force


def brute_gram(omega):
    g = omega.double() @ omega.double().T
    return g.fill_diagonal_(0).abs()  # diagonal out of the max (mu >= 0 anyway)


def brute_sign_gram(signs: np.ndarray) -> np.ndarray:
    s = signs.astype(np.int64)
    return np.abs(s @ s.T)


def upper(a):
    i, j = np.triu_indices(a.shape[0], 1)
    return np.asarray(a)[i, j]


# --------------------------------------------------------------------------- coherence


@st.composite
def matrices(draw):
    N = draw(st.integers(1, 40))
    d_e = draw(st.integers(1, 24))
    chunk = draw(st.integers(1, 50))
    seed = draw(st.integers(0, 2**31 - 1))
    style = draw(st.sampled_from(["gauss64", "gauss32", "sign32", "sign64", "sign_scaled"]))
    g = gen(seed)
    if style.startswith("gauss"):
        omega = torch.randn(N, d_e, generator=g, dtype=torch.float64)
        omega = omega / omega.norm(dim=1, keepdim=True).clamp_min(1e-12)
        omega = omega.to(torch.float32 if style == "gauss32" else torch.float64)
    else:
        dtype = torch.float64 if style == "sign64" else torch.float32
        omega = rademacher(N, d_e, generator=g, dtype=dtype)
        if style == "sign_scaled":
            omega = torch.sign(omega) * 0.375  # same magnitude, not unit norm
    return omega, chunk, style


@FAST
@given(matrices())
def test_coherence_matches_brute_force(case):
    omega, chunk, style = case
    mu = coherence(omega, chunk_rows=chunk)
    if omega.shape[0] == 1:
        assert mu == 0.0
        return
    if style.startswith("gauss"):
        assert mu == pytest.approx(float(brute_gram(omega).max()), rel=1e-12, abs=1e-15)
    else:  # integer Gram, exact
        S = int(upper(brute_sign_gram(torch.sign(omega).numpy())).max())
        d_e = omega.shape[1]
        expected = S / d_e if style != "sign_scaled" else S * 0.375**2
        assert mu == expected
        assert mu == pytest.approx(float(brute_gram(omega).max()), rel=1e-6)


@FAST
@given(matrices(), st.sampled_from([0.0, 0.25, 1 / 3, 0.5, 0.75]))
def test_coherence_report_matches_brute_force(case, threshold):
    omega, chunk, style = case
    N = omega.shape[0]
    rep = coherence_report(omega, threshold, chunk_rows=chunk)
    assert rep.n_pairs == N * (N - 1) // 2
    assert rep.threshold == threshold
    if N == 1:
        assert (rep.mu, rep.pair, rep.n_violations) == (0.0, None, 0)
        return
    i, j = rep.pair
    assert 0 <= i < j < N
    assert rep.mu == pytest.approx(
        coherence(omega), rel=1e-12
    )  # float64: chunking moves the last ulp
    if style.startswith("gauss"):
        vals = upper(brute_gram(omega).numpy())
        assert float(brute_gram(omega)[i, j]) == pytest.approx(rep.mu, rel=1e-12, abs=1e-15)
        assert rep.n_violations == int((vals > threshold).sum())
    else:
        S = brute_sign_gram(torch.sign(omega).numpy())
        unit = Fraction(1, omega.shape[1]) if style != "sign_scaled" else Fraction(3, 8) ** 2
        assert S[i, j] == upper(S).max()
        assert rep.n_violations == sum(int(v) * unit > Fraction(threshold) for v in upper(S))
    assert rep.ok == (rep.n_violations == 0)
    assert ("violates" in str(rep)) != rep.ok


def test_coherence_exact_ties_and_single_row():
    # two orthogonal codes and one coherent pair at exactly 1/2: no violation at threshold 1/2
    omega = torch.tensor([[1, 1, 1, 1], [1, 1, 1, -1], [1, -1, 1, -1.0]]) / 2
    rep = coherence_report(omega, 0.5)
    assert rep.mu == 0.5 and rep.n_violations == 0 and rep.pair == (0, 1)
    assert coherence_report(omega, 0.25).n_violations == 2
    assert coherence(omega[:1]) == 0.0
    assert coherence_report(omega[:1]).n_pairs == 0


def test_coherence_chunk_invariance_larger():
    omega = rademacher(300, 37, generator=gen(3))
    values = {coherence(omega, chunk_rows=c) for c in (1, 7, 64, 299, 300, 10_000)}
    assert len(values) == 1
    reps = {coherence_report(omega, 0.3, chunk_rows=c).n_violations for c in (1, 13, 300)}
    assert len(reps) == 1


# --------------------------------------------------------------------------- rademacher codes


def test_rademacher_codebook_coherent_and_small_d_e_refused():
    cb = rademacher_codebook(500, generator=gen(1))
    assert cb.kind == "rademacher" and cb.d_e == rademacher_dim(500, 1e-3) and cb.N == 500
    assert cb.mu <= 0.5 and cb.mu == coherence(cb.omega) and cb.params["tries"] >= 1
    assert torch.allclose(
        cb.omega.double().norm(dim=1), torch.ones(500, dtype=torch.float64), atol=1e-6
    )
    magnitudes = cb.omega.abs().unique()
    assert magnitudes.numel() == 1 and float(magnitudes) == pytest.approx(
        1 / math.sqrt(cb.d_e), rel=1e-7
    )
    with pytest.raises(ValueError, match=rf"d_e must be >= {cb.d_e}"):
        rademacher_codebook(500, d_e=cb.d_e - 1, generator=gen(1))
    big = rademacher_codebook(50, d_e=400, generator=gen(1), mu_max=0.4)
    assert big.d_e == 400 and big.mu <= 0.4


def test_rademacher_codebook_resamples_and_gives_up():
    # delta close to 1: one draw fails often, so some seeds need retries and max_tries=1 refuses
    outcomes = []
    for seed in range(12):
        try:
            cb = rademacher_codebook(300, delta=0.99, generator=gen(seed), max_tries=1)
            outcomes.append(cb.mu <= 0.5)
        except ValueError as err:
            assert "max_tries" in str(err)
            outcomes.append("refused")
    assert "refused" in outcomes and True in outcomes
    retried = [
        rademacher_codebook(300, delta=0.99, generator=gen(s)).params["tries"] for s in range(12)
    ]
    assert max(retried) > 1


def test_experimental_codebook_violates_assumption3():
    assert experimental_dim(100) == 23 and experimental_dim(1) == 1 and experimental_dim(2) == 3
    cb = experimental_codebook(100, generator=gen(0))
    assert cb.d_e == 23 and cb.kind == "experimental"
    rep = coherence_report(cb.omega, 0.5)
    assert cb.mu == rep.mu > 0.5
    assert 20 <= rep.n_violations <= 100 and cb.params["n_violations"] == rep.n_violations
    assert cb.params["expected_violations"] == pytest.approx(52.579, abs=1e-3)
    assert cb.params["satisfies_assumption3"] is False
    with pytest.raises(ValueError, match="Assumption 3"):
        require_coherence(cb)
    assert require_coherence(rs_hadamard_codebook(100)) <= 0.5


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
        table[x, y] == slow_gf_mul(int(x), int(y), m, codes.IRREDUCIBLE[m])
        for x, y in zip(a, b, strict=True)
    )
    nonzero = np.sort(table[1:, 1:], axis=1)  # each nonzero row is a permutation of the units
    assert (nonzero == np.arange(1, 2**m)).all()


@pytest.mark.parametrize("m, poly", [(4, 0b10001), (4, 0b10101), (8, 0b100000001), (3, 0b1001)])
def test_gf_check_catches_reducible_polynomial(m, poly):
    assert "inverse" in field_violations(codes._clmul_table(m, poly), np.random.default_rng(0))


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
    sym = codes._rs_symbols(np.arange(N), m, k)
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
    sym = codes._rs_symbols(np.arange(10**6, dtype=np.int64), 4, 5)
    assert sym.shape == (10**6, 16) and sym.max() < 16


def test_rs_hadamard_small_mu_for_sparse_averaging():
    q = 4
    cb = rs_hadamard_codebook(1000, mu=1 / (2 * q))
    assert cb.mu <= cb.params["guaranteed_mu"] <= 1 / (2 * q)
    assert cb.mu == coherence(cb.omega)


# --------------------------------------------------------------------------- entry point, errors


def test_build_codebook_dispatch():
    rs = build_codebook(100)
    assert rs.kind == "rs-hadamard" and rs.d_e == 64
    padded = build_codebook(100, d_e=300)
    assert padded.d_e == 300 and padded.params["n"] == 16 and padded.params["k"] == 2
    assert padded.mu == coherence(padded.omega) <= 1 / 16
    assert (padded.omega[:, 256:] == 0).all()
    with pytest.raises(ValueError, match="d_e must be >= 64"):
        build_codebook(100, d_e=63)
    assert build_codebook(100, d_e=64).d_e == 64  # the boundary is allowed
    rad = build_codebook(100, kind="rademacher", generator=gen(0))
    assert rad.kind == "rademacher" and rad.mu <= 0.5
    exp = build_codebook(100, kind="experimental", generator=gen(0))
    assert exp.d_e == 23
    with pytest.raises(ValueError, match="d_e is fixed"):
        build_codebook(100, kind="experimental", d_e=30, generator=gen(0))
    for kind in ("rademacher", "experimental"):
        with pytest.raises(ValueError, match="generator"):
            build_codebook(10, kind=kind)
    with pytest.raises(ValueError, match="kind"):
        build_codebook(10, kind="gaussian", generator=gen(0))


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: rademacher(0, 3, generator=gen()), "N"),
        (lambda: rademacher(3, 0, generator=gen()), "d_e"),
        (lambda: rademacher(3, 3, generator=None), "generator"),
        (lambda: rademacher(3, 3, generator=gen(), dtype=torch.int32), "dtype"),
        (lambda: rs_hadamard_codebook(0), "N"),
        (lambda: rs_hadamard_codebook(10, mu=-0.5), "mu"),
        (lambda: rs_hadamard_dim(10, mu=1.0), "mu"),
        (lambda: experimental_dim(0), "N"),
        (lambda: rademacher_codebook(10, delta=2.0, generator=gen()), "delta"),
        (lambda: rademacher_codebook(10, mu_max=0.0, generator=gen()), "mu_max"),
        (lambda: rademacher_codebook(10, max_tries=0, generator=gen()), "max_tries"),
        (lambda: build_codebook(0), "N"),
        (lambda: build_codebook(10, kind="rademacher", delta=0, generator=gen()), "delta"),
        (lambda: coherence(torch.tensor([[1.0, float("nan")]])), "omega"),
        (lambda: coherence(torch.ones(3)), "omega"),
        (lambda: coherence(torch.ones(3, 2), chunk_rows=0), "chunk_rows"),
        (lambda: coherence_report(torch.ones(3, 2), threshold=-1), "threshold"),
        (lambda: Codebook.from_tensor(torch.tensor([[1.0, float("inf")]])), "omega"),
        (lambda: Codebook.from_tensor(torch.ones(2, 2)), "omega"),
        (lambda: Codebook.from_tensor([[1.0]]), "omega"),
        (lambda: Codebook(torch.ones(2, 2), 0.0, "fancy"), "kind"),
    ],
)
def test_bad_arguments_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# --------------------------------------------------------------------------- reproducibility, to()


def test_reproducible_and_seed_dependent():
    a = rademacher_codebook(200, generator=gen(7)).omega
    b = rademacher_codebook(200, generator=gen(7)).omega
    c = rademacher_codebook(200, generator=gen(8)).omega
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(
        experimental_codebook(50, generator=gen(2)).omega,
        experimental_codebook(50, generator=gen(2)).omega,
    )
    assert torch.equal(rs_hadamard_codebook(300).omega, rs_hadamard_codebook(300).omega)


def test_codebook_to_moves_to_the_device_asked_and_stays_without_one():
    """Codebook.to(device=D) puts omega on D; with no device it stays where it is (the meta
    device stands in for a second device on a CPU-only machine)."""
    cb = rs_hadamard_codebook(100)
    moved = cb.to(device="meta")
    assert moved.omega.device.type == "meta" and moved.mu == cb.mu
    assert moved.to(dtype=torch.float64).omega.device.type == "meta"


def test_codebook_to_and_from_tensor():
    cb = rs_hadamard_codebook(100)
    cb64 = cb.to(dtype=torch.float64)
    assert cb64.omega.dtype == torch.float64 and cb64.mu == cb.mu and cb64.params == cb.params
    rad = rademacher_codebook(100, generator=gen(0))
    assert rad.to(dtype=torch.float64).mu == rad.mu == coherence(rad.omega.double())
    omega = torch.randn(30, 8, generator=gen(0), dtype=torch.float64)
    omega = omega / omega.norm(dim=1, keepdim=True)
    custom = Codebook.from_tensor(omega)
    assert (
        custom.kind == "custom"
        and custom.mu == coherence(omega)
        and (custom.N, custom.d_e) == (30, 8)
    )
    c32 = custom.to(dtype=torch.float32)
    assert c32.mu == coherence(omega.float()) and c32.mu == pytest.approx(custom.mu, abs=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    cpu = rademacher_codebook(2000, generator=gen(0))
    assert coherence(cpu.omega.cuda()) == cpu.mu
    rs = rs_hadamard_codebook(5000, device="cuda")
    assert rs.omega.is_cuda and coherence(rs.omega) == rs.mu == coherence(rs.omega.cpu())
    g = torch.Generator(device="cuda").manual_seed(0)
    x = rademacher(10, 5, generator=g, device="cuda")
    assert x.is_cuda
    with pytest.raises(ValueError, match="generator"):
        rademacher(10, 5, generator=gen(), device="cuda")


def test_require_coherence_takes_mu_max_by_keyword_and_the_boundary_is_inside():
    book = rs_hadamard_codebook(64, mu=0.5)
    assert book.mu == 0.5 and require_coherence(book, mu_max=0.5, name="codes") == 0.5
    with pytest.raises(ValueError, match="codes has coherence"):
        require_coherence(book, mu_max=0.25, name="codes")


def test_sign_codes_past_float32_integers_use_float64():
    """Inner products of sign codes are counted exactly: past 2**24 columns float32 would round
    them."""
    d_e = 2**24 + 1
    omega = torch.ones(2, d_e) / math.sqrt(d_e)  # two equal unit rows: coherence exactly 1
    omega[1, 0] = -omega[1, 0]  # <w_0, w_1> = (d_e - 2) / d_e, with d_e - 2 = 2**24 - 1 odd
    assert coherence(omega) == pytest.approx((d_e - 2) / d_e, abs=1e-12)
    assert codes._sign_form(omega)[0].dtype == torch.float64


# ------------------------------------------------------------------ from the assumption-3 claim


def _accepts(book, *args) -> bool:
    try:
        require_coherence(book, *args)
        return True
    except ValueError:
        return False


def test_coherence_of_one_row_is_zero_with_no_pair():
    """One row: mu = 0, no pair attains it, no pairs at all, and the report is satisfied."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    one = coherence_report(base.omega[:1])
    assert coherence(base.omega[:1]) == 0.0
    assert one.pair is None and one.n_pairs == 0 and one.ok


def test_non_unit_sign_codes_scale_their_coherence_exactly():
    """Sign codes of norm 1/2 (entries +-1/(2 sqrt d_e)): mu / 4 exactly, = the float64 Gram."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    half = 0.5 * base.omega
    assert coherence(half) == base.mu / 4
    assert abs(coherence(half) - float(brute_gram(half).max())) <= 1e-15


def test_a_custom_codebook_cast_to_float32_is_re_measured():
    """Codebook.to(dtype=float32) of custom codes re-measures mu on the cast rows."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(base.d_e, base.d_e, generator=gen(7), dtype=torch.float64))
    cast = Codebook.from_tensor(base.omega @ Q).to(dtype=torch.float32)
    assert cast.omega.dtype == torch.float32 and cast.mu == coherence(cast.omega)


def test_rademacher_codebook_tries_are_the_draws_a_fresh_generator_needs():
    """params['tries'] = the draws, replayed with a fresh generator, until mu <= mu_max."""
    book = rademacher_codebook(64, mu_max=0.5, delta=0.9, generator=gen(8))
    g, draws = gen(8), 0
    while True:
        draws += 1
        omega = rademacher(64, book.d_e, generator=g)
        if coherence(omega) <= 0.5:
            break
    assert book.params["tries"] == draws and torch.equal(omega, book.omega)


def test_rademacher_codebook_d_e_is_the_exact_rule():
    """rademacher_codebook's d_e is rademacher_dim(N, delta, mu_max); N = 1 needs d_e = 1."""
    book = build_codebook(2048, kind="rademacher", generator=gen(3))
    assert book.d_e == rademacher_dim(2048, 1e-3, 0.5) and book.kind == "rademacher"
    assert rademacher_dim(1, 1e-3) == 1


def test_assumption3_defaults_are_one_half_and_delta_1e3():
    """The documented defaults: mu = 1/2 (require_coherence, coherence_report, star_codebook,
    rademacher_codebook, build_codebook) and delta = 1e-3."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    rad = build_codebook(16, kind="rademacher", generator=gen(9))
    assert coherence_report(base.omega).threshold == 0.5
    assert codes.star_codebook(16).mu == 0.5 and require_coherence(base) == base.mu
    assert rad.params["mu_max"] == 0.5 and rad.params["delta"] == 1e-3
    assert rademacher_codebook(16, generator=gen(9)).params == rad.params


def test_require_coherence_default_refuses_just_above_one_half():
    """require_coherence() refuses mu > 1/2: the experiments' codes, and an RS-Hadamard row moved
    towards one it meets at 1/2 (coherence 1/2 + about 1e-6)."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    assert not _accepts(experimental_codebook(100, generator=gen(4)))
    i, j = coherence_report(base.omega).pair
    bent = base.omega.clone()
    bent[i] = bent[i] + 2e-6 * torch.sign(bent[i] @ bent[j]) * bent[j]
    bent[i] = bent[i] / bent[i].norm()
    assert not _accepts(bent) and _accepts(base)


def test_require_coherence_accepts_built_codebooks_iff_mu_at_most_one_half():
    """Built codebooks: require_coherence(book, 1/2) accepts exactly when mu <= 1/2 (1/2 inside)."""
    books = [
        build_codebook(8192),
        build_codebook(2048, kind="rademacher", generator=gen(3)),
        build_codebook(64, d_e=300, dtype=torch.float64),
        experimental_codebook(100, generator=gen(4)),
    ]
    for book in books:
        assert _accepts(book, 0.5) == (book.mu <= 0.5)


def test_sign_codes_have_rational_coherence_over_d_e():
    """Sign codes: inner products are integers over d_e, and mu is that fraction exactly."""
    for book in (build_codebook(8192), build_codebook(2048, kind="rademacher", generator=gen(3))):
        d_e = book.d_e
        assert book.mu == float(Fraction(round(book.mu * d_e), d_e))


def test_zero_padded_rs_hadamard_keeps_its_sign_columns():
    """build_codebook(64, d_e=300): the largest 4^m' <= 300 (256) sign columns, then zeros."""
    padded = build_codebook(64, kind="rs-hadamard", d_e=300, dtype=torch.float64)
    assert padded.d_e == 300
    assert bool((padded.omega[:, 256:] == 0).all()) and bool((padded.omega[:, :256] != 0).all())
    assert abs(padded.mu - float(brute_gram(padded.omega).max())) <= 1e-12


def test_from_tensor_unit_norm_tolerance():
    """Codebook.from_tensor refuses a row off by 10 UNIT_NORM_TOL, accepts one off by a tenth."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(base.d_e, base.d_e, generator=gen(6), dtype=torch.float64))
    omega = base.omega @ Q
    assert Codebook.from_tensor(omega).kind == "custom"
    for factor, ok in ((1 + 10 * codes.UNIT_NORM_TOL, False), (1 + codes.UNIT_NORM_TOL / 10, True)):
        bent = omega.clone()
        bent[5] *= factor
        if ok:
            Codebook.from_tensor(bent)
        else:
            with pytest.raises(ValueError, match="unit norm"):
                Codebook.from_tensor(bent)


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


def test_experimental_record_matches_its_own_draw():
    """experimental_codebook(100)'s record (from experimental-encoding): d_e = 23 = floor(5 ln 100),
    n_violations, mu and satisfies_assumption3 as coherence_report measures them, and
    expected_violations = C(100, 2) 89104 / 2^23."""
    book = experimental_codebook(100, generator=gen(11))
    rep = coherence_report(book.omega, 0.5)
    assert book.d_e == 23 == experimental_dim(100)
    assert book.params["n_violations"] == rep.n_violations and book.mu == rep.mu
    assert book.params["satisfies_assumption3"] == (rep.n_violations == 0)
    assert book.params["expected_violations"] == 4950 * float(Fraction(89104, 2**23))


@pytest.mark.parametrize("N, mu", [(16, 0.5), (40, 0.25)])
def test_star_codebook_meets_every_code_at_mu_and_records_its_shape(N, mu):
    cb = codes.star_codebook(N, mu=mu)
    G = cb.omega @ cb.omega.T
    assert torch.allclose(G[0, 1:], torch.full((N - 1,), mu, dtype=G.dtype), atol=1e-12)
    assert cb.mu == pytest.approx(mu, abs=1e-12) and cb.kind == "custom"
    assert cb.params == {"N": N, "d_e": cb.omega.shape[1], "star_mu": mu}
    assert cb.omega.shape[0] == N and cb.d_e == cb.omega.shape[1]


def test_codes_on_the_meta_device_are_refused():
    with pytest.raises(ValueError, match="on the CPU or a CUDA device, got meta"):
        Codebook.from_tensor(torch.eye(4, device="meta"))


# --------------------------------------------------------------------------- the codebook file


def test_save_and_load_round_trip_every_kind(tmp_path):
    """Codebook.save then Codebook.load gives the same codes, coherence, kind and params; a path
    and an open file write the same bytes; a bare tensor loads as custom codes."""
    books = (
        build_codebook(64, dtype=torch.float64),
        rademacher_codebook(50, generator=gen(5)),
        experimental_codebook(100, generator=gen(4)),
        Codebook.from_tensor(torch.eye(3, 5)),
    )
    for i, book in enumerate(books):
        path = tmp_path / f"{book.kind}-{i}.pt"
        book.save(path)
        back = Codebook.load(path)
        assert torch.equal(back.omega, book.omega) and back.omega.dtype == book.omega.dtype
        assert (back.mu, back.kind, back.params) == (book.mu, book.kind, book.params)
        with open(tmp_path / "fh.pt", "wb") as fh:
            book.save(fh)
        assert (tmp_path / "fh.pt").read_bytes() == path.read_bytes()
        assert torch.load(path, weights_only=True)["versions"] == provenance.versions()
    torch.save(torch.eye(4), tmp_path / "bare.pt")
    bare = Codebook.load(str(tmp_path / "bare.pt"))
    assert bare.kind == "custom" and bare.N == 4 and bare.mu == 0.0
    assert bare.params == {"N": 4, "d_e": 4}


def test_save_replaces_the_file_whole_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "cb.pt"
    path.write_bytes(b"old")
    build_codebook(16).save(str(path))
    assert Codebook.load(path).N == 16 and sorted(p.name for p in tmp_path.iterdir()) == ["cb.pt"]

    def full_disk(obj, fh):
        fh.write(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(ValueError, match=r"cb\.pt: cannot write it \(torch\.save failed: \[enf"):
        build_codebook(4).save(path)
    assert Codebook.load(path).N == 16 and sorted(p.name for p in tmp_path.iterdir()) == ["cb.pt"]
    with pytest.raises(ValueError, match="cannot write it"):
        build_codebook(4).save(tmp_path / "no" / "such" / "cb.pt")


@pytest.mark.parametrize(
    "content, needle",
    [
        (None, r"^'{path}': no such file$"),
        (b"", r"^{path}: not a codebook file .*\(not a torch file: empty or truncated file\)$"),
        (b"hello\n", r"^{path}: not a codebook file .*\(not a torch file: a text file\)$"),
        (bytes(1000), r"^{path}: not a codebook file .*\(not a torch file: all zero bytes\)$"),
        ([1.0, 2.0], r"^{path} holds list, not a tensor or a dict with an 'omega' tensor$"),
        ({"mu": 0.5}, r"^{path} holds dict, not a tensor or a dict with an 'omega' tensor$"),
        ({"omega": torch.eye(4).to_sparse()}, r"^{path} holds a torch\.sparse_coo tensor; "),
        ({"omega": torch.eye(4), "kind": "bogus"}, r"^{path} records the kind 'bogus'; known "),
    ],
)
def test_load_refuses_a_file_that_is_not_a_codebook_in_one_line(content, needle, tmp_path):
    path = tmp_path / "bad.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        torch.save(content, path)
    with pytest.raises(
        codes.CodebookFileError, match=needle.format(path=re.escape(str(path)))
    ) as err:
        Codebook.load(str(path))
    assert isinstance(err.value, ValueError) and len(str(err.value).splitlines()) == 1


def test_load_refuses_codes_that_are_not_unit_rows_as_from_tensor_does(tmp_path):
    torch.save({"omega": 2 * torch.eye(3), "kind": "rademacher"}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="unit norm") as err:
        Codebook.load(tmp_path / "x.pt")
    assert not isinstance(err.value, codes.CodebookFileError)
