"""Which training steps record as CUDA graphs, and what stops the others.

    python benchmarks/graph_capture.py      # CUDA only; one line per stack family, tracebacks
    python benchmarks/graph_capture.py --tests   # the float64 members of the graph test, and
                                                 # every recording of its train_stack runs
    python benchmarks/graph_capture.py --restacks  # the recording after a member finishes, five
                                                   # ways, each attempt's first error

For each family of Figure 1 (quick sizes, paper and published protocols) it takes one eager
step, then a second eager step under ``torch.cuda.set_sync_debug_mode("error")`` (any call that
waits for the device raises there, with its Python traceback: such a call cannot be recorded),
then records the step as train_stack does. A diagnostic script, not a test.
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
# the members of tests/verify/training/test_stack.py
sys.path.insert(0, os.path.join(HERE, "..", "tests", "verify", "training"))

from conftest import _make_member  # noqa: E402
from test_stack import (  # noqa: E402
    CASES,
    _to_cuda,
)

from qstr.verify.experiments import figure1  # noqa: E402
from qstr.verify.experiments.points import build_member  # noqa: E402
from qstr.verify.training import (  # noqa: E402
    StackOptions,
    stack,
    train_stack,
)
from qstr.verify.training.adamw import StackedAdamW  # noqa: E402
from qstr.verify.training.families import _pad_prompts, family_of  # noqa: E402
from qstr.verify.training.stack import (  # noqa: E402
    _GraphedStep,
    _record,
    _train_step,
)


def _stack(members, dev):
    fam = family_of(members[0])(members)
    P, meta = fam.stack(members)
    for v in P.values():
        v.requires_grad_(True)
    lr = torch.tensor([m.lr for m in members], device=dev)
    wd = torch.tensor([m.weight_decay for m in members], device=dev)
    opt = StackedAdamW(P, lr, wd)
    batch = [_pad_prompts(*m.stream.draw(64), fam.Nmax, fam.qmax) for m in members]
    return fam, opt, meta, [torch.stack(v) for v in zip(*batch, strict=True)]


def diagnose(protocol: str, variant: str, model: str, dev) -> str:
    pts = [
        p
        for p in figure1.points(quick=True, seeds=[0, 1], protocol=protocol)
        if p.variant == variant and p.model == model
    ]
    fam, opt, meta, (x, t, y) = _stack([build_member(p, device=dev) for p in pts], dev)
    _train_step(fam, opt, meta, x, t, y, 64)
    torch.cuda.synchronize()
    sync = "no synchronizing call"
    torch.cuda.set_sync_debug_mode("error")
    try:
        _train_step(fam, opt, meta, x, t, y, 64)
    except RuntimeError:
        sync = "SYNC: " + " | ".join(traceback.format_exc().strip().splitlines()[-7:])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _GraphedStep(fam, opt, meta, x, t, y, 64)
        graph = "records"
    except Exception as exc:  # noqa: BLE001 - the diagnosis is the message
        graph = f"RECORDING FAILS: {type(exc).__name__}: {str(exc).splitlines()[0]}"
    return f"{protocol:9s} {variant:6s} {model:11s}: {graph}; {sync}"


def _first_errors(fn) -> str:
    """Run ``fn``; the exception and every exception it was raised from or during, first last."""
    try:
        fn()
        return "records"
    except Exception as exc:  # noqa: BLE001 - the diagnosis is the message
        chain, e = [], exc
        while e is not None and len(chain) < 4:
            chain.append(f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
            e = e.__cause__ or e.__context__
        return "FAILS: " + " <- ".join(chain)


def diagnose_test_cases(dev) -> None:
    """The members of tests/verify/training/test_stack.py (float64, tiny) recorded as train_stack
    records them (warm-up on a side stream), then with the fused AdamW off, then with the
    second eager step under the sync debug mode: which part stops the recording."""
    for kind, published, specs in CASES:

        def stack(fused=True, kind=kind, published=published, specs=specs):
            ms = [
                _to_cuda(_make_member(kind, N, q, s, published=published, hidden=h or 6))
                for N, q, s, h in specs
            ]
            fam = family_of(ms[0])(ms)
            P, meta = fam.stack(ms)
            for v in P.values():
                v.requires_grad_(True)
            kw = dict(device=dev, dtype=torch.float64)
            opt = StackedAdamW(
                P,
                torch.tensor([m.lr for m in ms], **kw),
                torch.tensor([m.weight_decay for m in ms], **kw),
            )
            opt.fused = opt.fused and fused
            batch = [_pad_prompts(*m.stream.draw(8), fam.Nmax, fam.qmax) for m in ms]
            return fam, opt, meta, [torch.stack(v) for v in zip(*batch, strict=True)]

        def record(fused):
            fam, opt, meta, (x, t, y) = stack(fused)
            g, _, err = _record(fam, opt, meta, x, t, y, 8)
            if err is not None:
                raise RuntimeError(err)

        def sync_check():
            fam, opt, meta, (x, t, y) = stack()
            _train_step(fam, opt, meta, x, t, y, 8)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                _train_step(fam, opt, meta, x, t, y, 8)
            finally:
                torch.cuda.set_sync_debug_mode("default")

        name = f"test {kind}{' published' if published else ''} float64"
        for label, fn in (
            ("as train_stack", lambda: record(True)),
            ("fused AdamW off", lambda: record(False)),
            ("sync debug, eager", sync_check),
        ):
            print(f"{name:32s} {label:16s}: {_first_errors(fn)}", flush=True)
            torch.cuda.synchronize()


def diagnose_test_restacks(dev) -> None:
    """The graph test as it runs (member 0 stops at the first check, the stack is recorded
    again): every recording attempt of train_stack, with its result."""
    plain = stack._record
    for kind, published, specs in CASES:
        attempts = []

        def logged(fam, opt, meta, x, t, y, batch_size, attempts=attempts):
            graph, per, failed = plain(fam, opt, meta, x, t, y, batch_size)
            attempts.append(
                f"{x.shape[0]} members: "
                + ("records" if failed is None else "FAILS " + failed.splitlines()[0][:120])
            )
            return graph, per, failed

        members = [
            _to_cuda(_make_member(kind, N, q, s, published=published, hidden=h or 6))
            for N, q, s, h in specs
        ]
        members[0].threshold = 1e9
        stack._record = logged
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                train_stack(
                    members, StackOptions(graphs=True, batch_size=8, check_every=3, max_steps=12)
                )
        except Exception as exc:  # noqa: BLE001 - the diagnosis is the message
            attempts.append(f"train_stack raised {type(exc).__name__}: {exc}")
        finally:
            stack._record = plain
        name = f"{kind}{' published' if published else ''}"
        print(f"restack {name:22s}: " + " | ".join(attempts), flush=True)


def _chain(exc) -> str:
    """An exception and what it was raised during, innermost first, with the innermost's frames."""
    chain, e = [], exc
    while e is not None and len(chain) < 4:
        chain.append(e)
        e = e.__cause__ or e.__context__
    inner = chain[-1]
    frames = traceback.format_tb(inner.__traceback__)[-4:]
    return (
        " <- ".join(f"{type(e).__name__}: {str(e).splitlines()[0][:140]}" for e in reversed(chain))
        + "\n      "
        + "      ".join(f.replace("\n", " ") + "\n" for f in frames)
    )


def _figure1_members(dev, n=4):
    """``n`` members of Figure 1's 1STR FFN stack at the quick sizes (float32), as the figure
    builds them; member 0 stops at the first check so that the stack is recorded again."""
    pts = [
        p
        for p in figure1.points(quick=True, seeds=[0], protocol="paper")
        if p.variant == "1str" and p.model == "ffn"
    ][:n]
    return [build_member(p, device=dev) for p in pts]


def diagnose_restack_variants(dev) -> None:
    """Where the recording after a member finishes fails, and what makes it record: the graph
    test's paper Transformer (float64) and a Figure 1 FFN stack (float32), each recorded as
    train_stack records it, with the garbage collector off, in capture mode "relaxed", with the
    warm-up step on the current stream, and with two warm-up steps. Every attempt's first error."""
    plain_record, plain_mode = stack._record, stack.CAPTURE_ERROR_MODE

    def on_current(fam, opt, meta, x, t, y, batch_size):
        per = _train_step(fam, opt, meta, x, t, y, batch_size)
        try:
            return _GraphedStep(fam, opt, meta, x, t, y, batch_size), per, None
        except RuntimeError as exc:
            return None, per, _chain(exc)

    def two_warmups(fam, opt, meta, x, t, y, batch_size):
        _train_step(fam, opt, meta, x, t, y, batch_size)  # an extra step: the trajectory changes
        return plain_record(fam, opt, meta, x, t, y, batch_size)

    kind, published, specs = CASES[0]

    def test_members():
        ms = [
            _to_cuda(_make_member(kind, N, q, s, published=published, hidden=h or 6))
            for N, q, s, h in specs
        ]
        ms[0].threshold = 1e9
        return ms

    def ffn_members():
        ms = _figure1_members(dev)
        ms[0].threshold = 1e9
        return ms

    variants = [
        ("as train_stack", plain_record, plain_mode, False),
        ("gc off", plain_record, plain_mode, True),
        ("relaxed", plain_record, "relaxed", False),
        ("warm-up on current stream", on_current, plain_mode, False),
        ("two warm-ups", two_warmups, plain_mode, False),
    ]
    for case, make in (
        ("test transformer float64", test_members),
        ("figure1 1str ffn float32", ffn_members),
    ):
        for label, rec, mode, gc_off in variants:
            attempts = []

            def logged(*a, rec=rec, attempts=attempts):
                graph, per, failed = rec(*a)
                attempts.append(
                    f"{a[3].shape[0]} members: "
                    + ("records" if failed is None else "FAILS " + failed)
                )
                return graph, per, failed

            stack._record, stack.CAPTURE_ERROR_MODE = logged, mode
            if gc_off:
                gc.collect()
                gc.disable()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    train_stack(
                        make(), StackOptions(graphs=True, batch_size=8, check_every=3, max_steps=9)
                    )
            except Exception as exc:  # noqa: BLE001 - the diagnosis is the message
                attempts.append(f"train_stack raised {_chain(exc)}")
            finally:
                stack._record, stack.CAPTURE_ERROR_MODE = plain_record, plain_mode
                gc.enable()
            print(f"{case} / {label}: " + "\n    ".join(attempts), flush=True)
            torch.cuda.synchronize()


def main() -> int:
    if not torch.cuda.is_available():
        print("graph_capture: needs a CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    if "--restacks" in sys.argv:
        diagnose_restack_variants(dev)
        return 0
    if "--tests" in sys.argv:
        diagnose_test_cases(dev)
        diagnose_test_restacks(dev)
        return 0
    for protocol in ("paper", "published"):
        for variant in ("1str", "simple"):
            for model in ("transformer", "rnn", "ffn"):
                try:
                    print(diagnose(protocol, variant, model, dev), flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"{protocol} {variant} {model}: diagnosis failed: {exc!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
