"""The Rademacher codes' union bound (bounds/codebooks.py): the exact pair tail, the d_e rules,
the builders that pick d_e by them, and their old paths in constructions/codes.py."""

from __future__ import annotations

import functools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
import torch

from qstr.bounds import codebooks
from qstr.bounds.codebooks import (
    build_codebook,
    experimental_codebook,
    rademacher_codebook,
    rademacher_dim,
    rademacher_pair_tail,
)
from qstr.constructions import codes
from qstr.constructions.codes import (
    coherent_rademacher,
    experimental_codes,
    padded_rs_hadamard_codebook,
    rs_hadamard_codebook,
)
from tests.fixtures import seeded, via_old_path


# --------------------------------------------------------------------------- the pair tail


def enumerate_tail(d_e, mu, a=None):
    """Enumerate every sign vector b against a fixed a: <a, b> has the pair's distribution."""
    bits = (np.arange(2**d_e)[:, None] >> np.arange(d_e)) & 1
    b = 2 * bits - 1
    a = np.ones(d_e, dtype=np.int64) if a is None else a
    S = b @ a
    hits = sum(1 for s in S if Fraction(abs(int(s)), d_e) > Fraction(mu))
    return Fraction(hits, 2**d_e)


@pytest.mark.parametrize("d_e", range(1, 15))
@pytest.mark.parametrize("mu", [0.5, 0.25, 1 / 3, 0.1, 0.75])
def test_pair_tail_vs_enumeration(d_e, mu):
    a = np.where(np.random.default_rng(d_e).random(d_e) < 0.5, -1, 1)
    exact = enumerate_tail(d_e, mu, a)
    assert rademacher_pair_tail(d_e, mu) == float(exact)


@pytest.mark.parametrize("d_e", range(1, 6))
def test_pair_tail_vs_all_pairs(d_e):
    signs = 2 * ((np.arange(2**d_e)[:, None] >> np.arange(d_e)) & 1) - 1
    S = signs @ signs.T  # every ordered pair (a, b) of sign vectors
    for mu in (0.5, 0.2, 0.6):
        hits = sum(1 for v in np.abs(S).ravel() if Fraction(int(v), d_e) > Fraction(mu))
        frac = Fraction(hits, S.size)
        assert rademacher_pair_tail(d_e, mu) == float(frac)


def test_pair_tail_paper_example_and_strictness():
    assert rademacher_pair_tail(23, 0.5) == 89104 / 2**23
    assert 4950 * rademacher_pair_tail(23, 0.5) == pytest.approx(52.579, abs=1e-3)
    # strict inequality: d_e = 8, mu = 1/2 -> |S| > 4 -> |S| >= 6 -> B in {0, 1, 7, 8}
    assert rademacher_pair_tail(8, 0.5) == 2 * (1 + 8) / 256
    assert rademacher_pair_tail(1, 0.5) == 1.0  # |S| = 1 > 1/2 always
    assert rademacher_pair_tail(2, 0.5) == 0.5


def test_pair_tail_scipy_branch_agrees_with_integers():
    d_e, mu = 5001, 0.1
    low = codebooks._tail_cut(d_e, mu)
    exact = Fraction(2 * sum(math.comb(d_e, b) for b in range(low + 1)), 2**d_e)
    assert rademacher_pair_tail(d_e, mu) == pytest.approx(float(exact), rel=1e-10)


# --------------------------------------------------------------------------- dimension rules


def union(N, d_e, mu):
    return math.comb(N, 2) * rademacher_pair_tail(d_e, mu)


@pytest.mark.parametrize("N", [2, 3, 10, 100, 1000, 8192])
@pytest.mark.parametrize("delta", [1e-3, 0.1])
@pytest.mark.parametrize("mu", [0.5, 0.3])
def test_rademacher_dim_rule(N, delta, mu):
    d = rademacher_dim(N, delta, mu)
    h = rademacher_dim(N, delta, mu, rule="hoeffding")
    assert h >= d
    assert h == math.ceil(2 * math.log(N * (N - 1) / delta) / mu**2)
    assert math.comb(N, 2) * 2 * math.exp(-h * mu**2 / 2) <= delta
    assert math.comb(N, 2) * 2 * math.exp(-(h - 1) * mu**2 / 2) > delta
    assert d == 1 or union(N, d - 1, mu) > delta  # minimal
    assert all(union(N, x, mu) <= delta for x in range(d, h + 1))  # and for every larger d_e


def _rule_by_definition(N, delta, mu):
    """1 + the largest d_e below the Hoeffding value whose union bound exceeds delta."""
    top = rademacher_dim(N, delta, mu, rule="hoeffding")
    failing = [d for d in range(1, top) if union(N, d, mu) > delta]
    return max(failing) + 1 if failing else 1


@pytest.mark.parametrize("N, mu", [(2, 0.5), (100, 0.5), (100, 0.3)])
def test_rademacher_dim_settles_ties_at_the_union_bound(N, mu):
    # delta planted at the union bound of some d_e: scipy's tail lands an ulp either side of it,
    # so only the comparison with the exactly rounded tail decides whether that d_e passes
    for d in range(20, 100):
        delta = union(N, d, mu)
        if 0 < delta < 1:
            assert rademacher_dim(N, delta, mu) == _rule_by_definition(N, delta, mu), d


def test_rademacher_dim_parity_example_and_spec_form():
    # N = 100, delta = 1e-3: d_e = 100 passes pointwise but 101 and 105 fail, so the rule gives 106
    assert rademacher_dim(100, 1e-3) == 106
    assert union(100, 100, 0.5) <= 1e-3 < union(100, 105, 0.5)
    assert (
        rademacher_dim(100, 1e-3, rule="hoeffding") == math.ceil(8 * math.log(9900 / 1e-3)) == 129
    )
    assert rademacher_dim(1, 1e-3) == 1 and rademacher_dim(1, 1e-3, rule="hoeffding") == 1


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: rademacher_dim(0, 1e-3), "N"),
        (lambda: rademacher_dim(-3, 1e-3), "N"),
        (lambda: rademacher_dim(2.5, 1e-3), "N"),
        (lambda: rademacher_dim(10, 0.0), "delta"),
        (lambda: rademacher_dim(10, 1.0), "delta"),
        (lambda: rademacher_dim(10, float("nan")), "delta"),
        (lambda: rademacher_dim(10, 1e-3, mu=0.0), "mu"),
        (lambda: rademacher_dim(10, 1e-3, mu=1.0), "mu"),
        (lambda: rademacher_dim(10, 1e-3, rule="chernoff"), "rule"),
        (lambda: rademacher_pair_tail(0), "d_e"),
        (lambda: rademacher_pair_tail(5, 1.5), "mu"),
    ],
)
def test_bad_arguments_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


@pytest.mark.parametrize("mu", [1e-300, 1e-160, 1e-10, 1e-4])
def test_a_tiny_mu_is_refused_before_any_work_with_the_estimate(mu):
    with pytest.raises(ValueError, match=r"needs d_e up to about .* raise mu or delta"):
        rademacher_dim(16, 1e-3, mu)


# --------------------------------------------------------------------------- the builders


@pytest.mark.parametrize("N, mu_max, delta, seed", [(100, 0.5, 1e-3, 3), (300, 0.5, 0.99, 2)])
def test_rademacher_codebook_is_the_construction_at_the_rules_d_e(N, mu_max, delta, seed):
    """The bound picks d_e, the construction draws: the same codes, coherence and draws as
    coherent_rademacher at rademacher_dim's d_e and the same seed; params add delta and rule."""
    book = rademacher_codebook(N, mu_max=mu_max, delta=delta, generator=seeded(seed))
    d_e = rademacher_dim(N, delta, mu_max)
    built = coherent_rademacher(N, d_e, mu_max=mu_max, generator=seeded(seed))
    assert book.d_e == d_e and torch.equal(book.omega, built.omega) and book.mu == built.mu
    assert list(book.params.items()) == [
        ("N", N),
        ("d_e", d_e),
        ("mu_max", mu_max),
        ("delta", delta),
        ("rule", "exact"),
        ("tries", built.params["tries"]),
    ]
    via = build_codebook(N, kind="rademacher", mu_max=mu_max, delta=delta, generator=seeded(seed))
    assert torch.equal(via.omega, book.omega) and via.params == book.params


def test_experimental_codebook_adds_the_expected_violations_to_the_draw():
    book = experimental_codebook(100, generator=seeded(11))
    drawn = experimental_codes(100, generator=seeded(11))
    assert torch.equal(book.omega, drawn.omega) and book.mu == drawn.mu
    expected = math.comb(100, 2) * rademacher_pair_tail(23, 0.5)
    assert list(book.params) == [
        "N",
        "d_e",
        "rule",
        "expected_violations",
        "n_violations",
        "satisfies_assumption3",
    ]
    assert book.params == {**drawn.params, "expected_violations": expected}


def test_build_codebook_rs_hadamard_is_the_construction():
    for N, d_e in ((100, None), (64, 300)):
        book = build_codebook(N, d_e=d_e, dtype=torch.float64)
        built = padded_rs_hadamard_codebook(N, d_e=d_e, dtype=torch.float64)
        assert torch.equal(book.omega, built.omega) and book.params == built.params
    plain = rs_hadamard_codebook(100)
    assert torch.equal(padded_rs_hadamard_codebook(100).omega, plain.omega)
    with pytest.raises(ValueError, match="d_e must be >= 64 for an rs-hadamard code of N=100"):
        padded_rs_hadamard_codebook(100, d_e=63)


def test_coherent_rademacher_refuses_after_max_tries():
    with pytest.raises(ValueError, match="max_tries=1 draws all had coherence > mu_max=0.1"):
        coherent_rademacher(50, 8, mu_max=0.1, generator=seeded(0), max_tries=1)


# --------------------------------------------------------------------------- the old paths


def test_old_paths_import_with_a_warning_for_the_bounds_and_none_for_the_builders():
    """qstr.constructions.codes.rademacher_dim / rademacher_pair_tail / RADEMACHER_DIM_MAX are
    the bounds module's, with a DeprecationWarning naming their new home; build_codebook,
    rademacher_codebook and experimental_codebook are the same functions, without one."""
    for name in ("rademacher_dim", "rademacher_pair_tail", "RADEMACHER_DIM_MAX"):
        old = via_old_path(functools.partial(getattr, codes, name), f"qstr.bounds.codebooks.{name}")
        assert old is getattr(codebooks, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from qstr.constructions.codes import build_codebook as old  # noqa: PLC0415 - the old path

        assert old is build_codebook
        assert codes.rademacher_codebook is rademacher_codebook
        assert codes.experimental_codebook is experimental_codebook
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        codes.nothing  # noqa: B018 - the attribute access is the test
