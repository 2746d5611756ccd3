"""The GRU scan's hand-written backward through time against autograd through the cell loop."""

import pytest
import torch

from qstr.verify.training.gru_scan import _cell, gru_scan


def gru_scan_reference(z, WihT, bih, WhhT, bhh):
    """gru_scan as a plain loop of cells differentiated by autograd: the eager reference."""
    N, G, B, _ = z.shape
    H = WhhT.shape[1]
    h = z.new_zeros(G * B, H)
    outs = [h.view(G, 1, B, H)]
    for s in range(N):
        gi = torch.baddbmm(bih, z[s], WihT).view(G * B, 3 * H)
        gh = torch.baddbmm(bhh, h.view(G, B, H), WhhT).view(G * B, 3 * H)
        h = _cell(gi, gh, h)[0]
        outs.append(h.view(G, 1, B, H))
    return torch.cat(outs, 1)


def _inputs(N, G, B, H, device, seed, D=3):
    g = torch.Generator(device=device).manual_seed(seed)
    kw = dict(generator=g, device=device, dtype=torch.float64)
    z = torch.randn(N, G, B, D, **kw)
    WihT = torch.randn(G, D, 3 * H, **kw) / D**0.5
    bih = torch.randn(G, 1, 3 * H, **kw)
    WhhT = torch.randn(G, H, 3 * H, **kw) / H**0.5
    bhh = torch.randn(G, 1, 3 * H, **kw)
    up = torch.randn(G, N + 1, B, H, **kw)  # an arbitrary upstream gradient, fresh per case
    return [v.requires_grad_(True) for v in (z, WihT, bih, WhhT, bhh)], up


NAMES = ("states", "z", "WihT", "bih", "WhhT", "bhh")


def _value_and_grads(scan, inputs, up):
    hs = scan(*inputs)
    return [hs.detach()] + list(torch.autograd.grad((hs[:, 1:] * up[:, 1:]).sum(), inputs))


def _rel(a, b):
    """||a - b|| / ||b|| (an exact zero b, as dW_hh at N = 1, asks for an exact zero a)."""
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


@pytest.mark.parametrize("N,G,B,H,seed", [(1, 1, 1, 1, 0), (5, 3, 4, 7, 1), (9, 2, 3, 16, 2)])
def test_backward_through_time_matches_autograd(N, G, B, H, seed):
    """States and the gradients of inputs, W_ih, b_ih, W_hh, b_hh (each weight's one product over
    positions) agree with autograd through the loop of cells to float64 rounding, for random
    inputs and upstream gradients."""
    inputs, up = _inputs(N, G, B, H, "cpu", seed)
    fast = _value_and_grads(gru_scan, inputs, up)
    ref = _value_and_grads(gru_scan_reference, inputs, up)
    for name, a, b in zip(NAMES, fast, ref, strict=True):
        assert a.shape == b.shape, name
        assert _rel(a, b) < 1e-12, (name, _rel(a, b))
    assert torch.equal(fast[0][:, 0], torch.zeros_like(fast[0][:, 0]))


def test_inputs_that_are_data_get_no_gradient_and_change_no_other():
    """Encoded tokens are data in training: with z not requiring a gradient the scan returns none
    for it, and the weights' gradients are bit for bit those of the scan that also computed dz."""
    inputs, up = _inputs(6, 2, 3, 5, "cpu", 4)
    full = _value_and_grads(gru_scan, inputs, up)
    data = [inputs[0].detach()] + inputs[1:]
    hs = gru_scan(*data)
    grads = torch.autograd.grad((hs[:, 1:] * up[:, 1:]).sum(), data[1:])
    assert all(torch.equal(a, b) for a, b in zip(grads, full[2:], strict=True))


def test_no_workspace_without_grad():
    """Under no_grad the scan gives the same states and keeps no graph."""
    inputs, _ = _inputs(4, 2, 3, 5, "cpu", 3)
    with torch.no_grad():
        hs = gru_scan(*inputs)
    assert hs.grad_fn is None
    assert torch.allclose(hs, gru_scan_reference(*inputs).detach(), rtol=0, atol=1e-14)


def test_shapes_are_checked():
    z, b = torch.zeros(3, 2, 5, 4), torch.zeros(2, 1, 6)
    with pytest.raises(ValueError, match="gru_scan"):  # W_ih for inputs of width 3, not 4
        gru_scan(z, torch.zeros(2, 3, 6), b, torch.zeros(2, 2, 6), b)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_fused_cuda_backward_matches_float64_reference(dtype, tol):
    """On CUDA the scan runs torch's fused GRU cell and its fused backward: checked against the
    float64 autograd reference (float64: to rounding; float32: far under 1e-3)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    inputs, up = _inputs(33, 6, 16, 64, "cuda", 4)
    ref = _value_and_grads(gru_scan_reference, inputs, up)
    low = [v.detach().to(dtype).requires_grad_(True) for v in inputs]
    fast = _value_and_grads(gru_scan, low, up.to(dtype))
    for name, a, b in zip(NAMES, fast, ref, strict=True):
        assert _rel(a.double(), b) < tol, (name, _rel(a.double(), b))


def test_weight_gradients_come_in_the_weights_layout():
    """Weights kept as (G, 3H, .) blocks and passed transposed (as the GRU family does) get
    contiguous gradients, equal to autograd's through the loop."""
    (z, WihT, bih, WhhT, bhh), up = _inputs(4, 2, 3, 5, "cpu", 7)
    Wih = WihT.detach().transpose(1, 2).contiguous().requires_grad_(True)
    Whh = WhhT.detach().transpose(1, 2).contiguous().requires_grad_(True)
    args = (z.detach(), Wih.transpose(1, 2), bih, Whh.transpose(1, 2), bhh)
    fast = torch.autograd.grad((gru_scan(*args)[:, 1:] * up[:, 1:]).sum(), (Wih, Whh))
    ref = torch.autograd.grad((gru_scan_reference(*args)[:, 1:] * up[:, 1:]).sum(), (Wih, Whh))
    for a, b in zip(fast, ref, strict=True):
        assert a.is_contiguous()
        assert _rel(a, b) < 1e-12
