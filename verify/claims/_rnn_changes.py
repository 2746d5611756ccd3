"""What Lemmas 29-30's claims (verify/claims/lemma_29_30.py) evaluate a built RNN module with: its
nets' layers by name, parameter changes swapped in by torch.func, the states and outputs they give,
and the sum of Lemma 30's constants over a change (docs/derivations/rnn-lower-bounds.md, section 4,
item 5)."""

from __future__ import annotations

from typing import Dict

import torch
from torch import nn
from torch.func import functional_call


F64 = torch.float64


def nets_of(module: nn.Module) -> Dict[str, list]:
    """Parameter names of each net, layer by layer: {net: [(weight name, bias name or None)]}."""
    names = dict(module.named_parameters())
    out = {}
    for net in ("f_fwd", "f_bwd", "f_y"):
        idx = sorted({int(k.split(".")[1]) for k in names if k.startswith(net + ".")})
        out[net] = [
            (f"{net}.{i}.weight", f"{net}.{i}.bias" if f"{net}.{i}.bias" in names else None)
            for i in idx
        ]
    return out


def random_change(module, names, size: float, d_h: int, gen) -> dict:
    """A random change of the named parameters, each of Frobenius norm ``size`` x its own; the
    transitions' first layer keeps its h columns (the class: transitions do not read h)."""
    params = dict(module.named_parameters())
    out = {}
    for k in names:
        p = params[k].detach()
        D = torch.randn(p.shape, generator=gen, dtype=F64)
        if k.endswith("0.weight") and not k.startswith("f_y"):
            D[:, :d_h] = 0
        out[k] = D * (size * float(p.norm()) / float(D.norm()))
    return out


def inputs_of(module, honest, Z, net: str) -> torch.Tensor:
    """The rows u = (h, z) (transition) or (h_fwd, h_bwd, z) (f_y) the net reads, (B N, fan-in)."""
    h_fwd, h_bwd, _ = honest
    return torch.cat([h_fwd, Z] if net == "f_fwd" else [h_fwd, h_bwd, Z], -1).flatten(0, 1)


class _States(nn.Module):
    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, Z):
        return self.module.states(Z)


def moved(module, change: dict) -> dict:
    return {k: p + change[k] if k in change else p for k, p in module.named_parameters()}


def states_of(module, change: dict, Z):
    """(h_fwd, h_bwd) of the module with ``change`` (its own ``states``; torch.func swaps the
    parameters)."""
    params = {f"module.{k}": v for k, v in moved(module, change).items()}
    return functional_call(_States(module), params, (Z,))


def run(module, change: dict, Z):
    """(h_fwd, h_bwd, y) of the module with ``change`` (``states`` and ``forward``)."""
    return (*states_of(module, change, Z), functional_call(module, moved(module, change), (Z,)))


def net_bound(module, change, layers, r_in, b, params=None) -> float:
    """sum_l c_l ||Delta_l||_F with R_l the larger of both nets' ||[W_l b_l]||_F (the module's,
    or ``params``: a member's by name)."""
    old = dict(module.named_parameters()) if params is None else params
    new = {k: p + change[k] if k in change else p for k, p in old.items()}

    def fro(params, w, bias):
        return float(torch.cat([params[w].flatten()] + ([params[bias]] if bias else [])).norm())

    radii = [max(fro(old, w, bias), fro(new, w, bias)) for w, bias in layers]
    deltas = [
        float(
            torch.cat(
                [change.get(w, 0 * old[w]).flatten()]
                + ([change.get(bias, 0 * old[bias])] if bias else [])
            ).norm()
        )
        for w, bias in layers
    ]
    c = b.sensitivities(radii, [bias is not None for _, bias in layers], r_in)
    return sum(ci * di for ci, di in zip(c, deltas, strict=True))
