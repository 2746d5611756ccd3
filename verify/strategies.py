"""Hypothesis strategies for qSTR objects (links, tasks, prompts, codebooks, constructions), for the
toolkit's tests and users' own CI, and hypothesis settings profiles named after the qstr profiles
(``--hypothesis-profile qstr-full``), registered when this module is imported.
Each draws small sizes and a seed and builds from an explicit ``torch.Generator``: shrinking goes
to small N, d, q, seed 0. What a first build pays once (an import, a device's start) is paid when
the strategy is made, so every draw is fast and hypothesis's health checks pass under every
profile, its default included."""

from __future__ import annotations

import functools
from typing import Optional, Sequence

import torch
from hypothesis import settings, strategies as st

from qstr.bounds.attention import lemma11
from qstr.bounds.codebooks import build_codebook
from qstr.bounds.transition import prop28_rnn
from qstr.constructions import validate
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.links import LINK_NAMES, make_link
from qstr.constructions.task import INDEX_RULES, TOKEN_RULES, VARIANTS, QSTR

seeds = st.integers(min_value=0, max_value=2**31 - 1)


def _generator(seed: int, device="cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


@functools.cache
def _warm_device(device: str) -> None:
    """A device's first generator and allocation (CUDA starts its context), once a process."""
    torch.zeros(1, device=device).add_(
        torch.rand(1, generator=_generator(0, device), device=device)
    )


@functools.cache
def _warm_codebook(kind: str) -> None:
    """One small build of ``kind``, once a process: what the first build pays (rademacher's d_e
    imports scipy's binomial tail, about 1 s) is paid when the strategy is made, not in a draw."""
    gen = _generator(0) if kind != "rs-hadamard" else None
    build_codebook(2, kind=kind, generator=gen, dtype=torch.float64)


# hypothesis settings profiles after the qstr profiles: quick for every commit, full and gpu for
# nightly runs (no deadline: a construction's first build compiles and allocates); no health
# check is suppressed (the strategies' draws are fast). Each is built on hypothesis's own
# "default" profile, not on the one loaded when this module is imported: under a CI variable
# hypothesis loads its "ci" profile (too_slow suppressed, derandomized), and a qstr profile is the
# same on a laptop and in CI
PROFILE_SETTINGS = {
    "qstr-quick": dict(max_examples=25, deadline=None),
    "qstr-full": dict(max_examples=200, deadline=None),
    "qstr-gpu": dict(max_examples=200, deadline=None),
}


def register_profiles() -> None:
    """Register the hypothesis profiles qstr-quick, qstr-full and qstr-gpu (then
    ``settings.load_profile`` or ``pytest --hypothesis-profile qstr-full``). Importing this module
    registers them; ``pytest --qstr-profile P`` loads ``qstr-P`` unless --hypothesis-profile
    names one."""
    base = settings.get_profile("default")
    for name, kw in PROFILE_SETTINGS.items():
        settings.register_profile(name, parent=base, **kw)


def _sizes(**sizes) -> None:
    """Every size bound an integer >= 1 (``None``: drawn), checked when the strategy is made."""
    for name, value in sizes.items():
        if value is not None:
            validate.positive_int(name, value)


def _range(name: str, low: int, high: int) -> None:
    """``low <= high``, both sizes (``min_NAME``, ``max_NAME``), checked when the strategy is
    made."""
    _sizes(**{f"min_{name}": low, f"max_{name}": high})
    if low > high:
        raise ValueError(f"min_{name} = {low} exceeds max_{name} = {high}")


def _choices(name: str, values, allowed) -> list:
    """A non-empty selection from ``allowed``, checked when the strategy is made."""
    values = [values] if isinstance(values, str) else list(values)
    if not values or any(v not in allowed for v in values):
        raise ValueError(
            f"{name} must be a non-empty selection of {', '.join(map(str, allowed))}, "
            f"got {values!r}"
        )
    return values


def links(
    q: Optional[int] = None,
    d: Optional[int] = None,
    names: Sequence[str] = LINK_NAMES,
    max_q: int = 3,
    max_d: int = 4,
    device="cpu",
):
    """A link function g of any kind in ``names`` (random directions / teacher from a drawn seed),
    its parameters on ``device``. Bad arguments raise ``ValueError`` here, not when drawing."""
    _sizes(q=q, d=d, max_q=max_q, max_d=max_d)
    device = validate.device_of("device", device)
    _warm_device(str(device))
    return _links(q, d, _choices("names", names, LINK_NAMES), max_q, max_d, device)


@st.composite
def _links(draw, q, d, names, max_q, max_d, device):
    q = draw(st.integers(1, max_q)) if q is None else q
    d = draw(st.integers(1, max_d)) if d is None else d
    name = draw(st.sampled_from(names))
    return make_link(
        name, q, d, generator=_generator(draw(seeds), device), width=draw(st.integers(1, 6))
    )


_TASK_RULES = {  # the task's rule choices tasks() takes by keyword, and what each allows
    "variants": VARIANTS,
    "indices": INDEX_RULES,
    "tokens": TOKEN_RULES,
    "link_names": LINK_NAMES,
}


def tasks(
    max_N: int = 12,
    max_d: int = 4,
    max_q: int = 3,
    *,
    min_N: int = 1,
    q: Optional[int] = None,
    d: Optional[int] = None,
    device="cpu",
    **rules: Sequence[str],
):
    """A valid ``QSTR`` task: min_N <= N <= max_N, q <= N (``q``, ``d``: fixed, else drawn up to
    max_q, max_d), and the few-heads rule only where it is defined (2q <= N). ``rules``: the
    selections ``variants``, ``indices``, ``tokens``, ``link_names`` to draw from (default: all).
    Bad arguments raise ``ValueError`` here, not when drawing."""
    _sizes(max_d=max_d, max_q=max_q, q=q, d=d)
    _range("N", min_N, max_N)
    if q is not None and q > max_N:
        raise ValueError(f"q = {q} needs N >= q, but max_N = {max_N}")
    unknown = sorted(set(rules) - set(_TASK_RULES))
    if unknown:
        raise ValueError(f"tasks() got unknown argument(s) {unknown}; rules: {list(_TASK_RULES)}")
    chosen = {k: _choices(k, rules.get(k, allowed), allowed) for k, allowed in _TASK_RULES.items()}
    choices = (chosen["variants"], chosen["indices"], chosen["tokens"])
    sizes = (max(min_N, q or 1), max_N, q, max_q, d, max_d)
    device = validate.device_of("device", device)
    _warm_device(str(device))
    return _tasks(sizes, choices, chosen["link_names"], device)


@st.composite
def _tasks(draw, sizes, choices, link_names, device):
    variants, indices, tokens = choices
    min_N, max_N, q, max_q, d, max_d = sizes
    N = draw(st.integers(min_N, max_N))
    q = draw(st.integers(1, min(max_q, N))) if q is None else q
    d = draw(st.integers(1, max_d)) if d is None else d
    variant = draw(st.sampled_from(variants))
    allowed = [r for r in indices if r != "few-heads" or (2 * q <= N and variant == "general")]
    rule = draw(st.sampled_from(allowed or ["uniform"]))
    link = draw(links(q=q, d=d, names=link_names, device=device))
    return QSTR(
        N=N, d=d, link=link, variant=variant, indices=rule, tokens=draw(st.sampled_from(tokens))
    )


def prompts(
    task_strategy=None,
    max_B: int = 4,
    dtypes=(torch.float32, torch.float64),
    device="cpu",
    **task_kw,
):
    """A pair ``(task, Prompts)`` with B <= max_B prompts sampled on ``device``
    (the CPU by default).
    Bad arguments raise ``ValueError`` here, not when drawing.

    For example::

        from hypothesis import given
        from qstr.verify.strategies import prompts

        @given(prompts(max_N=16))
        def test_labels_are_finite(case):
            task, p = case
            assert p.y.isfinite().all()
    """
    _sizes(max_B=max_B)
    dtypes = [
        validate.float_dtype("dtypes", t)
        for t in ([dtypes] if isinstance(dtypes, (str, torch.dtype)) else dtypes)
    ]
    if not dtypes:
        raise ValueError("dtypes must name at least one of torch.float32, torch.float64")
    if task_strategy is None:
        task_strategy = tasks(device=device, **task_kw)
    elif task_kw:
        raise ValueError(f"give task_strategy or task arguments {sorted(task_kw)}, not both")
    device = validate.device_of("device", device)
    _warm_device(str(device))
    return _prompts(task_strategy, max_B, dtypes, device)


@st.composite
def _prompts(draw, task_strategy, max_B, dtypes, device):
    task = draw(task_strategy)
    B = draw(st.integers(1, max_B))
    dtype = draw(st.sampled_from(dtypes))
    return task, task.sample(
        B, generator=_generator(draw(seeds), device), device=device, dtype=dtype
    )


def codebooks(
    max_N: int = 64,
    kinds: Sequence[str] = ("rs-hadamard", "rademacher"),
    mu_max: float = 0.5,
    *,
    min_N: int = 1,
):
    """A codebook of min_N <= N <= max_N codes meeting Assumption 3 (coherence <= mu_max) built by
    ``bounds.codebooks.build_codebook``. Bad arguments raise ``ValueError`` here, not when
    drawing."""
    _range("N", min_N, max_N)
    kinds = _choices("kinds", kinds, ("rs-hadamard", "rademacher"))
    mu_max = validate.probability("mu_max", mu_max)
    for kind in kinds:
        _warm_codebook(kind)
    return _codebooks((min_N, max_N), kinds, mu_max)


@st.composite
def _codebooks(draw, sizes, kinds, mu_max):
    N = draw(st.integers(*sizes))
    kind = draw(st.sampled_from(kinds))
    gen = _generator(draw(seeds)) if kind != "rs-hadamard" else None
    return build_codebook(N, kind=kind, mu_max=mu_max, generator=gen, dtype=torch.float64)


CONSTRUCTIONS = ("lemma-11", "prop-28")


def constructions(
    kinds: Sequence[str] = CONSTRUCTIONS,
    max_N: int = 16,
    max_q: int = 2,
    max_d: int = 3,
    *,
    min_N: int = 2,
    eps: float = 0.1,
    r_x: float = 2.0,
):
    """A triple ``(kind, construction, g_net)`` built as the paper builds it at small sizes, for
    the two-layer net ``g_net`` of a random teacher link (q <= N): Lemma 11's q-head attention
    (``bounds.attention.lemma11``) or Prop 28's RNN on RS-Hadamard codes
    (``bounds.transition.prop28_rnn``), float64 on the CPU. Bad arguments raise ``ValueError``
    here, not when drawing.

    For example::

        from hypothesis import given
        from qstr.verify.strategies import constructions

        @given(constructions(kinds=["lemma-11"]))
        def test_the_heads_are_q(case):
            kind, cons, g_net = case
            assert cons.model.H == cons.q
    """
    kinds = _choices("kinds", kinds, CONSTRUCTIONS)
    _range("N", min_N, max_N)
    _sizes(max_q=max_q, max_d=max_d)
    eps = validate.probability("eps", eps)
    r_x = validate.positive_float("r_x", r_x)
    return _constructions(kinds, (min_N, max_N, max_q, max_d), eps, r_x)


@st.composite
def _constructions(draw, kinds, sizes, eps, r_x):
    min_N, max_N, max_q, max_d = sizes
    kind = draw(st.sampled_from(kinds))
    N = draw(st.integers(min_N, max_N))
    q = draw(st.integers(1, min(max_q, N)))
    d = draw(st.integers(1, max_d))
    net = make_link("teacher", q, d, generator=_generator(draw(seeds))).two_layer_net()
    if kind == "lemma-11":
        return kind, lemma11(N, d, q, net, eps=eps, r_x=r_x), net
    book = rs_hadamard_codebook(N, dtype=torch.float64)
    return kind, prop28_rnn(book, d, net, q=q, eps=eps, r_x=r_x), net


register_profiles()
