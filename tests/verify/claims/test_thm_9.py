"""The claim thm-9 of verify/claims/thm_9.py through its inputs, checks and faults
(tests/verify/claims/test_registered.py runs every claim)."""

import dataclasses

import pytest

from qstr.constructions.interpolation import parameter_norm2


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


WIDE_EXACT = "widths proportional to N: built memoriser exact"
WIDE_BELOW = "widths proportional to N: built memoriser below the requirement"
WIDE_ABOVE = "widths N d, N / 8: built memoriser above the requirement"


def test_thm9_memoriser_built_at_widths_proportional_to_n(declared):
    """The n = 8 memoriser at d_h = N d, N / 8, N / 512: the padded module is exact, its ||vec||^2
    (276.58, the same at every width: the padding is zero) is below the requirement at d_h = N / 512
    (2.955e4 at N = 512, margin 107) and above it at N d and N / 8 (5.17e-2 at best)."""
    d = declared(CID)
    cases = d.inputs.wide_built
    shapes = [(c.width, c.N, c.model.d_h) for c in cases]
    assert shapes == [
        ("N d", 64, 256),
        ("N d", 128, 512),
        ("N / 8", 256, 32),
        ("N / 8", 512, 64),
        ("N / 512", 512, 1),
        ("N / 512", 1024, 2),
    ]
    norms = [parameter_norm2(c.model) for c in cases]
    assert max(norms) == min(norms) == pytest.approx(276.5772, rel=1e-6)
    assert all(float(c.y @ c.y) == pytest.approx(9.8281, rel=1e-4) for c in cases)  # <= K_y n
    exact = d.verdict(WIDE_EXACT)
    assert exact.holds and exact.measured < 1e-13
    below = d.verdict(WIDE_BELOW)
    assert below.holds and below.measured == pytest.approx(276.5772, rel=1e-6)
    assert below.bound == pytest.approx(29553.98, rel=1e-6)
    assert "N = 512" in below.detail and "requirement / ||vec||^2 = 107" in below.detail
    above = d.verdict(WIDE_ABOVE)
    assert above.holds and above.bound == pytest.approx(0.0517217, rel=1e-5)
    assert "d_h = N / 8 = 64, N = 512" in above.detail
    assert "any interpolating RNN (depth-2 f_y, r_h = 1) has ||vec||^2 >= 2.14" in above.detail


@pytest.mark.parametrize(
    "fault, check, measured, bound",
    [
        ("requirement at sqrt N for the built width", WIDE_BELOW, 276.5772, 0.1808473),
        ("built memoriser not padded (d_h = 1)", WIDE_ABOVE, 276.5772, 29553.98),
        ("padding after z, not in the state blocks", WIDE_EXACT, 2.861969, 1e-9),
    ],
)
def test_thm9_wide_faults_are_caught(declared, fault, check, measured, bound):
    """Each slip of the built check at widths proportional to N makes its check fail, at the
    values the docstrings quote."""
    d = declared(CID)
    v = d.verdict(check, d.broken(fault))
    assert not v.holds
    assert v.measured == pytest.approx(measured, rel=1e-5) and v.bound == pytest.approx(
        bound, rel=1e-5
    )


def test_thm9_pins_widths_and_adversarial_memoriser(declared):
    """The bounds agree with the 40-digit evaluation (<= 1e-13); C_M = 4 fails; the wide modules'
    d_h is the width asked; the adversarial memoriser brings C n^3 within 0.5."""
    d = declared(CID)
    assert d.verdict("bounds = 40-digit evaluation").measured < 1e-13
    assert not d.verdict("bounds = 40-digit evaluation", d.broken("paper form with C_M = 4")).holds
    assert d.verdict("widths proportional to N: built d_h = the width asked").holds
    assert d.verdict("memoriser ||vec||^2 <= C n^3").ratio > 0.5
