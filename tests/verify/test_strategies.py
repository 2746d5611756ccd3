"""The hypothesis strategies: bad arguments are a ValueError when the strategy is made, not when
drawing; size bounds and fixed sizes are honoured; constructions are built as the paper builds
them; the settings profiles follow the qstr profiles."""

import pytest
import torch
from hypothesis import given, settings

from qstr.constructions.attention import Construction
from qstr.constructions.recurrent import RNNConstruction
from qstr.constructions.task import gather_tokens
from qstr.verify.strategies import (
    PROFILE_SETTINGS,
    codebooks,
    constructions,
    links,
    prompts,
    register_profiles,
    tasks,
)


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
        (codebooks, dict(min_N=9, max_N=4), "min_N = 9 exceeds max_N = 4"),
        (tasks, dict(q=5, max_N=4), "q = 5 needs N >= q, but max_N = 4"),
        (tasks, dict(min_N=0), "min_N must be an integer >= 1, got 0"),
        (tasks, dict(variant=["simple"]), "got unknown argument"),
        (constructions, dict(kinds=["prop-26"]), "kinds must be a non-empty selection"),
        (constructions, dict(eps=0), "eps must lie in"),
    ],
)
def test_bad_arguments_raise_value_error_up_front(make, kw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        make(**kw)


@settings(max_examples=20, deadline=None)
@given(tasks(q=2, min_N=4, max_N=8), codebooks(min_N=8, max_N=16))
def test_fixed_q_and_lower_size_bounds_are_honoured(task, book):
    assert task.q == 2 and 4 <= task.N <= 8
    assert 8 <= book.N <= 16 and book.mu <= 0.5


@settings(max_examples=12, deadline=None)
@given(constructions(max_N=8))
def test_constructions_are_the_papers_at_small_sizes(case):
    """Lemma 11's module has q heads and meets its guarantee eps at a sampled prompt in the r_x
    ball; Prop 28's RNN reads q d values per state."""
    kind, cons, g_net = case
    if kind == "lemma-11":
        assert isinstance(cons, Construction) and cons.model.H == cons.q
        g = torch.Generator().manual_seed(0)
        x = torch.randn(3, cons.N, cons.d, generator=g, dtype=torch.float64)
        x = x / x.norm(dim=-1, keepdim=True).clamp_min(1.0) * 0.9 * cons.guarantee.r_x
        t = torch.randint(0, cons.N, (3, cons.N, cons.q), generator=g)
        y = g_net(gather_tokens(x, t))
        with torch.no_grad():
            err = float((cons.predict(x, t) - y).abs().max())
        assert err <= cons.guarantee.error_bound
    else:
        assert isinstance(cons, RNNConstruction) and cons.transition.d_h == cons.q * cons.d


def test_settings_profiles_follow_the_qstr_profiles():
    register_profiles()
    for name, kw in PROFILE_SETTINGS.items():
        assert settings.get_profile(name).max_examples == kw["max_examples"]
        assert settings.get_profile(name).deadline is None
    assert (
        settings.get_profile("qstr-full").max_examples
        > settings.get_profile("qstr-quick").max_examples
    )
