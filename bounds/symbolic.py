"""Sympy forms of the Theorem 4 bound (seed; conference Thm 3), transcribed independently of
``bounds.transformer`` so agreement is a real check, and the sympy-limit certificate that its
sample size is O((ln N)^5). Derivation: docs/derivations/theorem4.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

import mpmath
import sympy as sp

from qstr.constructions import validate
from qstr.bounds.search import smallest_true
from qstr.bounds.transformer import Theorem4Params

__all__ = [
    "n",
    "N",
    "u",
    "bound_expr",
    "sample_size_from_expr",
    "majorant_terms",
    "majorant_expr",
    "polylog_certificate",
    "PolylogCertificate",
    "leading_sample_size_expr",
    "leading_constants",
    "limit_ratio",
    "polylog_degree",
    "ffn_sample_size_expr",
]

n = sp.Symbol("n", positive=True)
N = sp.Symbol("N", positive=True)
u = sp.Symbol("u", positive=True)  # u = ln N in the asymptotic forms
_E = sp.E


def _q(x) -> sp.Expr:
    """A float parameter as the exact rational of its shortest repr (0.01 -> 1/100)."""
    if isinstance(x, sp.Basic):
        return x
    if isinstance(x, int):
        return sp.Integer(x)
    return sp.Rational(repr(float(x)))


def _consts(params: Theorem4Params) -> dict:
    P = params
    c2 = sp.Rational(P.d, P.q) if P.c is None else _q(P.c) ** 2
    K = _q(P.r_a) * _q(P.r_w)
    return dict(
        q=sp.Integer(P.q),
        d=sp.Integer(P.d),
        m=sp.Integer(P.m_g),
        K=K,
        eps=_q(P.eps_2nn),
        Cx=_q(P.C_x),
        Cy=_q(P.C_y),
        s=_q(P.s),
        mu=_q(P.mu),
        delta=_q(P.delta),
        c2=c2,
    )


def bound_expr(params: Theorem4Params, n_sym: sp.Symbol = n, N_sym: sp.Symbol = N) -> sp.Expr:
    """The Theorem 4 bound R(Theta_hat) <= B(n, N) as an exact sympy expression
    (theorem4.md, section 9).

    B = 4 eps + tail + estimation + truncation with every intermediate quantity written out
    (``Max`` for the maxima, ``ceiling`` for the default code dimension).
    """
    C = _consts(params)
    q, d, m, K, eps, Cx, Cy, s, mu, delta, c2 = (
        C[k] for k in "q d m K eps Cx Cy s mu delta c2".split()
    )
    nn, NN = n_sym, N_sym
    r_x = sp.sqrt(3 * Cx * _E * d * sp.log(nn * NN))
    r_z = sp.sqrt(r_x**2 + c2 * (q + 1))
    d_e = sp.ceiling(8 * sp.log(NN**2 / delta)) if params.d_e is None else sp.Integer(params.d_e)
    D_e = d + (q + 1) * d_e
    alpha = sp.Max(0, sp.log((NN - 1) * 2 * K * sp.sqrt(q) * r_x / sp.sqrt(eps))) / (c2 * (1 - mu))
    r_qk = alpha * sp.sqrt(d_e)
    p = sp.Max(1, sp.log(2 * (1 + 3 / delta) * sp.sqrt(nn)))

    def psi(pp):
        r = sp.Max(2 * pp, 2 * sp.log(NN))
        return r * NN ** (2 / r)

    tau = _E * sp.Max(
        4 * Cy * (2 * p) ** (2 * s),
        4 * K**2 * q * Cx * d * psi(p) + 4 * K**2 * (q * c2 * (q + 1) + 1),
    )
    P = m * (q * D_e + 2) + q * D_e**2
    A = 6 * K * sp.Max(sp.sqrt(q * r_z**2 + 1), sp.sqrt(q) * r_qk * r_z**3)
    log_cov = P * sp.log(1 + 2 * A * sp.sqrt(nn / tau))
    rad = 4 * tau / sp.sqrt(nn) + 6 * tau * sp.sqrt(log_cov / nn)
    estimation = 2 * rad + tau * (
        3 * sp.sqrt(sp.log(6 / delta) / (2 * nn)) + sp.sqrt(sp.log(3 / delta) / (2 * nn))
    )
    truncation = 2 * tau * sp.exp(-p) * (1 + 3 / delta)
    tail = (
        2
        * (K**2 * (q * Cx * d * psi(2) + q * c2 * (q + 1) + 1) + Cy * 16**s)
        * sp.sqrt(NN * (nn * NN) ** sp.Rational(-3, 2))
    )
    return 4 * eps + tail + estimation + truncation


def sample_size_from_expr(
    target: float, N_value: int, params: Theorem4Params, *, dps: int = 30
) -> int:
    """Smallest n (bracketing + bisection, as in ``theorem4_sample_size``) with
    B(n, N_value) <= target, B evaluated from :func:`bound_expr` with mpmath at ``dps`` digits."""
    target = validate.positive_float("target", target)
    N_value = validate.positive_int("N_value", N_value, minimum=2)
    if not target > 4 * params.eps_2nn:
        raise ValueError(
            f"target must exceed the floor 4 eps_2nn = {4 * params.eps_2nn:g}, got {target:g}"
        )
    f = sp.lambdify(n, bound_expr(params).subs(N, N_value), modules="mpmath")
    with mpmath.workdps(dps):
        found = smallest_true(lambda k: f(mpmath.mpf(k)) <= target, limit=10**300, log_bisect=True)
    if found is None:
        raise ValueError(f"target = {target:g} is not reached for n <= 1e300")
    return found


def majorant_terms(
    params: Theorem4Params, n_lo: sp.Expr = n, n_up: Optional[sp.Expr] = None, lnN: sp.Expr = u
) -> Dict[str, sp.Expr]:
    """Smooth upper bounds of the bound's terms, in terms of ln N (``lnN``), valid for every integer
    n in [n_lo, n_up] (theorem4.md, section 10).

    Replacements (each makes the term larger, and each term is increasing in the replaced
    quantity): ceiling(x) <= x + 1;  max(0, ln((N-1) X)) <= ln N + ln(1 + X);  max(a, b) <= a + b;
    psi(p) = min_{r >= 2p} r N^{2/r} <= e (2p + 2 ln N). Quantities increasing in n (r_x, p, tau,
    the covering argument) take n_up, factors decreasing in n (1/sqrt n, n^{-3/4}) take n_lo.
    The log-covering factor is split with ln(1 + x y) <= ln(1 + x) + ln(1 + y) (x, y >= 0).

    Returns a dict with keys 'approximation', 'beta' (8 tau / sqrt n),
    'dudley' (12 tau sqrt(P L / n)),
    'concentration', 'truncation', 'tail', and the pieces 'tau', 'P', 'L_A', 'L_n' (L <= L_A + L_n).
    """
    C = _consts(params)
    q, d, m, K, eps, Cx, Cy, s, mu, delta, c2 = (
        C[k] for k in "q d m K eps Cx Cy s mu delta c2".split()
    )
    n_up = n_lo if n_up is None else n_up
    r_x = sp.sqrt(3 * Cx * _E * d * (sp.log(n_up) + lnN))
    r_z = sp.sqrt(r_x**2 + c2 * (q + 1))
    d_e = 8 * (2 * lnN - sp.log(delta)) + 1 if params.d_e is None else sp.Integer(params.d_e)
    D_e = d + (q + 1) * d_e
    alpha = (lnN + sp.log(1 + 2 * K * sp.sqrt(q) * r_x / sp.sqrt(eps))) / (c2 * (1 - mu))
    r_qk = alpha * sp.sqrt(d_e)

    def psi(pp):
        return _E * (2 * pp + 2 * lnN)

    def tau_at(nv):
        p = sp.log(2 * (1 + 3 / delta) * sp.sqrt(nv))  # >= ln 8 > 1, so Max(1, .) is inactive
        return _E * (
            4 * Cy * (2 * p) ** (2 * s)
            + 4 * K**2 * q * Cx * d * psi(p)
            + 4 * K**2 * (q * c2 * (q + 1) + 1)
        )

    tau = tau_at(n_up)  # tau is increasing in n: tau(n_lo) <= tau(n) <= tau(n_up)
    tau_lo = tau_at(n_lo)
    P = m * (q * D_e + 2) + q * D_e**2
    A = 6 * K * (sp.sqrt(q * r_z**2 + 1) + sp.sqrt(q) * r_qk * r_z**3)
    L_A = sp.log(1 + 2 * A)
    L_n = sp.log(1 + sp.sqrt(n_up / tau_lo))
    sq = sp.sqrt(n_lo)
    out = {
        "approximation": 4 * eps,
        "beta": 8 * tau / sq,
        "dudley": 12 * tau * sp.sqrt(P * (L_A + L_n)) / sq,
        "concentration": tau
        * (3 * sp.sqrt(sp.log(6 / delta) / 2) + sp.sqrt(sp.log(3 / delta) / 2))
        / sq,
        # 2 tau e^{-p} (1 + 3/delta) with e^{-p} = 1 / (2 (1 + 3/delta) sqrt(n));
        # tau at n_up, sqrt at n_lo
        "truncation": tau / sq,
        "tail": 2
        * (K**2 * (q * Cx * d * psi(2) + q * c2 * (q + 1) + 1) + Cy * 16**s)
        * n_lo ** sp.Rational(-3, 4)
        * sp.exp(-lnN / 4),
        "tau": tau,
        "P": P,
        "L_A": L_A,
        "L_n": L_n,
        # L_A <= ln 2 + max(L_rho, L_c + L_alpha + L_de + L_rz)  (1 + x + y <= 2 max(1 + x, 1 + y),
        # ln(1 + xy) <= ln(1 + x) + ln(1 + y), ln(1 + r^3) <= 3 ln(1 + r)): simpler pieces
        # for limits
        "L_rho": sp.log(1 + 12 * K * sp.sqrt(q * r_z**2 + 1)),
        "L_c": sp.log(1 + 12 * K * sp.sqrt(q)),
        "L_alpha": sp.log(1 + alpha),
        "L_de": sp.log(1 + sp.sqrt(d_e)),
        "L_rz": 3 * sp.log(1 + r_z),
    }
    return out


_SUM_KEYS = ("approximation", "beta", "dudley", "concentration", "truncation", "tail")


def majorant_expr(params: Theorem4Params, n_sym: sp.Symbol = n, N_sym: sp.Symbol = N) -> sp.Expr:
    """The smooth majorant M(n, N) >= B(n, N) (n_lo = n_up = n, ln N = log(N_sym))."""
    t = majorant_terms(params, n_sym, n_sym, sp.log(N_sym))
    return sp.Add(*(t[k] for k in _SUM_KEYS))


@dataclass(frozen=True)
class PolylogCertificate:
    """lim_{N -> oo} of the majorant over integers n in [Lam (ln N)^k, 2 Lam (ln N)^k],
    term by term."""

    k: int
    Lam: sp.Expr
    limits: Dict[str, sp.Expr]  # limit of each term (Dudley via the product of the factor limits)
    factors: Dict[str, sp.Expr]  # lim tau/u, P/u^2, (L_A + L_n)/ln u, u^4 ln u / n_lo
    value: sp.Expr  # sum of the limits

    @property
    def proves_polylog(self) -> bool:
        """True when the limit is the floor 4 eps_2NN: then n(N) <= 2 Lam (ln N)^k
        for all large N."""
        return (
            bool(self.value.is_finite)
            and all(bool(v.is_finite) for v in self.limits.values())
            and all(v == 0 for key, v in self.limits.items() if key != "approximation")
        )


def polylog_certificate(params: Theorem4Params, k: int = 5, Lam=1) -> PolylogCertificate:
    """Sympy proof that the Theorem 4 sample size is O((ln N)^k): the limit of the majorant.

    Substitute ln N = u and n in [n_lo, n_up] = [Lam u^k, 2 Lam u^k] (the integer ceil(Lam u^k)
    lies there once Lam u^k >= 1). Each term's limit is a sympy ``limit`` in u; the Dudley term,
    too slow as one expression, is handled by the algebra of limits:

        dudley^2 = 144 (tau/u)^2 (P/u^2) ((L_A + L_n)/ln u) (u^4 ln u / n_lo),

    a product of four factors whose limits (for L_A: the limit of the upper bound
    ln 2 + max(L_rho, L_c + L_alpha + L_de + L_rz), see :func:`majorant_terms`) are computed
    separately (each finite, the last 0 for k >= 5 and oo for k <= 4), so limsup dudley^2 is
    bounded by their product. If every term but the approximation tends to 0, the majorant
    tends to 4 eps_2NN; then for any target > 4 eps_2NN and all large N, ceil(Lam (ln N)^k)
    samples suffice. "Large" is astronomically large for realistic constants (ln N ~ 1e16 for
    the default parameters and Lam = 1): this is an asymptotic-class statement. Wall time
    about 2-3 s in all, no single limit above ~1 s on an idle core.
    """
    k = validate.positive_int("k", k)
    Lam = _q(Lam)
    if not Lam > 0:
        raise ValueError(f"Lam must be > 0, got {Lam}")
    n_lo, n_up = Lam * u**k, 2 * Lam * u**k
    t = majorant_terms(params, n_lo, n_up, u)
    lim = lambda e: sp.limit(e, u, sp.oo)  # noqa: E731
    factors = {
        "tau/u": lim(t["tau"] / u),
        "P/u^2": lim(t["P"] / u**2),
        "L/ln u": sp.Max(
            lim(t["L_rho"] / sp.log(u)),
            sum(lim(t[key] / sp.log(u)) for key in ("L_c", "L_alpha", "L_de", "L_rz")),
        )
        + lim(t["L_n"] / sp.log(u)),
        "u^4 ln u/n": lim(u**4 * sp.log(u) / n_lo),
    }
    f = factors
    if all(v.is_finite for v in f.values()):
        dud = sp.sqrt(144 * f["tau/u"] ** 2 * f["P/u^2"] * f["L/ln u"] * f["u^4 ln u/n"])
    else:
        dud = sp.oo  # inconclusive: the product has an infinite factor
    limits = {key: lim(t[key]) for key in ("beta", "concentration", "truncation", "tail")}
    limits["dudley"] = sp.simplify(dud)
    limits["approximation"] = t["approximation"]
    value = sp.Add(*limits.values())
    return PolylogCertificate(k=k, Lam=Lam, limits=limits, factors=factors, value=value)


def leading_constants(params: Theorem4Params) -> Dict[str, sp.Expr]:
    """Leading-order constants as N -> oo with n = polylog(N) (theorem4.md, section 11):

    tau ~ tau_c ln N, tau_c = 2 e^2 (4 K^2 q) C_x d;
    P ~ P_c (ln N)^{2j} with j = 1, P_c = 256 q (q+1)^2 for the default d_e
    (j = 0, P_c = P for a fixed d_e);
    ln(1 + 2 A sqrt(n / tau)) ~ L_c ln ln N with
    L_c = a + (k_n - 1)/2, a = 3 (default d_e) or 5/2 (fixed d_e), k_n = 2 + 2j.
    """
    C = _consts(params)
    q, d, m, K, Cx = C["q"], C["d"], C["m"], C["K"], C["Cx"]
    tau_c = 2 * _E**2 * 4 * K**2 * q * Cx * d
    if params.d_e is None:
        j, P_c, a = 1, 256 * q * (q + 1) ** 2, sp.Integer(3)
    else:
        De = d + (q + 1) * params.d_e
        j, P_c, a = 0, m * (q * De + 2) + q * De**2, sp.Rational(5, 2)
    k_n = 2 + 2 * j
    return {
        "tau_c": tau_c,
        "P_c": sp.Integer(P_c),
        "L_c": a + sp.Rational(k_n - 1, 2),
        "k_n": sp.Integer(k_n),
    }


def leading_sample_size_expr(
    params: Theorem4Params, target: float, N_sym: sp.Symbol = N
) -> sp.Expr:
    """Leading asymptotic form of n(N) for fixed target, N -> oo:

        n(N) ~ 144 tau_c^2 P_c L_c (ln N)^{k_n} ln ln N / (target - 4 eps_2NN)^2,

    k_n = 4 for the default d_e = ceil(8 ln(N^2/delta)) (k_n = 2 for a fixed d_e). Only the Dudley
    term 12 tau sqrt(P L / n) survives at leading order (theorem4.md, section 11). This is an
    asymptotic equivalence, not an inequality: the ratio to the exact n(N) tends to 1 only as
    ln ln N grows, i.e. extremely slowly (see the table in the note).
    """
    target = validate.positive_float("target", target)
    gap = _q(target) - 4 * _q(params.eps_2nn)
    if not gap > 0:
        raise ValueError(
            f"target must exceed the floor 4 eps_2nn = {4 * params.eps_2nn:g}, got {target:g}"
        )
    c = leading_constants(params)
    L = sp.log(N_sym)
    return 144 * c["tau_c"] ** 2 * c["P_c"] * c["L_c"] * L ** c["k_n"] * sp.log(L) / gap**2


def ffn_sample_size_expr(d: int, N_sym: sp.Symbol = N) -> sp.Expr:
    """Theorem 6 (conference Thm 9): n >= N d."""
    return N_sym * validate.positive_int("d", d)


def limit_ratio(expr: sp.Expr, N_sym: sp.Symbol, k) -> sp.Expr:
    """lim_{N -> oo} expr / (ln N)^k (sympy.limit)."""
    return sp.limit(expr / sp.log(N_sym) ** k, N_sym, sp.oo)


def polylog_degree(expr: sp.Expr, N_sym: sp.Symbol, kmax: int = 12) -> Optional[int]:
    """Smallest integer 0 <= k <= kmax with lim expr / (ln N)^k finite; None if there is none
    (polynomial growth such as the FFN's N d)."""
    for k in range(kmax + 1):
        if limit_ratio(expr, N_sym, k).is_finite:
            return k
    return None
