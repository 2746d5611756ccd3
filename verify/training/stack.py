"""Many independent models trained as one stack, each exactly as alone (Figures 1-3, Appendix E)."""
from __future__ import annotations

import contextlib
import math
import time
import warnings
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


def _test_mse(fam: _Family, P, meta, test, n_test: torch.Tensor,
              eval_elements: int) -> torch.Tensor:
    """(M,) test MSE of every member over its real positions, in chunks of test prompts."""
    chunk = evaluation_chunk(fam, P, int(n_test[0]), eval_elements)
    sse = torch.zeros(len(n_test), device=n_test.device, dtype=torch.float64)
    x, t, y = test
    for s in range(0, x.shape[1], chunk):
        yh = fam.evaluate(P, meta, x[:, s:s + chunk], t[:, s:s + chunk])
        err = (yh - y[:, s:s + chunk]) ** 2 * meta["pos_mask"][:, None, :]
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
    opt.step(dict(zip(names, grads)))
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
        for static, v in zip(self.inputs, (x, t, y)):
            static.copy_(v)
        self.graph.replay()
        return self.per


def train_stack(
    members: Sequence[Member],
    *,
    batch_size: int = 64,
    check_every: int = 10,
    max_steps: int = 15625,
    prefetch: int = 16,
    eval_elements: Optional[int] = None,
    epoch_steps: Optional[int] = None,
    epoch_loss_threshold: Optional[float] = None,
    return_models: bool = False,
    on_finish: Optional[Callable[[MemberResult], None]] = None,
    on_step: Optional[Callable[[int, int], None]] = None,
    graphs: Optional[bool] = None,
    tf32: bool = False,
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
    Figure 2); ``samples`` is then the prompts consumed.

    ``prefetch``: steps of prompts drawn per refill (the prompt sequence does not depend on it).
    ``eval_elements``: rough cap on activation elements per test chunk (default: 2^26 on the
    CPU; on CUDA a quarter of the free memory).
    ``on_finish(result)`` is called as each member finishes (in stopping order); ``on_step(step,
    active)`` after every step. ``graphs``: replay each step as a CUDA graph (default: on CUDA;
    the same arithmetic, without the per-kernel launch cost). ``tf32``: float32 matrix products
    on the tensor cores with 10-bit mantissas (CUDA; faster, not bit-comparable with the CPU).
    Returns results in the order of ``members``.
    """
    members = list(members)
    if not members:
        return []
    keys = {stack_key(m) for m in members}
    if len(keys) != 1:
        raise ValueError(f"members do not share one stack family: {sorted(keys)}")
    batch_size = validate.positive_int("batch_size", batch_size)
    check_every = validate.positive_int("check_every", check_every)
    max_steps = validate.positive_int("max_steps", max_steps)
    prefetch = validate.positive_int("prefetch", prefetch)
    fam = family_of(members[0])(members)
    P, meta = fam.stack(members)
    if eval_elements is None:
        eval_elements = default_eval_elements(P)
    for v in P.values():
        v.requires_grad_(True)
    dev = next(iter(P.values())).device
    dtype = next(iter(P.values())).dtype
    opt = StackedAdamW(P, torch.tensor([m.lr for m in members], device=dev, dtype=dtype),
                       torch.tensor([m.weight_decay for m in members], device=dev, dtype=dtype))
    Nmax, qmax = fam.Nmax, fam.qmax
    test = [torch.stack(v) for v in zip(*[_pad_prompts(*m.test, Nmax, qmax) for m in members])]
    n_test = torch.tensor([m.test[0].shape[0] for m in members], device=dev)
    if len(set(n_test.tolist())) != 1:
        raise ValueError("members of one stack must have test sets of equal size")
    thr = torch.tensor(
        [m.threshold if m.threshold is not None else -math.inf for m in members],
        device=dev,
        dtype=dtype,
    )
    active = list(range(len(members)))  # indices into members, aligned with the stack rows
    results: List[Optional[MemberResult]] = [None] * len(members)
    curves: List[List[Tuple[int, float]]] = [[] for _ in members]
    last_mse = [math.nan] * len(members)
    last_loss = [math.nan] * len(members)
    epoch_loss = torch.zeros(len(members), device=dev, dtype=torch.float64)
    buf = None
    buf_pos = 0
    t0 = time.perf_counter()

    def refill():
        parts = [
            _pad_prompts(*members[i].stream.draw(prefetch * batch_size), Nmax, qmax) for i in active
        ]
        return [torch.stack(v) for v in zip(*parts)]

    def finish(rows: List[int], step: int, reached: bool):
        nonlocal P, meta, test, thr, buf, epoch_loss, n_test, graph
        if not rows:
            return
        graph = None  # the stack changes: record the step again
        for r in rows:
            i = active[r]
            model = fam.unstack(P, r, members[i]) if return_models else None
            res = MemberResult(
                tag=members[i].tag,
                steps=step,
                samples=step * batch_size if reached else None,
                reached=reached,
                test_mse=last_mse[i],
                curve=log_curve(curves[i]),
                train_loss=last_loss[i],
                consumed=step * batch_size,
                seconds=time.perf_counter() - t0,
                model=model,
            )
            results[i] = res
            if on_finish is not None:
                on_finish(res)
        keep_rows = [r for r in range(len(active)) if r not in set(rows)]
        if not keep_rows:
            active.clear()
            return
        keep = torch.tensor(keep_rows, device=dev)
        opt.select(keep)
        P = opt.params
        for v in P.values():
            v.requires_grad_(True)
        meta = {k: v.index_select(0, keep) for k, v in meta.items()}
        test = [v.index_select(0, keep) for v in test]
        thr = thr.index_select(0, keep)
        epoch_loss = epoch_loss.index_select(0, keep)
        n_test = n_test.index_select(0, keep)
        if buf is not None:
            buf = [v.index_select(0, keep) for v in buf]
        active[:] = [active[r] for r in keep_rows]

    @torch.no_grad()
    def test_mse() -> torch.Tensor:
        nonlocal eval_elements
        while True:
            try:
                return _test_mse(fam, P, meta, test, n_test, eval_elements)
            except torch.cuda.OutOfMemoryError:  # fragmented device memory: halve the chunks
                if evaluation_chunk(fam, P, int(n_test[0]), eval_elements) == 1:
                    raise
                eval_elements //= 2
                torch.cuda.empty_cache()

    use_graphs = dev.type == "cuda" if graphs is None else bool(graphs)
    if use_graphs and dev.type != "cuda":
        raise ValueError(f"graphs=True needs a CUDA stack, got device {dev}")
    graph: Optional[_GraphedStep] = None
    failures = 0  # consecutive failed recordings
    with _tf32(tf32 and dev.type == "cuda"):
        step = 0
        while active and step < max_steps:
            if buf is None or buf_pos >= prefetch:
                buf, buf_pos = refill(), 0
            sl = slice(buf_pos * batch_size, (buf_pos + 1) * batch_size)
            x, t, y = (v[:, sl] for v in buf)
            buf_pos += 1
            if not use_graphs:
                per = _train_step(fam, opt, meta, x, t, y, batch_size)
            elif (
                graph is None
            ):  # a new or changed stack: this step runs eagerly, the next ones replay
                graph, per, failed = _record(fam, opt, meta, x, t, y, batch_size)
                failures = failures + 1 if failed is not None else 0
                if failures == 2:  # a recording after one warm-up step can fail (torch 2.11): the
                    use_graphs = False  # next step warms up again; after that, eager for good
                    warnings.warn(f"recording the training step as a CUDA graph failed twice "
                                  f"({failed}); this stack goes on without graphs", RuntimeWarning)
            else:
                per = graph(x, t, y)
            step += 1
            per_d = per.detach().double()
            loss_list = per_d.tolist() if (step % check_every == 0 or step == max_steps) else None
            epoch_loss += per_d
            done: List[int] = []
            if step % check_every == 0:
                mse = test_mse()
                for r, (i, v) in enumerate(zip(active, mse.tolist())):
                    last_mse[i] = v
                    curves[i].append((step, v))
                    last_loss[i] = loss_list[r]
                below = (mse < thr.double()).nonzero().flatten().tolist()
                done = below
            if epoch_steps and epoch_loss_threshold is not None and step % epoch_steps == 0:
                ep = (epoch_loss / epoch_steps).tolist()
                epoch_loss.zero_()
                for r, i in enumerate(active):
                    last_loss[i] = ep[r]
                done = sorted(set(done) | {r for r, v in enumerate(ep) if v < epoch_loss_threshold})
            elif epoch_steps and step % epoch_steps == 0:
                epoch_loss.zero_()
            if done:
                if step % check_every != 0:  # stopping off a check: measure the test MSE now
                    mse = test_mse()
                    for r, (i, v) in enumerate(zip(active, mse.tolist())):
                        last_mse[i] = v
                finish(done, step, reached=True)
            if on_step is not None:
                on_step(step, len(active))
        if active:
            if step % check_every != 0 or not curves[active[0]]:
                mse = test_mse()
                per_last = per.detach().double().tolist()
                for r, (i, v) in enumerate(zip(active, mse.tolist())):
                    last_mse[i] = v
                    last_loss[i] = per_last[r]
            finish(list(range(len(active))), step, reached=False)
    return results  # type: ignore[return-value]
