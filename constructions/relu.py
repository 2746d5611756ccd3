"""Small ReLU nets: the 1-D interpolant (of z^2: error h^2/4), the squared-norm net of Props 3
and 21, and the weights of the RNN-transition gadgets -- identity, soft threshold, product
(Lemma 22), gate (Lemma 24). The gadgets' certified errors are ``qstr.bounds.gadgets``.
Derivation: docs/derivations/rnn-transition.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from qstr.constructions import validate
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.mlp import MLPWeights
from qstr.constructions.moved import module_getattr, moved

_GADGETS = "qstr.bounds.gadgets"  # where the gadgets' certificates are computed (issue 56)


def interpolant(f: Callable[[torch.Tensor], torch.Tensor], knots: torch.Tensor) -> TwoLayerNet:
    """Two-layer ReLU net equal to the piecewise-linear interpolant of f at ``knots`` (1-D input).

    On [k_0, k_m] the net is the interpolant; outside it extends the end segments linearly:
        net(z) = f(k_0) + s_0 (relu(z - k_0) - relu(k_0 - z))
                 + sum_{i>=1} (s_i - s_{i-1}) relu(z - k_i),
    with s_i the slope on [k_i, k_{i+1}]. The constant f(k_0) sits in the bias of a unit
    relu(0 z + 1) with outer weight f(k_0).
    """
    knots = knots.to(torch.float64)
    if knots.dim() != 1 or knots.numel() < 2 or not bool((knots[1:] > knots[:-1]).all()):
        raise ValueError("knots must be a strictly increasing 1-D tensor with at least 2 entries")
    vals = f(knots)
    slopes = (vals[1:] - vals[:-1]) / (knots[1:] - knots[:-1])
    kinks = slopes[1:] - slopes[:-1]
    one = torch.ones(1, dtype=torch.float64)
    W = torch.cat(
        [
            one,
            -one,
            torch.ones(kinks.numel(), dtype=torch.float64),
            torch.zeros(1, dtype=torch.float64),
        ]
    )
    b = torch.cat([-knots[:1], knots[:1], -knots[1:-1], one])
    a = torch.cat([slopes[:1], -slopes[:1], kinks, vals[:1]])
    return TwoLayerNet(a=a, W=W[:, None], b=b)


def square_net(R: float, knots: int) -> tuple[TwoLayerNet, float]:
    """Net for z -> z^2 on [-R, R] with ``knots`` equally spaced knots, and its sup-error h^2/4."""
    R = validate.positive_float("R", R)
    knots = validate.positive_int("knots", knots, minimum=2)
    grid = torch.linspace(-R, R, knots, dtype=torch.float64)
    h = 2 * R / (knots - 1)
    return interpolant(lambda z: z * z, grid), h * h / 4


def sqnorm_net(q: int, d: int, H: int, *, R: float, knots: int) -> tuple[TwoLayerNet, float]:
    """(1/sqrt(q d)) sum_{k < H} (||x_k||^2 - d) as a two-layer net on vec(x_1..x_H) in R^{H d}.

    Returns the net and its certified sup-error on inputs with every coordinate in [-R, R]:
    H d h^2 / (4 sqrt(q d)). Width H d (knots + 2) (+1 bias unit).
    """
    q, d, H = (validate.positive_int(n, v) for n, v in (("q", q), ("d", d), ("H", H)))
    unit, err = square_net(R, knots)
    n_in, scale = H * d, 1.0 / math.sqrt(q * d)
    w_unit, b_unit, a_unit = unit.W[:, 0], unit.b, unit.a
    # one copy of the 1-D net per input coordinate; the constant unit is shared
    per = w_unit.numel() - 1
    W = torch.zeros(n_in * per + 1, n_in, dtype=torch.float64)
    b = torch.zeros(n_in * per + 1, dtype=torch.float64)
    a = torch.zeros(n_in * per + 1, dtype=torch.float64)
    for i in range(n_in):
        rows = slice(i * per, (i + 1) * per)
        W[rows, i] = w_unit[:-1]
        b[rows] = b_unit[:-1]
        a[rows] = a_unit[:-1] * scale
    b[-1] = 1.0
    a[-1] = (n_in * a_unit[-1] - H * d) * scale  # constants of every copy, minus H d
    return TwoLayerNet(a=a, W=W, b=b), n_in * err * scale


# =====================================================================================
# Certified one-hidden-layer gadgets (Lemmas 22 and 24, the identity, the soft threshold)
# =====================================================================================
#
# Every gadget is a one-hidden-layer ReLU net  u -> W2 relu(W1 u + b1)  with the domain its
# certificate holds on and its weight norms. The certificate -- the sup-error over the domain,
# derived exactly from the piecewise-linear structure (docs/derivations/rnn-transition.md) -- is
# computed from the gadget's parameters in qstr.bounds.gadgets (issue 56). "Certified" means
# proved, not sampled: the claims in verify/claims/lemma_22.py and lemma_24.py only check that
# sampling, dense grids and adversarial search never beat the certificate, and that the
# certificate is attained (it is tight) where the derivation says it is.


@dataclass(frozen=True, eq=False)
class Gadget:
    """A one-hidden-layer ReLU gadget u -> W2 relu(W1 u + b1).

    ``domain`` is where its certificate (``qstr.bounds.gadgets.gadget_error``: the sup of
    |gadget(u) - target(u)|) holds; ``tight`` says the certificate is attained (so it cannot be
    improved for these weights). ``params`` holds the derived constants (knot spacing, slope, ...).
    """

    name: str
    W1: torch.Tensor  # (width, n_in)
    b1: torch.Tensor  # (width,)
    W2: torch.Tensor  # (n_out, width)
    domain: str
    knots: Optional[int]
    tight: bool
    target: Callable[[torch.Tensor], torch.Tensor]
    params: dict = field(default_factory=dict)

    @property
    def error(self) -> float:
        """Deprecated (issue 56): the certificate is ``qstr.bounds.gadgets.gadget_error``."""
        return moved("Gadget.error", "gadget_error", _GADGETS)(self)

    @property
    def width(self) -> int:
        return int(self.W1.shape[0])

    @property
    def n_in(self) -> int:
        return int(self.W1.shape[1])

    @property
    def n_out(self) -> int:
        return int(self.W2.shape[0])

    @property
    def layers(self) -> MLPWeights:
        """``MLPWeights(((W1, b1), (W2, None)))`` (the paper's convention: no bias on the last
        layer)."""
        return MLPWeights(((self.W1, self.b1), (self.W2, None)))

    @property
    def norms(self) -> dict:
        """Frobenius norms of the layers, the largest |weight| and a Lipschitz bound
        ||W2|| ||W1||."""
        op = lambda M: float(torch.linalg.matrix_norm(M, ord=2))  # noqa: E731
        return {
            "W1_fro": float(self.W1.norm()),
            "b1_norm": float(self.b1.norm()),
            "W2_fro": float(self.W2.norm()),
            "max_abs": float(max(self.W1.abs().max(), self.b1.abs().max(), self.W2.abs().max())),
            "lipschitz_bound": op(self.W2) * op(self.W1),
        }

    def __call__(self, u: torch.Tensor) -> torch.Tensor:
        """Evaluate on ``u`` of shape (..., n_in); returns (..., n_out)."""
        validate.finite_tensor("u", u)
        if u.shape[-1:] != (self.n_in,):
            raise ValueError(f"u must have last axis {self.n_in}, got shape {tuple(u.shape)}")
        return self.layers(u)

    def sup_error(self, u: torch.Tensor) -> float:
        """max |gadget(u) - target(u)| over the given points (a measurement, not the
        certificate)."""
        return float((self(u) - self.target(u)).abs().max())


def _identity_pair(n: int):
    eye = torch.eye(n, dtype=torch.float64)
    return torch.cat([eye, -eye]), torch.cat([eye, -eye], dim=1)


def identity_gadget(n: int = 1) -> Gadget:
    """z -> z on R^n, exactly: relu(z) - relu(-z) = z (width 2n, error 0 everywhere)."""
    n = validate.positive_int("n", n)
    W1, W2 = _identity_pair(n)
    return Gadget(
        "identity",
        W1,
        torch.zeros(2 * n, dtype=torch.float64),
        W2,
        "all of R^n",
        None,
        True,
        lambda u: u,
        {"n": n},
    )


def soft_threshold(z: torch.Tensor, b: float) -> torch.Tensor:
    """ST_b(z) = relu(z - b) - relu(-z - b): 0 on [-b, b], z -+ b outside; |ST_b(z) - z| <= b."""
    return torch.relu(z - b) - torch.relu(-z - b)


def soft_threshold_gadget(b: float, n: int = 1) -> Gadget:
    """Coordinate-wise soft threshold ST_b on R^n, realised exactly (width 2n, error 0).

    It is what makes the RNN transition of Prop 26 output *exactly* zero: any pre-threshold
    value of size <= b is sent to 0, and a value z with |z| > b moves by exactly b.
    """
    b = validate.positive_float("b", b, allow_zero=True)
    n = validate.positive_int("n", n)
    W1, W2 = _identity_pair(n)
    return Gadget(
        "soft-threshold",
        W1,
        torch.full((2 * n,), -b, dtype=torch.float64),
        W2,
        "all of R^n",
        None,
        True,
        lambda u: soft_threshold(u, b),
        {"b": b, "n": n},
    )


# ----------------------------------------------------------------------- Lemma 22: products


def square_knots(R: float, knots: int) -> tuple[float, float]:
    """(k_0, h): ``knots`` equally spaced knots on [-2R, 2R] (the range of x +- y on [-R, R]^2)."""
    return -2.0 * R, 4.0 * R / (knots - 1)


def square_units(R: float, knots: int):
    """ReLU units of the interpolant S of z^2 at ``knots`` uniform knots on [-2R, 2R], without its
    constant.

    Returns (w, beta, coef), each (knots,): S(z) - S(k_0) = sum_u coef_u relu(w_u z + beta_u), with
    the units relu(z - k_0), relu(k_0 - z) (slope s_0 = k_0 + k_1 on both sides of k_0: the
    linear extension) and relu(z - k_i), i = 1..knots-2, each with kink k_{i+1} - k_{i-1} = 2h.
    """
    k0, h = square_knots(R, knots)
    grid = k0 + h * torch.arange(knots, dtype=torch.float64)
    s0 = float(grid[0] + grid[1])
    w = torch.cat(
        [torch.tensor([1.0, -1.0], dtype=torch.float64), torch.ones(knots - 2, dtype=torch.float64)]
    )
    beta = torch.cat([torch.tensor([-k0, k0], dtype=torch.float64), -grid[1:-1]])
    coef = torch.cat(
        [
            torch.tensor([s0, -s0], dtype=torch.float64),
            torch.full((knots - 2,), 2 * h, dtype=torch.float64),
        ]
    )
    return w, beta, coef


def square_interp(z: torch.Tensor, R: float, knots: int) -> torch.Tensor:
    """S(z) - S(k_0) in closed form (equal to the ``square_units`` sum up to rounding), any shape.

    On the segment [k_i, k_i + h] (end segments extended linearly)
    S(z) = k_i^2 + (2 k_i + h)(z - k_i).
    """
    k0, h = square_knots(R, knots)
    idx = torch.clamp(torch.floor((z - k0) / h), 0, knots - 2)
    ki = k0 + idx * h
    return ki * ki + (2 * ki + h) * (z - ki) - k0 * k0


def product_gadget(R: float, knots: int) -> Gadget:
    """(x, y) -> x y on [-R, R]^2 (Lemma 22), by polarisation x y = (S(x + y) - S(x - y)) / 4.

    S is the piecewise-linear interpolant of z^2 at ``knots`` equally spaced knots on
    [-2R, 2R], spacing h = 4R / (knots - 1). Certificate (exact, attained):

        e(z) = S(z) - z^2 = (z - k_i)(k_i + h - z) in [0, h^2 / 4] on [-2R, 2R], 0 at knots,
        h^2/4 at midpoints; so |P - x y| = |e(x + y) - e(x - y)| / 4 <= h^2 / 16,

    attained when x + y is a midpoint and x - y a knot (e.g. x = y = h/4 for odd ``knots``;
    ``qstr.bounds.gadgets.product_error``). Width 2 ``knots`` (the constants of S cancel in the
    difference).
    """
    R = validate.positive_float("R", R)
    knots = validate.positive_int("knots", knots, minimum=2)
    w, beta, coef = square_units(R, knots)
    plus = torch.stack([w, w], dim=1)  # rows act on (x, y): w (x + y)
    minus = torch.stack([w, -w], dim=1)  # w (x - y)
    W1 = torch.cat([plus, minus])
    b1 = torch.cat([beta, beta])
    W2 = torch.cat([coef, -coef])[None, :] / 4
    _, h = square_knots(R, knots)
    return Gadget(
        "product",
        W1,
        b1,
        W2,
        f"[-{R:g}, {R:g}]^2",
        knots,
        True,
        lambda u: (u[..., 0] * u[..., 1])[..., None],
        {"R": R, "h": h},
    )


# ---------------------------------------------------------------------- Lemma 24: the gate


@dataclass(frozen=True)
class GateBands:
    """Constants of the gate gadget: bands of width ``delta`` on [1/2, s_max], slope
    M = 2 r_x / delta.

    Band k (k = 0..K-1) starts at tau_k = 1/2 + k delta; its pair of units is
        relu(x + M s + beta_k) - relu(M s + beta_k),   beta_k = r_x - M (tau_k + delta),
    which is exactly 0 for s <= tau_k and exactly x for s >= tau_k + delta (|x| <= r_x).
    The gate is 2 delta sum_k (pair_k).
    """

    r_x: float
    knots: int
    s_max: float
    delta: float
    M: float
    beta: torch.Tensor  # (knots,)

    @property
    def error(self) -> float:
        """Deprecated (issue 56): Lemma 24's certificate is ``qstr.bounds.gadgets.gate_error``."""
        return moved("GateBands.error", "gate_error", _GADGETS)(self.r_x, self.knots, self.s_max)

    def leak(self, excess: float) -> float:
        """Deprecated (issue 56): the gate's leak bound is ``qstr.bounds.gadgets.gate_leak``."""
        leak = moved("GateBands.leak", "gate_leak", _GADGETS)
        return leak(excess, self.r_x, self.knots, self.s_max)

    def evaluate(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """Closed-form evaluation in O(1) per entry: x (..., d) and s (...) broadcast; returns
        (..., d).

        The pre-activations of band k are y - 2 r_x k with y = M (s - 1/2) - r_x (+ x for the
        x-units), and sum_{k<K} relu(y - c k) = n y - c n (n - 1) / 2 with
        n = #{k < K : c k < y} = clamp(ceil(y / c), 0, K), c = 2 r_x. Equal to the unit sum
        (:meth:`evaluate_units`) up to rounding, and exactly 0 wherever every unit is off.
        """
        y = (self.M * (s - 0.5) - self.r_x)[..., None]
        return 2 * self.delta * (self._ramp_sum(y + x) - self._ramp_sum(y))

    def _ramp_sum(self, y: torch.Tensor) -> torch.Tensor:
        c = 2 * self.r_x
        n = torch.clamp(torch.ceil(y / c), 0, self.knots)
        return n * y - c * n * (n - 1) / 2

    def evaluate_units(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """The same gate as the literal sum over the 2K units (reference for :meth:`evaluate`)."""
        beta = self.beta.to(dtype=x.dtype, device=x.device)
        pre = self.M * s[..., None, None] + beta  # (..., 1, K)
        units = torch.relu(x[..., None] + pre) - torch.relu(pre)
        return 2 * self.delta * units.sum(-1)


def gate_bands(r_x: float, knots: int, s_max: float = 1.0) -> GateBands:
    """The bands of :func:`gate_gadget` (Lemma 24's knot layout, shared by the RNN transition)."""
    r_x = validate.positive_float("r_x", r_x)
    knots = validate.positive_int("knots", knots)
    s_max = float(s_max)
    if not (math.isfinite(s_max) and s_max > 0.5):
        raise ValueError(f"s_max must be a finite number > 1/2, got {s_max}")
    delta = (s_max - 0.5) / knots
    M = 2 * r_x / delta
    tau = 0.5 + delta * torch.arange(knots, dtype=torch.float64)
    return GateBands(r_x, knots, s_max, delta, M, r_x - M * (tau + delta))


def gate_target(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """The gate of Lemma 24: 2 x relu(s - 1/2) (x 1[t_l = i] when s = <omega_i, omega_{t_l}>)."""
    return 2 * x * torch.relu(s - 0.5)


def gate_gadget(r_x: float, knots: int, s_max: float = 1.0) -> Gadget:
    """(x, s) -> 2 x relu(s - 1/2) for |x| <= r_x, s <= s_max (Lemma 24); certified error r_x delta
    (``qstr.bounds.gadgets.gate_error``).

    relu(s - 1/2) = int_{1/2}^{s_max} 1[s > tau] d tau is discretised into K = ``knots`` bands
    of width delta = (s_max - 1/2) / K, and x 1[s > tau] is realised *exactly outside a band*
    by a pair of units (big-M gating, M = 2 r_x / delta; see :class:`GateBands`). Inside
    band k the pair is theta x with theta in [0, 1]; the sum is then
    2 x (delta * #full bands + delta theta) against 2 x (s - 1/2), so the error is
    2 delta |x| |theta - u| (u the position in the band) <= delta |x| <= r_x delta, attained at
    x = +-r_x, u = 1/2. For s <= 1/2 the gadget is exactly 0. Width 2K; largest weight M.
    """
    bands = gate_bands(r_x, knots, s_max)
    K = bands.knots
    ones = torch.ones(K, dtype=torch.float64)
    W1 = torch.cat(
        [torch.stack([ones, bands.M * ones], 1), torch.stack([0 * ones, bands.M * ones], 1)]
    )
    b1 = torch.cat([bands.beta, bands.beta])
    W2 = 2 * bands.delta * torch.cat([ones, -ones])[None, :]
    return Gadget(
        "gate",
        W1,
        b1,
        W2,
        f"|x| <= {bands.r_x:g}, s <= {bands.s_max:g}",
        K,
        True,
        lambda u: gate_target(u[..., 0], u[..., 1])[..., None],
        {"r_x": bands.r_x, "s_max": bands.s_max, "delta": bands.delta, "M": bands.M},
    )


# Names that moved to qstr.bounds (issue 56): the old import path still works, with a
# DeprecationWarning, and loads qstr.bounds only when the name is asked for.
_MOVED_TO_BOUNDS = {
    "product_error": "qstr.bounds.gadgets",  # Lemma 22's certificate
}
__getattr__ = module_getattr(__name__, _MOVED_TO_BOUNDS)
