"""The hypothesis strategies: bad arguments are a ValueError when the strategy is made, not when
drawing; size bounds and fixed sizes are honoured; constructions are built as the paper builds
them; the settings profiles follow the qstr profiles."""

import importlib
import sys
import time

import pytest
import torch
from hypothesis import given, settings

import qstr.verify
from qstr.verify import strategies

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


USER_TEST = """
from hypothesis import given
from qstr.verify.strategies import codebooks, constructions, links, prompts, tasks


@given(codebooks())
def test_coherent(book):
    assert book.mu <= 0.5


@given(codebooks(min_N=8, kinds=["rademacher"]))
def test_rademacher(book):
    assert book.kind == "rademacher" and book.N >= 8 and book.mu <= 0.5


@given(links())
def test_links(g):
    assert 1 <= g.q <= 3


@given(tasks())
def test_tasks(task):
    assert task.q <= task.N <= 12


@given(prompts())
def test_prompts(case):
    assert case[1].y.isfinite().all()


@given(constructions())
def test_constructions(case):
    assert case[0] in ("lemma-11", "prop-28")
"""


def _slow_first_call(build, seconds: float):
    """``build``, its first call ``seconds`` slower: a first build as the issue timed it on a
    loaded machine (1.2 s: scipy's import for rademacher's d_e), whatever this machine's cache."""
    calls = []

    def first_slow(*args, **kw):
        if not calls:
            time.sleep(seconds)
        calls.append(args)
        return build(*args, **kw)

    return first_slow


def test_the_strategies_pass_the_health_checks_under_the_default_profile(inner_pytest, monkeypatch):
    """A user's tests on every strategy under hypothesis's default profile pass every health
    check: what the first codebook build pays is paid when the strategy is made, not in a draw.
    As in a fresh process: scipy out of sys.modules, nothing warmed, and the first build 1.2 s
    slower. The default is the strictest profile: too_slow trips at max(1 s, 5 deadlines) of
    drawing, 1 s at its 200 ms deadline, 30 s for the qstr-* profiles (no deadline), none of
    which suppresses a check (test_the_profiles_exist_after_a_plain_import)."""
    (inner_pytest.path / "test_books.py").write_text(USER_TEST)
    for name in [m for m in sys.modules if m == "scipy" or m.startswith("scipy.")]:
        monkeypatch.delitem(sys.modules, name)
    strategies._warm_codebook.cache_clear()
    monkeypatch.setattr(
        strategies, "build_codebook", _slow_first_call(strategies.build_codebook, 1.2)
    )
    out = inner_pytest("-q", "--hypothesis-profile=default", "test_books.py")  # CI loads "ci"
    assert out.returncode == 0 and "6 passed" in out.stdout, out.stdout + out.stderr


@pytest.fixture(params=["default", "ci"])
def loaded_profile(request):
    """Hypothesis's profile loaded when qstr.verify.strategies is imported: "ci" is what
    hypothesis loads under a CI environment variable (too_slow suppressed, derandomized)."""
    before = settings._current_profile
    settings.load_profile(request.param)
    yield request.param
    settings.load_profile(before)


def test_the_profiles_exist_after_a_plain_import(monkeypatch, loaded_profile):
    """Importing qstr.verify.strategies registers the qstr-* hypothesis profiles (outside pytest
    too): the module imported afresh, with no qstr-* profile registered before, and each profile
    the same whichever profile was loaded (a CI run's qstr-quick is a laptop's)."""
    monkeypatch.setattr(settings, "_profiles", dict(settings._profiles))
    for name in [n for n in settings._profiles if n.startswith("qstr-")]:
        del settings._profiles[name]
    monkeypatch.delitem(sys.modules, "qstr.verify.strategies")
    monkeypatch.setattr(qstr.verify, "strategies", strategies)  # restored after the import
    fresh = importlib.import_module("qstr.verify.strategies")
    assert fresh is not strategies
    for name, kw in PROFILE_SETTINGS.items():
        profile = settings.get_profile(name)
        assert profile.max_examples == kw["max_examples"] and profile.deadline is None
        assert not profile.suppress_health_check, name  # no health check is suppressed
        assert not profile.derandomize and profile.database is not None, name
