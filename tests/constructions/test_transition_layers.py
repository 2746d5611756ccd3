"""Lemmas 23 and 25's layers (constructions/transition_layers.py): built from the gadgets, equal
to the Prop 26 transition's dense layers and closed form, wider in layer 2 by the s-units they do
not share."""

import torch

from qstr.bounds.transition import prop26_transition
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.transition_layers import gadget_layers, lemma23_layer, transition_gadgets

F64 = torch.float64


def _transition(rotated: bool):
    om = rs_hadamard_codebook(64, dtype=F64).omega
    if rotated:
        g = torch.Generator().manual_seed(0)
        om = om @ torch.linalg.qr(torch.randn(om.shape[1], om.shape[1], generator=g, dtype=F64))[0]
    return prop26_transition(om, 3, 2, eps=0.1, r_x=2.5), om


def _rows(tr, om, n=300):
    g = torch.Generator().manual_seed(1)
    i = torch.randint(om.shape[0], (n,), generator=g)
    t = torch.stack([i, torch.randint(om.shape[0], (n,), generator=g)], 1)
    x = torch.randn(n, tr.d, generator=g, dtype=F64)
    x = x / x.norm(dim=1, keepdim=True) * 2.5 * torch.rand(n, 1, generator=g, dtype=F64)
    z = torch.cat([x, om[i], om[t[:, 0]], om[t[:, 1]]], 1)
    return torch.cat([torch.randn(n, tr.d_h, generator=g, dtype=F64), z], 1), z


def test_gadget_layers_equal_the_dense_layers_and_the_closed_form():
    for rotated in (False, True):
        tr, om = _transition(rotated)
        u, z = _rows(tr, om)
        g = transition_gadgets(tr)
        L, G = gadget_layers(tr, g), gadget_layers(tr, g, rectify=False)
        assert (L(u) - tr.dense(u)).abs().max() < 1e-11
        assert (G(u) - tr.dense(u, rectify=False)).abs().max() < 1e-11
        assert (L(u) - tr(z)).abs().max() < 1e-11
        w1, w2, w3 = tr.widths
        assert L.widths == (w1, tr.q * tr.d * 2 * tr.bands.knots, w3)
        assert w2 == tr.q * (tr.d + 1) * tr.bands.knots  # the shared s-units


def test_lemma23_layer_ignores_the_state():
    tr, om = _transition(True)
    W1, _, A = lemma23_layer(tr, transition_gadgets(tr))
    assert torch.count_nonzero(W1[:, : tr.d_h]) == 0
    assert A.shape == (tr.d + tr.q, W1.shape[0])
