"""The few-heads floors of Props 21 and 3 in exact rationals, and their slipped forms; the
adversary: heads that reveal the most about the q tokens, read by the exact conditional mean
(docs/derivations/few-heads.md, sections 2b and 7)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Tuple

import sympy as sp
import torch
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.encoding import default_prefactor, transformer_encoding
from qstr.constructions.layout import token_layout
from qstr.constructions.links import SqNorm
from qstr.constructions.paper_models import MergedAttention
from qstr.constructions.task import QSTR
from qstr.verify.rounding import Rounding

# (q, H, d, restricted) where the floor function is compared with its exact value: the claims'
# shapes at every H, H = q and H > q (clipped), the clipping edge H (q + d) = q d, d = 1 without
# the restriction (vacuous), a large d, and Prop 21's q = 7
FLOOR_POINTS = (
    *((q, H, d, False) for q in (2, 3) for d in (8, 16) for H in range(1, q + 2)),
    (2, 1, 2, False),  # H (q + d) = q d: exactly 0
    (3, 1, 1, False),  # d = 1, Prop 3 vacuous
    (5, 2, 7, False),
    (4, 1, 10**6, False),
    *((3, H, 1, True) for H in range(1, 5)),
    (7, 3, 1, True),
)
# the float64 floor is a few operations on small integers: relative error a few eps (~1e-15);
# 1e-12 leaves room for rounding and none for a slipped term (the smallest slip moves it by > 1%)
FLOOR_RTOL = 1e-12

ADV_SUPPRESS = -40.0  # positional logit of the random keys j = q..N/2-1: weight ~ e^-40


def floor_exact(q: int, H: int, d: int, restricted: bool) -> sp.Rational:
    """The per-position floor as few-heads.md states it, in rationals: 2 (q - H) / q (Prop 21) or
    2 (1 - H (q + d) / (q d)) (Prop 3), clipped at 0."""
    q, H, d = sp.Integer(q), sp.Integer(H), sp.Integer(d)
    value = 2 * (q - H) / q if restricted else 2 * (1 - H * (q + d) / (q * d))
    return sp.Max(sp.Integer(0), value)


def infimum_exact(q: int, H: int, d: int, restricted: bool) -> sp.Rational:
    """The infimum of the risk at a floor position over the class (few-heads.md, 2b and 3): the
    heads' information has rank q s + r (d - s), s = min(H, d), r = min(H, q); v = 0 (s = 0)
    in Prop 21's class. 2 (1 - H (q + d - H) / (q d)) for H < q, H <= d."""
    s, r = (0 if restricted else min(H, d)), min(H, q)
    rank = sp.Integer(q * s + r * (d - s))
    return 2 * (1 - rank / (q * d))


def floor_gap(floor: Callable, point: Tuple[int, int, int, bool]) -> float:
    """|floor(point) - exact| / |exact| (absolute where the exact value is 0)."""
    exact = floor_exact(*point)
    got = sp.Rational(floor(*point))  # the float's exact value
    return float(abs(got - exact) / (abs(exact) if exact else 1))


# the slipped floors of the faults


def floor_heads_from_zero(q: int, H: int, d: int, restricted: bool) -> float:
    """The per-position floor with the heads counted from 0 (H - 1 in place of H)."""
    h = H - 1
    return max(0.0, 2 * (q - h) / q if restricted else 2 * (1 - h * (q + d) / (q * d)))


def floor_without_logits(q: int, H: int, d: int, restricted: bool) -> float:
    """Prop 3's floor with the H q logit functionals left out: 2 (1 - H d / (q d))."""
    return max(0.0, 2 * (q - H) / q if restricted else 2 * (1 - H * d / (q * d)))


def floor_half(q: int, H: int, d: int, restricted: bool) -> float:
    """Prop 21's floor with Var(chi^2_k) = k for 2k: (q - H)/q."""
    return max(0.0, (q - H) / q if restricted else 1 - H * (q + d) / (q * d))


@dataclass(frozen=True)
class RiskEstimate:
    """A Monte Carlo risk at the positions i >= N/2 of a model with ``heads`` heads."""

    heads: int
    risk: float
    se: float
    prompts: int
    rnd: Rounding


def risk_rounding(samples: int, fan_in: int, risk: float, dtype) -> Rounding:
    """Rounding of a mean of ``samples`` squared errors, each from a forward pass whose longest
    sum has ``fan_in`` terms: relative error (samples + 2 fan_in + 1) eps of the risk (>= 1)."""
    return Rounding(
        n=samples + 2 * fan_in + 1,
        scale=max(risk, 1.0),
        dtype=dtype,
        what="(n N/2 + 2 fan-in + 1) eps max(risk, 1)",
    )


def few_heads_batch(s, dtype, device):
    """The few-heads task of shape ``s``, its codebook, and ``batch(B, gen) -> (encoded, y)``."""
    task = QSTR(N=s.N, d=s.d, link=SqNorm(q=s.q, d=s.d), indices="few-heads", tokens="half-zero")
    book = rs_hadamard_codebook(s.N, mu=0.5, dtype=dtype, device=device)

    def batch(B, gen):
        p = task.sample(B, generator=gen, device=device, dtype=dtype)
        return transformer_encoding(p.x, p.t, book.omega), p.y

    return task, book, batch


def restrict(layout):
    """Projection onto Prop 21's class: W_QK has no data-position cross blocks."""
    xs = layout["x"]

    def project(model):
        model.W_QK[:, xs, xs.stop :] = 0
        model.W_QK[:, xs.stop :, xs] = 0

    return project


def unseen_label(p, H: int, q: int, d: int) -> torch.Tensor:
    """Per prompt, the part of the floor positions' label the tokens 0..H-1 leave out: y_{N/2} -
    (1/sqrt(q d)) sum_{k<H} (||x_k||^2 - d), the label of the tokens an H-head model cannot see."""
    N = p.x.shape[1]
    seen = ((p.x[:, :H] ** 2).sum(dim=(1, 2)) - H * d) / math.sqrt(q * d)
    return p.y[:, N // 2] - seen


def unseen_second_moment(task, H: int, m: int, gen: torch.Generator, chunk: int):
    """Mean and variance of unseen_label^2 over m fresh prompts of ``task`` (no model: a control
    variate's mean, few-heads.md, 6)."""
    sq = []
    for start in range(0, m, chunk):
        p = task.sample(min(chunk, m - start), generator=gen, dtype=torch.float64)
        sq.append(unseen_label(p, H, task.q, task.d) ** 2)
    sq = torch.cat(sq)
    return float(sq.mean()), float(sq.var())


@dataclass(frozen=True)
class AdversaryWeights:
    """W_QK of H heads that at every floor position score key j by <v_h, x_j> + bias[h, j]:
    the query's slot-0 code reads the key's data (v_h, ``V`` row h) and position code."""

    W_QK: torch.Tensor  # (H, D_e, D_e)
    V: torch.Tensor  # (H, d): the data block of W_QK[h]^T z_i at a floor position
    bias: torch.Tensor  # (H, N): the positional logits
    scale: float  # |v_h|


def adversary_weights(
    N: int, d: int, q: int, H: int, scale: float, gen: torch.Generator
) -> AdversaryWeights:
    """Candidate weights: v_h = scale x (orthonormal rows), bias[h, :q] ~ N(0, 1), 0 at the keys
    j >= N/2 (x_j = 0, a reference), ADV_SUPPRESS at the other random keys (few-heads.md, 7)."""
    f64 = torch.float64
    om = rs_hadamard_codebook(N, mu=0.5, dtype=f64).omega
    lay, c = token_layout(d, q, om.shape[1]), default_prefactor(d, q)
    V = torch.zeros(H, d, dtype=f64)
    if scale:
        V = torch.linalg.qr(torch.randn(d, H, generator=gen, dtype=f64))[0].T * scale
    bias = torch.full((H, N), ADV_SUPPRESS, dtype=f64)
    bias[:, :q] = torch.randn(H, q, generator=gen, dtype=f64)
    bias[:, N // 2 :] = 0.0
    # a bias is a positional score beta^T omega_j: it must lie in the row space of omega; the keys
    # j > N/2 (x_j = 0) absorb the correction, the reference key N/2 keeps its 0
    U, S, _ = torch.linalg.svd(om)
    for null in U[:, int((S > 1e-9 * S[0]).sum()) :].T:
        ref = torch.arange(N) > N // 2
        bias[:, ref] -= torch.outer(bias @ null, null[ref]) / (null[ref] @ null[ref])
    beta = bias @ torch.linalg.pinv(om).T  # (H, d_e)
    if not torch.allclose(beta @ om.T, bias, atol=1e-9):
        raise ValueError("the positional logits are not scores of the codes")
    W = torch.zeros(H, lay.dim, lay.dim, dtype=f64)
    W[:, lay["slot0"], lay["pos"]] = om[0][None, :, None] * beta[:, None, :] / c**2
    W[:, lay["slot0"], lay["x"]] = om[0][None, :, None] * V[:, None, :] / c
    return AdversaryWeights(W, V, bias, scale)


def bayes_readout(
    u: torch.Tensor, w: AdversaryWeights, d: int, q: int, *, logits: bool = True, heads=None
) -> torch.Tensor:
    """E[y | head outputs] at a floor position (few-heads.md, 7): the weights A^h_k decoded from the
    positional block, the logit functionals X v_h from log A^h_k / A^h_ref, then X given
    (X V^T, A^T X) is Gaussian. ``logits=False`` or ``heads`` (the first ones) read less."""
    N = w.bias.shape[1]
    om = rs_hadamard_codebook(N, mu=0.5, dtype=u.dtype, device=u.device).omega
    lay, c = token_layout(d, q, om.shape[1]), default_prefactor(d, q)
    H = w.V.shape[0] if heads is None else heads
    if H == 0:
        return torch.zeros(u.shape[0], dtype=u.dtype, device=u.device)  # E y = 0
    u, V, bias = u[:, :H], w.V[:H].to(u), w.bias[:H].to(u)
    keys = [*range(q), *range(N // 2, N)]  # the keys with weight > e^-30
    A = u[..., lay["pos"]] @ torch.linalg.pinv(c * om[keys].T).T  # (n, H, |keys|)
    Aq = A[..., :q].transpose(1, 2)  # (n, q, H): A^h_k
    QX = Aq @ torch.linalg.solve(Aq.transpose(1, 2) @ Aq, u[..., lay["x"]])  # Q_A X, (n, q, d)
    s = int(torch.linalg.matrix_rank(V)) if logits and H else 0
    if s:
        ell = torch.log(A[..., :q] / A[..., q : q + 1]) - (bias[:, :q] - bias[:, N // 2, None])
        XPv = ell.transpose(1, 2) @ torch.linalg.pinv(V).T  # X P_V from X V^T, (n, q, d)
        PX = XPv + QX - QX @ torch.linalg.pinv(V) @ V
    else:
        PX = QX
    rank = q * s + H * (d - s)
    return ((PX**2).sum(dim=(1, 2)) - rank) / math.sqrt(q * d)


@dataclass(frozen=True)
class Adversary:
    """The best of the candidate weights at H heads, with its heads' outputs at a floor position
    and the labels on fresh prompts, and its risk under ``readout`` (bayes_readout's options)."""

    estimate: RiskEstimate
    weights: AdversaryWeights
    candidates: Tuple[Tuple[float, float], ...]  # (scale, risk on the search prompts)
    u: torch.Tensor  # (n, H, D_e): the heads at position N/2 on the evaluation prompts
    y: torch.Tensor  # (n,): their labels
    readout: Dict[str, Any] = field(default_factory=dict)


AGREE_PROMPTS = 64  # prompts on which the one-query heads are held to MergedAttention.heads


def adversary_heads(N: int, d: int, q: int, w: AdversaryWeights, n: int, gen: torch.Generator):
    """The heads of MergedAttention(w) at position N/2 and the labels, on n prompts (every floor
    position sees the same heads: W_QK reads the query's slot-0 code only). Computed for that one
    query, and held to the module's ``heads`` on the first AGREE_PROMPTS prompts."""
    f64 = torch.float64
    task = QSTR(N=N, d=d, link=SqNorm(q=q, d=d), indices="few-heads", tokens="half-zero")
    om = rs_hadamard_codebook(N, mu=0.5, dtype=f64).omega
    p = task.sample(n, generator=gen, dtype=f64)
    Z = transformer_encoding(p.x, p.t, om)
    A = torch.softmax(torch.einsum("bd,hde,bje->bhj", Z[:, N // 2], w.W_QK, Z), dim=-1)
    u = A @ Z  # (n, H, D_e)
    model = MergedAttention(w.W_QK.shape[1], w.W_QK.shape[0], 1, dtype=f64)
    with torch.no_grad():
        ref = model.set_weights(W_QK=w.W_QK).heads(Z[:AGREE_PROMPTS])[:, N // 2]
    if not torch.allclose(u[:AGREE_PROMPTS], ref, rtol=1e-12, atol=1e-12):
        raise AssertionError("one-query heads differ from MergedAttention.heads")
    return u, p.y[:, N // 2]


def scored(u, y, w: AdversaryWeights, shape, **readout) -> RiskEstimate:
    """The risk of bayes_readout(u) against the labels y, its standard error and rounding."""
    N, d, q = shape.N, shape.d, shape.q
    err = (bayes_readout(u, w, d, q, **readout) - y) ** 2
    n, risk = len(y), float(err.mean())
    rnd = risk_rounding(n, N + w.W_QK.shape[1] + q * d, risk, torch.float64)
    return RiskEstimate(u.shape[1], risk, float(err.std() / n**0.5), n, rnd)


def adversary_search(
    shape, H: int, n: Tuple[int, int], gens: Tuple[torch.Generator, torch.Generator], scales
) -> Adversary:
    """Each candidate (one per scale of v_h; Prop 21's class: v = 0, each its own logits) scored on
    the same n[0] prompts, the best re-scored on n[1] fresh ones (gens: weights, prompts)."""
    N, d, q = shape.N, shape.d, shape.q
    search_seed = int(torch.randint(2**62, (), generator=gens[1]))
    found = []
    for scale in scales:
        w = adversary_weights(N, d, q, H, scale, gens[0])
        prompts = torch.Generator().manual_seed(search_seed)  # common to every candidate
        found.append((scored(*adversary_heads(N, d, q, w, n[0], prompts), w, shape).risk, w))
    _, best = min(found, key=lambda f: f[0])
    u, y = adversary_heads(N, d, q, best, n[1], gens[1])
    return Adversary(scored(u, y, best, shape), best, tuple((w.scale, r) for r, w in found), u, y)


def reread(adv: Adversary, shape, **readout) -> Adversary:
    """The adversary's heads read by another readout (a fault's)."""
    return replace(
        adv, estimate=scored(adv.u, adv.y, adv.weights, shape, **readout), readout=readout
    )
