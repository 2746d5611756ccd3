"""The RS-Hadamard codes of Assumption 3: GF(2^m) tables are fields, and the exact coherence by
root counting equals the Gram coherence, within (k - 1)/n (docs/derivations/codebooks.md (c))."""

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import torch

from qstr.constructions.codes import MAX_M, Codebook, gf_mul_table, rs_hadamard_codebook
from qstr.constructions.codes import rs_hadamard_coherence, rs_hadamard_dim
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, close, exact, mapped, replaced
from qstr.verify.claim import by_ratio, worst
from qstr.verify.claims._codebooks import CODEBOOKS, coherence_rounding, gram_mu, largest
from qstr.verify.registry import register

# x^4 + x^2 + 1 = (x^2 + x + 1)^2 and x^8 + 1 = (x + 1)^8
REDUCIBLE = {4: 0b10101, 8: 0b100000001}
SWEEP_TOP = 2**16  # the sweep of the builder's rule covers every N = 2..2^16
# the mu asked in the sweep: Assumption 3's 1/2, sparse averaging's 1/(2q - 1) at q = 2, 3 and
# the 1/(2q) of single-head averaging at q = 2, 4
SWEEP_MUS = (Fraction(1, 2), Fraction(1, 3), Fraction(1, 4), Fraction(1, 5), Fraction(1, 8))


def rs_guarantee(k: int, n: int) -> float:
    """<omega_i, omega_j> = #roots(p_i - p_j) / n <= (k - 1) / n (codebooks.md (c))."""
    return (k - 1) / n


claim = register(
    Claim(
        "rs-hadamard-codes",
        Ref("Assumption 3"),
        statement="the RS-Hadamard codes: GF(2^m) tables are fields for every m used; exact "
        "coherence two ways; the builder's rule gives mu <= the mu asked for every N <= 2^16",
        builds=(rs_hadamard_codebook, gf_mul_table),
        bounds=(rs_hadamard_coherence, rs_guarantee),
        derivation=CODEBOOKS,
    )
)


@dataclass(frozen=True)
class RSInputs:
    """GF(2^m) multiplication tables for every m the code uses, RS-Hadamard codebooks with
    N = n^2 words at mu = 1/n, the root-count coherence and the guarantee (codebooks.md (c))."""

    tables: Dict[int, np.ndarray]  # m -> (2^m, 2^m) table
    books: Tuple[Tuple[int, Codebook], ...]  # (m, codebook)
    grams: Tuple[float, ...]  # each code's brute-force Gram coherence, computed once
    sweep: Tuple[Tuple[Fraction, Tuple[int, ...]], ...]  # (mu asked, every N swept at it)
    built_ns: Tuple[int, ...]  # N = 2^j + 1 built at each mu: one N of each (m, k, L) interval
    built_mus: Tuple[Fraction, ...]  # the mu the builder is run at
    root_count: Callable[[int, int, int], float] = rs_hadamard_coherence  # (N, m, k) -> mu
    guarantee: Callable[[int, int], float] = rs_guarantee  # (k, n) -> (k - 1) / n
    dim: Callable[[int, float], int] = rs_hadamard_dim  # (N, mu) -> d_e = 4^m, the builder's rule
    builder: Optional[Callable[..., Codebook]] = None  # a substitute for rs_hadamard_codebook


@claim.inputs
def rs_inputs(ctx: Context) -> RSInputs:
    """Tables for m = 1..MAX_M; codes for m = 1..5 (6 on the GPU profile)."""
    tables = {m: gf_mul_table(m) for m in range(1, MAX_M + 1)}
    books = tuple(
        (m, rs_hadamard_codebook(4**m, mu=1.0 / 2**m, device=ctx.device))
        for m in range(1, ctx.pick(quick=5, full=5, gpu=6) + 1)
    )
    grams = tuple(gram_mu(b.omega) for _, b in books)
    reps = tuple(n for j in range(17) for n in (2**j, 2**j + 1) if 2 <= n <= SWEEP_TOP)
    every = tuple(range(2, SWEEP_TOP + 1))  # quick: the ends of each interval (derivation (c))
    sweep = tuple((mu, ctx.pick(quick=reps, full=every)) for mu in SWEEP_MUS)
    built_ns = tuple(2**j + 1 for j in range(ctx.pick(quick=8, full=13)))
    built_mus = ctx.pick(quick=SWEEP_MUS[::2], full=SWEEP_MUS)
    return RSInputs(tables, books, grams, sweep, built_ns, built_mus)


def _worst_code(inp: RSInputs, verdict, values, detail: str) -> Verdict:
    """verdict(value, 0) per code with the float64 Gram's rounding term: the worst m."""
    cases = []
    for value, (m, b) in zip(values, inp.books, strict=True):
        rnd = coherence_rounding(b, torch.float64)
        cases.append((f"m = {m} (N = {b.N})", verdict(value, 0.0, rounding=rnd, detail=detail)))
    return worst(cases, key=largest)


@claim.check("root-count mu = Gram mu", evidence="built")
def root_count(inp: RSInputs) -> Verdict:
    """The code's mu (O(N n) root count) = the brute-force float64 Gram coherence (worst m)."""
    gaps = [abs(b.mu - g) for g, (_, b) in zip(inp.grams, inp.books, strict=True)]
    return _worst_code(inp, close, gaps, "|stored mu - Gram mu|")


@claim.check("Gram mu <= (k - 1)/n", evidence="built")
def guarantee(inp: RSInputs) -> Verdict:
    """Gram coherence <= (k - 1)/n for every code: the largest excess over the guarantee."""
    bounds = [inp.guarantee(b.params["k"], 2**m) for m, b in inp.books]
    excess = [g - bound for g, bound in zip(inp.grams, bounds, strict=True)]
    return _worst_code(inp, at_most, excess, "Gram mu - (k - 1)/n")


@claim.check("prefix root count = Gram", evidence="built")
def prefixes(inp: RSInputs) -> Verdict:
    """rs_hadamard_coherence(N', m, k) = the Gram coherence of the first N' words, N' = 2, n + 1
    (the XOR identity of codebooks.md (c))."""
    cases = []
    for m, b in inp.books:
        for Np in (2, 2**m + 1):
            gap = abs(inp.root_count(Np, m, b.params["k"]) - gram_mu(b.omega[:Np]))
            rnd = coherence_rounding(b, torch.float64)
            cases.append((f"m = {m}, N' = {Np}", close(gap, 0.0, 0.0, rnd)))
    return worst(cases, key=largest)


def fewest_digits(N: int, n: int) -> int:
    """k: the fewest base-n digits that number N words (n^k >= N), codebooks.md (c)."""
    k = 1
    while n**k < N:
        k += 1
    return k


def _swept(inp: RSInputs, mu: Fraction, ns: Tuple[int, ...]) -> Tuple[Fraction, int, str]:
    """The largest exact coherence over the N swept: the builder's rule's m (from its d_e = 4^m),
    the fewest digits k, and the root count over p_c for c < 2^L, L = bit length of N - 1 (one
    root count per (m, k, L)); a rule that refuses an N counts as coherence 1."""
    seen: Dict[Tuple[int, int, int], Fraction] = {}
    top, where = Fraction(0), "none"
    for N in ns:
        try:
            n = int(round(inp.dim(N, float(mu)) ** 0.5))
        except ValueError as exc:
            return Fraction(1), N, f"refused: {exc}"
        m, k = n.bit_length() - 1, fewest_digits(N, n)
        key = (m, k, (N - 1).bit_length())
        if key not in seen:
            seen[key] = Fraction(inp.root_count(N, m, k)).limit_denominator(n)
        if seen[key] > top:
            top, where = seen[key], f"N = {N}: d_e = {n * n}, k = {k}"
    return top, len(seen), where


@claim.check("the builder's rule: mu <= mu asked, every N <= 2^16", evidence="exact")
def rule_sweep(inp: RSInputs) -> Verdict:
    """For every N = 2..2^16 (quick: N = 2^j and 2^j + 1, the ends of the intervals on which the
    rule's m and k and the bit length L of N - 1 are constant, codebooks.md (c)) the code the
    builder's parameter rule picks has exact coherence (root count) <= the mu asked."""
    cases = []
    for mu, ns in inp.sweep:
        top, codes, where = _swept(inp, mu, ns)
        detail = f"{len(ns)} N, {codes} codes; largest exact mu {top} at {where}"
        cases.append((f"mu = {mu}", at_most(top, mu, detail=detail, dtype="exact")))
    return worst(cases, key=by_ratio)


@claim.check("built codes: Gram mu <= mu asked (N = 2^j + 1)", evidence="built")
def built_sweep(inp: RSInputs) -> Verdict:
    """The builder's codes at N = 2^j + 1 (the first N of each interval on which m, k and L are
    constant) for every mu swept: the float64 Gram coherence <= the mu asked; a refusal fails."""
    cases = []
    for mu in inp.built_mus:
        for N in inp.built_ns:
            try:
                book = (inp.builder or rs_hadamard_codebook)(N, mu=float(mu))
            except ValueError as exc:
                refused = at_most(math.inf, mu, detail=f"refused: {exc}")
                cases.append((f"mu = {mu}, N = {N}", refused))
                continue
            rnd = coherence_rounding(book, torch.float64)
            detail = f"Gram mu (d_e = {book.d_e})"
            cases.append((f"mu = {mu}, N = {N}", at_most(gram_mu(book.omega), mu, rnd, detail)))
    return worst(cases, key=by_ratio)


def _has_zero_divisors(table: np.ndarray) -> bool:
    """Some nonzero row of the table does not permute the nonzero elements (not a field)."""
    return bool((np.sort(table[1:, 1:], axis=1) != np.arange(1, table.shape[0])).any())


@claim.check("GF(2^m) tables are fields", evidence="exact")
def fields(inp: RSInputs) -> Verdict:
    """GF(2)[x]/(f_m) is a field for every m: each nonzero row permutes the nonzero elements."""
    bad = sorted(m for m, t in inp.tables.items() if _has_zero_divisors(t))
    found = f": m = {bad}" if bad else ""
    detail = f"tables with zero divisors among m = 1..{max(inp.tables)}{found}"
    return exact(len(bad), 0, detail=detail)


@claim.fault("reducible moduli x^4 + x^2 + 1 and x^8 + 1", breaks=fields)
def _reducible(inp: RSInputs) -> RSInputs:
    """Reducible moduli x^4 + x^2 + 1 and x^8 + 1: zero divisors."""
    reducible = {m: gf_mul_table(m, p) for m, p in REDUCIBLE.items()}
    return replace(inp, tables={**inp.tables, **reducible})


def _one_root_fewer(case: Tuple[int, Codebook]) -> Tuple[int, Codebook]:
    """A code storing (k - 2)/n: a polynomial of degree < k counted with k - 2 roots at most."""
    m, b = case
    return m, Codebook(b.omega, max(0.0, (b.params["k"] - 2) / 2**m), b.kind, b.params)


claim.fault("codes storing (k - 2)/n", breaks=root_count, apply=mapped("books", _one_root_fewer))

claim.fault(
    "the guarantee (k - 2)/n", breaks=guarantee, apply=replaced(guarantee=lambda k, n: (k - 2) / n)
)


def _rule_one_root_fewer(N: int, mu: float) -> int:
    """The builder's rule with k - 2 <= mu n for k - 1 <= mu n (a degree read as a root count):
    d_e = 4^m of the smallest such m."""
    m = 1
    while fewest_digits(N, 2**m) - 2 > mu * 2**m:
        m += 1
    return 4**m


claim.fault("the rule k - 2 <= mu n", breaks=rule_sweep, apply=replaced(dim=_rule_one_root_fewer))
claim.fault(  # mu = 1/(2q) read as 1/q
    "the builder asked for 2 mu",
    breaks=built_sweep,
    apply=replaced(builder=lambda N, mu: rs_hadamard_codebook(N, mu=min(1.0, 2 * mu))),
)
claim.fault(  # an off-by-one in the XOR range
    "the root count over N' + 1 words",
    breaks=prefixes,
    apply=replaced(root_count=lambda N, m, k: rs_hadamard_coherence(min(N + 1, 4**m), m, k)),
)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        f"GF(2^m) tables m = 1..{max(inp.tables)}; codes m = "
        + ", ".join(str(m) for m, _ in inp.books)
        + f"; the rule swept at mu = {', '.join(str(mu) for mu, _ in inp.sweep)} over "
        + f"{' / '.join(str(len(ns)) for _, ns in inp.sweep)} N <= {SWEEP_TOP}; built at "
        + f"N = 2^j + 1 <= {max(inp.built_ns)}, mu = {', '.join(map(str, inp.built_mus))}"
    )
)
