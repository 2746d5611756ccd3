"""Hypothesis strategies for qSTR objects (links, tasks, prompts, codebooks), for the toolkit's tests and users' own CI.
Each draws small sizes and a seed and builds from an explicit ``torch.Generator``: shrinking goes to small N, d, q, seed 0."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from hypothesis import strategies as st

from qstr.constructions.links import LINK_NAMES, make_link
from qstr.constructions.task import INDEX_RULES, TOKEN_RULES, VARIANTS, QSTR

seeds = st.integers(min_value=0, max_value=2**31 - 1)


def _generator(seed: int, device="cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


@st.composite
def links(draw, q: Optional[int] = None, d: Optional[int] = None, names: Sequence[str] = LINK_NAMES,
          max_q: int = 3, max_d: int = 4, device="cpu"):
    """A link function g of any kind in ``names`` (random directions / teacher from a drawn seed),
    its parameters on ``device``."""
    q = draw(st.integers(1, max_q)) if q is None else q
    d = draw(st.integers(1, max_d)) if d is None else d
    name = draw(st.sampled_from(list(names)))
    return make_link(name, q, d, generator=_generator(draw(seeds), device), width=draw(st.integers(1, 6)))


@st.composite
def tasks(draw, max_N: int = 12, max_d: int = 4, max_q: int = 3, variants: Sequence[str] = VARIANTS,
          indices: Sequence[str] = INDEX_RULES, tokens: Sequence[str] = TOKEN_RULES,
          link_names: Sequence[str] = LINK_NAMES, device="cpu"):
    """A valid ``QSTR`` task: q <= N, and the few-heads rule only where it is defined (2q <= N)."""
    N = draw(st.integers(1, max_N))
    q = draw(st.integers(1, min(max_q, N)))
    d = draw(st.integers(1, max_d))
    variant = draw(st.sampled_from(list(variants)))
    allowed = [r for r in indices if r != "few-heads" or (2 * q <= N and variant == "general")]
    rule = draw(st.sampled_from(allowed or ["uniform"]))
    link = draw(links(q=q, d=d, names=link_names, device=device))
    return QSTR(N=N, d=d, link=link, variant=variant, indices=rule, tokens=draw(st.sampled_from(list(tokens))))


@st.composite
def prompts(draw, task_strategy=None, max_B: int = 4, dtypes=(torch.float32, torch.float64), device="cpu", **task_kw):
    """A pair ``(task, Prompts)`` with B <= max_B prompts sampled on ``device`` (the CPU by default).

    For example::

        from hypothesis import given
        from qstr.verify.strategies import prompts

        @given(prompts(max_N=16))
        def test_labels_are_finite(case):
            task, p = case
            assert p.y.isfinite().all()
    """
    task = draw(task_strategy if task_strategy is not None else tasks(device=device, **task_kw))
    B = draw(st.integers(1, max_B))
    dtype = draw(st.sampled_from(list(dtypes)))
    return task, task.sample(B, generator=_generator(draw(seeds), device), device=device, dtype=dtype)


@st.composite
def codebooks(draw, max_N: int = 64, kinds: Sequence[str] = ("rs-hadamard", "rademacher"), mu_max: float = 0.5):
    """A codebook meeting Assumption 3 (coherence <= mu_max) built by ``build_codebook``."""
    from qstr.constructions.codes import build_codebook

    N = draw(st.integers(1, max_N))
    kind = draw(st.sampled_from(list(kinds)))
    gen = _generator(draw(seeds)) if kind != "rs-hadamard" else None
    return build_codebook(N, kind=kind, mu_max=mu_max, generator=gen, dtype=torch.float64)
