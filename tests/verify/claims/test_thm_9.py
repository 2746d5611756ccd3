"""The claim thm-9 of verify/claims/thm_9.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses

import pytest


CID = "thm-9"


def test_thm9_checks_and_faults(declared):
    v = declared(CID).verdict("rigorous n*(N) slopes >= 1/(L_y+4)")
    assert v.bound == pytest.approx(1 / 6) and "paper" in v.detail and "sqrt N" in v.detail
    flat = declared(CID).verdict("widths proportional to N: rigorous n*(N) flat")
    assert flat.holds and flat.measured < 1e-3


def test_thm9_memoriser_hypothesis_excludes_large_labels(declared):
    """Memorisers whose labels break ||y||^2 <= K_y n are not held to C n^3; with none left the
    check fails rather than passing vacuously."""
    d = declared(CID)
    loud = tuple((n, m, 10 * y) for n, m, y in d.inputs.memorisers)
    v = d.verdict("memoriser ||vec||^2 <= C n^3", dataclasses.replace(d.inputs, memorisers=loud))
    assert not v.holds
