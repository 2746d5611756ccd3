"""Ball arithmetic for the certified checks (FLINT's arb through python-flint): float64 tensors
read exactly, enclosures of matmul, exp, log, sqrt, softmax rows and max, and the verdict rule
(docs/derivations/certified.md)."""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Sequence, Tuple

import torch
from flint import arb, arb_mat, ctx

# bits of the working precision: a float64 has 53, so products and sums of the weights stay
# narrow and exp / log / softmax enclosures are ~1e-30 relative wide
PREC = 128

CERTIFIED = "certified"  # the enclosure's upper end is below the bound's lower end
NOT_CERTIFIED = "not certified"  # they overlap (or the premise of the computation fails)
VIOLATED = "violated"  # the enclosure's lower end is above the bound's upper end


@contextmanager
def precision(bits: int = PREC) -> Iterator[None]:
    """arb's working precision set to ``bits`` inside the block, restored after."""
    if not (isinstance(bits, int) and bits >= 53):
        raise ValueError(f"precision must be an int >= 53 bits, got {bits!r}")
    old = ctx.prec
    ctx.prec = bits
    try:
        yield
    finally:
        ctx.prec = old


def exact(x: float) -> arb:
    """A finite float as an exact ball (radius 0): a float64 is a dyadic rational."""
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"only finite numbers have an exact ball, got {x}")
    return arb(x)


def arb_matrix(t: torch.Tensor) -> arb_mat:
    """A 2-D float tensor (float64 or float32) as an arb matrix, each entry read exactly."""
    if not isinstance(t, torch.Tensor) or t.ndim != 2 or not t.is_floating_point():
        raise ValueError("expected a 2-D floating-point torch.Tensor")
    if t.dtype not in (torch.float64, torch.float32):
        raise ValueError(f"expected float64 or float32 (read exactly), got {t.dtype}")
    rows = t.detach().cpu().to(torch.float64).tolist()
    if not all(math.isfinite(v) for r in rows for v in r):
        raise ValueError("the tensor has a non-finite entry")
    return arb_mat([[arb(v) for v in r] for r in rows]) if rows and rows[0] else arb_mat(*t.shape)


def arb_vector(t: torch.Tensor) -> List[arb]:
    """A 1-D float tensor as a list of exact balls."""
    if not isinstance(t, torch.Tensor) or t.ndim != 1:
        raise ValueError("expected a 1-D torch.Tensor")
    return [exact(v) for v in t.detach().cpu().to(torch.float64).tolist()]


def rows_of(m: arb_mat) -> List[List[arb]]:
    """The entries of ``m`` as a list of rows."""
    return [[m[i, j] for j in range(m.ncols())] for i in range(m.nrows())]


def matmul(a: arb_mat, b: arb_mat) -> arb_mat:
    """The enclosure of the product a b (arb's matrix product: each entry a ball)."""
    if a.ncols() != b.nrows():
        raise ValueError(f"shapes ({a.nrows()}, {a.ncols()}) and ({b.nrows()}, {b.ncols()})")
    return a * b


def exp(x: arb) -> arb:
    """The enclosure of e^x."""
    return arb(x).exp()


def log(x: arb) -> arb:
    """The enclosure of ln x; ValueError unless x > 0 holds for the whole ball."""
    x = arb(x)
    if not x > 0:
        raise ValueError(f"log needs a ball inside (0, inf), got {x}")
    return x.log()


def sqrt(x: arb) -> arb:
    """The enclosure of sqrt(x); ValueError unless x >= 0 holds for the whole ball."""
    x = arb(x)
    if not x >= 0:
        raise ValueError(f"sqrt needs a ball inside [0, inf), got {x}")
    return x.sqrt()


def sqrt_nonneg(x: arb) -> arb:
    """The enclosure of sqrt(x) for a quantity known to be >= 0 (a norm squared, a Gram form)
    whose ball may reach below 0: the ball is cut at 0 first."""
    x = arb(x)
    if x >= 0:
        return x.sqrt()
    if x < 0:
        raise ValueError(f"a quantity >= 0 has a ball below 0: {x}")
    return hull((arb(0), x.upper())).sqrt()


def hull(xs: Iterable[arb]) -> arb:
    """The smallest ball holding every ball of ``xs``."""
    xs = list(xs)
    if not xs:
        raise ValueError("hull of no balls")
    out = arb(xs[0])
    for x in xs[1:]:
        out = out.union(x)
    return out


def max_of(xs: Iterable[arb]) -> arb:
    """The enclosure of max(xs) over a finite set: [max of the lower ends, max of the upper
    ends]."""
    xs = list(xs)
    if not xs:
        raise ValueError("max over an empty set")
    return hull((_largest([x.lower() for x in xs]), _largest([x.upper() for x in xs])))


def max_ends(xs: Iterable[arb]) -> Tuple[arb, arb]:
    """The exact end points (radius 0) of max(xs)'s enclosure: (max of the lower ends, max of the
    upper ends); a wide ball's own ends are rounded to its radius's 30 bits, these are not."""
    xs = list(xs)
    if not xs:
        raise ValueError("max over an empty set")
    return _largest([x.lower() for x in xs]), _largest([x.upper() for x in xs])


def _largest(ends: List[arb]) -> arb:
    """The largest of exact end points (radius 0, so arb's comparison decides)."""
    best = ends[0]
    for e in ends[1:]:
        if e > best:
            best = e
    return best


def softmax_row(scores: Sequence[arb]) -> List[arb]:
    """The enclosure of softmax(scores): p_j = e^{s_j - m} / sum_k e^{s_k - m}, shifted by the
    first score's midpoint m (each ball holds the exact weight; their sum's ball holds 1)."""
    s = [arb(v) for v in scores]
    if not s:
        raise ValueError("softmax of an empty row")
    m = s[0].mid()
    e = [exp(v - m) for v in s]
    total = sum(e, arb(0))
    return [v / total for v in e]


def norm(v: Sequence[arb]) -> arb:
    """The enclosure of the Euclidean norm of a vector of balls."""
    return sqrt_nonneg(sum((x * x for x in v), arb(0)))


def down(x: arb) -> float:
    """The largest float at most every point of the ball (its lower end rounded down)."""
    lo = x.lower()
    f = float(lo)
    return math.nextafter(f, -math.inf) if arb(f) > lo else f


def up(x: arb) -> float:
    """The smallest float at least every point of the ball (its upper end rounded up)."""
    hi = x.upper()
    f = float(hi)
    return math.nextafter(f, math.inf) if arb(f) < hi else f


@dataclass(frozen=True)
class Enclosure:
    """A quantity proved to lie in [lower, upper] (floats rounded outward from an arb ball)."""

    lower: float
    upper: float

    @classmethod
    def of(cls, x: arb) -> "Enclosure":
        """The enclosure of an arb ball; ValueError if the ball is not finite."""
        x = arb(x)
        if not x.is_finite():
            raise ValueError(f"the ball is not finite: {x}")
        return cls(down(x), up(x))

    @classmethod
    def between(cls, lower: arb, upper: arb) -> "Enclosure":
        """[lower's lower end, upper's upper end], each rounded outward: for bounds kept as
        exact end points (a wide ball's own ends are rounded to its radius's 30 bits)."""
        lo, hi = down(arb(lower)), up(arb(upper))
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise ValueError(f"not an enclosure: [{lo}, {hi}]")
        return cls(lo, hi)

    @property
    def width(self) -> float:
        return self.upper - self.lower

    def __str__(self) -> str:
        return f"[{self.lower:.12g}, {self.upper:.12g}] (width {self.width:.2g})"


def verdict(measured: Enclosure, bound: Enclosure) -> str:
    """measured <= bound: ``CERTIFIED`` when measured.upper < bound.lower, ``VIOLATED`` when
    measured.lower > bound.upper, else ``NOT_CERTIFIED`` (the enclosures straddle)."""
    if measured.upper < bound.lower:
        return CERTIFIED
    if measured.lower > bound.upper:
        return VIOLATED
    return NOT_CERTIFIED


@dataclass(frozen=True)
class Certified:
    """A certified computation of ``measured <= bound``: both enclosures, the verdict, its cost
    (boxes or cases enclosed, seconds) and a detail (the premise that failed, the widest box)."""

    what: str
    measured: Enclosure
    bound: Enclosure
    status: str
    boxes: int
    seconds: float
    detail: str = ""

    @property
    def holds(self) -> bool:
        return self.status == CERTIFIED

    def line(self) -> str:
        """One line: the verdict, the enclosures and the cost."""
        tail = f"; {self.detail}" if self.detail else ""
        return (
            f"{self.what}: {self.status}: measured in {self.measured}, bound in {self.bound}, "
            f"{self.boxes} boxes, {self.seconds:.2f} s{tail}"
        )
