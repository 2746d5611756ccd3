"""The gadgets' certificates (bounds/gadgets.py, Lemmas 22 and 24) and the deprecated paths they
keep in constructions/relu.py (issue 56)."""

import pytest

from qstr.bounds.gadgets import gadget_error, gate_error, gate_leak, product_error
from qstr.constructions import relu
from qstr.constructions.relu import gate_bands, gate_gadget, identity_gadget, product_gadget
from tests.fixtures import via_old_path


def test_certificates_are_the_lemmas_closed_forms():
    """h^2/16 with h = 4R/(knots - 1); r_x delta with delta = (s_max - 1/2)/knots; the leak's two
    branches r_x 4e (e < delta/2) and r_x (2e + delta)."""
    assert product_error(1.0, 17) == pytest.approx((4 / 16) ** 2 / 16, rel=1e-15)
    assert gate_error(3.0, 16, 1.05) == pytest.approx(3.0 * 0.55 / 16, rel=1e-15)
    delta = 0.5 / 4
    assert gate_leak(0.1 * delta, 2.0, 4) == pytest.approx(2.0 * 0.4 * delta, rel=1e-15)
    assert gate_leak(delta, 2.0, 4) == pytest.approx(2.0 * 3 * delta, rel=1e-15)
    assert gate_leak(-0.5, 2.0, 4) == 0.0


def test_gadget_error_reads_the_gadgets_parameters():
    assert gadget_error(identity_gadget(2)) == 0.0
    assert gadget_error(product_gadget(0.5, 9)) == product_error(0.5, 9)
    assert gadget_error(gate_gadget(2.0, 7, 1.2)) == gate_error(2.0, 7, 1.2)
    with pytest.raises(ValueError, match="Gadget"):
        gadget_error("gate")


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="knots"):
        product_error(1.0, 1)
    with pytest.raises(ValueError, match="r_x"):
        gate_error(-1.0, 4)


def test_old_paths_warn_and_give_the_same_numbers():
    """``qstr.constructions.relu.product_error``, ``Gadget.error`` and ``GateBands.error`` /
    ``.leak`` still answer, each with one DeprecationWarning naming its home in bounds/."""
    g, bands = gate_gadget(2.0, 7, 1.2), gate_bands(2.0, 7, 1.2)
    cases = (
        (lambda: relu.product_error, product_error, "qstr.bounds.gadgets.product_error"),
        (lambda: g.error, gate_error(2.0, 7, 1.2), "qstr.bounds.gadgets.gadget_error"),
        (lambda: bands.error, gate_error(2.0, 7, 1.2), "qstr.bounds.gadgets.gate_error"),
        (lambda: bands.leak(0.01), gate_leak(0.01, 2.0, 7, 1.2), "qstr.bounds.gadgets.gate_leak"),
    )
    for get, want, home in cases:
        assert via_old_path(get, home) == want, home
    with pytest.raises(AttributeError, match="no_such_name"):
        relu.no_such_name  # noqa: B018 - the attribute access is the test
