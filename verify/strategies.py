"""Hypothesis strategies for qSTR objects (links, tasks, prompts, codebooks), for the toolkit's
tests and users' own CI.
Each draws small sizes and a seed and builds from an explicit ``torch.Generator``: shrinking goes
to small N, d, q, seed 0."""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from hypothesis import strategies as st

from qstr.constructions import validate
from qstr.constructions.codes import build_codebook
from qstr.constructions.links import LINK_NAMES, make_link
from qstr.constructions.task import INDEX_RULES, TOKEN_RULES, VARIANTS, QSTR

seeds = st.integers(min_value=0, max_value=2**31 - 1)


def _generator(seed: int, device="cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def _sizes(**sizes) -> None:
    """Every size bound an integer >= 1 (``None``: drawn), checked when the strategy is made."""
    for name, value in sizes.items():
        if value is not None:
            validate.positive_int(name, value)


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
    return _links(
        q,
        d,
        _choices("names", names, LINK_NAMES),
        max_q,
        max_d,
        validate.device_of("device", device),
    )


@st.composite
def _links(draw, q, d, names, max_q, max_d, device):
    q = draw(st.integers(1, max_q)) if q is None else q
    d = draw(st.integers(1, max_d)) if d is None else d
    name = draw(st.sampled_from(names))
    return make_link(
        name, q, d, generator=_generator(draw(seeds), device), width=draw(st.integers(1, 6))
    )


def tasks(
    max_N: int = 12,
    max_d: int = 4,
    max_q: int = 3,
    variants: Sequence[str] = VARIANTS,
    indices: Sequence[str] = INDEX_RULES,
    tokens: Sequence[str] = TOKEN_RULES,
    link_names: Sequence[str] = LINK_NAMES,
    device="cpu",
):
    """A valid ``QSTR`` task: q <= N, and the few-heads rule only where it is defined (2q <= N).
    Bad arguments raise ``ValueError`` here, not when drawing."""
    _sizes(max_N=max_N, max_d=max_d, max_q=max_q)
    choices = (
        _choices("variants", variants, VARIANTS),
        _choices("indices", indices, INDEX_RULES),
        _choices("tokens", tokens, TOKEN_RULES),
    )
    link_names = _choices("link_names", link_names, LINK_NAMES)
    return _tasks(max_N, max_d, max_q, choices, link_names, validate.device_of("device", device))


@st.composite
def _tasks(draw, max_N, max_d, max_q, choices, link_names, device):
    variants, indices, tokens = choices
    N = draw(st.integers(1, max_N))
    q = draw(st.integers(1, min(max_q, N)))
    d = draw(st.integers(1, max_d))
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
    return _prompts(task_strategy, max_B, dtypes, validate.device_of("device", device))


@st.composite
def _prompts(draw, task_strategy, max_B, dtypes, device):
    task = draw(task_strategy)
    B = draw(st.integers(1, max_B))
    dtype = draw(st.sampled_from(dtypes))
    return task, task.sample(
        B, generator=_generator(draw(seeds), device), device=device, dtype=dtype
    )


def codebooks(
    max_N: int = 64, kinds: Sequence[str] = ("rs-hadamard", "rademacher"), mu_max: float = 0.5
):
    """A codebook meeting Assumption 3 (coherence <= mu_max) built by ``build_codebook``.
    Bad arguments raise ``ValueError`` here, not when drawing."""
    _sizes(max_N=max_N)
    return _codebooks(
        max_N,
        _choices("kinds", kinds, ("rs-hadamard", "rademacher")),
        validate.probability("mu_max", mu_max),
    )


@st.composite
def _codebooks(draw, max_N, kinds, mu_max):
    N = draw(st.integers(1, max_N))
    kind = draw(st.sampled_from(kinds))
    gen = _generator(draw(seeds)) if kind != "rs-hadamard" else None
    return build_codebook(N, kind=kind, mu_max=mu_max, generator=gen, dtype=torch.float64)
