"""Tests for bounds/symbolic.py: the sympy Theorem 4 bound against the numeric one, its leading form
and the polylog certificate. Derivation: docs/derivations/theorem4.md."""

import math

import pytest
import sympy as sp

from qstr.bounds import symbolic as sy
from qstr.bounds.transformer import (
    Theorem4Params,
    ffn_sample_size,
    theorem4_bound,
    theorem4_sample_size,
)

P0 = Theorem4Params.default()
TARGET = 0.1

POINTS = [(1, 2), (7, 3), (1000, 16), (10**12, 2**10), (10**20, 2**20), (3 * 10**25, 2**40)]


@pytest.mark.parametrize(
    "params",
    [
        P0,
        Theorem4Params.default(q=3, d=7, s=2.5, C_y=3.0, mu=0.25, c=1.0),
        Theorem4Params.default(d_e=40, delta=1e-3),
    ],
)
def test_sympy_bound_matches_numeric(params):
    f = sp.lambdify((sy.n, sy.N), sy.bound_expr(params), "mpmath")
    M = sp.lambdify((sy.n, sy.N), sy.majorant_expr(params), "mpmath")
    for n_, N_ in POINTS:
        num = theorem4_bound(n_, N_, params).total
        assert float(f(n_, N_)) == pytest.approx(num, rel=1e-12)
        assert float(M(n_, N_)) >= num  # the smooth majorant used for the limits is an upper bound


def test_sympy_sample_size_matches_numeric():
    for N_ in (2**6, 2**20):
        a = sy.sample_size_from_expr(TARGET, N_, P0)
        b = theorem4_sample_size(TARGET, N_, P0)
        assert a == pytest.approx(b, rel=1e-12)  # equal up to double rounding of the numeric bound


def test_sympy_leading_form_and_degrees():
    lead = sy.leading_sample_size_expr(P0, TARGET)
    # 144 * (64 e^2)^2 * 4608 * 9/2 / 0.06^2
    assert (
        sp.simplify(lead - 3397386240000 * sp.E**4 * sp.log(sy.N) ** 4 * sp.log(sp.log(sy.N))) == 0
    )
    assert sy.limit_ratio(lead, sy.N, 5) == 0
    assert sy.limit_ratio(lead, sy.N, 4) == sp.oo
    assert sy.polylog_degree(lead, sy.N) == 5
    ffn = sy.ffn_sample_size_expr(4)
    assert all(ffn.subs(sy.N, v) == ffn_sample_size(v, 4) for v in (2, 17, 2**20))  # n >= N d
    assert sy.limit_ratio(ffn, sy.N, 5) == sp.oo
    assert sy.polylog_degree(ffn, sy.N, kmax=8) is None
    # a fixed code dimension removes (ln N)^2: n ~ (ln N)^2 ln ln N
    assert (
        sy.polylog_degree(sy.leading_sample_size_expr(Theorem4Params.default(d_e=50), TARGET), sy.N)
        == 3
    )
    # the exact sample size approaches the leading form only slowly (theorem4.md, section 11)
    f = sp.lambdify(sy.N, lead, "mpmath")
    ratios = [theorem4_sample_size(TARGET, 2**k, P0) / float(f(2**k)) for k in (20, 100, 1000)]
    assert ratios[0] > ratios[1] > ratios[2] > 1


def test_polylog_certificate():
    cert = sy.polylog_certificate(P0, k=5)
    assert cert.proves_polylog
    assert cert.value == sp.Rational(
        1, 25
    )  # 4 eps_2NN: the majorant at n = (ln N)^5 tends to the floor
    assert cert.factors["tau/u"] == 64 * sp.E**2 and cert.factors["P/u^2"] == 4608
    assert cert.factors["L/ln u"] == 5
    # consistency with the leading constants
    c = sy.leading_constants(P0)
    assert c["tau_c"] == cert.factors["tau/u"] and c["P_c"] == cert.factors["P/u^2"]
    # "large N" is astronomically large here (n(N) <= (ln N)^5 needs ln N ~ 1e16, theorem4.md
    # section 11); what is checkable is the trend: n(N) / (ln N)^5 keeps falling
    ks = (20, 100, 1000, 10000)
    r = [theorem4_sample_size(TARGET, 2**k, P0) / (k * math.log(2)) ** 5 for k in ks]
    assert all(
        a > 5 * b for a, b in zip(r, r[1:], strict=False)
    )  # measured 4.9e15, 4.6e13, 3.2e12, 3.8e11


def test_a_certificate_proves_only_when_every_term_but_the_floor_vanishes():
    """proves_polylog asks for limits exactly 0 outside the approximation floor: a finite positive
    limit (the beta term 8 tau / sqrt(n) at n = Lam (ln N)^2 tends to 8 tau_c / sqrt(Lam)) is no
    proof. polylog_certificate never produces one (a finite Dudley limit needs k >= 5, where every
    other term vanishes), so it is hand-built here."""
    cert = sy.polylog_certificate(P0, k=5)
    assert cert.proves_polylog and not sy.polylog_certificate(P0, k=4).proves_polylog
    beta = {**cert.limits, "beta": 8 * cert.factors["tau/u"]}
    for limits in (beta, {**cert.limits, "tail": sp.oo}):
        forged = sy.PolylogCertificate(
            k=5, Lam=1, limits=limits, factors=cert.factors, value=sp.Add(*limits.values())
        )
        assert not forged.proves_polylog


# ---------------------------------------------------------------- moved from the thm-4 claim


def test_sample_size_from_expr_is_the_least_n():
    """sample_size_from_expr returns the least n with B(n) <= target < B(n - 1) (target 1e6,
    N = 1024), the float search agrees within one, and the floor 4 eps_2nn as target is refused."""
    k = sy.sample_size_from_expr(1e6, 1024, P0)
    B = lambda nv: theorem4_bound(nv, 1024, P0).total  # noqa: E731
    assert B(k) <= 1e6 < B(k - 1)
    assert abs(theorem4_sample_size(1e6, 1024, P0) - k) <= 1
    with pytest.raises(ValueError):
        sy.sample_size_from_expr(4 * P0.eps_2nn, 1024, P0)


def test_polylog_degree_finite_branch():
    """polylog_degree((ln N)^2) = 2, and kmax itself is searched: ((ln N)^3, kmax = 3) = 3."""
    assert sy.polylog_degree(sp.log(sy.N) ** 2, sy.N) == 2
    assert sy.polylog_degree(sp.log(sy.N) ** 3, sy.N, kmax=3) == 3
