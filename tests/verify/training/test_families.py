"""Tests for verify/training/families.py: the stacked, zero-padded encoding against the
library's."""

import pytest
import torch

from qstr.constructions.encoding import encode
from qstr.verify.training import family_of
from qstr.verify.training.families import _pad_prompts


def test_padded_encoding_matches_library_encoding(make_member):
    ms = [make_member("transformer", N, q, s) for N, q, s in ((3, 1, 0), (6, 2, 1))]
    fam = family_of(ms[0])(ms)
    P, meta = fam.stack(ms)

    x, t, _ = (
        torch.stack(v)
        for v in zip(*[_pad_prompts(*m.test, fam.Nmax, fam.qmax) for m in ms], strict=True)
    )
    z = fam.encode(meta, x, t, fam.Dmax)
    for i, m in enumerate(ms):
        ref = encode(m.test[0], m.test[1], m.omega, c=m.c)
        assert torch.allclose(z[i, :, : m.N, : ref.shape[-1]], ref, atol=1e-12)
        assert (
            torch.count_nonzero(z[i, :, m.N :]) == 0
            and torch.count_nonzero(z[i, :, :, ref.shape[-1] :]) == 0
        )


def _rnn_stack(make_member, device="cpu", dtype=torch.float64):
    specs = ((3, 1, 0, 6), (5, 2, 1, 9), (4, 1, 2, 4))
    ms = [make_member("rnn", N, q, s, hidden=h) for N, q, s, h in specs]
    fam = family_of(ms[0])(ms)
    P, meta = fam.stack(ms)
    P = {k: v.to(device, dtype) for k, v in P.items()}
    meta = {k: v.to(device, dtype if v.is_floating_point() else v.dtype) for k, v in meta.items()}
    padded = [_pad_prompts(*m.test, fam.Nmax, fam.qmax) for m in ms]
    x, t, _ = (torch.stack(v) for v in zip(*padded, strict=True))
    return ms, fam, P, meta, x.to(device, dtype), t.to(device)


def test_rnn_forward_each_is_the_stacked_forward(make_member):
    """The test evaluation's route (one member at a time through nn.GRU) computes the padded
    scan's function on every real position, and each member's own module's output."""
    ms, fam, P, meta, x, t = _rnn_stack(make_member)
    with torch.no_grad():
        stacked = fam.forward(P, meta, x, t)
    each = fam.forward_each(P, meta, x, t)
    for i, m in enumerate(ms):
        ref = m.model(encode(m.test[0], m.test[1], m.omega, c=m.c))
        assert torch.allclose(each[i, :, : m.N], stacked[i, :, : m.N], rtol=0, atol=1e-12)
        assert torch.allclose(each[i, :, : m.N], ref, rtol=0, atol=1e-12)
        assert torch.count_nonzero(each[i, :, m.N :]) == 0
    assert torch.equal(fam.evaluate(P, meta, x, t), stacked)  # the CPU keeps the scan


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_rnn_evaluate_on_cuda_is_the_stacked_forward(make_member, dtype, tol):
    """On CUDA the evaluation runs cuDNN's GRU: the scan's function to float64 rounding, and to
    float32 rounding (TF32 off) in float32."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    ms, fam, P, meta, x, t = _rnn_stack(make_member, "cuda", dtype)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        with torch.no_grad():
            stacked = fam.forward(P, meta, x, t)
        each = fam.evaluate(P, meta, x, t)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    for i, m in enumerate(ms):
        err = (each[i, :, : m.N] - stacked[i, :, : m.N]).norm() / stacked[i, :, : m.N].norm()
        assert err < tol, (i, float(err))
