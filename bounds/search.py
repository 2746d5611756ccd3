"""Integer search shared by the bounds: the smallest n where a monotone predicate turns true."""

from __future__ import annotations

import math
from typing import Callable, Optional


def smallest_true(
    pred: Callable[[int], bool], *, limit: float, log_bisect: bool = False
) -> Optional[int]:
    """Smallest integer n >= 1 with ``pred(n)``, for pred False ... False True ... True.

    Doubling until pred holds (``None`` once past ``limit``), then bisection keeping
    not pred(lo), pred(hi); ``log_bisect`` bisects on log n (for n spanning many decades).
    """
    if pred(1):
        return 1
    lo, hi = 1, 2
    while not pred(hi):
        lo, hi = hi, hi * 2
        if hi > limit:
            return None
    while hi - lo > 1:
        mid = math.isqrt(lo * hi) if log_bisect else (lo + hi) // 2
        mid = min(max(mid, lo + 1), hi - 1)
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi
