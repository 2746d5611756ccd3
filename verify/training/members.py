"""One model to train with its task instance and stopping rule, and its outcome (Appendix E)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

import torch
from torch import nn

from qstr.constructions.encoding import encode
from qstr.constructions.experiment_models import PracticalFFN


@dataclass
class Member:
    """One model to train, with its task instance and its stopping rule.

    * ``model``: the initial network (its weights are read once; its class fixes the family):
      :class:`PracticalTransformer` (or :class:`BiasedTransformer`) on the Transformer encoding
      with prefactor ``c``; :class:`PracticalRNN` (GRU, one layer) on the RNN encoding (c = 1);
      :class:`PracticalFFN` (one-hot t) on (x, t); :class:`EncodedFFN` on the encoding.
    * ``omega``: (N, d_e) positional codes (for the encoding models; ``None`` for PracticalFFN).
    * ``stream``: training prompts (:class:`OnlineStream` or :class:`EpochStream`).
    * ``test``: ``(x, t, y)`` test prompts; test MSE = mean over prompts and positions.
    * ``threshold``: stop at the first check with test MSE < threshold (``None``: never).
    * ``tag``: anything; returned in the :class:`MemberResult`.
    """

    model: nn.Module
    stream: Any
    test: tuple
    omega: Optional[torch.Tensor] = None
    c: float = 1.0
    threshold: Optional[float] = None
    lr: float = 1e-3
    weight_decay: float = 0.1
    tag: Any = None
    info: dict = field(
        default_factory=dict
    )  # free-form facts to record (e.g. the codebook's coherence)

    @property
    def N(self) -> int:
        return int(self.test[0].shape[1])

    @property
    def d(self) -> int:
        return int(self.test[0].shape[2])

    @property
    def q(self) -> int:
        return int(self.test[1].shape[2])

    def inputs(self, x: torch.Tensor, t: torch.Tensor):
        """What ``self.model`` takes: the encoding z (B, N, D_e), or (x, t) for PracticalFFN."""
        if isinstance(self.model, PracticalFFN):
            return (x, t[:, 0, :]) if self.model.task == "simple" else (x, t)
        return (encode(x, t, self.omega.to(device=x.device, dtype=x.dtype), c=self.c),)


@dataclass
class MemberResult:
    """Outcome of one member: ``samples`` = steps * batch at the first check with test MSE
    below the threshold (``None`` if never reached within ``max_steps``)."""

    tag: Any
    steps: int
    samples: Optional[int]
    reached: bool
    test_mse: float
    curve: List[Tuple[int, float]]
    train_loss: float
    consumed: int
    seconds: float
    model: Optional[nn.Module] = None


def log_curve(curve: List[Tuple[int, float]], keep: int = 60) -> List[Tuple[int, float]]:
    """At most ``keep`` points of a learning curve, log-spaced in the check index, last kept."""
    if len(curve) <= keep:
        return list(curve)
    idx = sorted({int(round(v)) for v in torch.logspace(0, math.log10(len(curve)), keep).tolist()})
    return [curve[i - 1] for i in idx if 1 <= i <= len(curve)] + (
        [curve[-1]] if idx[-1] != len(curve) else []
    )
