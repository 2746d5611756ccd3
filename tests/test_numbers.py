"""tests/numbers.py: numbers within the tolerance pass, all else compares exactly, and a mismatch
names its place and both values."""

import pytest

from tests.numbers import assert_close, split_numbers


def test_split_numbers_leaves_words_and_ranges_as_written():
    pieces, numbers = split_numbers("h200 tf32 1STR: 0.65-0.91, p = 5e-05, -3.5 nan")
    assert numbers[:3] == [0.65, 0.91, 5e-05] and numbers[3] == -3.5 and numbers[4] != numbers[4]
    assert pieces[0] == "h200 tf32 1STR: " and pieces[1] == "-"


def test_numbers_within_tolerance_pass_and_beyond_it_fail_with_their_place():
    want = {"a": [1.0, "x = 2.6665433645352183"], "b": None, "c": 0.0}
    got = {"a": [1.0, "x = 2.666543364535218"], "b": None, "c": 1e-15}
    assert_close(got, want, rel_tol=1e-14, abs_tol=1e-12)
    with pytest.raises(AssertionError, match=r"\$\.a\[0\]: 1\.001 != 1\.0"):
        assert_close({**want, "a": [1.001, "x = 2.6665433645352183"]}, want, rel_tol=1e-14)


@pytest.mark.parametrize(
    "got",
    [
        {"a": [1.0, "y = 2.6665433645352183"], "b": None, "c": 0.0},  # the text beside a number
        {"a": [1.0, "x = 2.6665433645352183", 3], "b": None, "c": 0.0},  # one more item
        {"a": [1.0, "x = 2.6665433645352183"], "b": False, "c": 0.0},  # None is not False
        {"a": [1.0, "x = 2.6665433645352183"], "c": 0.0},  # a key missing
    ],
)
def test_everything_but_the_numbers_is_exact(got):
    want = {"a": [1.0, "x = 2.6665433645352183"], "b": None, "c": 0.0}
    with pytest.raises(AssertionError):
        assert_close(got, want, rel_tol=0.1, abs_tol=0.1)
