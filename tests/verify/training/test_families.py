"""Tests for verify/training/families.py: the stacked, zero-padded encoding against the library's."""
import torch

from qstr.constructions.encoding import encode
from qstr.verify.training import family_of
from qstr.verify.training.families import _pad_prompts


def test_padded_encoding_matches_library_encoding(make_member):
    ms = [make_member("transformer", N, q, s) for N, q, s in ((3, 1, 0), (6, 2, 1))]
    fam = family_of(ms[0])(ms)
    P, meta = fam.stack(ms)

    x, t, _ = (torch.stack(v) for v in zip(*[_pad_prompts(*m.test, fam.Nmax, fam.qmax) for m in ms]))
    z = fam.encode(meta, x, t, fam.Dmax)
    for i, m in enumerate(ms):
        ref = encode(m.test[0], m.test[1], m.omega, c=m.c)
        assert torch.allclose(z[i, :, : m.N, : ref.shape[-1]], ref, atol=1e-12)
        assert torch.count_nonzero(z[i, :, m.N:]) == 0 and torch.count_nonzero(z[i, :, :, ref.shape[-1]:]) == 0
