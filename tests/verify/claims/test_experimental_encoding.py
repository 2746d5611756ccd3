"""The experiments' encoding, Appendix E (verify/claims/experimental_encoding.py) through its
declared structure."""

from fractions import Fraction

import mpmath as mp
import pytest

from qstr.verify.claims.experimental_encoding import EXPERIMENT_NS, floor_5_ln
from qstr.verify.experiments.figure1 import FULL, QUICK

CID = "experimental-encoding"


def test_experimental_tail_hand_value_and_the_one_sided_tail(declared):
    """89104 / 2^23 per pair, 52.58 of 4950 pairs; the one-sided tail predicts half."""
    d = declared(CID)
    assert d.inputs.d_e == 23 and d.inputs.pair_tail(23, 0.5) == float(Fraction(89104, 2**23))
    v = d.verdict("mean violations = C(N, 2) tail")
    assert v.bound == pytest.approx(52.58, abs=0.01)
    v = d.verdict("mean violations = C(N, 2) tail", d.broken("the one-sided"))
    assert v.bound == pytest.approx(26.29, abs=0.01)


def test_experimental_encoding_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()


def test_the_experiments_n_are_figure_1s_grids_and_figure_2s():
    """The claim pins d_e at every N the experiments build codes for: Figure 1's grids (full and
    quick) and Figure 2's N = 100."""
    grids = {n for grid in (FULL, QUICK) for ns in grid.values() for n in ns}
    assert set(EXPERIMENT_NS) == grids | {100}


def test_the_certified_floor_agrees_with_exp_brackets():
    """floor(5 ln N) = d exactly when e^d <= N^5 < e^(d + 1): checked in exact-enough mpmath."""
    with mp.workdps(60):
        for n in EXPERIMENT_NS + (1000, 8192, 65536):
            d = floor_5_ln(n)
            assert mp.exp(d) <= mp.mpf(n) ** 5 < mp.exp(d + 1)


def test_the_finding_slips_and_the_ceiling_rule_are_seen(declared):
    """The one-sided finding differs in its count and its expectation (d_e stays 23); the codes
    built at ceil(5 ln N) differ at every N of the experiments (d_e 24 at N = 100)."""
    d = declared(CID)
    v = d.verdict("the finding's numbers = exact counts", d.broken("one-sided numbers"))
    assert v.measured == 2 and "pair-tail count: stated 44552" in v.detail
    v = d.verdict("built d_e = floor(5 ln N) at the experiments' N", d.broken("ceil(5 ln N)"))
    assert not v.holds and "floor(5 ln N) = " in v.detail
