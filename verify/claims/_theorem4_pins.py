"""40-digit evaluations of the bounds Lemmas 12-16 and 20 read, written from
docs/derivations/theorem4.md (sections 1, 3 and 6) with mpmath, not from ``bounds/``: the
independent path the claims' pins compare the float64 functions with (issue 53, point 1)."""

from __future__ import annotations

from typing import Callable, Iterable

import mpmath as mp

DPS = 40  # digits of the independent evaluation
PIN_RTOL = 1e-12  # float64 closed forms of a few logs, roots and products: gaps ~1e-15; a slipped
# constant, power or log base moves them by 1e-3 or more


def digits():
    """The context of a 40-digit evaluation (``with digits(): ...``)."""
    return mp.workdps(DPS)


def relative_gap(got, want) -> float:
    """|got - want| / |want| (|got| where want = 0), evaluated at the current precision."""
    want = mp.mpf(want)
    return float(abs(mp.mpf(got) - want) / abs(want)) if want != 0 else float(abs(mp.mpf(got)))


def largest_gap(pairs: Iterable[tuple]) -> float:
    """The largest relative gap |float64 - 40-digit| / |40-digit| over (float64, thunk) pairs; each
    thunk is evaluated at 40 digits."""
    with mp.workdps(DPS):
        return max(relative_gap(got, want()) for got, want in pairs)


# ------------------------------------------------------------------ section 1: Lemma 12, (1b)


def r_x(d, n, N, C_x=1) -> mp.mpf:
    """(1a): r_x = sqrt(3 C_x e d ln(n N))."""
    return mp.sqrt(3 * mp.mpf(C_x) * mp.e * d * mp.log(mp.mpf(n) * N))


def token_radius(d, n_tokens, delta) -> mp.mpf:
    """sqrt(d) + sqrt(2 ln(n_tokens / delta)): Gaussian concentration of the norm, union bound."""
    return mp.sqrt(d) + mp.sqrt(2 * mp.log(mp.mpf(n_tokens) / mp.mpf(delta)))


def psi(p, N) -> mp.mpf:
    """(1b): psi(p) = min_{r >= 2p} r N^{2/r}; r N^{2/r} decreases up to r = 2 ln N and increases
    after, so psi = 2 e ln N where ln N >= p, else 2p N^{1/p} (the minimum at the endpoint)."""
    lnN = mp.log(N)
    return 2 * mp.e * lnN if lnN >= p else 2 * mp.mpf(p) * mp.mpf(N) ** (1 / mp.mpf(p))


def envelope(M, K, q, c) -> mp.mpf:
    """(2.1): B(X) = K sqrt(q (M^2 + c^2 (q + 1)) + 1)."""
    M, K, c = mp.mpf(M), mp.mpf(K), mp.mpf(c)
    return K * mp.sqrt(q * (M**2 + c**2 * (q + 1)) + 1)


# ------------------------------------------------------------------ section 3: Lemmas 13-16


def output_net_cover(m, D, r_ma, R_mw, rho, eps) -> mp.mpf:
    """Lemma 14: m (D + 2) ln(1 + 4 r_ma R_mw rho / eps) (natural logarithm)."""
    r_ma, R_mw, rho, eps = (mp.mpf(v) for v in (r_ma, R_mw, rho, eps))
    return m * (D + 2) * mp.log(1 + 4 * r_ma * R_mw * rho / eps)


def score_cover(q, D_e, r_qk, r_z, eps) -> mp.mpf:
    """Lemma 16, second estimate: q D_e^2 ln(1 + 2 r_qk r_z^2 / eps)."""
    r_qk, r_z, eps = (mp.mpf(v) for v in (r_qk, r_z, eps))
    return q * D_e**2 * mp.log(1 + 2 * r_qk * r_z**2 / eps)


def transformer_cover(shape, radii, eps) -> mp.mpf:
    """Prop 17, before the P ln(1 + A/eps) step: m (q D_e + 2) ln(1 + 6 K rho / eps)
    + q D_e^2 ln(1 + 6 sqrt(q) K r_qk r_z^3 / eps), K = r_ma R_mw."""
    m, q, D_e = shape
    r_ma, R_mw, r_qk, r_z, rho = (mp.mpf(v) for v in radii)
    K, eps = r_ma * R_mw, mp.mpf(eps)
    out = m * (q * D_e + 2) * mp.log(1 + 6 * K * rho / eps)
    return out + q * D_e**2 * mp.log(1 + 6 * mp.sqrt(q) * K * r_qk * r_z**3 / eps)


def lemma15_steps(r_z, x) -> dict:
    """Lemma 15's steps at radius r_z and size x (||dW^h||_F, ||ds||_inf or ||dA||_1): scores
    r_z^2 x, softmax x, values r_z x, composed r_z^3 (per unit ||dW_QK||_F)."""
    r_z, x = mp.mpf(r_z), mp.mpf(x)
    return {"score": r_z**2 * x, "softmax": x, "value": r_z * x, "attention": r_z**3}


def _norm(values) -> mp.mpf:
    """The Euclidean norm of float entries, at the current precision."""
    v = [mp.mpf(x) for x in values]
    return mp.sqrt(mp.fdot(v, v))


def _diff_norm(u, v) -> mp.mpf:
    """||u - v|| of two float lists (each difference exact at 40 digits)."""
    d = [mp.fsub(s, t) for s, t in zip(u, v, strict=True) if s != t]
    return mp.sqrt(mp.fdot(d, d))


def _op_norm(rows) -> mp.mpf:
    """||A||_op of A given by its rows: the square root of the largest eigenvalue of the Gram
    matrix A A^T (symmetric, mp.eigsy)."""
    R = [[mp.mpf(x) for x in r] for r in rows]
    gram = mp.matrix([[mp.fdot(r, s) for s in R] for r in R])
    E, _ = mp.eigsy(gram)
    return mp.sqrt(max(max(E[i], 0) for i in range(E.rows)))


def lemma13_terms(weights: Callable, H: int, radii) -> list:
    """Lemma 13's three terms at each radius r_z, from the two parameter sets' entries
    (``weights(k)``: the lists (Theta's, Theta''s) of block k's entries, and ``weights("W'")``
    Theta''s W as a list of rows): rho = sqrt(H r_z^2 + 1),
    (||a - a'|| ||(W,b)||_F rho, ||a'|| rho ||d(W,b)||_F, ||a'|| ||W'||_op r_z^3 ||dW_QK||_F)."""
    (a, a_p), (wb, wb_p), (qk, qk_p) = (weights(k) for k in ("a", "Wb", "W_QK"))
    norm_a_p, da, norm_wb = _norm(a_p), _diff_norm(a, a_p), _norm(wb)
    dwb, attention = _diff_norm(wb, wb_p), norm_a_p * _op_norm(weights("W'")) * _diff_norm(qk, qk_p)
    out = []
    for r_z in radii:
        r_z = mp.mpf(r_z)
        rho = mp.sqrt(H * r_z**2 + 1)
        out.append((da * norm_wb * rho, norm_a_p * rho * dwb, attention * r_z**3))
    return out
