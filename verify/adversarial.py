"""Adversarial search for prompts that make a construction's error large, inside its assumptions.

The constructions' guarantees hold for prompts whose tokens satisfy ||x_j|| <= r_x (Lemma 12's
radius). ``worst_case_tokens`` (Adam) and ``ball_ascent`` (normalised gradient steps, no
``torch.optim``) run projected gradient ascent on the tokens, staying in that ball, so a check
measures the error near the worst case and not only on typical prompts.
"""

from __future__ import annotations

from typing import Callable

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
