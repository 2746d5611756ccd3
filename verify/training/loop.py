"""One model at a time: online AdamW on fresh batches (the claims' few-head fits, Props 3/21),
its risk, and the reference loop the stacked trainer is tested against (Appendix E)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import torch
from torch import nn

from qstr.constructions import validate
from qstr.verify.training.members import Member, MemberResult, log_curve


@dataclass(frozen=True)
class FitResult:
    steps: int
    final_loss: float
    samples: int


@dataclass(frozen=True)
class OnlineFit:
    """How :func:`fit_online` trains: ``steps`` AdamW steps on fresh batches of ``batch_size``."""

    steps: int
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0

    def __post_init__(self):
        validate.positive_int("steps", self.steps)
        validate.positive_int("batch_size", self.batch_size)
        validate.positive_float("lr", self.lr)
        validate.positive_float("weight_decay", self.weight_decay, allow_zero=True)


def fit_online(
    model: nn.Module,
    batch: Callable[[int, torch.Generator], tuple],
    fit: OnlineFit,
    *,
    generator: torch.Generator,
    positions: Optional[slice] = None,
    project: Optional[Callable[[nn.Module], None]] = None,
) -> FitResult:
    """AdamW on fresh batches (``fit``): ``batch(B, generator) -> (inputs, y)`` and
    ``model(inputs) -> y_hat``.

    ``positions`` restricts the squared loss to those output positions; ``project`` is called
    after every step (e.g. to keep W_QK in a restricted class by zeroing blocks).
    """
    if not isinstance(fit, OnlineFit):
        raise ValueError(f"fit must be an OnlineFit, got {type(fit).__name__}")
    steps, batch_size, lr, weight_decay = fit.steps, fit.batch_size, fit.lr, fit.weight_decay
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    pos = positions or slice(None)
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        inputs, y = batch(batch_size, generator)
        loss = ((model(inputs)[:, pos] - y[:, pos]) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if project is not None:
            with torch.no_grad():
                project(model)
    return FitResult(steps=steps, final_loss=float(loss.detach()), samples=steps * batch_size)


@torch.no_grad()
def position_risk(
    model: nn.Module,
    batch: Callable[[int, torch.Generator], tuple],
    *,
    n: int,
    generator: torch.Generator,
    positions: Optional[slice] = None,
    chunk: int = 512,
):
    """Mean and standard error of (y_hat_i - y_i)^2 over ``n`` fresh prompts
    and the given positions.

    The standard error treats prompts as the independent units (positions in one prompt share x).
    """
    pos = positions or slice(None)
    per_prompt = []
    for start in range(0, n, chunk):
        inputs, y = batch(min(chunk, n - start), generator)
        per_prompt.append(((model(inputs)[:, pos] - y[:, pos]) ** 2).mean(dim=1))
    losses = torch.cat(per_prompt).double()
    return float(losses.mean()), float(losses.std() / losses.numel() ** 0.5)


def fit_until_threshold(
    member: Member,
    *,
    batch_size: int = 64,
    check_every: int = 10,
    max_steps: int = 15625,
    chunk: int = 1000,
) -> MemberResult:
    """The protocol of :func:`train_stack` for ONE member, on its ``nn.Module`` with
    ``torch.optim.AdamW``: the reference the batched trainer must reproduce. The member's
    model is trained in place."""
    model = member.model
    opt = torch.optim.AdamW(model.parameters(), lr=member.lr, weight_decay=member.weight_decay)
    tx, tt, ty = member.test
    curve: List[Tuple[int, float]] = []
    t0 = time.perf_counter()
    mse = math.nan
    loss = torch.tensor(math.nan)

    @torch.no_grad()
    def evaluate() -> float:
        sse = 0.0
        for s in range(0, tx.shape[0], chunk):
            yh = model(*member.inputs(tx[s : s + chunk], tt[s : s + chunk]))
            sse += float(((yh - ty[s : s + chunk]) ** 2).sum())
        return sse / ty.numel()

    def result(steps: int, reached: bool) -> MemberResult:
        return MemberResult(
            member.tag,
            steps,
            steps * batch_size if reached else None,
            reached,
            mse,
            log_curve(curve),
            float(loss.detach()),
            steps * batch_size,
            time.perf_counter() - t0,
            model,
        )

    for step in range(1, max_steps + 1):
        x, t, y = member.stream.draw(batch_size)
        loss = ((model(*member.inputs(x, t)) - y) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % check_every == 0:
            mse = evaluate()
            curve.append((step, mse))
            if member.threshold is not None and mse < member.threshold:
                return result(step, True)
    if max_steps % check_every != 0 or not curve:
        mse = evaluate()
    return result(max_steps, False)
