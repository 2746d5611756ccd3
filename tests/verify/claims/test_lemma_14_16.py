"""Lemmas 14 and 16 (verify/claims/lemma_14_16.py): packings of built output nets and score maps
against the block covers, and Prop 17's sum of them (test_registered.py runs every fault)."""

import math

import pytest
import torch

from qstr.verify.claims.lemma_14_16 import output_net_values, score_values

F64 = torch.float64


def test_output_net_values_are_each_one_neuron_net():
    """Row c of the built module's values is a_c relu(w_c . h + b_c) at every input."""
    g = torch.Generator().manual_seed(3)
    a, Wb = torch.randn(7, generator=g, dtype=F64), torch.randn(7, 3, generator=g, dtype=F64)
    S = torch.randn(5, 2, generator=g, dtype=F64)
    want = a[:, None] * torch.relu(Wb[:, :2] @ S.T + Wb[:, 2:])
    torch.testing.assert_close(output_net_values(a, Wb, S, chunk=3), want, rtol=1e-14, atol=0)


def test_score_values_are_each_tuples_scores():
    """Row c holds z_i^T W_c^(h) z_j for every head h and token pair (i, j), heads first."""
    g = torch.Generator().manual_seed(4)
    W = torch.randn(3, 2, 2, 2, generator=g, dtype=F64)
    Z = torch.randn(4, 2, generator=g, dtype=F64)
    got = score_values(W, Z).reshape(3, 2, 4, 4)
    want = torch.einsum("id,chde,je->chij", Z, W, Z)
    torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-15)


def test_packings_sit_between_half_and_all_of_the_bound(declared):
    """ln M is within the bound and above a third of it: the packings measure the parameter
    count, so a count off by a factor 2 or more fails (the faults), as the docstrings say."""
    for cid in ("lemma-14", "lemma-16"):
        d = declared(cid)
        assert d.verdict("log M <= bound").holds
        for P in d.inputs.packings:
            if cid == "lemma-14":
                bound = d.inputs.cover(*P.sizes, *d.inputs.radii, P.eps)
            else:
                bound = d.inputs.cover(*P.sizes, 1.0, 1.5, P.eps)
            assert 0.33 < math.log(P.packed.shape[0]) / bound < 0.8, (cid, str(P))


def test_prop17_blocks_stay_under_theorem4s_cover(declared):
    v = declared("lemma-16").verdict("Prop 17: Lemma 14 + 16 covers <= Theorem 4's")
    assert v.holds and 0.9 < v.measured <= 1.0


def test_faults_leave_the_honest_inputs(declared):
    for cid in ("lemma-14", "lemma-16"):
        declared(cid).faults_leave_the_honest_inputs()


@pytest.mark.parametrize("cid", ["lemma-14", "lemma-16"])
def test_packings_are_separated_and_counted(declared, cid):
    v = declared(cid).verdict("packings 2 eps-separated")
    assert v.holds and v.measured > 1.0


def test_lemma14_16_pins_see_what_the_packings_cannot(declared):
    """The covers equal their 40-digit evaluations to float64 rounding; a log10 cover (2.3 x too
    small) still clears the packing, and only the pin fails."""
    d14, d16 = declared("lemma-14"), declared("lemma-16")
    for d, name in ((d14, "cover = 40-digit evaluation"), (d16, "covers = 40-digit evaluation")):
        v = d.verdict(name)
        assert v.holds and v.measured < 1e-14, name
    broken = d14.broken("covering in log10")
    assert d14.verdict("log M <= bound", broken).holds
    v = d14.verdict("cover = 40-digit evaluation", broken)
    assert not v.holds and v.measured == pytest.approx(1 - 1 / math.log(10), rel=1e-9)
    assert not d16.verdict("covers = 40-digit evaluation", d16.broken("at eps / (3 K r_z^2)")).holds
