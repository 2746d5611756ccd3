"""Ball arithmetic (verify/ball.py) against known values: exp, log, sqrt, softmax rows, a Hadamard
Gram matrix, max, and the verdict rule."""

from fractions import Fraction

import mpmath as mp
import pytest
import scipy.linalg
import torch
from flint import arb, fmpq

from qstr.verify import ball
from qstr.verify.ball import CERTIFIED, NOT_CERTIFIED, VIOLATED, Enclosure


def _rational(x: float) -> fmpq:
    f = Fraction(x)
    return fmpq(f.numerator, f.denominator)


def _holds(enc: Enclosure, value: mp.mpf) -> bool:
    return mp.mpf(enc.lower) <= value <= mp.mpf(enc.upper)


def test_exp_one_encloses_e():
    with mp.workdps(60), ball.precision():
        enc = Enclosure.of(ball.exp(ball.exact(1.0)))
        assert _holds(enc, mp.e)
        assert 0 < enc.width <= 2 * 2**-52 * float(mp.e)  # the floats either side of e at most
        assert enc.lower <= float(mp.e) <= enc.upper  # e rounded to float64


def test_log_and_sqrt_known_values():
    with mp.workdps(60), ball.precision():
        assert _holds(Enclosure.of(ball.log(ball.exp(ball.exact(1.0)))), mp.mpf(1))
        assert _holds(Enclosure.of(ball.log(ball.exact(2.0))), mp.log(2))
        assert _holds(Enclosure.of(ball.sqrt(ball.exact(2.0))), mp.sqrt(2))
        assert Enclosure.of(ball.sqrt(ball.exact(4.0))) == Enclosure(2.0, 2.0)
        assert Enclosure.of(ball.log(ball.exact(1.0))) == Enclosure(0.0, 0.0)
        two = ball.sqrt(ball.exact(2.0)) ** 2
        assert two.contains(arb(2)) and not two.contains(arb(2.0000001))


def test_log_and_sqrt_refuse_balls_outside_their_domain():
    with pytest.raises(ValueError, match="log needs"):
        ball.log(ball.exact(0.0))
    with pytest.raises(ValueError, match="sqrt needs"):
        ball.sqrt(ball.exact(-1.0))
    with pytest.raises(ValueError, match="below 0"):
        ball.sqrt_nonneg(ball.exact(-1e-300))
    assert ball.sqrt_nonneg(arb(0, 1e-40)).contains(arb(0))  # a ball reaching below 0 is cut


def test_softmax_row_holds_the_exact_weights_and_sums_to_one():
    scores = [0.0, 1.0, 2.5, -3.0, 0.1]
    with mp.workdps(60), ball.precision():
        p = ball.softmax_row([ball.exact(s) for s in scores])
        total = sum(mp.exp(mp.mpf(s)) for s in scores)
        for pj, s in zip(p, scores, strict=True):
            assert _holds(Enclosure.of(pj), mp.exp(mp.mpf(s)) / total)
        assert sum(p, arb(0)).contains(arb(1))
        assert Enclosure.of(sum(p, arb(0))).width < 1e-15
    torch_p = torch.softmax(torch.tensor(scores, dtype=torch.float64), 0).tolist()
    for pj, f in zip(p, torch_p, strict=True):
        enc = Enclosure.of(pj)  # the float64 softmax is within its rounding of the enclosure
        assert enc.lower - 4e-16 <= f <= enc.upper + 4e-16


def test_hadamard_gram_is_exact():
    """H/4 for the 16 x 16 Hadamard matrix has entries +-1/4 (exact floats): its Gram matrix is
    the identity with radius 0."""
    h = torch.tensor(scipy.linalg.hadamard(16), dtype=torch.float64) / 4
    with ball.precision():
        m = ball.arb_matrix(h)
        g = ball.matmul(m, m.transpose())
    for i, row in enumerate(ball.rows_of(g)):
        for j, v in enumerate(row):
            assert Enclosure.of(v) == Enclosure(float(i == j), float(i == j))
    assert torch.equal(h @ h.T, torch.eye(16, dtype=torch.float64))  # the float64 value inside


def test_gram_of_rounded_entries_encloses_the_floats_read_exactly():
    """H/sqrt(8): the entries are 1/sqrt(8) rounded; the Gram matrix's diagonal is 8 fl(1/sqrt 8)^2
    exactly (a rational), which the ball holds, and the float64 Gram is within its rounding."""
    h = torch.tensor(scipy.linalg.hadamard(8), dtype=torch.float64) / 8**0.5
    with ball.precision():
        g = ball.matmul(ball.arb_matrix(h), ball.arb_matrix(h.T))
        diag = 8 * _rational(float(h[0, 0])) ** 2  # dyadic, exact in 128 bits
        assert g[0, 0].contains(arb(diag)) and diag != 1
    assert g[0, 1].contains(arb(0))
    enc, f = Enclosure.of(g[0, 0]), float((h @ h.T)[0, 0])
    assert enc.lower - 4e-16 <= f <= enc.upper + 4e-16


def test_float64_tensors_are_read_exactly():
    t = torch.tensor([[0.1, -1e-300], [3.0, 2.0**-60]], dtype=torch.float64)
    m = ball.arb_matrix(t)
    for i in range(2):
        for j in range(2):
            assert m[i, j].rad() == 0 and m[i, j] == arb(_rational(float(t[i, j])))
    assert ball.arb_matrix(t.float())[0, 0] == arb(_rational(float(t.float()[0, 0])))


@pytest.mark.parametrize(
    "bad",
    [
        torch.zeros(2, 2, 2, dtype=torch.float64),
        torch.zeros(2, 2, dtype=torch.long),
        torch.tensor([[float("nan")]], dtype=torch.float64),
        [[1.0]],
    ],
)
def test_arb_matrix_refuses_bad_input(bad):
    with pytest.raises(ValueError):
        ball.arb_matrix(bad)


def test_max_over_a_finite_set():
    with ball.precision():
        m = ball.max_of([ball.exact(1.0), ball.exact(3.0), ball.exact(2.0)])
        assert Enclosure.of(m) == Enclosure(3.0, 3.0)
        m = ball.max_of([arb(1, 0.5), arb(1.2, 0.1)])  # overlapping: [max lower, max upper]
        enc = Enclosure.of(m)
        assert enc.lower <= 1.1 <= enc.lower + 1e-9 and enc.upper >= 1.5
    with pytest.raises(ValueError):
        ball.max_of([])


def test_verdict_rule():
    with ball.precision():
        e = Enclosure.of(ball.exp(ball.exact(1.0)))
    assert ball.verdict(e, Enclosure(2.72, 2.72)) == CERTIFIED
    assert ball.verdict(e, Enclosure(2.7, 2.7)) == VIOLATED
    assert ball.verdict(e, e) == NOT_CERTIFIED  # a bound equal to the value straddles
    assert ball.verdict(e, Enclosure(float(mp.e), float(mp.e))) == NOT_CERTIFIED
    assert ball.verdict(Enclosure(1.0, 2.0), Enclosure(2.0, 3.0)) == NOT_CERTIFIED  # touching


def test_enclosure_refuses_infinite_balls_and_precision_is_restored():
    with pytest.raises(ValueError):
        Enclosure.of(arb("nan"))
    with pytest.raises(ValueError):
        ball.exact(float("inf"))
    before = ball.ctx.prec
    with ball.precision(200):
        assert ball.ctx.prec == 200
    assert ball.ctx.prec == before
    with pytest.raises(ValueError):
        with ball.precision(10):
            pass
