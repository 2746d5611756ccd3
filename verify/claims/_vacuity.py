"""Where a sample-complexity result is vacuous at its explicit constants (docs/claims.md,
"Vacuity"): the N from which a sample bound falls below the N d samples an FFN needs."""

from __future__ import annotations

from typing import Callable, Optional

from qstr.verify.claim import Vacuity


def first_power_below_ffn(
    n_of_N: Callable[[int], float], d: int, k_lo: int, k_max: int
) -> Optional[int]:
    """The least k in [k_lo, k_max] with n(2^k) < 2^k d, by bisection (n(N) grows like a
    polylog, N d linearly, so their order changes once); None when n(2^k_max) >= 2^k_max d.
    ``k_max``: as far as the bound evaluates in float64."""

    def below(k: int) -> bool:
        return n_of_N(2**k) < 2**k * d

    if below(k_lo):
        return k_lo
    if not below(k_max):
        return None
    lo, hi = k_lo, k_max  # below(lo) false, below(hi) true
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if below(mid) else (mid, hi)
    return hi


def ffn_line(sizes: dict, d: int, k: Optional[int], k_max: int, what: str) -> str:
    """'n(N) = 1.6e+20..2.5e+21 at N = 16..1048576 (what): at or above N d ...; below from 2^k'."""
    Ns = sorted(sizes)
    lo, hi = min(sizes.values()), max(sizes.values())
    above = [N for N in Ns if sizes[N] >= N * d]
    head = f"n(N) = {lo:.2g}..{hi:.2g} at N = {Ns[0]}..{Ns[-1]} ({what})"
    where = (
        "at or above the N d samples an FFN needs (Theorem 6) at every N checked"
        if len(above) == len(Ns)
        else f"at or above N d at {len(above)} of the {len(Ns)} N checked"
    )
    onset = f"below N d from N = 2^{k} on" if k is not None else f"not below N d up to 2^{k_max}"
    return f"{head}, {where}; {onset}"


def ffn_vacuity(n_of_N: Callable[[int], float], Ns, d: int, k_max: int, what: str) -> Vacuity:
    """Vacuous as a separation where n(N) >= N d (the samples an FFN needs, Theorem 6): at every
    N of ``Ns``? And the first N = 2^k below it (up to 2^k_max)."""
    sizes = {N: n_of_N(N) for N in Ns}
    k = first_power_below_ffn(n_of_N, d, 4, k_max)
    return Vacuity(all(n >= N * d for N, n in sizes.items()), ffn_line(sizes, d, k, k_max, what))


def bound_scope(name: str, params, target: float, Ns) -> str:
    """A sample bound's scope: its constants, its risk and its N grid."""
    return f"{name} (q = {params.q}, d = {params.d}), risk {target}, N = {min(Ns)}..{max(Ns)}"
