"""The stacked linear layer: einsum's value and gradients, with dL/dW in W's own layout."""

import pytest
import torch

from qstr.verify.training.stacked_linear import stacked_linear


def _inputs(M, B, I, O, seed):
    g = torch.Generator().manual_seed(seed)
    kw = dict(generator=g, dtype=torch.float64)
    h, W, b = torch.randn(M, B, I, **kw), torch.randn(M, O, I, **kw), torch.randn(M, O, **kw)
    return [v.requires_grad_(True) for v in (h, W, b)], torch.randn(M, B, O, **kw)


@pytest.mark.parametrize("M,B,I,O,seed", [(1, 1, 1, 1, 0), (3, 5, 7, 4, 1), (2, 64, 33, 10, 2)])
def test_value_and_gradients_match_einsum(M, B, I, O, seed):
    """Value and the gradients of h, W, b equal einsum's to float64 rounding (fresh random inputs
    and upstream gradient per case), and dL/dW is contiguous like W (einsum's is not)."""
    (h, W, b), up = _inputs(M, B, I, O, seed)
    fast = stacked_linear(h, W, b)
    ref = torch.einsum("mbi,moi->mbo", h, W) + b[:, None, :]
    torch.testing.assert_close(fast, ref, rtol=1e-13, atol=1e-13)
    got = torch.autograd.grad((fast * up).sum(), (h, W, b))
    want = torch.autograd.grad((ref * up).sum(), (h, W, b))
    for a, e in zip(got, want, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-13, atol=1e-13)
    assert got[1].is_contiguous()
    if min(O, I) > 1:
        assert not want[1].is_contiguous()  # what the layer is for


def test_no_bias_and_no_input_gradient():
    (h, W, _), up = _inputs(2, 3, 4, 5, 3)
    x = h.detach()  # data: no gradient asked for
    (dW,) = torch.autograd.grad((stacked_linear(x, W) * up).sum(), (W,))
    torch.testing.assert_close(dW, torch.einsum("mbo,mbi->moi", up, x), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize(
    "h,W,b",
    [((2, 3, 4), (3, 5, 4), None), ((2, 3, 4), (2, 5, 3), None), ((2, 3, 4), (2, 5, 4), (2, 4))],
)
def test_shapes_are_checked(h, W, b):
    with pytest.raises(ValueError, match="stacked_linear"):
        stacked_linear(torch.zeros(h), torch.zeros(W), None if b is None else torch.zeros(b))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_cuda_matches_float64_einsum(dtype, tol):
    """On CUDA (cuBLAS, the Figure 1 size of one FFN layer): value and gradients against the
    float64 einsum on the CPU; dL/dW contiguous."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    (h, W, b), up = _inputs(25, 64, 330, 1000, 4)
    ref = torch.einsum("mbi,moi->mbo", h, W) + b[:, None, :]
    want = [ref.detach(), *torch.autograd.grad((ref * up).sum(), (h, W, b))]
    low = [v.detach().to("cuda", dtype).requires_grad_(True) for v in (h, W, b)]
    y = stacked_linear(*low)
    got = [y.detach(), *torch.autograd.grad((y * up.to("cuda", dtype)).sum(), low)]
    assert got[2].is_contiguous()
    for a, e in zip(got, want, strict=True):
        rel = ((a.double().cpu() - e).norm() / e.norm()).item()
        assert rel < tol, rel
