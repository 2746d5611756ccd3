"""Interpolating networks of Theorem 9 (Lemmas 36-38: separating direction, sorted interpolation,
the memorising RNN).

Weights only, from given parameters (the gap eps, the direction v, the depth): what the weights are
(norms, the float64 rounding of their evaluation), never what a lemma promises. The thresholds,
constants and guarantees (eps_n, C38_A, C36, the certified norm bounds) are in
``qstr.bounds.interpolation``. Derivation: docs/derivations/interpolation.md.

The generalising slot-memory RNN they compete with (Prop 8) is ``qstr.constructions.slot_memory``'s;
``slot_memory_rnn`` stays importable from here (listed in ``__all__``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Union

import torch

from qstr.constructions import validate
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.mlp import MLPWeights
from qstr.constructions.paper_models import DeepTransitionBiRNN
from qstr.constructions.slot_memory import slot_memory_rnn

__all__ = [
    "float64_points",
    "certified_gap",
    "SeparatingDirection",
    "separating_direction",
    "Lemma37Events",
    "lemma37_events",
    "Lemma38Net",
    "interpolate_sorted",
    "Lemma36Net",
    "interpolate_points",
    "evaluate_net",
    "rounding_allowance",
    "memorised_points",
    "MemoriserLayout",
    "memorising_rnn",
    "parameter_norm2",
    "slot_memory_rnn",  # re-exported: Prop 8's RNN (qstr.constructions.slot_memory)
]

UNIT_ROUNDOFF = 2.0**-53


# ---------------------------------------------------------------------------------- Lemma 37


def float64_points(name: str, x) -> torch.Tensor:
    """``x`` checked as n >= 2 finite float64 points of R^D, D >= 1 (shape (n, D)); returned."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape (n, D), got {type(x).__name__}")
    validate.shape(name, x, (None, None))
    if x.dtype != torch.float64:
        raise ValueError(f"{name} must be float64 (exact checks run in float64), got {x.dtype}")
    validate.finite_tensor(name, x)
    if x.shape[0] < 2 or x.shape[1] < 1:
        raise ValueError(
            f"{name} must hold n >= 2 points of dimension D >= 1, got shape {tuple(x.shape)}"
        )
    return x


def certified_gap(x: torch.Tensor, v: torch.Tensor) -> tuple[float, torch.Tensor]:
    """(certified min_{i != j} |<v, x_i - x_j>|, z = x v) in float64.

    The float64 products z_j = fl(<v, x_j>) are off by at most gamma_D sum_k |v_k x_jk| with
    gamma_D = D u / (1 - D u), u = 2^-53 (Higham, Thm 3.1); the returned gap is the float gap of the
    sorted z, shrunk by (1 - u) for the subtraction, minus twice the largest such error. It is a
    rigorous lower bound on the exact gap of the real numbers <v, x_j>.
    """
    x = float64_points("x", x)
    if not isinstance(v, torch.Tensor) or v.dtype != torch.float64:
        raise ValueError("v must be a float64 torch.Tensor of shape (D,)")
    validate.shape("v", v, (x.shape[1],))
    validate.finite_tensor("v", v)
    gap, z = _certified_gaps(x[None], v[None])
    return float(gap[0]), z[0]


def _certified_gaps(x: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`certified_gap` for T trials at once: x (T, n, D), v (T, D) -> gaps (T,), z (T, n)."""
    D = x.shape[-1]
    z = (x @ v[:, :, None]).squeeze(-1)
    gamma = D * UNIT_ROUNDOFF / (1.0 - D * UNIT_ROUNDOFF)
    err = gamma * (x.abs() @ v.abs()[:, :, None]).squeeze(-1).amax(dim=1)
    s = torch.sort(z, dim=1).values
    return (s[:, 1:] - s[:, :-1]).amin(dim=1) * (1.0 - UNIT_ROUNDOFF) - 2.0 * err, z


@dataclass(frozen=True, eq=False)
class SeparatingDirection:
    """Lemma 37's output: a unit v with certified gaps >= ``threshold`` and
    ||z||^2 <= ``norm_factor`` n."""

    v: torch.Tensor  # (D,) unit vector, float64
    z: torch.Tensor  # (n,) projections <v, x_j>
    gap: float  # certified min_{i != j} |z_i - z_j|
    threshold: float  # eps the gap was required to meet (Lemma 37: eps_n)
    z_norm2: float  # ||z||^2
    norm_factor: float  # ||z||^2 <= norm_factor * n was required (Lemma 37: 2)
    tries: int  # draws of v until both events held


def _unit_vector(D: int, generator: torch.Generator) -> torch.Tensor:
    g = torch.randn(D, generator=generator, dtype=torch.float64, device=generator.device)
    return g / g.norm()


def separating_direction(
    x: torch.Tensor,
    *,
    generator: torch.Generator,
    threshold: float,
    norm_factor: float,
    max_tries: int = 1000,
) -> SeparatingDirection:
    """Draw unit v (uniform on the sphere, from ``generator``) until Lemma 37's events hold on
    ``x``.

    Success means certified gap >= ``threshold`` and ||z||^2 <= ``norm_factor`` * n. Lemma 37's
    values (eps_n = sqrt(pi)/(3 n^2) and 2, jointly met with probability >= 1/3 over Gaussian x
    and v) are ``qstr.bounds.interpolation.gap_threshold`` and ``LEMMA37_NORM_FACTOR``; for
    typical x a handful of tries suffice; ``tries`` is reported. Raises ``ValueError`` if
    ``max_tries`` draws all fail (e.g. two equal points).
    """
    x = float64_points("x", x)
    n, D = x.shape
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if not validate.same_device(generator.device, x.device):
        raise ValueError(f"generator lives on {generator.device} but x on {x.device}")
    thr = validate.positive_float("threshold", threshold)
    norm_factor = validate.positive_float("norm_factor", norm_factor)
    max_tries = validate.positive_int("max_tries", max_tries)
    for tries in range(1, max_tries + 1):
        v = _unit_vector(D, generator)
        gap, z = certified_gap(x, v)
        z2 = float(z @ z)
        if gap >= thr and z2 <= norm_factor * n:
            return SeparatingDirection(
                v=v, z=z, gap=gap, threshold=thr, z_norm2=z2, norm_factor=norm_factor, tries=tries
            )
    raise ValueError(
        f"max_tries={max_tries} random directions all failed "
        f"(gap >= {thr:.3g} and ||z||^2 <= {norm_factor:g} n); "
        f"the points may nearly coincide -- raise max_tries or check x"
    )


@dataclass(frozen=True)
class Lemma37Events:
    """Monte Carlo counts of Lemma 37's events over ``trials`` independent (x, v) draws."""

    n: int
    D: int
    trials: int
    threshold: float
    gap_ok: int  # trials with min pairwise gap >= threshold
    norm_ok: int  # trials with ||z||^2 <= norm_factor n
    joint_ok: int  # both
    norm_factor: float


def lemma37_events(
    n: int,
    D: int,
    *,
    trials: int,
    generator: torch.Generator,
    threshold: float,
    norm_factor: float,
    chunk: int = 4096,
) -> Lemma37Events:
    """Draw ``trials`` independent pairs (x in R^{n x D} Gaussian, v uniform unit) and count the
    events gap >= ``threshold`` and ||z||^2 <= ``norm_factor`` n (Lemma 37: eps_n and 2, from
    ``qstr.bounds.interpolation``; its union bound is ``lemma37_union_bound`` there).

    Gaps are computed in float64 as the certified gap of each trial (:func:`certified_gap`'s
    rounding allowance, batched). Each chunk of trials draws its x, then its v. Device: the
    generator's.
    """
    n = validate.positive_int("n", n, minimum=2)
    D = validate.positive_int("D", D)
    trials = validate.positive_int("trials", trials)
    chunk = validate.positive_int("chunk", chunk)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    thr = validate.positive_float("threshold", threshold)
    norm_factor = validate.positive_float("norm_factor", norm_factor)
    dev = generator.device
    gap_ok = norm_ok = joint_ok = 0
    done = 0
    while done < trials:
        T = min(chunk, trials - done)
        x = torch.randn(T, n, D, generator=generator, dtype=torch.float64, device=dev)
        v = torch.randn(T, D, generator=generator, dtype=torch.float64, device=dev)
        v = v / v.norm(dim=1, keepdim=True)
        gap, z = _certified_gaps(x, v)
        g_ok = gap >= thr
        z_ok = (z * z).sum(dim=1) <= norm_factor * n
        gap_ok += int(g_ok.sum())
        norm_ok += int(z_ok.sum())
        joint_ok += int((g_ok & z_ok).sum())
        done += T
    return Lemma37Events(
        n=n,
        D=D,
        trials=trials,
        threshold=thr,
        gap_ok=gap_ok,
        norm_ok=norm_ok,
        joint_ok=joint_ok,
        norm_factor=norm_factor,
    )


# ---------------------------------------------------------------------------------- Lemma 38


@dataclass(frozen=True, eq=False)
class Lemma38Net:
    """Lemma 38's interpolant of sorted scalars, before (``raw``) and after (``balanced``)
    rescaling.

    Both nets compute the same function z -> sum_k a_k relu(w_k z + b_k) (1-D input, W of shape
    (n, 1)).
    ``a_norm2`` = ||a'||^2 and ``wb_norm2`` = ||w'||^2 + ||b'||^2 of the raw net (Lemma 38's bound
    on ``a_norm2``, 16 ||y||^2 / eps^2, is ``qstr.bounds.interpolation.lemma38_bound``); after
    rescaling by ``tau`` the total squared norm is ``norm2_balanced`` = 2 sqrt(a_norm2 *
    wb_norm2) (the minimum over tau).
    ``max_error`` is max_k |f(z_k) - y_k| of the balanced net in float64; ``rounding`` is a rigorous
    bound on the float64 evaluation error at the data (:func:`rounding_allowance`): the net is exact
    in real arithmetic, so ``max_error <= rounding`` is the exactness check when 1e-9 is too strict
    (large n: the telescoping sum cancels terms of size ||y|| / eps).
    """

    raw: TwoLayerNet
    balanced: TwoLayerNet
    eps: float
    min_gap: float
    y_norm2: float
    a_norm2: float
    wb_norm2: float
    tau: float
    norm2_raw: float
    norm2_balanced: float
    max_error: float
    rounding: float


def _vector(name: str, t, n: Optional[int] = None) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float64:
        raise ValueError(f"{name} must be float64 (exact checks run in float64), got {t.dtype}")
    validate.shape(name, t, (n,))
    validate.finite_tensor(name, t)
    return t


def rounding_allowance(net: TwoLayerNet, x: torch.Tensor) -> float:
    """max over rows of x of gamma_{D+m+2} sum_k |a_k| (|W_k| |x| + |b_k|): a float64 error bound
    for :func:`evaluate_net` (Higham-style, any summation order), with gamma_j = j u / (1 - j u)."""
    D, m = net.W.shape[1], net.W.shape[0]
    j = D + m + 2
    gamma = j * UNIT_ROUNDOFF / (1.0 - j * UNIT_ROUNDOFF)
    W, b, a = (t.to(x).abs() for t in (net.W, net.b, net.a))
    return float(gamma * ((x.abs() @ W.T + b) @ a).max())


def evaluate_net(net: TwoLayerNet, x: torch.Tensor) -> torch.Tensor:
    """a^T relu(W x + b) for x of shape (..., D) (plain vectors, unlike TwoLayerNet.__call__)."""
    W, b, a = (t.to(x) for t in (net.W, net.b, net.a))
    return torch.relu(x @ W.T + b) @ a


def interpolate_sorted(z: torch.Tensor, y: torch.Tensor, eps: float) -> Lemma38Net:
    """Lemma 38: exact width-n ReLU interpolant of strictly increasing z (gaps >= eps) and labels y.

    f(z) = sum_{k=1}^n a_k relu(z - c_k), c_1 = z_1 - eps, c_k = z_{k-1} (k >= 2). On [c_k, c_{k+1}]
    f has slope s_{k-1} = a_1 + ... + a_k, so choosing s_0 = y_1 / eps and s_k = (y_{k+1} - y_k) /
    (z_{k+1} - z_k), a_k = s_{k-1} - s_{k-2}, makes f(z_k) = y_k for every k (telescoping).
    Its bound ||a||^2 <= 16 ||y||^2 / eps^2 (docs/derivations/interpolation.md) is
    ``qstr.bounds.interpolation.lemma38_bound``.

    z, y: float64 (n,), n >= 2.
    """
    z = _vector("z", z)
    n = z.shape[0]
    if n < 2:
        raise ValueError(f"z must hold n >= 2 points, got {n}")
    y = _vector("y", y, n)
    eps = validate.positive_float("eps", eps)
    gaps = z[1:] - z[:-1]
    if not bool((gaps > 0).all()):
        raise ValueError("z must be strictly increasing (sort the points first)")
    min_gap = float(gaps.min())
    if min_gap < eps:
        raise ValueError(
            f"z has a gap {min_gap:.3g} < eps = {eps:.3g}; Lemma 38 needs every gap >= eps"
        )
    c = torch.cat([z[:1] - eps, z[:-1]])
    slopes = torch.cat([y[:1] / eps, (y[1:] - y[:-1]) / gaps])  # s_0 .. s_{n-1}
    a = slopes - torch.cat([slopes.new_zeros(1), slopes[:-1]])
    w = torch.ones(n, 1, dtype=torch.float64, device=z.device)
    b = -c
    raw = TwoLayerNet(a=a, W=w, b=b)
    A = float(a @ a)
    P = float((w * w).sum() + b @ b)
    tau = (A / P) ** 0.25 if A > 0 else 1.0
    balanced = TwoLayerNet(a=a / tau, W=w * tau, b=b * tau)
    err = float((evaluate_net(balanced, z[:, None]) - y).abs().max())
    return Lemma38Net(
        raw=raw,
        balanced=balanced,
        eps=eps,
        min_gap=min_gap,
        y_norm2=float(y @ y),
        a_norm2=A,
        wb_norm2=P,
        tau=tau,
        norm2_raw=A + P,
        norm2_balanced=float(
            balanced.a @ balanced.a + (balanced.W**2).sum() + balanced.b @ balanced.b
        ),
        max_error=err,
        rounding=rounding_allowance(balanced, z[:, None]),
    )


# ---------------------------------------------------------------------------------- Lemma 36


@dataclass(frozen=True, eq=False)
class Lemma36Net:
    """Lemma 36: x -> a^T relu(W x + b) with W = tau w v^T interpolating n points of R^D exactly.

    ``norm2`` = ||W||_F^2 + ||b||^2 + ||a||^2 (measured; its certified bounds are
    ``qstr.bounds.interpolation.Lemma36Guarantee``). ``order`` maps hidden unit k to the point it
    was built from (sorted by <v, x>); ``direction`` is the Lemma 37 direction it was built on.
    """

    net: TwoLayerNet
    direction: SeparatingDirection
    lemma38: Lemma38Net
    order: torch.Tensor
    norm2: float
    max_error: float
    rounding: float


def interpolate_points(
    x: torch.Tensor, y: torch.Tensor, direction: SeparatingDirection
) -> Lemma36Net:
    """Lemma 36's net on a given direction: a width-n two-layer ReLU net with f(x^(j)) = y^(j).

    x: (n, D) float64 points, y: (n,) float64 labels, ``direction``: a Lemma 37 direction for x
    (:func:`separating_direction`; its ``threshold`` is the gap eps). Lemma 38 interpolates the
    sorted projections with that eps, and the first layer becomes W = tau 1 v^T. The direction is
    drawn, and the norm bound O(n^{5/2} ||y||) attached, by ``qstr.bounds.interpolation.
    lemma36_net`` (docs/derivations/interpolation.md).
    """
    x = float64_points("x", x)
    n = x.shape[0]
    y = _vector("y", y, n)
    if not isinstance(direction, SeparatingDirection):
        raise ValueError(f"direction must be a SeparatingDirection, got {type(direction).__name__}")
    validate.shape("direction.z", direction.z, (n,))
    order = torch.argsort(direction.z)
    zs = direction.z[order]
    l38 = interpolate_sorted(zs, y[order], direction.threshold)
    tau = l38.tau
    W = tau * torch.ones(n, 1, dtype=torch.float64, device=x.device) * direction.v[None, :]
    net = TwoLayerNet(a=l38.balanced.a, W=W, b=l38.balanced.b)
    norm2 = float(net.a @ net.a + (net.W**2).sum() + net.b @ net.b)
    err = float((evaluate_net(net, x) - y).abs().max())
    return Lemma36Net(
        net=net,
        direction=direction,
        lemma38=l38,
        order=order,
        norm2=norm2,
        max_error=err,
        rounding=rounding_allowance(net, x),
    )


# ------------------------------------------------------------------- Theorem 9: the memoriser


def parameter_norm2(module: torch.nn.Module) -> float:
    """||vec theta||^2: the sum of squares of every parameter of ``module`` (float64
    accumulation)."""
    return float(sum(float((p.detach().double() ** 2).sum()) for p in module.parameters()))


def memorised_points(
    x: torch.Tensor, y: torch.Tensor, position: Union[int, str]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(points, labels) Theorem 9's memoriser interpolates on prompts x (n, N, d), labels y (n, N).

    ``position=i`` (0-based): the n tokens x[:, i] and labels y[:, i]; ``position="all"``: the
    n N tokens and all labels. Checks the shapes, float64, and that there are >= 2 points.
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError("x must be a torch.Tensor of shape (n, N, d)")
    if x.dtype != torch.float64:
        raise ValueError(f"x must be float64 (exact checks run in float64), got {x.dtype}")
    validate.finite_tensor("x", x)
    n, N, d = x.shape
    if not isinstance(y, torch.Tensor) or y.dtype != torch.float64:
        raise ValueError("y must be a float64 torch.Tensor of shape (n, N)")
    validate.shape("y", y, (n, N))
    validate.finite_tensor("y", y)
    if position == "all":
        pts, labels = x.reshape(n * N, d), y.reshape(n * N)
    elif isinstance(position, int) and not isinstance(position, bool):
        if not 0 <= position < N:
            raise ValueError(
                f"position must be 'all' or an integer in [0, N) = [0, {N}), got {position}"
            )
        pts, labels = x[:, position], y[:, position]
    else:
        raise ValueError(f"position must be 'all' or an integer in [0, N), got {position!r}")
    if pts.shape[0] < 2:
        raise ValueError(
            f"need at least 2 points to memorise, got n = {pts.shape[0]} (use n >= 2 prompts)"
        )
    return pts, labels


@dataclass(frozen=True)
class MemoriserLayout:
    """Lemma 36 / Theorem 9's memoriser, its shape: ``depth`` linear layers of f_y (>= 2), state
    width ``d_h``, state projection radius ``r_h`` (never acts: the states stay 0)."""

    depth: int = 2
    d_h: int = 1
    r_h: float = 1.0


def memorising_rnn(
    lemma36: Lemma36Net, *, D_in: int, layout: MemoriserLayout = MemoriserLayout()
) -> DeepTransitionBiRNN:
    """Theorem 9's interpolating RNN around a Lemma 36 net on the points of
    :func:`memorised_points` (their x-block first in z: ``D_in`` >= d, e.g. d + 2 d_e for the
    q = 1 RNN encoding).

    f_fwd = f_bwd = 0 (one linear layer, zero weights), so h_fwd = h_bwd = 0 and U = 0. f_y has
    ``layout.depth`` linear layers: layer 1 = the Lemma 36 first layer on the x-block (state
    columns zero), layers 2..depth-1 = scaled identities (ReLU passes nonnegative values), last =
    a. Scales are balanced by ReLU homogeneity: with A = ||a'||^2, P = ||(w', b')||^2 of the raw
    Lemma 38 net and width m, the total is depth * (A P m^{depth-2})^{1/depth} (AM-GM optimum;
    2 sqrt(A P) for depth 2). The guarantee is ``qstr.bounds.interpolation.memoriser``'s
    (docs/derivations/interpolation.md).
    """
    if not isinstance(lemma36, Lemma36Net):
        raise ValueError(f"lemma36 must be a Lemma36Net, got {type(lemma36).__name__}")
    if not isinstance(layout, MemoriserLayout):
        raise ValueError(f"layout must be a MemoriserLayout, got {type(layout).__name__}")
    l38, direction = lemma36.lemma38, lemma36.direction
    d, dev = direction.v.shape[0], direction.v.device
    D_in = validate.positive_int("D_in", D_in)
    if D_in < d:
        raise ValueError(f"D_in must be >= d = {d} (the x-block comes first in z), got {D_in}")
    depth = validate.positive_int("depth", layout.depth, minimum=2)
    d_h = validate.positive_int("d_h", layout.d_h)
    m = lemma36.order.shape[0]
    raw_a, raw_b = l38.raw.a, l38.raw.b
    A, P = l38.a_norm2, m * float(direction.v @ direction.v) + float(raw_b @ raw_b)
    T = (A * P * float(m) ** (depth - 2)) ** (1.0 / depth)
    tau1 = math.sqrt(T / P)
    tau_mid = math.sqrt(T / m)
    prod = tau1 * tau_mid ** (depth - 2)

    model = DeepTransitionBiRNN(
        D_in,
        d_h,
        transition_widths=(),
        output_widths=(m,) * (depth - 1),
        r_h=layout.r_h,
        dtype=torch.float64,
        device=dev,
    )
    zero_t = [(torch.zeros(d_h, d_h + D_in, dtype=torch.float64), None)]
    MLPWeights(zero_t).load_into(model.f_fwd)
    MLPWeights(zero_t).load_into(model.f_bwd)
    W1 = torch.zeros(m, 2 * d_h + D_in, dtype=torch.float64, device=dev)
    W1[:, 2 * d_h : 2 * d_h + d] = tau1 * direction.v[None, :]
    layers = [(W1, tau1 * raw_b)]
    eye = torch.eye(m, dtype=torch.float64, device=dev)
    layers += [(tau_mid * eye, None)] * (depth - 2)
    layers.append(((raw_a / prod)[None, :], None))
    MLPWeights(layers).load_into(model.f_y)
    return model
