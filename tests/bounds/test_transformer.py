"""Tests for bounds/transformer.py (Props 3, 21; Theorem 4; Theorem 6 slope).

Derivations: docs/derivations/few-heads.md, docs/derivations/theorem4.md.
"""

import dataclasses
import math

import numpy as np
import pytest

from qstr.bounds.transformer import (
    C_APPROX,
    Theorem4Params,
    few_heads_floor,
    few_heads_floor_per_position,
    ffn_sample_size,
    floor_fraction,
    loglog_slope,
    theorem4_bound,
    theorem4_sample_size,
)

P0 = Theorem4Params.default()
NS = [2**k for k in (4, 8, 12, 16, 20)]
TARGET = 0.1

# --------------------------------------------------------------------------- few heads


def test_floor_hand_values():
    # Prop 21: q = 3, H = 1, d = 1 -> 1/2 * 2 * 2/3
    assert few_heads_floor(3, 1, 1, True) == pytest.approx(2 / 3, rel=1e-15)
    # Prop 3: q = 2, H = 1, d = 16 -> 1/2 * 2 * (1 - 18/32)
    assert few_heads_floor(2, 1, 16, False) == pytest.approx(0.4375, rel=1e-15)
    assert few_heads_floor_per_position(2, 1, 16, False) == pytest.approx(0.875, rel=1e-15)
    assert few_heads_floor_per_position(5, 2, 1, True) == pytest.approx(2 * 3 / 5, rel=1e-15)
    # even N gives the N=None value
    assert few_heads_floor(3, 1, 1, True, N=10) == few_heads_floor(3, 1, 1, True)


def test_floor_clipping():
    for q in (1, 2, 5):
        assert few_heads_floor(q, q, 1, True) == 0.0  # H = q: exactly zero
        assert few_heads_floor(q, q + 3, 1, True) == 0.0  # H > q: clipped, not negative
    assert few_heads_floor(2, 2, 16, False) == 0.0  # 2 (1 - 36/32) < 0 -> 0
    assert few_heads_floor(3, 1, 1, False) == 0.0  # Prop 3 is vacuous at d = 1
    # boundary H (q + d) = q d: q = d = 2, H = 1
    assert few_heads_floor(2, 1, 2, False) == 0.0


def test_floor_odd_N_fraction():
    assert floor_fraction(7) == pytest.approx(4 / 7)
    assert floor_fraction(None) == 0.5
    assert floor_fraction(2) == 0.5
    assert few_heads_floor(3, 1, 1, True, N=7) == pytest.approx(16 / 21, rel=1e-15)
    assert few_heads_floor(2, 1, 16, False, N=9) == pytest.approx(5 / 9 * 0.875, rel=1e-15)


def test_floor_monotone_in_heads_and_dimension():
    vals = [few_heads_floor(6, H, 1, True) for H in range(1, 8)]
    assert all(a > b for a, b in zip(vals[:6], vals[1:6], strict=False)) and vals[-1] == 0.0
    # Prop 3 approaches the restricted-style 2 (q - H)/q... only as d -> oo: 2 (1 - H/d - H/q)
    big_d = few_heads_floor_per_position(4, 1, 10**6, False)
    assert big_d == pytest.approx(2 * (1 - 1 / 4), abs=1e-5)


@pytest.mark.parametrize(
    "args, kw, name",
    [
        ((3, 1, 2, True), {}, "d"),  # restricted needs d == 1
        ((3, 0, 1, True), {}, "H"),
        ((3, -1, 4, False), {}, "H"),
        ((0, 1, 1, True), {}, "q"),
        ((3, 1, 0, False), {}, "d"),
        ((3, 1, -2, False), {}, "d"),
        ((3, 1, 1, 1), {}, "restricted"),  # not a bool
        ((3, 1, 1, True), {"N": 1}, "N"),
        ((3, 1, 1, True), {"N": 5}, "q"),  # q = 3 > N//2 = 2
        ((2.5, 1, 1, True), {}, "q"),
    ],
)
def test_floor_errors(args, kw, name):
    with pytest.raises(ValueError, match=name):
        few_heads_floor(*args, **kw)


# --------------------------------------------------------------------------- Theorem 4 pieces


def test_softmax_l1_linf_lipschitz_constant_one():
    """The attention-cover step (theorem4.md, section 3):
    ||softmax(s) - softmax(s')||_1 <= ||s - s'||_inf."""
    rng = np.random.default_rng(0)

    def sm(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    worst = 0.0
    for scale in (1e-3, 0.1, 1.0, 5.0):
        s = rng.normal(size=(4000, 7)) * 3
        v = rng.normal(size=(4000, 7)) * scale
        ratio = np.abs(sm(s + v) - sm(s)).sum(-1) / np.abs(v).max(-1)
        worst = max(worst, ratio.max())
    assert worst <= 1.0 + 1e-12
    # tight: N = 2, s = 0, s' - s = (c, -c), c -> 0 gives ratio -> 1 (Edelman et al. use 2)
    c = 1e-4
    r = np.abs(sm(np.array([c, -c])) - sm(np.zeros(2))).sum() / c
    assert r == pytest.approx(1.0, abs=1e-6)


def test_bound_structure_and_intermediates():
    n, N = 10**12, 2**10
    b = theorem4_bound(n, N, P0)
    assert b.total == pytest.approx(
        b.approximation + b.tail + b.estimation + b.truncation, rel=1e-14
    )
    assert b.approximation == C_APPROX * P0.eps_2nn == pytest.approx(0.04)
    assert min(b.tail, b.estimation, b.truncation) > 0
    assert b.r_x == pytest.approx(math.sqrt(3 * math.e * 4 * math.log(n * N)))
    assert b.r_z == pytest.approx(math.sqrt(b.r_x**2 + 4 * (1 + 1 / 2)))  # d (1 + 1/q)
    assert b.d_e == math.ceil(8 * math.log(N**2 / 0.05))
    assert b.D_e == 4 + 3 * b.d_e
    assert b.n_params == 16 * (2 * b.D_e + 2) + 2 * b.D_e**2
    assert b.confidence == pytest.approx(1 - 0.05 - (n * N) ** -0.5)
    # truncation term equals tau / sqrt(n) for the chosen p
    assert b.truncation == pytest.approx(b.tau / math.sqrt(n), rel=1e-12)
    # Lemma 11: alpha makes (N-1) e^{-alpha c^2 (1-mu)} 2 K sqrt(q) r_x exactly sqrt(eps)
    c2 = 4 / 2
    err = (N - 1) * math.exp(-b.alpha * c2 * (1 - 0.5)) * 2 * 1.0 * math.sqrt(2) * b.r_x
    assert err == pytest.approx(math.sqrt(P0.eps_2nn), rel=1e-10)
    assert b.r_qk == pytest.approx(b.alpha * math.sqrt(b.d_e))
    assert b.R == pytest.approx(math.sqrt(b.r_ma**2 + b.R_mw**2 + 2 * b.r_qk**2))
    assert (b.r_ma, b.R_mw) == (pytest.approx(0.25), pytest.approx(4.0))


def test_alpha_zero_when_construction_is_trivially_accurate():
    p = Theorem4Params.default(r_a=1e-6, r_w=1e-6, eps_2nn=1.0)
    assert theorem4_bound(4, 2, p).alpha == 0.0


def test_bound_decreasing_in_n():
    ns = sorted({int(round(x)) for x in np.logspace(0, 45, 400)})
    for params in (
        P0,
        Theorem4Params.default(q=1, d=1, m_g=1),
        Theorem4Params.default(q=5, d=50, r_a=3, r_w=2),
        Theorem4Params.default(delta=1e-6),
        Theorem4Params.default(mu=0.0, d_e=20),
    ):
        for N in (2, 16, 2**20, 2**60):
            vals = np.array([theorem4_bound(n, N, params).total for n in ns])
            assert np.all(np.diff(vals) < 0), (params, N)
    # the bound tends to the floor 4 eps
    assert theorem4_bound(10**200, 2**20, P0).total == pytest.approx(P0.floor, rel=1e-6)


def test_bound_polylog_in_N_at_fixed_n():
    excess = lambda N: theorem4_bound(10**20, N, P0).total - P0.floor  # noqa: E731
    sl = loglog_slope(excess, NS)
    assert np.all(np.diff(sl) < 0) and 0 < sl[-1] < 0.08  # measured 0.173 0.120 0.088 0.071


def test_sample_size_crossing_and_monotone_in_target():
    N = 2**12
    n_star = theorem4_sample_size(TARGET, N, P0)
    assert theorem4_bound(n_star, N, P0).total <= TARGET < theorem4_bound(n_star - 1, N, P0).total
    targets = [0.045, 0.05, 0.1, 0.5, 1.0, 10.0, 1e3, 1e6]
    ns = [theorem4_sample_size(t, N, P0) for t in targets]
    assert all(a > b for a, b in zip(ns, ns[1:], strict=False))
    assert theorem4_sample_size(1e12, N, P0) == 1  # bound(1) is below a huge target


def test_sample_size_rejects_targets_at_or_below_floor():
    with pytest.raises(ValueError, match=r"target.*floor.*0\.04"):
        theorem4_sample_size(0.04, 2**8, P0)
    with pytest.raises(ValueError, match="target"):
        theorem4_sample_size(0.01, 2**8, P0)
    with pytest.raises(ValueError, match="target"):
        theorem4_sample_size(-1.0, 2**8, P0)


def test_sample_size_table_and_slopes():
    ns = [theorem4_sample_size(TARGET, N, P0) for N in NS]
    # the table of docs/derivations/theorem4.md, section 11
    expected = [1.641e20, 4.678e20, 9.634e20, 1.643e21, 2.525e21]
    for a, b in zip(ns, expected, strict=True):
        assert a == pytest.approx(b, rel=1e-3)
    sl = np.diff([math.log(x) for x in ns]) / np.diff(np.log(NS))
    assert np.allclose(
        sl, loglog_slope(lambda N: theorem4_sample_size(TARGET, N, P0), NS), rtol=1e-12
    )
    # slopes decrease; measured 0.378 0.261 0.192 0.155 -> honest threshold 0.16 on the last step
    assert np.all(np.diff(sl) < 0) and sl[-1] < 0.16
    # and keep falling toward 0 far out (polylog), unlike the FFN's slope 1
    far = loglog_slope(
        lambda N: theorem4_sample_size(TARGET, N, P0), [2**20, 2**100, 2**200, 2**1000]
    )
    assert np.all(np.diff(far) < 0) and far[-1] < 0.02


def test_ffn_slope_exactly_one():
    assert ffn_sample_size(2**10, 4) == 4096
    sl = loglog_slope(lambda N: ffn_sample_size(N, 10), NS)
    assert np.allclose(sl, 1.0, rtol=0, atol=1e-12)
    # the Transformer needs more samples at small N (loose constants) but the FFN overtakes it
    # once N d exceeds n(N): polynomial vs polylog
    N_big = 2**80
    assert ffn_sample_size(N_big, 4) > theorem4_sample_size(TARGET, N_big, P0)


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(q=0), "q"),
        (dict(d=0), "d"),
        (dict(m_g=0), "m_g"),
        (dict(r_a=0.0), "r_a"),
        (dict(eps_2nn=-1.0), "eps_2nn"),
        (dict(mu=1.0), "mu"),
        (dict(mu=-0.1), "mu"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(s=-1.0), "s"),
        (dict(c=0.0), "c"),
        (dict(d_e=0), "d_e"),
        (dict(C_x=float("nan")), "C_x"),
    ],
)
def test_params_validation(kw, name):
    with pytest.raises(ValueError, match=name):
        Theorem4Params.default(**kw)


def test_bound_argument_validation():
    with pytest.raises(ValueError, match="N"):
        theorem4_bound(10, 1, P0)
    with pytest.raises(ValueError, match="n"):
        theorem4_bound(0, 16, P0)
    with pytest.raises(ValueError, match="params"):
        theorem4_bound(10, 16, {"q": 2})
    with pytest.raises(ValueError, match="Ns"):
        loglog_slope(lambda N: N, [4])
    with pytest.raises(ValueError, match="Ns"):
        loglog_slope(lambda N: N, [8, 4])


@pytest.mark.parametrize("Ns", [[4, 16, 16], [16, 4, 64], [0, 4, 16], [-4, 4, 16]])
def test_loglog_slope_refuses_ns_not_positive_and_increasing(Ns):
    with pytest.raises(ValueError, match="positive and strictly increasing"):
        loglog_slope(lambda N: N, Ns)


@pytest.mark.parametrize("q, d, restricted, N", [(3, 1, True, 8), (2, 16, False, 8)])
def test_floor_share_counted_by_hand(q, d, restricted, N):
    """Props 3 and 21 at the claims' sizes (moved from the prop-3 and prop-21 claims): the share of
    positions i >= N//2 counted by hand is floor_fraction(N) at N, N + 1 and 2q + 1, and
    few_heads_floor(N) is that share of the per-position floor; 1/2 for N = None; q > N//2 refused;
    H = q, q + 1, 2q, 3q heads have floor exactly 0."""
    per = few_heads_floor_per_position(q, q - 1, d, restricted)
    assert floor_fraction() == 0.5 and few_heads_floor(q, q - 1, d, restricted) == 0.5 * per
    for H in (q, q + 1, 2 * q, 3 * q):
        assert few_heads_floor_per_position(q, H, d, restricted) == 0.0
    for n in (N, N + 1, 2 * q + 1):
        share = sum(1 for i in range(n) if i >= n // 2) / n
        assert floor_fraction(n) == share
        assert few_heads_floor(q, q - 1, d, restricted, N=n) == share * per
    with pytest.raises(ValueError):
        few_heads_floor(q, q - 1, d, restricted, N=2 * q - 1)


# ---------------------------------------------------------------- Theorem 4's record
# (moved from the thm-4 claim; docs/derivations/theorem4.md)


def _alpha(P, n, N):
    """alpha = max(0, ln((N - 1) 2 K sqrt(q) r_x / sqrt(eps_2nn))) / (c^2 (1 - mu))."""
    c2 = P.d / P.q if P.c is None else P.c**2
    r_x = math.sqrt(3 * P.C_x * math.e * P.d * math.log(n * N))
    arg = (N - 1) * 2 * P.r_a * P.r_w * math.sqrt(P.q) * r_x / math.sqrt(P.eps_2nn)
    return max(0.0, math.log(arg)) / (c2 * (1 - P.mu))


@pytest.mark.parametrize(
    "P, points",
    [
        (
            Theorem4Params.default(q=4, r_a=2.0),
            [(10**2, 16), (10**4, 16), (10**6, 1024), (10**9, 2**20), (10**12, 2**16)],
        ),
        (Theorem4Params.default(C_x=1e-6, c=0.5, C_y=1e-3), [(1, 2), (10, 2)]),
    ],
)
def test_theorem4_record_fields_as_defined(P, points):
    """theorem4_bound's record against its definitions: alpha (0 where the logarithm is),
    r_qk = alpha sqrt(d_e), D_e = d + (q + 1) d_e, R^2 = r_ma^2 + R_mw^2 + q r_qk^2 with
    r_ma = r_a / sqrt(m), R_mw = sqrt(m) r_w, the parameter count m (q D_e + 2) + q D_e^2,
    total = sum of its four terms, and terms() is every field under its own name."""
    for n, N in points:
        b = theorem4_bound(n, N, P)
        assert b.alpha == pytest.approx(_alpha(P, n, N), rel=1e-12, abs=1e-12)
        assert b.r_qk == pytest.approx(b.alpha * math.sqrt(b.d_e), rel=1e-12, abs=1e-12)
        assert b.D_e == P.d + (P.q + 1) * b.d_e
        assert b.R**2 == pytest.approx(b.r_ma**2 + b.R_mw**2 + P.q * b.r_qk**2, rel=1e-12)
        assert b.r_ma == pytest.approx(P.r_a / math.sqrt(P.m_g), rel=1e-12)
        assert b.R_mw == pytest.approx(math.sqrt(P.m_g) * P.r_w, rel=1e-12)
        assert b.n_params == P.m_g * (P.q * b.D_e + 2) + P.q * b.D_e**2
        terms = b.approximation + b.tail + b.estimation + b.truncation
        assert b.total == pytest.approx(terms, rel=1e-12)
        t = b.terms()
        assert t == {k: getattr(b, k) for k in b.__dataclass_fields__}
        assert (t["n"], t["N"]) == (n, N)


def test_theorem4_prefactor_given_as_the_default():
    """c = sqrt(d/q) given (Appendix A.1's default) has the bound of c = None; 2 sqrt(d/q) not."""
    c0 = math.sqrt(P0.d / P0.q)
    given, doubled = dataclasses.replace(P0, c=c0), dataclasses.replace(P0, c=2 * c0)
    for n, N in [(10**2, 16), (10**4, 16), (10**6, 1024)]:
        default = theorem4_bound(n, N, P0).total
        assert theorem4_bound(n, N, given).total == pytest.approx(default, rel=1e-12)
        assert theorem4_bound(n, N, doubled).total != theorem4_bound(n, N, P0).total
