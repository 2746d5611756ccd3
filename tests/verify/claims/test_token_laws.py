"""The token laws of claim lemma-12 at their exact Assumption 1 constant
(verify/claims/_token_laws.py)."""

import math

import torch

from qstr.verify.claims._token_laws import rademacher, sparse_constant, sparse_gaussian


def test_sparse_constant_of_the_plain_gaussian_is_pi_over_4():
    """p = 1, d = 2: the ratio (E chi_2^r)^{2/r} / (2 r) is largest at r = 1, (E chi_2)^2 / 2 =
    (pi / 2) / 2."""
    assert abs(sparse_constant(1.0, 2) - math.pi / 4) < 1e-12


def test_sparse_constant_for_small_mass_is_the_markov_constant():
    """For small p the sup sits near r = e / (pi p^2) and is 1/(e d) x exp(pi p^2 / e) to Stirling's
    order (1e-3 at p = 0.05, d = 2)."""
    p, d = 0.05, 2
    assert abs(sparse_constant(p, d) * math.e * d / math.exp(math.pi * p * p / math.e) - 1) < 1e-3


def test_laws_are_scaled_to_their_constant():
    """Each law's float64 grid maximum is its C_x to 1e-6 (from below); its s scales linearly."""
    for law in (rademacher(2.0, 2), sparse_gaussian(0.5, 2, 0.2), sparse_gaussian(3.0, 5, 0.1)):
        assert 1 - 1e-6 <= law.constant_on_grid() / law.C_x <= 1 + 1e-12, law.name
    assert sparse_gaussian(1.0, 2, 0.2).s == 2 * sparse_gaussian(0.5, 2, 0.2).s


def test_samples_have_the_law_s_moments():
    """E||x||^2 of 200000 draws within 5 standard errors of exp(log_moment(2)), both laws."""
    g = torch.Generator().manual_seed(3)
    for law in (rademacher(2.0, 3), sparse_gaussian(0.5, 2, 0.2)):
        sq = (law.sample((200000,), g) ** 2).sum(dim=-1)
        want = math.exp(law.log_moment(2.0))
        assert abs(float(sq.mean()) - want) <= 5 * float(sq.std()) / math.sqrt(sq.numel()) + 1e-12
