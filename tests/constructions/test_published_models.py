"""Tests for constructions/published_models.py: the published experiment code's variants
(BiasedTransformer, EncodedFFN)."""

from __future__ import annotations

import torch

from qstr.constructions.experiment_models import build_practical
from qstr.constructions.published_models import BiasedTransformer, EncodedFFN

from tests.constructions.model_counts import mlp_count, n_params, transformer_count
from tests.fixtures import seeded

F64 = torch.float64


def test_encoded_ffn_has_the_documented_defaults():
    """EncodedFFN's defaults are the model docs/experiments.md documents (Appendix E): hidden
    widths (1000, 1000)."""
    shapes = lambda m: {n: tuple(p.shape) for n, p in m.named_parameters()}  # noqa: E731
    ffn = EncodedFFN(8, 14)
    assert shapes(ffn)["net.0.weight"][0] == 1000 and shapes(ffn)["net.2.weight"] == (1000, 1000)


def test_published_models_parameter_counts_are_the_closed_forms():
    """Appendix E at N = 6, d = 2, q = 2, d_e = 4 (D_e = 14): the published biased Transformer
    (width 100) and the encoded FFN (1000, 1000)."""
    N, d, q, d_e = 6, 2, 2, 4
    D_e = d + (q + 1) * d_e
    assert n_params(BiasedTransformer(D_e, q, dtype=F64)) == transformer_count(D_e, q, 100, True)
    assert n_params(EncodedFFN(N, D_e, dtype=F64)) == mlp_count((N * D_e, 1000, 1000, N))


def test_biased_transformer_at_zero_biases_is_the_plain_one():
    """The biased Transformer at zero biases (its initialisation) is the plain one, weights drawn
    from the same generator, at N = 6, d = 2, q = 2, d_e = 4 (D_e = 14)."""
    N, d, q, d_e = 6, 2, 2, 4
    D_e = d + (q + 1) * d_e
    tr = build_practical("transformer", N=N, d=d, q=q, d_e=d_e, generator=seeded(300), dtype=F64)
    biased = BiasedTransformer(D_e, q, generator=seeded(300), dtype=F64)
    Z = torch.randn(2, N, D_e, generator=seeded(302), dtype=F64)
    with torch.no_grad():
        assert (biased(Z) - tr(Z)).abs().max() <= 1e-12
