"""The hypothesis strategies refuse bad arguments with a ValueError when made, not when drawing."""

import pytest

from qstr.verify.strategies import codebooks, links, prompts, tasks


@pytest.mark.parametrize(
    "make, kw, message",
    [
        (prompts, dict(max_N=0), "max_N must be an integer >= 1, got 0"),
        (prompts, dict(max_B=0), "max_B must be an integer >= 1, got 0"),
        (prompts, dict(dtypes=()), "dtypes must name at least one"),
        (tasks, dict(variants=()), "variants must be a non-empty selection"),
        (links, dict(names=["cubic"]), "names must be a non-empty selection"),
        (links, dict(q=0), "q must be an integer >= 1, got 0"),
        (codebooks, dict(max_N=-1), "max_N must be an integer >= 1, got -1"),
        (codebooks, dict(mu_max=2), "mu_max must lie in"),
    ],
)
def test_bad_arguments_raise_value_error_up_front(make, kw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        make(**kw)
