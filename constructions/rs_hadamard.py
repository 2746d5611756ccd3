"""The RS-Hadamard codes of Assumption 3: the field GF(2^m), Reed-Solomon words over it with
Walsh-Hadamard rows for symbols (coherence <= (k-1)/n guaranteed, its exact value by root
counts), the star codes on which Lemma 11's leak bound is attained, and the zero-padded entry
point of build_codebook. Derivation: docs/derivations/codebooks.md."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
import torch

from qstr.constructions.codebook import Codebook, _fits
from qstr.constructions.coherence import coherence
from qstr.constructions.validate import device_of, float_dtype, positive_int, probability

__all__ = [
    "IRREDUCIBLE",
    "MAX_M",
    "gf_mul_table",
    "rs_hadamard_dim",
    "rs_hadamard_coherence",
    "rs_hadamard_codebook",
    "star_codebook",
    "padded_rs_hadamard_codebook",
]


# --------------------------------------------------------------------------- GF(2^m)

IRREDUCIBLE = {
    1: 0b11,
    2: 0b111,
    3: 0b1011,
    4: 0b10011,
    5: 0b100101,
    6: 0b1000011,
    7: 0b10000011,
    8: 0b100011011,
    9: 0b1000010001,
    10: 0b10000001001,
}
MAX_M = max(IRREDUCIBLE)


def _clmul_table(m: int, poly: int) -> np.ndarray:
    """Carry-less a * b reduced mod ``poly`` (degree m), for all a, b in [0, 2^m)."""
    n = 1 << m
    a = np.arange(n, dtype=np.int64)[:, None]
    b = np.arange(n, dtype=np.int64)[None, :]
    prod = np.zeros((n, n), dtype=np.int64)
    for bit in range(m):
        prod ^= np.where((b >> bit) & 1, a << bit, 0)
    for deg in range(2 * m - 2, m - 1, -1):
        prod ^= ((prod >> deg) & 1) * (poly << (deg - m))
    return prod


@lru_cache(maxsize=None)
def gf_mul_table(m: int, poly: int | None = None) -> np.ndarray:
    """Multiplication table of GF(2)[x] / (poly), poly = IRREDUCIBLE[m] by default (then the field
    GF(2^m)); addition is XOR. Read-only. Another ``poly`` of degree m is for checking the table."""
    m = positive_int("m", m)
    if m > MAX_M:
        raise ValueError(f"m must be an integer in [1, {MAX_M}], got {m}")
    if poly is None:
        poly = IRREDUCIBLE[m]
    elif not isinstance(poly, int) or poly.bit_length() != m + 1:
        raise ValueError(
            f"poly must be an int of degree m = {m} (bit length {m + 1}), got {poly!r}"
        )
    table = _clmul_table(m, poly).astype(np.int32)
    table.setflags(write=False)
    return table


# --------------------------------------------------------------------------- RS-Hadamard


def _rs_parameters(N: int, mu: float, m_min: int = 1):
    """Smallest m >= m_min with a length-n RS code (n = 2^m) of >= N words and (k-1)/n <= mu."""
    for m in range(m_min, MAX_M + 1):
        n = 1 << m
        k = 1
        while n**k < N:
            k += 1
        if k - 1 <= mu * n:  # i.e. k <= floor(mu n) + 1
            return m, n, k
    return None


def rs_hadamard_dim(N: int, mu: float = 0.5) -> int:
    """d_e = 4^m of the RS-Hadamard code for N words with guaranteed coherence <= mu.

    m is the smallest with n^(floor(mu n) + 1) >= N, n = 2^m; at mu = 1/2 that is
    n^(n/2 + 1) >= N, so d_e = n^2 = O((log N / log log N)^2): N <= 4 -> 4, N <= 64 -> 16,
    N <= 32768 -> 64, N <= 16^9 -> 256. ``ValueError`` when even m = 10 is not enough.
    """
    return _rs_found(positive_int("N", N), probability("mu", mu))[1] ** 2


def _rs_found(N: int, mu: float):
    """(m, n, k) of the smallest RS-Hadamard code for N words at coherence <= mu, or ValueError."""
    found = _rs_parameters(N, mu)
    if found is None:
        raise ValueError(
            f"N={N} codewords with coherence <= mu={mu} need an RS-Hadamard code beyond "
            f"GF(2^{MAX_M}) (d_e > {4**MAX_M}); use a larger mu or a smaller N"
        )
    return found


def _rs_symbols(indices: np.ndarray, m: int, k: int) -> np.ndarray:
    """Outer RS code: row r is p_r(x) at all x in GF(2^m), p_r's coefficients = base-2^m digits
    of r."""
    n, mul = 1 << m, gf_mul_table(m).ravel()  # mul[(a << m) | b] = a * b
    xs = np.arange(n, dtype=np.int32)[None, :]
    values = np.zeros((len(indices), n), dtype=np.int32)
    for level in range(k - 1, -1, -1):  # Horner: v <- v * x + c_level
        digit = ((indices >> (m * level)) & (n - 1)).astype(np.int32)
        values = np.take(mul, (values << m) | xs) ^ digit[:, None]
    return values


def _hadamard(m: int) -> np.ndarray:
    """Sylvester-Hadamard matrix H[a, b] = (-1)^popcount(a & b); rows are mutually orthogonal."""
    n = 1 << m
    ab = np.arange(n)[:, None] & np.arange(n)[None, :]
    parity = np.zeros_like(ab)
    for bit in range(m):
        parity ^= (ab >> bit) & 1
    return 1 - 2 * parity


def rs_hadamard_coherence(N: int, m: int, k: int) -> float:
    """Exact coherence of the first N RS-Hadamard words, in O(N n) time instead of O(N^2 n^2).

    <omega_i, omega_j> = #{x : p_i(x) = p_j(x)} / n and p_i - p_j is the polynomial whose
    digits are those of i XOR j. For i != j < N, i XOR j ranges over exactly
    [1, 2^L), L = bit length of N - 1 (take i = 2^h, j = c - 2^h, h = top bit of c).
    So mu = max_{1 <= c < 2^L} #roots(p_c) / n.
    """
    return _rs_coherence(positive_int("N", N), m, k)


def _rs_coherence(N: int, m: int, k: int) -> float:
    if N == 1:
        return 0.0
    n = 1 << m
    c = np.arange(1, 1 << (N - 1).bit_length(), dtype=np.int64)
    roots = (_rs_symbols(c, m, k) == 0).sum(axis=1)
    return float(Fraction(int(roots.max()), n))


def _rs_hadamard(N, m, k, d_e, device, dtype) -> Codebook:
    n = 1 << m
    _fits(N, max(d_e, n * n), device, dtype)
    symbols = torch.as_tensor(_rs_symbols(np.arange(N, dtype=np.int64), m, k), device=device).long()
    H = torch.as_tensor(_hadamard(m), dtype=dtype, device=device) / n  # n blocks of n: unit norm
    omega = H[symbols].reshape(N, n * n)
    if d_e > n * n:
        omega = torch.nn.functional.pad(omega, (0, d_e - n * n))
    params = {
        "N": N,
        "m": m,
        "n": n,
        "k": k,
        "field_poly": IRREDUCIBLE[m],
        "guaranteed_mu": (k - 1) / n,
        "d_e": d_e,
    }
    return Codebook(omega, _rs_coherence(N, m, k), "rs-hadamard", params)


def rs_hadamard_codebook(N: int, *, mu: float = 0.5, device=None, dtype=torch.float32) -> Codebook:
    """Deterministic codes with guaranteed coherence <= (k-1)/n <= mu (Assumption 3 at mu = 1/2).

    Word i: write i in base n = 2^m as k digits = coefficients of p_i, deg p_i < k, over
    GF(2^m); evaluate p_i at all n field elements (Reed-Solomon: distinct words agree in
    <= k-1 places); replace each symbol a by the Walsh row ((-1)^popcount(a & b))_b and
    scale by 1/n. Then ||omega_i|| = 1 and <omega_i, omega_j> = #agreements / n in
    [0, (k-1)/n]. m is the smallest that works, k the fewest digits with n^k >= N:
    d_e = n^2, at mu = 1/2 n^(n/2+1) >= N, so d_e = O((log N / log log N)^2). Smaller mu
    (e.g. 1/(2q) for single-head sparse averaging) just needs a larger n.
    ``mu`` of the result is the exact coherence (:func:`rs_hadamard_coherence`).
    """
    N, mu = positive_int("N", N), probability("mu", mu)
    device, dtype = device_of("device", device), float_dtype("dtype", dtype)
    m, n, k = _rs_found(N, mu)
    _rs_refuse_above(N, mu, Fraction(k - 1, n), f"its guarantee (k - 1)/n (m = {m}, k = {k})")
    book = _rs_hadamard(N, m, k, n * n, device, dtype)
    _rs_refuse_above(N, mu, Fraction(book.mu), "its exact coherence (root count)")
    return book


def _rs_refuse_above(N: int, mu: float, got: Fraction, what: str) -> None:
    """The builder's re-check of its parameter rule: ValueError when ``got`` (the code's
    guarantee or its exact coherence) exceeds the mu asked, compared exactly."""
    if got > Fraction(mu):
        raise ValueError(
            f"the RS-Hadamard code chosen for N = {N} at mu = {mu} has {what} = {float(got):.6g} "
            f"above mu: its parameter rule is broken"
        )


def star_codebook(N: int, *, mu: float = 0.5, device=None, dtype=torch.float64) -> Codebook:
    """Codes on which Lemma 11's leak bound is attained: omega_0 = e_0 meets every other code at
    exactly mu.

    omega_j = mu e_0 + sqrt(1 - mu^2) v_j with v_j RS-Hadamard of coherence <= mu/(1 + mu), so
    the other pairs meet at <= mu^2 + (1 - mu^2) mu/(1 + mu) = mu (docs/derivations/lemma11.md).
    """
    N, mu = positive_int("N", N, minimum=2), probability("mu", mu)
    device, dtype = device_of("device", device), float_dtype("dtype", dtype)
    m, n, k = _rs_found(N - 1, mu / (1 + mu))
    base = _rs_hadamard(N - 1, m, k, n * n, device, torch.float64).omega
    omega = torch.zeros(N, base.shape[1] + 1, dtype=torch.float64, device=device)
    omega[0, 0] = 1
    omega[1:, 0] = mu
    omega[1:, 1:] = math.sqrt(1 - mu * mu) * base
    omega = omega.to(dtype)
    return Codebook(
        omega, coherence(omega), "custom", {"N": N, "d_e": omega.shape[1], "star_mu": mu}
    )


# --------------------------------------------------------------------------- entry point


def padded_rs_hadamard_codebook(
    N: int, *, mu_max: float = 0.5, d_e: int | None = None, device=None, dtype=torch.float32
) -> Codebook:
    """RS-Hadamard codes with coherence <= mu_max guaranteed (Assumption 3 at mu_max = 1/2), in
    ``d_e`` columns: a d_e >= the needed 4^m uses the largest 4^m' <= d_e (smaller coherence),
    zero-padded to d_e columns; the kind rs-hadamard of ``qstr.bounds.codebooks.build_codebook``.
    """
    N, mu_max = positive_int("N", N), probability("mu_max", mu_max)
    device, dtype = device_of("device", device), float_dtype("dtype", dtype)
    need = rs_hadamard_dim(N, mu_max)
    if d_e is None:
        d_e = need
    elif positive_int("d_e", d_e) < need:
        raise ValueError(
            f"d_e must be >= {need} for an rs-hadamard code of N={N} words "
            f"with mu <= {mu_max}, got {d_e}"
        )
    m_fit = min(MAX_M, int(math.log2(d_e)) // 2)
    while 4**m_fit > d_e:
        m_fit -= 1
    m, n, k = _rs_parameters(N, mu_max, m_min=m_fit)
    _rs_refuse_above(N, mu_max, Fraction(k - 1, n), f"its guarantee (k - 1)/n (k = {k})")
    return _rs_hadamard(N, m, k, d_e, device, dtype)
