"""Properties every sampled qSTR batch must satisfy (Definition 2), as plain assertions.

Used by the ``data-model`` claim and the test suite; users can call ``assert_valid_prompts``
in their own property tests.
"""

from __future__ import annotations

import torch

from qstr.constructions.task import QSTR, Prompts


def assert_valid_prompts(task: QSTR, p: Prompts, dtype: torch.dtype) -> None:
    """Shapes, dtypes, index ranges, variant structure and y_i = g(x_{t_i}) at every position."""
    B, N, d, q = p.x.shape[0], task.N, task.d, task.q
    assert p.x.shape == (B, N, d), f"x has shape {tuple(p.x.shape)}, expected {(B, N, d)}"
    assert p.t.shape == (B, N, q), f"t has shape {tuple(p.t.shape)}, expected {(B, N, q)}"
    y_shape = (B, N) if task.link.out_dim is None else (B, N, task.link.out_dim)
    assert p.y.shape == y_shape, f"y has shape {tuple(p.y.shape)}, expected {y_shape}"
    assert p.x.dtype == dtype and p.y.dtype == dtype, f"dtypes {p.x.dtype}, {p.y.dtype} != {dtype}"
    assert p.t.dtype == torch.long, f"t has dtype {p.t.dtype}"
    assert int(p.t.min()) >= 0 and int(p.t.max()) < N, "t out of [0, N)"
    assert_labels_match(task, p)
    assert_index_structure(task, p)


def assert_labels_match(task: QSTR, p: Prompts) -> None:
    """y[b, i] equals g applied to the tokens x[b, t[b, i, k]], k = 0..q-1, read one by one."""
    tol = 1e-5 if p.x.dtype == torch.float32 else 1e-12
    for b in range(p.x.shape[0]):
        for i in range(task.N):
            xt = torch.stack([p.x[b, int(j)] for j in p.t[b, i]])
            want = task.link(xt)
            assert torch.allclose(p.y[b, i], want, rtol=tol, atol=tol), (
                f"label at prompt {b}, position {i} is {p.y[b, i].tolist()}, "
                f"g(x_t) = {want.tolist()}"
            )


def assert_index_structure(task: QSTR, p: Prompts) -> None:
    """simple: one t per prompt; distinct: distinct entries; few-heads / half-zero as defined."""
    half = task.N // 2
    if task.variant == "simple":
        assert bool((p.t == p.t[:, :1]).all()), "simple prompts must share one t across positions"
    if task.indices == "distinct":
        s = p.t.sort(dim=-1).values
        assert not bool((s[..., 1:] == s[..., :-1]).any()), "distinct indices repeat an entry"
    if task.indices == "few-heads":
        want = torch.arange(task.q, device=p.t.device).expand_as(p.t[:, half:])
        assert bool((p.t[:, half:] == want).all()), (
            "few-heads positions i >= N/2 must read t = (1..q)"
        )
    if task.tokens == "half-zero":
        assert bool((p.x[:, half:] == 0).all()), "half-zero tokens j >= N/2 must be 0"
