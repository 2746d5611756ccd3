"""What the codebook claims share (Assumption 3, the RS-Hadamard codes, the experiments'
encoding): the brute-force coherence and its rounding term, the pair tail by counting sign
patterns and its one-sided slip (docs/derivations/codebooks.md)."""

from fractions import Fraction
from operator import attrgetter
from typing import Optional

import torch

from qstr.bounds.codebooks import rademacher_pair_tail
from qstr.constructions.codes import Codebook
from qstr.verify.rounding import Rounding

CODEBOOKS = "docs/derivations/codebooks.md"
largest = attrgetter("measured")  # worst(..., key=largest): the codebook measuring most


def coherence_rounding(book: Codebook, dtype: Optional[torch.dtype] = None) -> Rounding:
    """Inner products of unit codes: d_e-term sums whose magnitudes add up to at most 1 (in
    ``dtype``, by default the codes')."""
    return Rounding(n=book.d_e, scale=1.0, dtype=dtype or book.omega.dtype, what="d_e eps")


def gram_mu(omega: torch.Tensor) -> float:
    """max_{i != j} |<omega_i, omega_j>| from the full float64 Gram matrix (brute force)."""
    G = omega.to(torch.float64) @ omega.to(torch.float64).T
    return float((G - torch.diag(torch.diagonal(G))).abs().max())


def tail_by_counting(d_e: int, mu: float) -> Fraction:
    """P(|<w, w'>| > mu) for independent Rademacher words, by counting sign patterns:
    <w, w'> = (2b - d_e)/d_e with b ~ Binomial(d_e, 1/2) (codebooks.md (a))."""
    cut, count, term = Fraction(mu) * d_e, 0, 1  # term = C(d_e, b), b = 0, 1, ...
    for b in range(d_e + 1):
        if d_e - 2 * b <= cut:  # the lower tail 2b - d_e < -mu d_e ends; the upper one mirrors it
            break
        count, term = count + term, term * (d_e - b) // (b + 1)
    return Fraction(2 * count, 2**d_e)


def one_sided_pair_tail(d_e: int, mu: float) -> float:
    """The pair tail with |.| forgotten: P(<w_i, w_j> > mu), half the two-sided tail."""
    return rademacher_pair_tail(d_e, mu) / 2
