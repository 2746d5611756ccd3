"""The RS-Hadamard codes of Assumption 3: GF(2^m) tables are fields, and the exact coherence by
root counting equals the Gram coherence, within (k - 1)/n (docs/derivations/codebooks.md (c))."""

from dataclasses import dataclass, replace
from typing import Callable, Dict, Tuple

import numpy as np
import torch

from qstr.constructions.codes import MAX_M, Codebook, gf_mul_table, rs_hadamard_codebook
from qstr.constructions.codes import rs_hadamard_coherence
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, close, exact, mapped, replaced
from qstr.verify.claim import worst
from qstr.verify.claims._codebooks import CODEBOOKS, coherence_rounding, gram_mu, largest
from qstr.verify.registry import register

# x^4 + x^2 + 1 = (x^2 + x + 1)^2 and x^8 + 1 = (x + 1)^8
REDUCIBLE = {4: 0b10101, 8: 0b100000001}


def rs_guarantee(k: int, n: int) -> float:
    """<omega_i, omega_j> = #roots(p_i - p_j) / n <= (k - 1) / n (codebooks.md (c))."""
    return (k - 1) / n


claim = register(
    Claim(
        "rs-hadamard-codes",
        Ref("Assumption 3"),
        statement="the RS-Hadamard codes: GF(2^m) tables are fields for every m used; exact "
        "coherence two ways",
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
    root_count: Callable[[int, int, int], float] = rs_hadamard_coherence  # (N, m, k) -> mu
    guarantee: Callable[[int, int], float] = rs_guarantee  # (k, n) -> (k - 1) / n


@claim.inputs
def rs_inputs(ctx: Context) -> RSInputs:
    """Tables for m = 1..MAX_M; codes for m = 1..5 (6 on the GPU profile)."""
    tables = {m: gf_mul_table(m) for m in range(1, MAX_M + 1)}
    books = tuple(
        (m, rs_hadamard_codebook(4**m, mu=1.0 / 2**m, device=ctx.device))
        for m in range(1, ctx.pick(quick=5, full=5, gpu=6) + 1)
    )
    grams = tuple(gram_mu(b.omega) for _, b in books)
    return RSInputs(tables, books, grams)


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
claim.fault(  # an off-by-one in the XOR range
    "the root count over N' + 1 words",
    breaks=prefixes,
    apply=replaced(root_count=lambda N, m, k: rs_hadamard_coherence(min(N + 1, 4**m), m, k)),
)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        f"GF(2^m) tables m = 1..{max(inp.tables)}; codes m = "
        + ", ".join(str(m) for m, _ in inp.books)
    )
)
