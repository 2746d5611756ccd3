"""Adversarial search for prompts that make a construction's error large, inside its assumptions.

The constructions' guarantees hold for prompts whose tokens satisfy ||x_j|| <= r_x (Lemma 12's
radius). ``worst_case_tokens`` (Adam) and ``ball_ascent`` (normalised gradient steps, no
``torch.optim``) run projected gradient ascent on the tokens, staying in that ball, so a check
measures the error near the worst case and not only on typical prompts. For Lemma 11's heads
with an affine output net the worst case is computed, not searched: ``lemma11_worst_case``.
``sphere_ascent`` searches parameter perturbations of a fixed size for the largest ratio of a
measured change to its bound (Lemmas 13 and 15).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch


def clip_to_ball(x: torch.Tensor, r: float) -> torch.Tensor:
    """Project each token x_j (last axis) onto the ball of radius r."""
    norms = x.norm(dim=-1, keepdim=True)
    return x * torch.clamp(r / norms.clamp_min(1e-300), max=1.0)


def worst_case_tokens(
    error: Callable[[torch.Tensor], torch.Tensor],
    x0: torch.Tensor,
    r: float,
    *,
    steps: int = 50,
    lr: float = 0.2,
) -> torch.Tensor:
    """Projected Adam ascent on sum(error(x)^2) from x0 within ||x_j|| <= r;
    returns the best x seen.

    ``error(x)`` returns the per-position absolute errors (any shape); the best iterate is the one
    with the largest maximum error, so the search never reports less than its start.
    """
    x = clip_to_ball(x0.detach().clone(), r).requires_grad_(True)
    opt = torch.optim.Adam([x], lr=lr * r)
    with torch.no_grad():
        best, best_val = x.detach().clone(), float(error(x).max())
    for _ in range(steps):
        err = error(x)
        val = float(err.detach().max())
        if val > best_val:
            best, best_val = x.detach().clone(), val
        opt.zero_grad(set_to_none=True)
        (-(err**2).sum()).backward()
        opt.step()
        with torch.no_grad():
            x.copy_(clip_to_ball(x, r))
    with torch.no_grad():
        if float(error(x).max()) > best_val:
            best = x.detach().clone()
    return best


def ball_ascent(err, x0: torch.Tensor, r: float, steps: int) -> torch.Tensor:
    """Worst-case tokens inside ||x_j|| <= r: projected normalised-gradient ascent on sum(err(x)^2)
    from x0; returns the iterate with the largest max error (never worse than x0).

    (The search of :func:`worst_case_tokens` without ``torch.optim``, whose first use imports
    torch._dynamo: seconds that the quick profile cannot spend.)
    """
    x = clip_to_ball(x0.detach().clone(), r)
    with torch.no_grad():
        best, best_val = x.clone(), float(err(x).max())
    for k in range(steps):
        x.requires_grad_(True)
        e = err(x)
        (grad,) = torch.autograd.grad((e**2).sum(), x)
        with torch.no_grad():
            val = float(e.max())
            if val > best_val:
                best, best_val = x.detach().clone(), val
            g = grad / grad.norm(dim=-1, keepdim=True).clamp_min(1e-300)
            x = clip_to_ball(x + 0.1 * r * (1 - k / steps) * g, r)
    with torch.no_grad():
        if float(err(x).max()) > best_val:
            best = x.detach().clone()
    return best


def sphere_ascent(ratio: Callable[[torch.Tensor], torch.Tensor], D0: torch.Tensor, steps: int):
    """The search of Lemmas 13 and 15's claims for parameter changes near their bounds: normalised
    gradient ascent of the scalar ``ratio(D)`` over D on the sphere ||D|| = ||D0||
    (step 10% of the radius, decaying); returns (the best D seen, its ratio)."""
    radius = float(D0.norm())
    D = D0.detach().clone()
    best, best_val = D.clone(), -math.inf
    for k in range(steps + 1):
        D.requires_grad_(True)
        val = ratio(D)
        if float(val.detach()) > best_val:
            best, best_val = D.detach().clone(), float(val.detach())
        if k == steps:
            break
        (grad,) = torch.autograd.grad(val, D)
        with torch.no_grad():
            D = D + 0.1 * radius * (1 - k / steps) * grad / grad.norm().clamp_min(1e-300)
            D = D * (radius / D.norm().clamp_min(1e-300))
    return best, best_val


@dataclass(frozen=True)
class WorstCase:
    """The worst case of a Lemma 11 head for an affine output net
    (docs/derivations/lemma11.md, "The worst case over target tuples").

    ``value``: the error at ``prompt``, the largest over the target tuples searched, a lower
    bound on the supremum over all prompts in the r_x-ball; ``upper``: a certified upper bound on
    that supremum; ``exact``: every tuple was searched, so ``value`` is the supremum and equals
    ``upper``; ``targets``: the tuple (t_1, ..., t_q) every position of ``prompt`` reads;
    ``tuples``: how many tuples were evaluated; ``same_target``: the largest value over tuples
    that repeat one target in every slot (2 r_x max_t leak[t] ||sum_h w_h||)."""

    value: float
    upper: float
    exact: bool
    targets: Tuple[int, ...]
    prompt: Tuple[torch.Tensor, torch.Tensor]
    tuples: int
    same_target: float


EXHAUSTIVE_WORK = 2**24  # tuples x positions evaluated at most: N^(q+1) (N = 256 at q = 2)


def affine_gradient(net, H: int, d: int, *, dtype=torch.float64, device=None) -> torch.Tensor:
    """(H, d): the gradient of ``net`` on R^{H x d}, which must be affine (the same gradient at
    three random points, to 1e-12 relative); ValueError otherwise."""
    g = torch.Generator().manual_seed(0)
    grads = []
    for _ in range(3):
        z = torch.randn(H, d, generator=g, dtype=dtype).to(device).requires_grad_(True)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(net(z).sum(), z)
        grads.append(grad)
    scale = float(grads[0].norm()) + 1e-300
    if any(float((gr - grads[0]).norm()) > 1e-12 * scale for gr in grads[1:]):
        raise ValueError("net must be affine on R^{H d}: its gradient differs between points")
    return grads[0]


def _target_rows(omega: torch.Tensor, A: float, targets: torch.Tensor) -> torch.Tensor:
    """D[t] = softmax_j(A <omega_t, omega_j>) - e_t for each t in ``targets``: (len, N)."""
    P = torch.softmax(A * (omega[targets] @ omega.T), dim=-1)
    P[torch.arange(len(targets), device=P.device), targets] -= 1
    return P


def _best_tuple(D: torch.Tensor, Gw: torch.Tensor, q: int, r_x: float):
    """The tuple (q >= 2) over D's rows (indices into them) maximising r_x sum_j ||sum_h D[t_h, j]
    w_h||, with Gw = W W^T, so ||.||^2 = sum_{h,k} Gw[h, k] D[t_h, j] D[t_k, j]; its value;
    tuples evaluated. The first q - 1 entries run over prefixes in chunks, the last over all rows
    at once: quad = Q + 2 L D[t_q] + Gw[q, q] D[t_q]^2 with the prefix's Q and L (no gather of
    the q rows of every tuple)."""
    K, N = D.shape
    last = q - 1
    per = max(1, 2**22 // (K * N))  # prefixes per chunk
    D2 = Gw[last, last] * D**2
    best, best_val = None, -1.0
    for s in range(0, K**last, per):
        flat = torch.arange(s, min(K**last, s + per), device=D.device)
        pre = torch.stack([(flat // K**h) % K for h in range(last)], dim=1)  # (P, q - 1)
        a = D[pre]  # (P, q - 1, N)
        Q = torch.einsum("phn,hk,pkn->pn", a, Gw[:last, :last], a)
        L = torch.einsum("phn,h->pn", a, Gw[:last, last])
        quad = torch.addcmul(Q[:, None] + D2, 2 * L[:, None], D[None])  # (P, K, N)
        vals = r_x * quad.clamp_min_(0).sqrt_().sum(-1)  # (P, K)
        i = int(vals.argmax())
        if float(vals.flatten()[i]) > best_val:
            p, k = divmod(i, K)
            best = torch.cat([pre[p], torch.tensor([k], device=D.device)])
            best_val = float(vals.flatten()[i])
    return best, best_val, K**q


def lemma11_worst_case(construction, net, *, r_x: Optional[float] = None) -> WorstCase:
    """The worst error of a Lemma 11 construction over every prompt with ||x_j|| <= r_x, for an
    output net that is affine (docs/derivations/lemma11.md, "The worst case over target tuples").

    The softmax weights do not depend on the tokens, so for the targets (t_1, ..., t_q) of a
    position the supremum over tokens is r_x sum_j ||sum_h (P[t_h, j] - 1[j = t_h]) w_h||,
    attained by x_j = r_x v_j / ||v_j||. At q = 1 that is 2 r_x max_t leak[t] ||w||, exact for
    every N; at q >= 2 exhaustive over all N^q tuples when N^(q+1) <= ``EXHAUSTIVE_WORK``;
    beyond, over the K^q tuples of the K targets with the largest leak (K^q N within the same
    work), with the certified upper bound 2 r_x max_t leak[t] sum_h ||w_h||. Returns a
    :class:`WorstCase` whose prompt (B = 1, every position reading the tuple) attains ``value``.
    """
    from qstr.bounds.lemma11_leaks import target_leaks  # noqa: PLC0415 - layers
    from qstr.constructions.attention import Construction  # noqa: PLC0415 - layers

    if not isinstance(construction, Construction) or construction.kind != "lemma11":
        raise ValueError("construction must be a Lemma 11 Construction (kind='lemma11')")
    slots = construction.head_slots
    if any(len(s) != 1 for s in slots):
        raise ValueError("every head must read exactly one slot (H = q)")
    N, d, q = construction.N, construction.d, len(slots)
    omega = construction.omega
    if r_x is None:
        if construction.guarantee is None:
            raise ValueError("r_x must be given: the construction carries no guarantee")
        r_x = construction.guarantee.r_x
    r_x = float(r_x)
    if not (math.isfinite(r_x) and r_x > 0):
        raise ValueError(f"r_x must be a finite number > 0, got {r_x}")
    W = affine_gradient(net, q, d, dtype=omega.dtype, device=omega.device)  # (H, d)
    Gw = W @ W.T
    leak = target_leaks(construction)
    A = construction.alpha * construction.c**2
    t_star = int(leak.argmax())
    same = 2 * r_x * float(leak[t_star]) * float(W.sum(0).norm())
    upper = 2 * r_x * float(leak.max()) * float(W.norm(dim=1).sum())
    if q == 1:  # sum_j |P[t, j] - 1[j = t]| = 2 leak[t]: the closed form, no search
        idx = torch.tensor([t_star], device=omega.device)
        prompt = _worst_prompt(_target_rows(omega, A, idx), W, (t_star,), N, r_x)
        return WorstCase(same, same, True, (t_star,), prompt, N, same)
    exact = N ** (q + 1) <= EXHAUSTIVE_WORK
    if exact:
        cands = torch.arange(N, device=omega.device)
    else:
        K = max(1, int((EXHAUSTIVE_WORK / N) ** (1 / q)))
        cands = torch.argsort(leak, descending=True)[: min(K, N)]
    D = _target_rows(omega, A, cands)
    best, value, tuples = _best_tuple(D, Gw, q, r_x)
    targets = tuple(int(cands[i]) for i in best)
    prompt = _worst_prompt(D[best], W, targets, N, r_x)
    return WorstCase(value, value if exact else upper, exact, targets, prompt, tuples, same)


def lemma11_tuple_prompt(construction, gradient: torch.Tensor, targets, r_x: float):
    """Lemma 11: the worst prompt of one target tuple for an affine net with gradient (H, d): every
    position reads ``targets``, x_j = r_x v_j / ||v_j|| with v_j = sum_h (P[t_h, j] -
    1[j = t_h]) w_h (docs/derivations/lemma11.md). Returns (x (1, N, d), t (1, N, q))."""
    idx = torch.tensor(tuple(targets), device=construction.omega.device)
    D = _target_rows(construction.omega, construction.alpha * construction.c**2, idx)
    return _worst_prompt(D, gradient, tuple(targets), construction.N, r_x)


def _worst_prompt(D_rows: torch.Tensor, W: torch.Tensor, targets, N: int, r_x: float):
    """x_j = r_x v_j / ||v_j||, v_j = sum_h D[t_h, j] w_h (0 where v_j = 0), every position
    reading ``targets``: (x (1, N, d), t (1, N, q))."""
    v = D_rows.T @ W  # (N, d)
    norms = v.norm(dim=-1, keepdim=True)
    x = torch.where(norms > 0, r_x * v / norms.clamp_min(1e-300), torch.zeros_like(v))
    t = torch.tensor(targets, device=W.device).expand(1, N, len(targets)).clone()
    return x.unsqueeze(0), t
