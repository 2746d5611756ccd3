"""Token laws of Assumption 1 at their exact constant C_x, for claim lemma-12
(verify/claims/lemma_12.py; docs/derivations/theorem4.md, section 1a).

Assumption 1 asks (E||x||^r)^{1/r} <= sqrt(C_x d r) for every r >= 1: the least such constant is
C_x = sup_{r >= 1} (E||x||^r)^{2/r} / (d r). Two laws, each scaled so that this sup equals a given
C_x: Rademacher coordinates sqrt(s) (+-1)^d (a constant norm: the sup is at r = 1, s = C_x), and
the sparse Gaussian B sqrt(s) g, B ~ Bernoulli(p), g ~ N(0, I_d), whose tail
P(||x|| > t) ~ p exp(-t^2 / (2s)) is the Markov tail of (1a) at its constant e C_x d when the sup
sits at a large r (small p): the law that brings the token maximum nearest r_x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath as mp
import torch

SUP_DPS = 30  # digits of the sup's golden-section search
GRID = 4000  # log-spaced r in [1, 1e6] of the float64 evaluation
GRID_RTOL = 1e-6  # the grid's maximum misses the sup by at most this (its spacing, 0.35%, squared)


@dataclass(frozen=True)
class TokenLaw:
    """Tokens in R^d: Rademacher coordinates (``p`` None) or the sparse Gaussian of mass ``p``,
    scaled by ``s`` (the variance of a coordinate given B = 1, or its square for +-1)."""

    name: str
    d: int
    C_x: float  # the constant it was scaled to
    s: float
    p: float | None = None

    def log_moment(self, r: float) -> float:
        """ln E||x||^r in float64 (math.lgamma)."""
        if self.p is None:
            return (r / 2) * math.log(self.s * self.d)
        tail = math.lgamma((self.d + r) / 2) - math.lgamma(self.d / 2)
        return math.log(self.p) + (r / 2) * math.log(2 * self.s) + tail

    def constant_on_grid(self) -> float:
        """max over GRID log-spaced r in [1, 1e6] of (E||x||^r)^{2/r} / (d r), in float64: a
        second evaluation of C_x (no search, no mpmath)."""
        rs = (10 ** (6 * i / (GRID - 1)) for i in range(GRID))
        return max(math.exp(2 * self.log_moment(r) / r) / (self.d * r) for r in rs)

    def sample(self, shape: tuple, generator: torch.Generator) -> torch.Tensor:
        """Tokens of shape (*shape, d), float64, on the generator's device."""
        kw = dict(generator=generator, dtype=torch.float64, device=generator.device)
        if self.p is None:
            signs = torch.randint(0, 2, (*shape, self.d), generator=generator, device=kw["device"])
            return math.sqrt(self.s) * (2.0 * signs.to(torch.float64) - 1.0)
        keep = (torch.rand(shape, **kw) < self.p).to(torch.float64)[..., None]
        return math.sqrt(self.s) * keep * torch.randn(*shape, self.d, **kw)


def _sparse_ratio(r, p: float, d: int):
    """(E||x||^r)^{2/r} / (d r) of the sparse Gaussian at s = 1, in mpmath."""
    r = mp.mpf(r)
    log_m = mp.log(p) + (r / 2) * mp.log(2) + mp.loggamma((d + r) / 2) - mp.loggamma(mp.mpf(d) / 2)
    return mp.exp(2 * log_m / r) / (d * r)


def sparse_constant(p: float, d: int) -> float:
    """C_x of the sparse Gaussian at s = 1: sup_{r >= 1} of its moment ratio, by a log grid on
    [1, 1e8] refined by golden section around the largest point (the ratio rises to one maximum,
    near r = e / (pi p^2) for small p, and falls to 1 / (e d))."""
    with mp.workdps(SUP_DPS):
        grid = [mp.mpf(10) ** (k / mp.mpf(50)) for k in range(401)]
        k = max(range(len(grid)), key=lambda i: _sparse_ratio(grid[i], p, d))
        lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
        golden = (mp.sqrt(5) - 1) / 2
        for _ in range(120):
            c, e = hi - golden * (hi - lo), lo + golden * (hi - lo)
            lo, hi = (lo, e) if _sparse_ratio(c, p, d) > _sparse_ratio(e, p, d) else (c, hi)
        return float(_sparse_ratio((lo + hi) / 2, p, d))


def rademacher(C_x: float, d: int) -> TokenLaw:
    """sqrt(C_x) (+-1)^d: ||x|| = sqrt(C_x d) always, so the sup is at r = 1 and equals C_x."""
    return TokenLaw(f"Rademacher, C_x = {C_x:g}", d, C_x, C_x)


def sparse_gaussian(C_x: float, d: int, p: float) -> TokenLaw:
    """B sqrt(s) g with s = C_x / sparse_constant(p, d): its C_x is exactly ``C_x``."""
    name = f"sparse Gaussian p = {p:g}, C_x = {C_x:g}"
    return TokenLaw(name, d, C_x, C_x / sparse_constant(p, d), p)
