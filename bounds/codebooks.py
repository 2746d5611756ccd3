"""The Rademacher codes' union bound behind Assumption 3 (w.h.p.): the exact pair tail, the
dimension rules d_e (exact and Hoeffding), and the builders that pick d_e by them.
Derivation: docs/derivations/codebooks.md."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import torch

from qstr.constructions.codes import (
    BUILDABLE_KINDS,
    Codebook,
    coherent_rademacher,
    experimental_codes,
    experimental_dim,
    padded_rs_hadamard_codebook,
)
from qstr.constructions.validate import positive_int, probability

# --------------------------------------------------------------------------- the union bound


_EXACT_TAIL_MAX_D = 4096


def rademacher_pair_tail(d_e: int, mu: float = 0.5) -> float:
    """Exact P(|<omega_i, omega_j>| > mu) for two independent Rademacher codewords.

    <omega_i, omega_j> = S / d_e with S = 2B - d_e, B ~ Binomial(d_e, 1/2), so the event
    is |2B - d_e| > mu d_e (strict; S has the parity of d_e). Exact rational sum for
    d_e <= 4096, scipy's binomial cdf (relative error ~1e-14) beyond. Serves the union
    bound behind Assumption 3 and the d_e = floor(5 ln N) rule of the experiments.
    """
    d_e, mu = positive_int("d_e", d_e), probability("mu", mu)
    low = _tail_cut(d_e, mu)  # |2B - d_e| > mu d_e  <=>  B <= low  or  B >= d_e - low
    if d_e <= _EXACT_TAIL_MAX_D:
        count, term = 0, 1
        for b in range(low + 1):
            count += term
            term = term * (d_e - b) // (b + 1)
        return float(Fraction(2 * count, 2**d_e))
    from scipy import stats  # noqa: PLC0415 - lazy: scipy takes ~1 s to import

    return float(2 * stats.binom.cdf(low, d_e, 0.5))


def _tail_cut(d_e: int, mu: float) -> int:
    """Largest B with 2B - d_e < -mu d_e, computed in exact rationals (>= 0: B = 0 qualifies for
    mu < 1)."""
    bound = (d_e - Fraction(mu) * d_e) / 2  # B < bound
    low = math.ceil(bound) - 1
    return min(low, d_e)


def _tail_many(ds: np.ndarray, mu: float) -> np.ndarray:
    """Vectorized tail for many d_e (scipy), used to scan for the dimension rule."""
    lows = np.array([_tail_cut(int(d), mu) for d in ds])
    from scipy import stats  # noqa: PLC0415 - lazy: scipy takes ~1 s to import

    return 2 * stats.binom.cdf(lows, ds, 0.5)


RADEMACHER_DIM_MAX = 1 << 26  # the largest Hoeffding d_e the rules search below (seconds)


def _sci(log_x: float) -> str:
    """exp(log_x) printed, as 10^k beyond float range."""
    return f"{math.exp(log_x):.3g}" if log_x < 700 else f"10^{log_x / math.log(10):.0f}"


def _hoeffding_dim(N: int, delta: float, mu: float) -> int:
    """ceil(2 ln(N (N-1) / delta) / mu^2), refused (ValueError with the estimate) above
    RADEMACHER_DIM_MAX before any work: a tiny mu or delta is one line, never an overflow."""
    log_d = math.log(2 * math.log(N * (N - 1) / delta)) - 2 * math.log(mu)
    if log_d > math.log(RADEMACHER_DIM_MAX):
        raise ValueError(
            f"a Rademacher code of N = {N} words with mu = {mu:g}, delta = {delta:g} needs d_e up "
            f"to about {_sci(log_d)} (2 ln(N (N-1) / delta) / mu^2), more than "
            f"the {RADEMACHER_DIM_MAX:,} this toolkit builds; raise mu or delta, or use "
            "kind='rs-hadamard'"
        )
    return max(1, math.ceil(2 * math.log(N * (N - 1) / delta) / mu**2))


def rademacher_dim(N: int, delta: float, mu: float = 0.5, rule: str = "exact") -> int:
    """Smallest d_e with C(N, 2) * P(|<omega_i, omega_j>| > mu) <= delta, for every larger d_e too.

    ``rule="hoeffding"``: P <= 2 exp(-d_e mu^2 / 2), so d_e = ceil(2 ln(N (N-1) / delta) / mu^2)
    (= 8 ln(N (N-1) / delta) at mu = 1/2, the 8 ln(N^2 / delta) of Assumption 3's union bound,
    with N^2 -> N(N-1)).
    ``rule="exact"``: the exact tail (:func:`rademacher_pair_tail`) is not monotone in d_e
    (parity of S), so we return d* = 1 + the largest d_e that fails the bound; then the
    bound holds for d* and *every* larger d_e (above the Hoeffding value it holds because
    the exact tail is below the Hoeffding bound, which decreases). Some d_e < d* of
    favourable parity may also pass; they are not returned. N = 1 returns 1.
    Serves Assumption 3 (w.h.p. version) for Rademacher codes.
    """
    N, delta, mu = positive_int("N", N), probability("delta", delta), probability("mu", mu)
    if rule not in ("exact", "hoeffding"):
        raise ValueError(f"rule must be 'exact' or 'hoeffding', got {rule!r}")
    if N == 1:
        return 1
    top = _hoeffding_dim(N, delta, mu)
    if rule == "hoeffding":
        return top
    pairs = N * (N - 1) // 2
    step = 1 << 14
    for hi in range(top - 1, 0, -step):  # scan downward from the Hoeffding value
        ds = np.arange(hi, max(hi - step, 0), -1)
        expected = pairs * _tail_many(ds, mu)
        fails = expected > delta
        near = np.abs(expected - delta) <= 1e-9 * delta
        for i in np.flatnonzero(near):  # settle ties with the exact rational tail
            fails[i] = pairs * rademacher_pair_tail(int(ds[i]), mu) > delta
        if fails.any():
            return int(ds[np.argmax(fails)]) + 1
    return 1


# --------------------------------------------------------------------------- the builders


def rademacher_codebook(
    N: int,
    *,
    mu_max: float = 0.5,
    delta: float = 1e-3,
    d_e: int | None = None,
    generator: torch.Generator,
    device=None,
    dtype=torch.float32,
    max_tries: int = 20,
) -> Codebook:
    """Rademacher codes with measured coherence <= ``mu_max`` (Assumption 3 when mu_max = 1/2).

    d_e defaults to ``rademacher_dim(N, delta, mu_max)``, so one draw fails with probability
    <= delta; draws are repeated with the same generator until the exact coherence is
    <= mu_max (``params['tries']``), at most ``max_tries`` times.
    """
    N, mu_max, delta = (
        positive_int("N", N),
        probability("mu_max", mu_max),
        probability("delta", delta),
    )
    max_tries = positive_int("max_tries", max_tries)
    d_min = rademacher_dim(N, delta, mu_max)
    if d_e is None:
        d_e = d_min
    elif positive_int("d_e", d_e) < d_min:
        raise ValueError(
            f"d_e must be >= {d_min} for N={N} codes with mu <= {mu_max} at failure "
            f"probability delta={delta} (exact union bound), got {d_e}"
        )
    book = coherent_rademacher(
        N, d_e, mu_max=mu_max, generator=generator, device=device, dtype=dtype, max_tries=max_tries
    )
    tries = book.params["tries"]
    params = {"N": N, "d_e": d_e, "mu_max": mu_max, "delta": delta, "rule": "exact", "tries": tries}
    return dataclasses.replace(book, params=params)


def experimental_codebook(
    N: int, *, generator: torch.Generator, device=None, dtype=torch.float32
) -> Codebook:
    """Rademacher codes at d_e = floor(5 ln N), NOT resampled: they may violate Assumption 3.

    At N = 100 (d_e = 23) each pair exceeds 1/2 with probability 89104/2^23 ~= 0.0106,
    ~52.6 of the 4950 pairs in expectation (docs/derivations/codebooks.md). ``params`` records the
    expected number of violating pairs (by :func:`rademacher_pair_tail`), this draw's number and
    whether it satisfies Assumption 3 (``qstr.constructions.codes.experimental_codes``).
    """
    book = experimental_codes(N, generator=generator, device=device, dtype=dtype)
    n_pairs = book.N * (book.N - 1) // 2
    params = dict(book.params)
    drawn = {k: params.pop(k) for k in ("n_violations", "satisfies_assumption3")}
    expected = n_pairs * rademacher_pair_tail(book.d_e, 0.5)
    return dataclasses.replace(book, params={**params, "expected_violations": expected, **drawn})


def build_codebook(
    N: int,
    *,
    kind: str = "rs-hadamard",
    mu_max: float = 0.5,
    d_e: int | None = None,
    delta: float = 1e-3,
    generator: torch.Generator | None = None,
    device=None,
    dtype=torch.float32,
) -> Codebook:
    """One entry point for the codebooks of Assumption 3: kind in ``BUILDABLE_KINDS``.

    rs-hadamard: deterministic, coherence <= mu_max guaranteed; a user d_e >= the needed
    4^m uses the largest 4^m' <= d_e (smaller coherence) zero-padded to d_e columns.
    rademacher: see :func:`rademacher_codebook`. experimental: d_e = floor(5 ln N), no
    check of mu (d_e, if given, must equal it). The random kinds need ``generator``.
    """
    if kind not in BUILDABLE_KINDS:
        raise ValueError(f"kind must be one of {BUILDABLE_KINDS}, got {kind!r}")
    N = positive_int("N", N)
    if kind == "rs-hadamard":
        return padded_rs_hadamard_codebook(N, mu_max=mu_max, d_e=d_e, device=device, dtype=dtype)
    if generator is None:
        raise ValueError(
            f"generator must be a torch.Generator for kind={kind!r} (random codes), got None"
        )
    if kind == "rademacher":
        return rademacher_codebook(
            N, mu_max=mu_max, delta=delta, d_e=d_e, generator=generator, device=device, dtype=dtype
        )
    if d_e is not None and positive_int("d_e", d_e) != experimental_dim(N):
        raise ValueError(
            f"d_e is fixed to floor(5 ln N) = {experimental_dim(N)} for kind='experimental', "
            f"got {d_e}; "
            f"use kind='rademacher' for another d_e"
        )
    return experimental_codebook(N, generator=generator, device=device, dtype=dtype)
