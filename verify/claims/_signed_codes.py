"""Codes with signed inner products for the single-head sparse average (remark after Prop 3): a
Gram matrix I + mu S whose signs put each of the bound's signed cross terms at its extreme,
factored into unit rows; and the exact ||pi_T - w_T||_1 of every q-set T
(docs/derivations/sparse-averaging.md, 'Signed codes'). Also the claim's other helpers: the worst
prompt and extreme sets of any code, a scale sweep's rounding, the conditions alpha's derivation
must meet, and the slipped bounds its faults substitute. And the claim's cases: ``SACase`` (a head,
its exact sup and worst prompt, random prompts), ``SparseAverageInputs`` and ``_sa_case``."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import mpmath as mp
import torch

from qstr.bounds.attention import lemma12_radius
from qstr.bounds.sparse_averaging import (
    separation_limit,
    sparse_average_alpha,
    sparse_average_error_bound,
    sparse_average_head,
    sparse_average_leak,
    sparse_average_within,
)
from qstr.constructions.codes import Codebook
from qstr.constructions.links import Mean
from qstr.constructions.task import QSTR, gather_tokens
from qstr.verify.adversarial import clip_to_ball, worst_case_tokens
from qstr.verify.claim import Context
from qstr.verify.claims._attention import SA_DPS, file_record, sa_bound_mp, sa_measured
from qstr.verify.claims._roundtrip import saved_and_reloaded
from qstr.verify.rounding import Rounding

# S = J - I with -1 on a triangle and an edge: the set {0, 1, 2} scores A (1 - 2 mu) against
# out-of-set keys at 3 A mu (the leak's gap A (1 - (2q - 1) mu), q = 3); {6, 7} scores A (1 - mu)
# against 2 A mu (q = 2); {3, 6, 7} scores A (1 + 2 mu), A, A (the spread 2 A (q - 2) mu, q = 3)
SIGNED_NEGATIVE = ((0, 1), (0, 2), (1, 2), (6, 7))
SIGNED_N = 8
SIGNED_MU = 0.13  # below 1/(2q - 1) = 0.2 (q = 3) and 1/3 (q = 2); G = I + mu S stays positive
SA_LEAST = 1e-9  # the least alpha for eps: the bound at alpha (1 - 1e-9) is above eps
SA_MIN_STEP = 1e-3  # the minimiser: the bound at alpha (1 -+ 1e-3) is not below it
SA_ABOVE_MIN = 1.25  # q >= 3 asked for eps = 1.25 x the least bound: the first crossing


def signed_gram(
    N: int, mu: float, negative: Sequence[Tuple[int, int]] = SIGNED_NEGATIVE
) -> torch.Tensor:
    """I + mu S (float64): S_ab = +1 for a != b, but -1 on the pairs ``negative`` (both orders)."""
    G = (1 - mu) * torch.eye(N, dtype=torch.float64) + mu * torch.ones(N, N, dtype=torch.float64)
    for a, b in negative:
        G[a, b] = G[b, a] = -mu
    return G


def factored_codebook(G: torch.Tensor, device=None) -> Codebook:
    """Unit rows omega with omega omega^T = G (the Cholesky factor of a positive definite G with a
    unit diagonal), wrapped as users wrap their codes (``Codebook.from_tensor``: mu measured)."""
    omega = torch.linalg.cholesky(G)  # raises where G is not positive definite
    return Codebook.from_tensor(omega.to(device=device))


def set_gaps(omega: torch.Tensor, q: int, A: float):
    """||pi_T - w_T||_1 for every q-set T of positions (pi: the softmax of the scores
    A sum_{l in T} <omega_l, omega_j>, w: 1/q on T), with the sets (M, q) and pi - w (M, N)."""
    T = torch.combinations(torch.arange(omega.shape[0], device=omega.device), q)
    pi = torch.softmax(A * (omega @ omega.T)[T].sum(1), dim=-1)
    w = torch.zeros_like(pi).scatter_(1, T, 1.0 / q)
    return (pi - w).abs().sum(1), T, pi - w


def worst_set_parts(omega: torch.Tensor, q: int, A: float) -> Tuple[float, float, float]:
    """At the q-set T with the largest ||pi_T - w_T||_1 (every set searched): (that norm, the leak
    L = pi(T^c), the within-set part ||pi_T - w_T||_1 - 2 L = sum_{j in T} |pi_j - 1/q| - L)."""
    gaps, T, diff = set_gaps(omega, q, A)
    worst = int(gaps.argmax())
    outside = torch.ones(omega.shape[0], dtype=torch.bool, device=omega.device)
    outside[T[worst]] = False
    leak = float(diff[worst][outside].sum())  # w = 0 off T: pi - w = pi there
    return float(gaps[worst]), leak, float(gaps[worst]) - 2 * leak


def worst_prompt(T: torch.Tensor, diff: torch.Tensor, d: int, r_x: float):
    """Every position averages the set T; x_j = r_x sign(pi_j - w_j) e_0 (``diff`` = pi - w), so
    every position's error is r_x ||pi - w||_1 (docs/derivations/sparse-averaging.md)."""
    N, q = diff.shape[-1], T.shape[-1]
    x = torch.zeros(1, N, d, dtype=diff.dtype, device=diff.device)
    x[0, :, 0] = r_x * torch.where(diff >= 0, 1.0, -1.0).to(diff)
    return x, T.expand(1, N, q).contiguous()


def extreme_sets(omega: torch.Tensor, T: torch.Tensor, A: float):
    """Of the q-sets T, the one with the least in-set minus out-of-set score gap and the one with
    the largest out-of-set softmax mass, from the codes' Gram matrix at scale A."""
    s = A * (omega @ omega.T)[T].sum(1)  # (M, N)
    inset = torch.zeros_like(s, dtype=torch.bool).scatter_(1, T, True)
    gap = s.masked_fill(~inset, math.inf).amin(1) - s.masked_fill(inset, -math.inf).amax(1)
    leak = (torch.softmax(s, dim=-1) * ~inset).sum(1)
    return T[int(gap.argmin())], T[int(leak.argmax())]


def ratio_text(r: float) -> str:
    """A ratio to 3 decimals, to 9 where it is within 1e-3 of 1 (or above)."""
    return f"{r:.3f}" if r < 0.999 else f"{r:.9f}"


def nonneg_slack(g, omega: torch.Tensor, exact: float) -> str:
    """Why the bound sits ~2x above the exact sup of codes with inner products >= 0: their least
    inner product, and the exact sup over the bound the same derivation gives such codes
    (rho = e^{A (q - 2) mu}, gap A (1 - q mu); docs/derivations/sparse-averaging.md, 'Slack')."""
    least = float((omega @ omega.T - torch.eye(g.N).to(omega)).min())
    with mp.workdps(SA_DPS):
        nonneg = float(sa_bound_mp(g.N, g.q, g.mu, g.alpha * g.c**2, g.r_x, spread=1))
    return f"q={g.q}: least inner product {least:.3g}, exact sup / that bound {exact / nonneg:.3f}"


def sweep_rounding(g, A: float, r_x: float) -> Rounding:
    """Rounding of r_x ||pi - w||_1 at scale A for the head of guarantee ``g``."""
    n, scale = g.N + g.d_e + 4, max(1.0, g.q * A) * r_x
    return Rounding(n=n, scale=scale, what="(N + d_e + 4) eps max(1, q A) r_x (scores, softmax)")


def inversion_failures(error_bound, alpha_for, g, c: float, alpha: float, eps) -> list:
    """What fails of alpha's derivation (remark after Prop 3) for the head of guarantee ``g`` at
    prefactor c (``error_bound``, ``alpha_for``: the bound and its inversion under test): for eps,
    bound(alpha) <= eps < bound(alpha (1 - 1e-9)); without, alpha minimises the bound and the
    alpha asked for 1.25 x the minimum is the bound's first crossing (each bound to 64 float64 eps
    of its value)."""

    def bound(a: float) -> float:
        return error_bound(N=g.N, q=g.q, mu=g.mu, c=c, alpha=a, r_x=g.r_x)

    at, rel = bound(alpha), 64 * torch.finfo(torch.float64).eps
    where = f"N = {g.N}, q = {g.q}, c = {c:.4g}"
    out = []
    if eps is not None:
        if not at <= eps * (1 + rel):
            out.append(f"{where}: bound {at:.9g} above eps = {eps}")
        if not bound(alpha * (1 - SA_LEAST)) > eps:
            out.append(f"{where}: alpha (1 - {SA_LEAST:g}) meets eps too")
        return out
    beside = min(bound(alpha * (1 - SA_MIN_STEP)), bound(alpha * (1 + SA_MIN_STEP)))
    if not at <= beside * (1 + rel):
        out.append(f"{where}: alpha (1 -+ {SA_MIN_STEP:g}) gives a smaller bound")
    eps = SA_ABOVE_MIN * at  # the non-monotone bound's first crossing, below the minimiser
    a = alpha_for(N=g.N, q=g.q, mu=g.mu, c=c, r_x=g.r_x, eps=eps)
    if not (bound(a) <= eps * (1 + rel) < bound(a * (1 - SA_LEAST)) and a < alpha):
        out.append(f"{where}: alpha {a:.9g} for eps = {eps:.6g} is not its first crossing")
    return out


# ---------------------------------------------------------------- slipped bounds (the faults)


def leak_only_bound(*, N, q, mu, c, alpha, r_x):
    """The bound without the within-set imbalance term: 2 r_x L (equal in-set weights assumed)."""
    return 2 * r_x * sparse_average_leak(N=N, q=q, mu=mu, A=alpha * c**2)


def rho_halved(*, N, q, mu, c, alpha, r_x):
    """The bound with rho = e^{A (q - 2) mu}: the in-set spread's factor 2 (signed cross terms)
    dropped."""
    A = alpha * c * c
    L = sparse_average_leak(N=N, q=q, mu=mu, A=A)
    rho = math.exp(A * max(q - 2, 0) * mu)
    return r_x * (2 * L + sparse_average_within(q=q, leak=L, rho=rho))


# ---------------------------------------------------------------- the claim's cases
SA_N, SA_D, SA_MU = 64, 3, 1 / 16
RS, SIGNED = "RS-Hadamard", "signed"  # codes with inner products >= 0; with signed ones (I + mu S)


@dataclass(frozen=True, eq=False)
class SACase:
    """One q: the averaging head as certified (fast path, guarantee), the module users get, the
    exact sup over all q-sets and its worst prompt, and random prompts in the r_x-ball."""

    code: str  # RS (inner products >= 0) or SIGNED (Gram I + mu S)
    q: int
    head: Any  # the construction as certified
    module: Any  # the built weights users get (a fault edits a copy)
    n_sets: int
    exact: float  # r_x max_T ||pi_T - w_T||_1: the sup over all prompts
    pi: torch.Tensor  # the closed-form softmax row of the worst set, from the codes' Gram matrix
    worst: Tuple[torch.Tensor, torch.Tensor]  # the worst prompt (x, t)
    fast_at_worst: float  # the fast path's error at the worst prompt
    prompts: Tuple[torch.Tensor, torch.Tensor]  # random prompts (distinct indices)
    ascent: bool  # full and gpu profiles: gradient ascent on 8 prompts
    eps: Optional[float] = None  # the error the head was built for (None: the bound's minimiser)
    extreme: Tuple[torch.Tensor, ...] = ()  # the sets of the least score gap and the largest leak

    @property
    def label(self) -> str:
        return f"q = {self.q}" if self.code == RS else f"signed q = {self.q}"

    def errors(self, predict, x, t) -> torch.Tensor:
        """||y_hat_i - mean of the q selected tokens||_2 per position."""
        y = predict(x, t).reshape(*t.shape[:2], SA_D)
        return (y - Mean(q=self.q, d=SA_D)(gather_tokens(x, t))).norm(dim=-1)

    @functools.cached_property
    def records(self):
        """((the guarantee as certified, what the built head measures), (the guarantee saved in
        its construction file, what the reloaded head measures)) (sa_measured)."""
        g, m = self.head.guarantee, self.module
        measure = functools.partial(sa_measured, sets=self.extreme)
        built = measure(m.model, m.omega, m.c, m.q, g.r_x)
        return (g.as_dict(), built), file_record(m, measure)

    @functools.cached_property
    def measured(self) -> Dict[str, float]:
        """The module's and its export's errors at the worst prompt, the module's on random prompts
        (and after ascent), and its attention rows against pi."""
        exported = saved_and_reloaded(self.module)[1]
        paths = {
            "module": lambda x, t: self.module.predict(x, t),
            "nn.MultiheadAttention": lambda x, t: exported(self.module.encode(x, t)),
        }
        x, t = self.prompts
        with torch.no_grad():
            out = {k: float(self.errors(f, *self.worst).max()) for k, f in paths.items()}
            out["fast path"] = self.fast_at_worst
            rows = self.module.model.attention(self.module.encode(*self.worst), chunk=16)[0, 0]
            every_query = rows.shape == (self.module.N, self.module.N)  # one row per query i
            out["attention rows"] = float((rows - self.pi).abs().max()) if every_query else math.inf
            out["random"] = float(self.errors(paths["module"], x, t).max())
        if self.ascent:
            errors = lambda xx: self.errors(paths["module"], xx, t[:8])  # noqa: E731
            x8 = worst_case_tokens(errors, x[:8], self.head.guarantee.r_x, steps=80)
            with torch.no_grad():
                ascent = float(self.errors(paths["module"], x8, t[:8]).max())
            out["random"] = max(out["random"], ascent)
        return out


@dataclass(frozen=True)
class SparseAverageInputs:
    """The cases, and the bound they are compared against (remark after Prop 3)."""

    cases: Tuple[SACase, ...]
    error_bound: Callable[..., float] = sparse_average_error_bound  # r_x (2 L + within(L, rho))
    alpha_for: Callable[..., float] = sparse_average_alpha  # the least alpha for an eps
    limit: Callable[[int], float] = separation_limit  # the largest mu the head separates at
    leak_of: Callable[..., float] = sparse_average_leak  # L = X / (1 + X)


def _sa_case(ctx: Context, code: str, q: int, eps, book) -> SACase:
    """The head for q on ``book`` (RS-Hadamard, N = 64, mu = 1/16, or the signed codes, N = 8),
    its exact sup over all q-sets, the worst prompt and random prompts."""
    N = book.N
    r_x = lemma12_radius(SA_D, n=10_000, N=N)
    head = sparse_average_head(N, SA_D, q, codebook=book, r_x=r_x, eps=eps, device=ctx.device)
    g = head.guarantee
    gaps, sets, diffs = set_gaps(head.omega, q, g.alpha * g.c**2)
    worst = int(gaps.argmax())
    xw, tw = worst_prompt(sets[worst], diffs[worst], SA_D, g.r_x)
    pi = diffs[worst] + torch.zeros_like(diffs[worst]).scatter_(0, sets[worst], 1.0 / q)
    task = QSTR(N=N, d=SA_D, link=Mean(q=q, d=SA_D), indices="distinct")
    stream = "sparse-average-single-head/prompts" + ("" if code == RS else "/signed")
    gen = ctx.generator(stream, q, device=ctx.device)
    p = task.sample(ctx.pick(16, 512, 640), generator=gen, device=ctx.device, dtype=torch.float64)
    sup, prompts = g.r_x * float(gaps[worst]), (clip_to_ball(p.x, g.r_x), p.t)
    found = (len(sets), sup, pi, (xw, tw), 0.0, prompts, ctx.profile != "quick", eps)
    case = SACase(code, q, head, head, *found, extreme_sets(head.omega, sets, g.alpha * g.c**2))
    with torch.no_grad():
        fast = float(case.errors(head.fast_predict, xw, tw).max())
    return replace(case, fast_at_worst=fast)
