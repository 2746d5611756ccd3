"""Theorem 4's bound evaluated a second way, for the claim thm-4 (verify/claims/thm_4.py): the exact
bound's intermediate quantities (docs/derivations/theorem4.md, section 9) and the split covering
logarithm's pieces (section 10), written from the derivation in mpmath, not from ``bounds/``: what
the certificate's smooth majorant is compared with. Each takes the mpmath module (``mp``) and is
called inside ``mpmath.workdps``."""

from __future__ import annotations


def exact_pieces(P, nv: int, Nv: int, mp) -> dict:
    """The exact bound's intermediate quantities at (n, N), from docs/derivations/theorem4.md
    (section 9) in mpmath: what the certificate's majorant must dominate."""
    K, c2 = P.r_a * P.r_w, (mp.mpf(P.d) / P.q if P.c is None else mp.mpf(P.c) ** 2)
    q, d, e, dl = P.q, P.d, mp.e, mp.mpf(P.delta)
    r_x = mp.sqrt(3 * P.C_x * e * d * mp.log(nv * Nv))
    r_z = mp.sqrt(r_x**2 + c2 * (q + 1))
    d_e = mp.ceil(8 * mp.log(mp.mpf(Nv) ** 2 / dl)) if P.d_e is None else P.d_e
    D_e = d + (q + 1) * d_e
    log_arg = (Nv - 1) * 2 * K * mp.sqrt(q) * r_x / mp.sqrt(P.eps_2nn)
    alpha = max(0, mp.log(log_arg)) / (c2 * (1 - P.mu))
    p = max(1, mp.log(2 * (1 + 3 / dl) * mp.sqrt(nv)))
    r = max(2 * p, 2 * mp.log(Nv))
    codes = 4 * K**2 * (q * c2 * (q + 1) + 1)
    tokens = 4 * K**2 * q * P.C_x * d * r * mp.mpf(Nv) ** (2 / r) + codes
    tau = e * max(4 * P.C_y * (2 * p) ** (2 * P.s), tokens)
    A = 6 * K * max(mp.sqrt(q * r_z**2 + 1), mp.sqrt(q) * alpha * mp.sqrt(d_e) * r_z**3)
    # the majorant's tau: max -> sum, psi(p) <= e (2p + 2 ln N)
    p_ = mp.log(2 * (1 + 3 / dl) * mp.sqrt(nv))
    tau_sum = e * (
        4 * P.C_y * (2 * p_) ** (2 * P.s)
        + 4 * K**2 * q * P.C_x * d * e * (2 * p_ + 2 * mp.log(Nv))
        + codes
    )
    tail = 2 * (
        K**2 * (q * P.C_x * d * e * (4 + 2 * mp.log(Nv)) + q * c2 * (q + 1) + 1) + P.C_y * 16**P.s
    )
    return {
        "tau": tau,
        "tau_sum": tau_sum,
        "L_n": mp.log(1 + mp.sqrt(nv / tau_sum)),
        "P": P.m_g * (q * D_e + 2) + q * D_e**2,
        "A": A,
        "L": mp.log(1 + 2 * A * mp.sqrt(nv / tau)),
        "alpha": alpha,
        "truncation": 2 * tau * mp.exp(-p) * (1 + 3 / dl),
        "tail": tail * mp.mpf(nv) ** (-0.75) * mp.exp(-mp.log(Nv) / 4),
    }


def majorant_logs(P, nv: int, Nv: int, mp) -> dict:
    """The split covering logarithm's pieces as section 10 derives them: alpha <= (ln N + ln(1 + X))
    / (c^2 (1 - mu)), X = 2 K sqrt(q) r_x / sqrt(eps_2NN), d_e <= 8 (2 ln N - ln delta) + 1,
    L_A = ln(1 + 2 A), A = 6 K (sqrt(q r_z^2 + 1) + sqrt(q) alpha sqrt(d_e) r_z^3),
    L_rho = ln(1 + 12 K rho), L_c = ln(1 + 12 K sqrt q), L_alpha = ln(1 + alpha),
    L_de = ln(1 + sqrt d_e), L_rz = 3 ln(1 + r_z)."""
    K, c2 = P.r_a * P.r_w, (mp.mpf(P.d) / P.q if P.c is None else mp.mpf(P.c) ** 2)
    q, lnN = P.q, mp.log(Nv)
    r_x = mp.sqrt(3 * P.C_x * mp.e * P.d * mp.log(nv * Nv))
    r_z = mp.sqrt(r_x**2 + c2 * (q + 1))
    alpha = (lnN + mp.log(1 + 2 * K * mp.sqrt(q) * r_x / mp.sqrt(P.eps_2nn))) / (c2 * (1 - P.mu))
    d_e = 8 * (2 * lnN - mp.log(P.delta)) + 1 if P.d_e is None else P.d_e
    A = 6 * K * (mp.sqrt(q * r_z**2 + 1) + mp.sqrt(q) * alpha * mp.sqrt(d_e) * r_z**3)
    return {
        "L_A": mp.log(1 + 2 * A),
        "L_rho": mp.log(1 + 12 * K * mp.sqrt(q * r_z**2 + 1)),
        "L_c": mp.log(1 + 12 * K * mp.sqrt(q)),
        "L_alpha": mp.log(1 + alpha),
        "L_de": mp.log(1 + mp.sqrt(d_e)),
        "L_rz": 3 * mp.log(1 + r_z),
    }
