import math

import pytest
import torch
from hypothesis import given, settings
from scipy import stats

from qstr.constructions.links import SqNorm, make_link
from qstr.constructions.task import QSTR, gather_tokens, moment_check
from qstr.verify.properties import assert_valid_prompts
from qstr.verify.strategies import prompts


@settings(max_examples=80, deadline=None)
@given(prompts(max_N=10))
def test_sampled_prompts_satisfy_definition_2(case):
    task, p = case
    assert_valid_prompts(task, p, p.x.dtype)


def _task(gen, N=8, d=2, q=2, **kw):
    return QSTR(N=N, d=d, link=make_link("linear", q, d, generator=gen), **kw)


def test_reproducible(gen):
    task = _task(gen)
    a = task.sample(3, generator=torch.Generator().manual_seed(5))
    b = task.sample(3, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a.x, b.x) and torch.equal(a.t, b.t) and torch.equal(a.y, b.y)


def test_uniform_indices_are_uniform(gen):
    task = _task(gen, N=5, q=1)
    t = task.sample(4000, generator=gen).t.flatten()
    counts = torch.bincount(t, minlength=5).numpy()
    assert stats.chisquare(counts).pvalue > 1e-4


def test_distinct_indices_uniform_over_ordered_pairs(gen):
    task = _task(gen, N=4, q=2, indices="distinct")
    t = task.sample(3000, generator=gen).t.reshape(-1, 2)
    assert (t[:, 0] != t[:, 1]).all()
    codes = torch.bincount(t[:, 0] * 4 + t[:, 1], minlength=16).numpy()
    observed = [codes[a * 4 + b] for a in range(4) for b in range(4) if a != b]
    assert all(codes[a * 5] == 0 for a in range(4))
    assert stats.chisquare(observed).pvalue > 1e-4


def test_simple_variant_shares_t(gen):
    p = _task(gen, variant="simple").sample(16, generator=gen)
    assert (p.t == p.t[:, :1]).all()
    assert not (p.t[:, 0] == p.t[0, 0]).all()  # but t differs across prompts


def test_general_variant_varies_t(gen):
    p = _task(gen, N=32).sample(4, generator=gen)
    assert not (p.t == p.t[:, :1]).all()


def test_gaussian_token_moments(gen):
    x = _task(gen, N=50, d=4).sample(500, generator=gen, dtype=torch.float64).x
    assert x.mean().abs() < 0.01
    assert abs(x.var().item() - 1) < 0.01


def test_few_heads_variant(gen):
    task = QSTR(N=8, d=3, link=SqNorm(q=2, d=3), indices="few-heads", tokens="half-zero")
    p = task.sample(5, generator=gen)
    assert (p.x[:, 4:] == 0).all() and (p.x[:, :4] != 0).all()
    assert (p.t[:, 4:] == torch.tensor([0, 1])).all()
    # labels at the fixed positions read the same two tokens
    assert torch.allclose(p.y[:, 4:], p.y[:, 4:5].expand(5, 4))


def test_gather_tokens():
    x = torch.arange(2 * 3 * 1, dtype=torch.float32).reshape(2, 3, 1)
    t = torch.tensor([[[2, 0]] * 3, [[1, 1]] * 3])
    assert gather_tokens(x, t)[0, 0, :, 0].tolist() == [2.0, 0.0]
    assert gather_tokens(x, t)[1, 2, :, 0].tolist() == [4.0, 4.0]


def test_moment_check_gaussian_linear(gen):
    """For x ~ N(0, I_d) and y ~ N(0, 1): E||x||^2/(2d) = 1/2 and E y^2 / 4 = 1/4 at r = 2."""
    task = _task(gen, N=20, d=5, q=1)
    rep = moment_check(task, B=2000, generator=gen, orders=(2, 4))
    r2 = rep.per_order[0]
    assert r2[1] == pytest.approx(0.5, rel=0.02)
    assert r2[2] == pytest.approx(0.25, rel=0.05)
    # r = 4: E||x||^4 = d(d + 2) -> sqrt(35)/(4 * 5); E y^4 = 3 -> sqrt(3)/16
    assert rep.per_order[1][1] == pytest.approx(math.sqrt(35) / 20, rel=0.03)
    assert rep.per_order[1][2] == pytest.approx(math.sqrt(3) / 16, rel=0.08)
    assert rep.C_x == pytest.approx(r2[1]) and rep.holds(1.0, 1.0) and not rep.holds(0.1, 1.0)


def test_label_checks(gen):
    task = _task(gen)
    p = task.sample(2, generator=gen)
    assert torch.equal(task.label(p.x, p.t), p.y)
    for bad_t in (
        p.t + 8,
        torch.full_like(p.t, task.N),
        p.t - 1 - p.t.max(),
    ):  # N itself and -1 are out too
        with pytest.raises(ValueError, match="t must be"):
            task.label(p.x, bad_t)
    bad = p.x.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="x contains NaN"):
        task.label(bad, p.t)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(N=0), "N must be"),
        (dict(N=-3), "N must be"),
        (dict(d=0), "d must be"),
        (dict(N=1, q=2), "q must satisfy"),
        (dict(variant="weird"), "variant must be"),
        (dict(indices="few-heads", N=3, q=2), "few-heads"),
        (dict(tokens="uniform"), "tokens must be"),
    ],
)
def test_bad_tasks(gen, kw, match):
    N, d, q = kw.pop("N", 8), kw.pop("d", 2), kw.pop("q", 2)
    with pytest.raises(ValueError, match=match):
        QSTR(N=N, d=d, link=make_link("linear", q, 2, generator=gen), **kw)


def test_bad_sampling_arguments(gen):
    task = _task(gen)
    with pytest.raises(ValueError, match="B must be"):
        task.sample(0, generator=gen)
    with pytest.raises(ValueError, match="generator must be a torch.Generator"):
        task.sample(2, generator=3)
    with pytest.raises(ValueError, match="dtype"):
        task.sample(2, generator=gen, dtype=torch.int32)


@pytest.mark.gpu
def test_sampling_on_cuda():
    g = torch.Generator(device="cuda").manual_seed(0)
    task = QSTR(N=64, d=3, link=SqNorm(q=2, d=3))
    p = task.sample(8, generator=g)
    assert p.x.device.type == "cuda" and p.y.device.type == "cuda"
    with pytest.raises(ValueError, match="lives on cuda"):
        task.sample(8, generator=g, device="cpu")


def test_sample_bytes_hand_value_and_bad_input():
    task = QSTR(N=10, d=3, link=SqNorm(q=2, d=3))
    # per position: 4 bytes x (3 + 2 * 2 * 3 + 1) floats + 8 x 2 longs = 64 + 16
    assert task.sample_bytes(5) == 5 * 10 * 80
    assert task.sample_bytes(5, torch.float64) == 5 * 10 * (8 * 16 + 16)
    for bad in (dict(B=0), dict(B=2.5), dict(B=2, dtype=torch.int64)):
        with pytest.raises(ValueError):
            task.sample_bytes(**bad)


@settings(max_examples=60, deadline=None)
@given(prompts(max_N=10, max_d=3, max_q=3, max_B=3))
def test_prompt_accessors_agree_with_the_tensors(case):
    """(B, N) = x's leading shape, selected()[b, i, k] = x[b, t_bik], task.label(x, t) = y, and
    task.sample_bytes = the bytes of x, twice the gathered tokens, y and t (from data-model)."""
    task, p = case
    assert (p.B, p.N) == tuple(p.x.shape[:2])
    direct = p.x[torch.arange(p.B)[:, None, None], p.t]
    assert torch.equal(p.selected(), direct)
    tol = 1e-5 if p.x.dtype == torch.float32 else 1e-12
    assert torch.allclose(task.label(p.x, p.t), p.y, rtol=tol, atol=tol)
    counted = p.x.nbytes + 2 * p.selected().nbytes + p.y.nbytes + p.t.nbytes
    assert task.sample_bytes(p.B, p.x.dtype) == counted


def test_moment_report_fields_as_asked():
    """moment_check's report (from assumption-1): C_x, C_y = the largest ratios, s, the orders and
    the sample count as asked; holds(C_x, C_y) is Assumption 1 with those constants, met at the
    measured constants and not just below either; default orders (1, 2, 4, 8), s = 1."""
    orders = (1.0, 2.0, 3.0, 4.0)
    link = make_link("linear", 1, 4, generator=torch.Generator().manual_seed(14))
    task = QSTR(N=64, d=4, link=link)
    rep = moment_check(task, B=400, generator=torch.Generator().manual_seed(24), orders=orders)
    assert rep.C_x == max(mx for _, mx, _ in rep.per_order)
    assert rep.C_y == max(my for *_, my in rep.per_order)
    assert rep.s == 1.0 and rep.orders == orders and rep.samples == 400 * 64
    assert rep.holds(1.0, rep.C_y) and not rep.holds(0.999 * rep.C_x, 2 * rep.C_y + 1)
    assert not rep.holds(1.0, 0.999 * rep.C_y)
    default = moment_check(task, B=8, generator=torch.Generator().manual_seed(29))
    assert default.orders == (1.0, 2.0, 4.0, 8.0) and default.s == 1.0
