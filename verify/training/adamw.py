"""AdamW on stacked tensors: each member's update is the one torch.optim.AdamW would make alone."""

from __future__ import annotations

from typing import Dict

import torch


class StackedAdamW:
    """AdamW (torch.optim.AdamW's update, amsgrad off) on stacked tensors (M, ...) with
    per-member learning rate and weight decay; each member's moments are its own slice, so the
    update is the one each member would get alone. All members share the step count (they
    start together; finished members are removed from the stack, see :meth:`select`)."""

    def __init__(
        self,
        params: Dict[str, torch.Tensor],
        lr: torch.Tensor,
        weight_decay: torch.Tensor,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
    ):
        self.params = params
        self.lr, self.wd = lr, weight_decay
        self.b1, self.b2 = betas
        self.eps = eps
        self.m = {k: torch.zeros_like(v) for k, v in params.items()}
        self.v = {k: torch.zeros_like(v) for k, v in params.items()}
        self.step_count = 0
        # torch's fused AdamW kernel (same update, one pass over memory) when every member has
        # the same lr and weight decay; the explicit per-member update otherwise.
        self.fused = (
            hasattr(torch, "_fused_adamw_")
            and bool((lr == lr[0]).all())
            and bool((weight_decay == weight_decay[0]).all())
        )
        # host copies of the shared lr / weight decay and device step counters, so that a step
        # never waits for the device (no .item(), no host-to-device copy)
        self._lr0, self._wd0 = float(lr[0]), float(weight_decay[0])
        self._steps = [
            torch.zeros((), dtype=torch.float32, device=v.device) for v in params.values()
        ]

    @torch.no_grad()
    def step(self, grads: Dict[str, torch.Tensor]) -> None:
        """One update. Reads the step count from device tensors only (no host value enters the
        arithmetic), so a CUDA graph that captured a step replays the right update every time."""
        self.step_count += 1
        torch._foreach_add_(self._steps, 1.0)
        if self.fused:
            try:
                return self._fused_step(grads)
            except (RuntimeError, NotImplementedError):  # dtype / device without a fused kernel
                self.fused = False
        step = self._steps[0].double()
        bc1 = 1 - self.b1**step
        bc2_sqrt = (1 - self.b2**step).sqrt()
        for k, p in self.params.items():
            g = grads[k]
            shape = (-1,) + (1,) * (p.dim() - 1)
            lr = self.lr.view(shape)
            bc1, bc2_sqrt = bc1.to(p.dtype), bc2_sqrt.to(p.dtype)
            p.mul_(1 - lr * self.wd.view(shape))
            self.m[k].lerp_(g, 1 - self.b1)
            self.v[k].mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            denom = (self.v[k].sqrt() / bc2_sqrt).add_(self.eps)
            p.sub_(self.m[k] / denom * (lr / bc1))

    def _fused_step(self, grads: Dict[str, torch.Tensor]) -> None:
        keys = list(self.params)
        # the kernel reads the step count from self._steps
        # (torch.optim increments it before the call)
        torch._fused_adamw_(
            [self.params[k] for k in keys],
            [grads[k].contiguous() for k in keys],
            [self.m[k] for k in keys],
            [self.v[k] for k in keys],
            [],
            self._steps,
            lr=self._lr0,
            beta1=self.b1,
            beta2=self.b2,
            weight_decay=self._wd0,
            eps=self.eps,
            amsgrad=False,
            maximize=False,
        )

    @torch.no_grad()
    def select(self, keep: torch.Tensor) -> None:
        """Keep the members ``keep`` (row indices). The kept parameters are new leaves: selected
        with autograd on, they would hang from the old stack's graph, keeping every earlier stack
        alive and, on CUDA, tying each new step's gradients to the stream the selection ran on
        (which broke the recording of the step as a CUDA graph)."""
        for d in (self.params, self.m, self.v):
            for k in list(d):
                d[k] = d[k].index_select(0, keep)
        self.lr = self.lr.index_select(0, keep)
        self.wd = self.wd.index_select(0, keep)
