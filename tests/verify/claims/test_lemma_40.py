"""The claim lemma-40 of verify/claims/lemma_40.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import pytest
import torch

from qstr.bounds.gaussian import regression_conditional_variance
from qstr.verify.claims.lemma_40 import KNOWN_SAMPLES, KNOWN_VARIANCE, known_mean

CID = "lemma-40"


def test_lemma40_samples_are_plain_gaussians(declared):
    """Each case's samples are N(0, I_k) drawn as such: their covariance is I_k to 5 standard
    errors (the conditional law is never sampled), V's rows are orthonormal."""
    for case in declared(CID).inputs.cases:
        n, k = case.x.shape
        cov = case.x.T @ case.x / n
        assert float((cov - torch.eye(k, dtype=torch.float64)).abs().max()) < 5 * (2 / n) ** 0.5
        eye = torch.eye(case.r, dtype=torch.float64)
        assert torch.allclose(case.V @ case.V.T, eye, atol=1e-12)


def test_lemma40_known_answer_is_the_stated_model(declared):
    """The known answer's labels minus m(a) have variance 5 (uniform, |eps| <= sqrt(15))."""
    for a, y in declared(CID).inputs.known:
        assert a.shape == (KNOWN_SAMPLES, 2)
        noise = y - known_mean(a)
        assert float(noise.abs().max()) <= (3 * KNOWN_VARIANCE) ** 0.5 + 1e-12


def test_lemma40_bessel_fault_shrinks_by_n_minus_p(declared):
    """Without the n - p correction every known-answer estimate is (n - p)/n = 18/24 of the
    honest one, and the check fails; the honest check holds."""
    d = declared(CID)
    broken = d.broken("Bessel")
    a, y = d.inputs.known[0]
    honest, slipped = d.inputs.estimator(a, y), broken.estimator(a, y)
    p = honest.features
    for h, s in zip(honest.all, slipped.all, strict=True):
        assert s.estimate == pytest.approx(h.estimate * (KNOWN_SAMPLES - p) / KNOWN_SAMPLES)
    assert d.verdict("estimator unbiased on a known answer").holds
    assert not d.verdict("estimator unbiased on a known answer", broken).holds


def test_lemma40_scaled_fault_is_seen_in_the_bins(declared):
    """x's off-span part scaled with ||Vx||: the lowest bin's variance falls below 2(k - r) and
    the highest rises above it, for every conditioned case."""
    d = declared(CID)
    for case in d.broken("scaled with").cases:
        if case.r == 0:
            continue
        est = regression_conditional_variance(case.x @ case.V.T, (case.x**2).sum(dim=1))
        claimed = 2 * (case.k - case.r)
        assert est.bins[0].estimate < claimed < est.bins[-1].estimate


def test_lemma40_faults_leave_the_honest_inputs(declared):
    declared(CID).faults_leave_the_honest_inputs()


def test_lemma40_certified_on_every_built_v(declared):
    """The closed form equals 2 (k - rank V) exactly at every case; a repeated row (rank r - 1)
    moves it by exactly 2 where r >= 2, and the balls say violated."""
    d = declared(CID)
    name = "2(k - r) = 2(k - rank V) on the built V (certified)"
    v = d.verdict(name)
    assert v.holds and v.certified is True and len(v.cases) == len(d.inputs.cases)
    assert all(case.enclosure == (0.0, 0.0) for _, case in v.cases)
    broken = d.verdict(name, d.broken("V with a row repeated"))
    gaps = [case.enclosure for _, case in broken.cases]
    assert gaps == [(2.0, 2.0) if c.r >= 2 else (0.0, 0.0) for c in d.inputs.cases]
    assert not broken.holds and broken.certified is True
