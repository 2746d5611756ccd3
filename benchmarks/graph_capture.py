"""Which training steps record as CUDA graphs, and what stops the others.

    python benchmarks/graph_capture.py      # CUDA only; one line per stack family, tracebacks

For each family of Figure 1 (quick sizes, paper and published protocols) it takes one eager
step, then a second eager step under ``torch.cuda.set_sync_debug_mode("error")`` (any call that
waits for the device raises there, with its Python traceback: such a call cannot be recorded),
then records the step as train_stack does. A diagnostic script, not a test.
"""
from __future__ import annotations

import os
import sys
import traceback
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from qstr.verify.experiments import figure1  # noqa: E402
from qstr.verify.experiments.points import build_member  # noqa: E402
from qstr.verify.training.adamw import StackedAdamW  # noqa: E402
from qstr.verify.training.families import _pad_prompts, family_of  # noqa: E402
from qstr.verify.training.stack import _GraphedStep, _train_step  # noqa: E402


def _stack(members, dev):
    fam = family_of(members[0])(members)
    P, meta = fam.stack(members)
    for v in P.values():
        v.requires_grad_(True)
    lr = torch.tensor([m.lr for m in members], device=dev)
    wd = torch.tensor([m.weight_decay for m in members], device=dev)
    opt = StackedAdamW(P, lr, wd)
    batch = [_pad_prompts(*m.stream.draw(64), fam.Nmax, fam.qmax) for m in members]
    return fam, opt, meta, [torch.stack(v) for v in zip(*batch)]


def diagnose(protocol: str, variant: str, model: str, dev) -> str:
    pts = [p for p in figure1.points(quick=True, seeds=[0, 1], protocol=protocol)
           if p.variant == variant and p.model == model]
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


def main() -> int:
    if not torch.cuda.is_available():
        print("graph_capture: needs a CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
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
