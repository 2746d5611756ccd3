"""Link functions g of the qSTR model (Definition 2): Linear (Figure 1, Theorem 6), Hermite
(Figure 3), SqNorm (Props 3, 21), Mean (sparse averaging), Teacher, and the two-layer ReLU nets of
Assumption 2."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Callable, Optional

import numpy as np
import torch

from qstr.constructions import validate
from qstr.constructions.mlp import MLPWeights


@dataclass(frozen=True, eq=False)
class TwoLayerNet:
    """A width-m two-layer ReLU net z -> a^T relu(W z + b) on z in R^{q d} (Assumption 2).

    ``r_a`` and ``r_w`` are the normalised norms of Assumption 2:
    ||a|| = r_a / sqrt(m) and ||(W, b)||_F = sqrt(m) r_w; the net is (r_a r_w)-Lipschitz
    (indeed ||a|| ||W||_op <= r_a r_w).
    """

    a: torch.Tensor  # (m,)
    W: torch.Tensor  # (m, q d)
    b: torch.Tensor  # (m,)

    @property
    def m(self) -> int:
        return self.a.shape[0]

    @property
    def r_a(self) -> float:
        return float(self.a.norm()) * math.sqrt(self.m)

    @property
    def r_w(self) -> float:
        return float(torch.cat([self.W, self.b[:, None]], dim=1).norm()) / math.sqrt(self.m)

    @property
    def lipschitz(self) -> float:
        """A Lipschitz constant of the net (<= ||a|| ||W||_op <= r_a r_w), exact for an affine net.

        Units i, j with (W_j, b_j, a_j) = -(W_i, b_i, a_i) add up to a_i (W_i z + b_i), since
        relu(t) - relu(-t) = t: such pairs form an affine map with gradient v = sum a_i W_i. The
        constant is min(||a|| ||W||_op, ||v|| + ||a_rest|| ||W_rest||_op), the rest being the
        unpaired units; for a net made only of such pairs (the linear link) it is ||v||, exact.
        """
        generic = float(self.a.norm() * torch.linalg.matrix_norm(self.W, ord=2))
        rows = torch.cat([self.W, self.b[:, None], self.a[:, None]], dim=1).detach().cpu()
        keys = {}
        for i, r in enumerate(rows):
            keys.setdefault(r.numpy().tobytes(), []).append(i)
        paired, used = [], set()
        for i, r in enumerate((-rows).numpy()):
            if i in used:
                continue
            partners = [j for j in keys.get((r + 0.0).tobytes(), ()) if j != i and j not in used]
            if partners:
                paired.append(i)
                used.update((i, partners[0]))
        if not paired:
            return generic
        v = (self.a[paired, None] * self.W[paired]).sum(0)
        rest = [k for k in range(self.m) if k not in used]
        tail = (
            float(self.a[rest].norm() * torch.linalg.matrix_norm(self.W[rest], ord=2))
            if rest
            else 0.0
        )
        return min(generic, float(v.norm()) + tail)

    @property
    def device(self) -> torch.device:
        return self.W.device

    def as_mlp(self) -> MLPWeights:
        """The net as :class:`~qstr.constructions.mlp.MLPWeights` ``((W, b), (a[None, :], None))``
        on the flattened z in R^{q d} (the tensors are shared, not copied)."""
        return MLPWeights(((self.W, self.b), (self.a[None, :], None)))

    @classmethod
    def from_mlp(cls, weights: MLPWeights) -> "TwoLayerNet":
        """The two-layer net of ``weights`` = ((W, b), (a^T, None)): one hidden layer with a bias,
        one output, no bias on it (inverse of :meth:`as_mlp`)."""
        if not isinstance(weights, MLPWeights):
            raise ValueError(f"weights must be an MLPWeights, got {type(weights).__name__}")
        if len(weights) != 2 or weights.out_dim != 1 or weights[0].b is None or weights.bias_last:
            raise ValueError(
                "a TwoLayerNet is ((W, b), (a^T, None)): two layers, a bias on the first only, "
                f"one output; got widths {weights.widths}, {len(weights)} layers, "
                f"out_dim {weights.out_dim}"
            )
        return cls(a=weights[1].W[0], W=weights[0].W, b=weights[0].b)

    def to(self, device=None, dtype=None) -> "TwoLayerNet":
        """The same net with its weights moved (once) to ``device`` / cast to ``dtype``."""
        a, W, b = (v.to(device=device, dtype=dtype) for v in (self.a, self.W, self.b))
        return self if (a is self.a and W is self.W and b is self.b) else TwoLayerNet(a=a, W=W, b=b)

    def __call__(self, xt: torch.Tensor) -> torch.Tensor:
        z = xt.flatten(-2)
        if not validate.same_device(self.W.device, z.device):
            raise ValueError(
                f"net weights live on {self.W.device} but the input on {z.device}; "
                f"move them once with .to({str(z.device)!r})"
            )
        W, b, a = (v.to(z.dtype) for v in (self.W, self.b, self.a))
        return torch.relu(z @ W.T + b) @ a


@dataclass(frozen=True, eq=False)
class Link:
    """Base class: ``q`` tokens of dimension ``d`` in, a scalar (or ``out_dim`` vector) out.

    A link maps the q selected tokens of one output position to its label: ``g(xt)`` with ``xt``
    of shape ``(..., q, d)`` returns ``(...)`` (scalar links) or ``(..., out_dim)`` (the
    vector-valued sparse average).
    """

    q: int
    d: int

    name = "link"
    out_dim: Optional[int] = None  # None: scalar labels

    def __call__(self, xt: torch.Tensor) -> torch.Tensor:
        validate.shape("xt", xt, (None,) * (xt.dim() - 2) + (self.q, self.d))
        return self.g(xt)

    def g(self, xt: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def two_layer_net(self) -> Optional[TwoLayerNet]:
        """An exact Assumption 2 network for g (eps_2NN = 0), or ``None`` if g is not one."""
        return None

    def to(self, device) -> "Link":
        """The same link with its parameters (directions, teacher weights) moved once to ``device``.

        The claims draw link parameters from a CPU generator (same link on every device) and
        move them with this before sampling prompts on ``ctx.device``."""
        moved = {
            f.name: getattr(self, f.name).to(device=device)
            for f in fields(self)
            if isinstance(getattr(self, f.name), (torch.Tensor, TwoLayerNet))
        }
        return replace(self, **moved) if moved else self


def _unit_rows(rows: int, d: int, generator: torch.Generator) -> torch.Tensor:
    """Rows drawn uniformly from the unit sphere S^{d-1} (float64, on the generator's device)."""
    u = torch.randn(rows, d, generator=generator, dtype=torch.float64, device=generator.device)
    return u / u.norm(dim=1, keepdim=True)


def _check_directions(u: torch.Tensor, q: int, d: int) -> None:
    validate.finite_tensor("u", u)
    validate.shape("u", u, (q, d))
    if not torch.allclose(u.norm(dim=1), torch.ones(q, dtype=u.dtype, device=u.device), atol=1e-6):
        raise ValueError("u must have rows of unit norm")


@dataclass(frozen=True, eq=False)
class Linear(Link):
    """g = (1/sqrt q) sum_k <u_k, x_{t_k}>; for q = 1 this is <u, x_t> (Figure 1, Theorem 6)."""

    u: torch.Tensor = field(default=None)  # (q, d), unit rows
    name = "linear"

    def __post_init__(self):
        _check_directions(self.u, self.q, self.d)

    def g(self, xt):
        return (xt * self.u.to(xt)).sum(dim=(-2, -1)) / math.sqrt(self.q)

    def two_layer_net(self):
        w = self.u.flatten() / math.sqrt(self.q)
        W = torch.stack([w, -w])
        return TwoLayerNet(
            a=torch.tensor([1.0, -1.0], dtype=w.dtype, device=w.device),
            W=W,
            b=torch.zeros(2, dtype=w.dtype, device=w.device),
        )


def he2(z: torch.Tensor) -> torch.Tensor:
    """Second normalised probabilists' Hermite polynomial He2(z) = (z^2 - 1)/sqrt 2."""
    return (z * z - 1) / math.sqrt(2)


@dataclass(frozen=True, eq=False)
class Hermite(Link):
    """g = (1/sqrt q) sum_k He2(<u_k, x_{t_k}>) (Figure 3)."""

    u: torch.Tensor = field(default=None)  # (q, d), unit rows
    name = "hermite"

    def __post_init__(self):
        _check_directions(self.u, self.q, self.d)

    def g(self, xt):
        return he2((xt * self.u.to(xt)).sum(-1)).sum(-1) / math.sqrt(self.q)


@dataclass(frozen=True, eq=False)
class SqNorm(Link):
    """g = (1/sqrt(q d)) sum_k (||x_{t_k}||^2 - d) (Prop 3; with d = 1, Prop 21)."""

    name = "sqnorm"

    def g(self, xt):
        return ((xt * xt).sum(-1) - self.d).sum(-1) / math.sqrt(self.q * self.d)


@dataclass(frozen=True, eq=False)
class Mean(Link):
    """g = (1/q) sum_k x_{t_k} in R^d: q-sparse averaging (Sanford, Hsu, Telgarsky 2023)."""

    name = "mean"

    def __post_init__(self):
        object.__setattr__(self, "out_dim", self.d)

    def g(self, xt):
        return xt.mean(dim=-2)


@dataclass(frozen=True, eq=False)
class MeanProjected(Link):
    """g = <u, (1/q) sum_k x_{t_k}>: scalar sparse averaging."""

    u: torch.Tensor = field(default=None)  # (d,), unit
    name = "mean-projected"

    def __post_init__(self):
        _check_directions(self.u[None], 1, self.d)

    def g(self, xt):
        return xt.mean(dim=-2) @ self.u.to(xt)

    def two_layer_net(self):
        w = self.u.repeat(self.q) / self.q
        W = torch.stack([w, -w])
        return TwoLayerNet(
            a=torch.tensor([1.0, -1.0], dtype=w.dtype, device=w.device),
            W=W,
            b=torch.zeros(2, dtype=w.dtype, device=w.device),
        )


@dataclass(frozen=True, eq=False)
class Teacher(Link):
    """g = a^T relu(W vec(x_{t_1}, ..., x_{t_q}) + b): Assumption 2 with eps_2NN = 0."""

    net: TwoLayerNet = field(default=None)
    name = "teacher"

    def __post_init__(self):
        m = self.net.a.shape[0]
        validate.shape("W", self.net.W, (m, self.q * self.d))
        validate.shape("b", self.net.b, (m,))
        for nm in ("a", "W", "b"):
            validate.finite_tensor(nm, getattr(self.net, nm))

    def g(self, xt):
        return self.net(xt)

    def two_layer_net(self):
        return self.net


@dataclass(frozen=True, eq=False)
class CallableLink(Link):
    """Any user function ``fn(xt)`` with xt of shape (..., q, d) returning (...) or
    (..., out_dim)."""

    fn: Callable = field(default=None)
    name = "callable"

    def __post_init__(self):
        if not callable(self.fn):
            raise ValueError(f"fn must be callable, got {type(self.fn).__name__}")

    def g(self, xt):
        y = self.fn(xt)
        want = xt.shape[:-2] + (() if self.out_dim is None else (self.out_dim,))
        if not isinstance(y, torch.Tensor) or tuple(y.shape) != tuple(want):
            got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
            raise ValueError(f"fn must return a tensor of shape {tuple(want)}, got {got}")
        return y


def affine_net(w: torch.Tensor, r_x: float) -> TwoLayerNet:
    """One ReLU unit relu(<w, z> + beta), beta = r_x ||w|| sqrt(len w) + 1: exactly affine on inputs
    made of blocks of norm <= r_x, so its Lipschitz constant ||a|| ||W||_op = ||w|| is exact there
    (the net on which Lemma 11's bound is attained, docs/derivations/lemma11.md)."""
    validate.finite_tensor("w", w)
    validate.shape("w", w, (None,))
    r_x = validate.positive_float("r_x", r_x)
    beta = r_x * float(w.norm()) * math.sqrt(w.shape[0]) + 1.0
    one = torch.ones(1, dtype=w.dtype, device=w.device)
    return TwoLayerNet(a=one, W=w[None].clone(), b=one * beta)


def relu_pair_moments(W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """K_jk = E relu(u_j) relu(u_k) for u = W z + b, z ~ N(0, I), in closed form: the moments behind
    Assumption 2's E g^2 of a two-layer ReLU net (float64; leading batch dimensions allowed:
    W (..., m, D), b (..., m) -> K (..., m, m)).

    With s_j = ||W_j||, h_j = b_j / s_j and rho the correlation of u_j and u_k, K_jk = s_j s_k M,
    M = (rho + h k) Phi2(h, k; rho) + k phi(h) Phi((k - rho h)/r) + h phi(k) Phi((h - rho k)/r)
    + r phi(h) phi((k - rho h)/r), r = sqrt(1 - rho^2) (the truncated bivariate normal moments;
    Phi2 by Owen's T); rho = +-1 (|rho| > 1 - 1e-12, a unit with itself) and zero rows in closed
    form too (docs/derivations/theorem4.md, "The random teacher's E g^2")."""
    from scipy.special import ndtr, owens_t  # noqa: PLC0415 - scipy is needed only here

    W64 = W.detach().to("cpu", torch.float64).numpy()
    b64 = b.detach().to("cpu", torch.float64).numpy()
    s = np.sqrt((W64 * W64).sum(-1))  # (..., m)
    live = s > 0
    safe = np.where(live, s, 1.0)
    h = np.where(live, b64 / safe, 0.0) + 0.0  # + 0.0: no -0.0 (it would flip Owen's T's sign)
    rho = np.clip(
        (W64 @ np.swapaxes(W64, -1, -2)) / (safe[..., :, None] * safe[..., None, :]), -1, 1
    )
    H, Kk = h[..., :, None], h[..., None, :]

    def phi(x):
        return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)

    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(np.maximum(1 - rho * rho, 0.0))
        inner = np.abs(rho) <= 1 - 1e-12
        rs = np.where(inner, r, 1.0)
        gh, gk = (Kk - rho * H) / rs, (H - rho * Kk) / rs
        beta = np.where((H * Kk < 0) | ((H * Kk == 0) & (H + Kk < 0)), 0.5, 0.0)
        phi2 = 0.5 * (ndtr(H) + ndtr(Kk)) - owens_t(H, gh / H) - owens_t(Kk, gk / Kk) - beta
        both_zero = (H == 0) & (Kk == 0)
        phi2 = np.where(both_zero, 0.25 + np.arcsin(rho) / (2 * math.pi), phi2)
        general = (rho + H * Kk) * phi2 + Kk * phi(H) * ndtr(gh) + H * phi(Kk) * ndtr(gk)
        general = general + rs * phi(H) * phi(gh)
    c = np.minimum(H, Kk)  # rho = 1: one variable
    same = (1 + H * Kk) * ndtr(c) + (H + Kk - c) * phi(c)
    opposite = np.where(  # rho = -1: nonzero on -h < z < k
        H + Kk > 0, (H * Kk - 1) * (ndtr(H) + ndtr(Kk) - 1) + Kk * phi(H) + H * phi(Kk), 0.0
    )
    M = np.where(inner, general, np.where(rho > 0, same, opposite))
    K = safe[..., :, None] * safe[..., None, :] * M
    mean = np.where(live, s * (h * ndtr(h) + phi(h)), np.maximum(b64, 0.0))  # E relu(u_j)
    both = live[..., :, None] & live[..., None, :]  # a zero row is a constant, independent of all
    K = np.where(both, K, mean[..., :, None] * mean[..., None, :])
    return torch.from_numpy(K)


def gaussian_second_moment(net: TwoLayerNet) -> float:
    """E g(z)^2 = a^T K a for z ~ N(0, I_{q d}) of a two-layer ReLU net (K:
    :func:`relu_pair_moments`): the random teacher's E g^2 per draw in closed form
    (docs/derivations/theorem4.md)."""
    a = net.a.detach().to("cpu", torch.float64)
    return float(a @ relu_pair_moments(net.W, net.b) @ a)


LINK_NAMES = ("linear", "hermite", "sqnorm", "mean", "mean-projected", "teacher")


def make_link(
    name: str, q: int, d: int, *, generator: Optional[torch.Generator] = None, width: int = 8
) -> Link:
    """Build a named link with random directions / teacher weights drawn from ``generator``.

    ``u`` (and each ``u_k``) is uniform on the unit sphere; the teacher has width ``width``,
    W with N(0, 1/(q d)) entries, b ~ N(0, 1) scaled by 1/sqrt(q d), a with N(0, 1/width) entries.
    """
    q = validate.positive_int("q", q)
    d = validate.positive_int("d", d)
    if name in ("sqnorm",):
        return SqNorm(q=q, d=d)
    if name == "mean":
        return Mean(q=q, d=d)
    if name not in LINK_NAMES:
        raise ValueError(f"link must be one of {', '.join(LINK_NAMES)}, got {name!r}")
    if generator is None:
        raise ValueError(f"link {name!r} has random parameters: pass generator=torch.Generator()")
    generator = validate.generator("generator", generator)
    validate.fits_in_memory(
        f"the link's directions ({q} x {d}, float64)", 2 * q * d * 8, generator.device
    )
    if name == "linear":
        return Linear(q=q, d=d, u=_unit_rows(q, d, generator))
    if name == "hermite":
        return Hermite(q=q, d=d, u=_unit_rows(q, d, generator))
    if name == "mean-projected":
        return MeanProjected(q=q, d=d, u=_unit_rows(1, d, generator)[0])
    width = validate.positive_int("width", width)
    validate.fits_in_memory(
        f"the teacher's W ({width} x {q * d}, float64)", 2 * width * q * d * 8, generator.device
    )
    kw = dict(generator=generator, dtype=torch.float64, device=generator.device)
    W = torch.randn(width, q * d, **kw) / math.sqrt(q * d)
    b = torch.randn(width, **kw) / math.sqrt(q * d)
    a = torch.randn(width, **kw) / math.sqrt(width)
    return Teacher(q=q, d=d, net=TwoLayerNet(a=a, W=W, b=b))
