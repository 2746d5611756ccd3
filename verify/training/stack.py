"""Many independent models trained as one stack, each exactly as alone (Figures 1-3, Appendix E)."""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from qstr.constructions import validate
from qstr.verify.training.adamw import StackedAdamW
from qstr.verify.training.families import _Family, _pad_prompts, family_of, stack_key
from qstr.verify.training.members import Member, MemberResult, log_curve


@contextlib.contextmanager
def _tf32(enabled: bool):
    """Let float32 matrix products use TF32 tensor cores while the block runs (restored after)."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    if enabled:  # otherwise both settings stay as the caller left them
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def default_eval_elements(P: Dict[str, torch.Tensor]) -> int:
    """Activation elements a test chunk may hold: 2^26 on the CPU; on CUDA a quarter of the free
    memory (at most 2^31)."""
    v = next(iter(P.values()))
    if v.device.type != "cuda":
        return 2**26
    free, _ = torch.cuda.mem_get_info(v.device)
    return max(2**26, min(2**31, free // (4 * v.element_size())))


def evaluation_chunk(fam: _Family, P: Dict[str, torch.Tensor], n: int, eval_elements: int) -> int:
    """Test prompts per chunk of :meth:`_Family.evaluate` within ``eval_elements``."""
    return max(1, min(n, eval_elements // max(1, fam.evaluation_elements(P))))


def _test_mse(
    fam: _Family, P, meta, test, n_test: torch.Tensor, eval_elements: int
) -> torch.Tensor:
    """(M,) test MSE of every member over its real positions, in chunks of test prompts."""
    chunk = evaluation_chunk(fam, P, int(n_test[0]), eval_elements)
    sse = torch.zeros(len(n_test), device=n_test.device, dtype=torch.float64)
    x, t, y = test
    for s in range(0, x.shape[1], chunk):
        yh = fam.evaluate(P, meta, x[:, s : s + chunk], t[:, s : s + chunk])
        err = (yh - y[:, s : s + chunk]) ** 2 * meta["pos_mask"][:, None, :]
        sse += err.sum(dim=(1, 2)).double()
    return sse / (n_test.double() * meta["N"].double())


def _train_step(fam: _Family, opt: StackedAdamW, meta, x, t, y, batch_size: int) -> torch.Tensor:
    """One AdamW step of every member on its own mean squared error; returns the (M,) losses."""
    P = opt.params
    yh = fam.forward(P, meta, x, t)
    per = ((yh - y) ** 2 * meta["pos_mask"][:, None, :]).sum(dim=(1, 2)) / (
        batch_size * meta["N"].to(yh.dtype)
    )
    names = list(P)
    grads = torch.autograd.grad(per.sum(), [P[k] for k in names])
    opt.step(dict(zip(names, grads, strict=True)))
    return per.detach()


def _record(fam, opt, meta, x, t, y, batch_size: int):
    """Take this step eagerly on a side stream (the warm-up recording needs: lazy library set-up
    must not happen during capture), then record it for the next steps: ``(graph, losses,
    None)``. If recording fails, the step has still been taken exactly once (a capture runs
    nothing): ``(None, losses, message)``, and the caller decides whether to try again."""
    side = torch.cuda.Stream(device=x.device)
    side.wait_stream(torch.cuda.current_stream(x.device))
    with torch.cuda.stream(side):
        per = _train_step(fam, opt, meta, x, t, y, batch_size)
    torch.cuda.current_stream(x.device).wait_stream(side)
    try:
        return _GraphedStep(fam, opt, meta, x, t, y, batch_size), per, None
    except RuntimeError as exc:  # torch.AcceleratorError is one
        first = exc  # the error the capture first met (the one raised at its end only follows it)
        while isinstance(first.__context__, RuntimeError):
            first = first.__context__
        message = f"{type(first).__name__}: {str(first).splitlines()[0]}"
    # only the message is kept: the exception's frames hold the failed capture's tensors
    torch.cuda.empty_cache()
    return None, per, message


CAPTURE_ERROR_MODE = "thread_local"  # torch.cuda.graph's capture_error_mode for the steps


class _GraphedStep:
    """:func:`_train_step` recorded once as a CUDA graph and replayed on copies of each batch.

    A step of a stack launches hundreds of small kernels (the GRU alone several per position
    and direction); replaying them as one graph removes the host's launch cost, which
    dominated on a GPU. The graph holds the stack's tensors, so it is recorded again whenever
    the stack changes (a member finishes); the memory of the graph it replaces is returned to
    the device first (one pool shared by the recordings tripped an allocator assertion in
    torch 2.11, and pools left behind fragmented the memory until a later stack ran out)."""

    def __init__(self, fam, opt, meta, x, t, y, batch_size: int):
        torch.cuda.synchronize(x.device)  # nothing pending while recording
        torch.cuda.empty_cache()  # the replaced graph's pool
        self.inputs = (x.clone(), t.clone(), y.clone())
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, capture_error_mode=CAPTURE_ERROR_MODE):
            self.per = _train_step(fam, opt, meta, *self.inputs, batch_size)

    def __call__(self, x, t, y) -> torch.Tensor:
        for static, v in zip(self.inputs, (x, t, y), strict=True):
            static.copy_(v)
        self.graph.replay()
        return self.per


@dataclass(frozen=True)
class StackOptions:
    """How a stack trains (Appendix E's protocol, :func:`train_stack`).

    ``prefetch``: steps of prompts drawn per refill (the prompt sequence does not depend on it).
    ``eval_elements``: rough cap on activation elements per test chunk (default: 2^26 on the
    CPU; on CUDA a quarter of the free memory). ``epoch_steps`` with ``epoch_loss_threshold``:
    the fixed-training-set stopping rule of Figure 2. ``return_models``: each result carries its
    trained module. ``graphs``: replay each step as a CUDA graph (default: on CUDA; the same
    arithmetic, without the per-kernel launch cost). ``tf32``: float32 matrix products on the
    tensor cores with 10-bit mantissas (CUDA; faster, not bit-comparable with the CPU)."""

    batch_size: int = 64
    check_every: int = 10
    max_steps: int = 15625
    prefetch: int = 16
    eval_elements: Optional[int] = None
    epoch_steps: Optional[int] = None
    epoch_loss_threshold: Optional[float] = None
    return_models: bool = False
    graphs: Optional[bool] = None
    tf32: bool = False

    def __post_init__(self):
        for name in ("batch_size", "check_every", "max_steps", "prefetch"):
            validate.positive_int(name, getattr(self, name))


class _Stack:
    """The active members of a stack, stacked: parameters and their optimiser, the prompts
    drawn ahead, test sets, thresholds, each member's record so far, and the recorded step.
    Row r of every tensor is member ``active[r]``; :meth:`finish` removes rows."""

    def __init__(self, members: List[Member], opts: StackOptions):
        self.members, self.opts = members, opts
        self.fam = fam = family_of(members[0])(members)
        P, self.meta = fam.stack(members)
        for v in P.values():
            v.requires_grad_(True)
        v0 = next(iter(P.values()))
        self.dev, dtype = v0.device, v0.dtype
        self.opt = StackedAdamW(
            P,
            torch.tensor([m.lr for m in members], device=self.dev, dtype=dtype),
            torch.tensor([m.weight_decay for m in members], device=self.dev, dtype=dtype),
        )
        self.eval_elements = (
            default_eval_elements(P) if opts.eval_elements is None else opts.eval_elements
        )
        padded = [_pad_prompts(*m.test, fam.Nmax, fam.qmax) for m in members]
        self.test = [torch.stack(v) for v in zip(*padded, strict=True)]
        self.n_test = torch.tensor([m.test[0].shape[0] for m in members], device=self.dev)
        if len(set(self.n_test.tolist())) != 1:
            raise ValueError("members of one stack must have test sets of equal size")
        thr = [m.threshold if m.threshold is not None else -math.inf for m in members]
        self.thr = torch.tensor(thr, device=self.dev, dtype=dtype)
        self.active = list(range(len(members)))  # indices into members, aligned with the rows
        self.results: List[Optional[MemberResult]] = [None] * len(members)
        self.curves: List[List[Tuple[int, float]]] = [[] for _ in members]
        self.last_mse = [math.nan] * len(members)
        self.last_loss = [math.nan] * len(members)
        self.epoch_loss = torch.zeros(len(members), device=self.dev, dtype=torch.float64)
        self.buf, self.buf_pos = None, 0
        self.graph: Optional[_GraphedStep] = None
        self.use_graphs = self.dev.type == "cuda" if opts.graphs is None else bool(opts.graphs)
        if self.use_graphs and self.dev.type != "cuda":
            raise ValueError(f"graphs=True needs a CUDA stack, got device {self.dev}")
        self.failures = 0  # consecutive failed recordings
        self.t0 = time.perf_counter()

    @property
    def P(self) -> Dict[str, torch.Tensor]:
        return self.opt.params

    def batch(self):
        """The next ``batch_size`` prompts of every active member's own stream."""
        o = self.opts
        if self.buf is None or self.buf_pos >= o.prefetch:
            fam = self.fam
            parts = [
                _pad_prompts(
                    *self.members[i].stream.draw(o.prefetch * o.batch_size), fam.Nmax, fam.qmax
                )
                for i in self.active
            ]
            self.buf, self.buf_pos = [torch.stack(v) for v in zip(*parts, strict=True)], 0
        sl = slice(self.buf_pos * o.batch_size, (self.buf_pos + 1) * o.batch_size)
        self.buf_pos += 1
        return [v[:, sl] for v in self.buf]

    def train_step(self, x, t, y) -> torch.Tensor:
        """One step of every active member (eager, or a replay of the recorded step; a new or
        changed stack runs its first step eagerly and records it for the next ones)."""
        fam, opt, meta, b = self.fam, self.opt, self.meta, self.opts.batch_size
        if not self.use_graphs:
            return _train_step(fam, opt, meta, x, t, y, b)
        if self.graph is not None:
            return self.graph(x, t, y)
        self.graph, per, failed = _record(fam, opt, meta, x, t, y, b)
        self.failures = self.failures + 1 if failed is not None else 0
        if self.failures == 2:  # a recording after one warm-up step can fail (torch 2.11): the
            self.use_graphs = False  # next step warms up again; after that, eager for good
            warnings.warn(
                f"recording the training step as a CUDA graph failed twice "
                f"({failed}); this stack goes on without graphs",
                RuntimeWarning,
                stacklevel=2,
            )
        return per

    @torch.no_grad()
    def test_mse(self) -> torch.Tensor:
        """(rows,) test MSE of the active members; halves its chunks on a CUDA out-of-memory."""
        while True:
            try:
                return _test_mse(
                    self.fam, self.P, self.meta, self.test, self.n_test, self.eval_elements
                )
            except torch.cuda.OutOfMemoryError:  # fragmented device memory: halve the chunks
                if evaluation_chunk(self.fam, self.P, int(self.n_test[0]), self.eval_elements) == 1:
                    raise
                self.eval_elements //= 2
                torch.cuda.empty_cache()

    def measure(
        self, step: Optional[int] = None, losses: Optional[List[float]] = None
    ) -> torch.Tensor:
        """The active members' test MSE (by row), recorded (with ``step`` on their curves, and
        their training ``losses``)."""
        mse = self.test_mse()
        for r, (i, v) in enumerate(zip(self.active, mse.tolist(), strict=True)):
            self.last_mse[i] = v
            if step is not None:
                self.curves[i].append((step, v))
            if losses is not None:
                self.last_loss[i] = losses[r]
        return mse

    def finish(self, rows: List[int], step: int, reached: bool, on_finish) -> None:
        """Members at ``rows`` stop at ``step``: their results, then the stack without them (the
        step is recorded again for the stack that is left)."""
        if not rows:
            return
        self.graph = None
        b = self.opts.batch_size
        for r in rows:
            i = self.active[r]
            m = self.members[i]
            model = self.fam.unstack(self.P, r, m) if self.opts.return_models else None
            res = MemberResult(
                tag=m.tag,
                steps=step,
                samples=step * b if reached else None,
                reached=reached,
                test_mse=self.last_mse[i],
                curve=log_curve(self.curves[i]),
                train_loss=self.last_loss[i],
                consumed=step * b,
                seconds=time.perf_counter() - self.t0,
                model=model,
            )
            self.results[i] = res
            if on_finish is not None:
                on_finish(res)
        keep_rows = [r for r in range(len(self.active)) if r not in set(rows)]
        if not keep_rows:
            self.active.clear()
            return
        keep = torch.tensor(keep_rows, device=self.dev)
        self.opt.select(keep)
        for v in self.P.values():
            v.requires_grad_(True)
        self.meta = {k: v.index_select(0, keep) for k, v in self.meta.items()}
        self.test = [v.index_select(0, keep) for v in self.test]
        self.thr = self.thr.index_select(0, keep)
        self.epoch_loss = self.epoch_loss.index_select(0, keep)
        self.n_test = self.n_test.index_select(0, keep)
        if self.buf is not None:
            self.buf = [v.index_select(0, keep) for v in self.buf]
        self.active[:] = [self.active[r] for r in keep_rows]

    def stopping(self, step: int, per: torch.Tensor) -> List[int]:
        """After ``step``: the rows that stop now (below their threshold at a check, or, with
        the epoch rule, below ``epoch_loss_threshold`` over the epoch just ended)."""
        o = self.opts
        per_d = per.detach().double()
        checked = step % o.check_every == 0
        self.epoch_loss += per_d
        done: List[int] = []
        if checked:
            mse = self.measure(step, per_d.tolist())
            done = (mse < self.thr.double()).nonzero().flatten().tolist()
        if o.epoch_steps and step % o.epoch_steps == 0:
            if o.epoch_loss_threshold is None:
                self.epoch_loss.zero_()
            else:
                ep = (self.epoch_loss / o.epoch_steps).tolist()
                self.epoch_loss.zero_()
                for r, i in enumerate(self.active):
                    self.last_loss[i] = ep[r]
                below = {r for r, v in enumerate(ep) if v < o.epoch_loss_threshold}
                done = sorted(set(done) | below)
        if done and not checked:  # stopping off a check: measure the test MSE now
            self.measure()
        return done


def train_stack(
    members: Sequence[Member],
    options: StackOptions = StackOptions(),
    *,
    on_finish: Optional[Callable[[MemberResult], None]] = None,
    on_step: Optional[Callable[[int, int], None]] = None,
) -> List[MemberResult]:
    """Train ``members`` (one family, see :func:`stack_key`) together, each exactly as alone.

    Protocol (Appendix E): every step each active member takes the next ``batch_size``
    prompts of its own stream and makes one AdamW step on its own mean squared error. Every
    ``check_every`` steps the active members' test MSE is computed on their own test sets; a
    member whose test MSE is below its ``threshold`` stops there (it is removed from the stack:
    no more updates, no more prompts) with ``samples = steps * batch_size``. Members still
    active after ``max_steps`` steps stop with ``samples = None``. With ``epoch_steps`` and
    ``epoch_loss_threshold`` a member also stops when its mean training loss over the last
    ``epoch_steps`` steps (an epoch) is below that value (the fixed-training-set protocol of
    Figure 2); ``samples`` is then the prompts consumed. ``options``: :class:`StackOptions`.
    ``on_finish(result)`` is called as each member finishes (in stopping order); ``on_step(step,
    active)`` after every step. Returns results in the order of ``members``.
    """
    members = list(members)
    if not members:
        return []
    keys = {stack_key(m) for m in members}
    if len(keys) != 1:
        raise ValueError(f"members do not share one stack family: {sorted(keys)}")
    st = _Stack(members, options)
    step, per = 0, None
    with _tf32(options.tf32 and st.dev.type == "cuda"):
        while st.active and step < options.max_steps:
            per = st.train_step(*st.batch())
            step += 1
            st.finish(st.stopping(step, per), step, True, on_finish)
            if on_step is not None:
                on_step(step, len(st.active))
        if st.active:
            if step % options.check_every != 0 or not st.curves[st.active[0]]:
                st.measure(losses=per.detach().double().tolist())
            st.finish(list(range(len(st.active))), step, False, on_finish)
    return st.results  # type: ignore[return-value]
