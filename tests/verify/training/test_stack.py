"""Tests for verify/training/stack.py: batched training (train_stack) against training each model
alone."""

import warnings
from dataclasses import replace

import pytest
import torch

from qstr.verify.training import (
    Member,
    OnlineStream,
    StackOptions,
    fit_until_threshold,
    train_stack,
)
from qstr.verify.training.families import FFNFamily

DT = torch.float64


def max_param_diff(a, b):
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    assert pa.keys() == pb.keys()
    return max(float((pa[k] - pb[k]).detach().abs().max()) for k in pa)


# (kind, published, [(N, q, seed, rnn hidden)]): members differ in N, q and widths, so every
# padded axis is exercised; thresholds make some stop early and others run to the cap.
CASES = [
    ("transformer", False, [(3, 1, 0, 0), (5, 2, 1, 0), (4, 3, 2, 0)]),
    ("transformer", True, [(3, 1, 0, 0), (5, 2, 1, 0)]),
    ("rnn", False, [(3, 1, 0, 6), (5, 2, 1, 9), (4, 1, 2, 4)]),
    ("ffn", False, [(3, 1, 0, 0), (5, 2, 1, 0), (4, 1, 2, 0)]),
    ("ffn", True, [(3, 1, 0, 0), (5, 1, 1, 0)]),
]


@pytest.mark.parametrize("kind,published,specs", CASES)
def test_batched_equals_sequential(kind, published, specs, make_member):
    """Stacked training of padded members reproduces torch.optim.AdamW on each nn.Module alone."""

    def members():
        return [
            make_member(kind, N, q, s, published=published, hidden=h or 6) for N, q, s, h in specs
        ]

    opts = StackOptions(batch_size=8, check_every=3, max_steps=24, prefetch=5, return_models=True)
    batched = train_stack(members(), opts)
    alone = [fit_until_threshold(m, batch_size=8, check_every=3, max_steps=24) for m in members()]
    for a, b in zip(batched, alone, strict=True):
        assert a.tag == b.tag
        assert (a.steps, a.samples, a.reached) == (b.steps, b.samples, b.reached)
        assert a.test_mse == pytest.approx(b.test_mse, abs=1e-9)
        assert [s for s, _ in a.curve] == [s for s, _ in b.curve]
        assert max_param_diff(a.model, b.model) < 1e-6


def test_batched_equals_sequential_simple_variant_and_per_member_lr(make_member):
    """Simple-qSTR FFN input, and per-member learning rates (explicit, non-fused AdamW path)."""

    def members():
        ms = [make_member("ffn", N, 1, s, variant="simple") for N, s in ((3, 0), (6, 1))]
        ms[1].lr = 3e-3
        return ms

    batched = train_stack(
        members(), StackOptions(batch_size=8, check_every=4, max_steps=16, return_models=True)
    )
    alone = [fit_until_threshold(m, batch_size=8, check_every=4, max_steps=16) for m in members()]
    for a, b in zip(batched, alone, strict=True):
        assert (a.steps, a.samples) == (b.steps, b.samples)
        assert max_param_diff(a.model, b.model) < 1e-6


def test_member_at_threshold_stops_consuming_samples(make_member):
    """A member below its threshold at the first check stops there; the others go on."""
    easy = make_member("ffn", 3, 1, 0, threshold=100.0)  # any test MSE is below 100
    hard = make_member("ffn", 4, 1, 1, threshold=-1.0)  # never reached
    res = train_stack(
        [easy, hard], StackOptions(batch_size=8, check_every=5, max_steps=30, prefetch=1)
    )
    assert (res[0].steps, res[0].samples, res[0].reached) == (5, 40, True)
    assert easy.stream.consumed == 40  # prefetch=1: exactly the prompts it trained on
    assert (res[1].steps, res[1].samples, res[1].reached) == (30, None, False)
    assert hard.stream.consumed == 30 * 8
    assert res[0].consumed == 40 and res[1].consumed == 240


def test_out_of_memory_in_the_test_evaluation_halves_the_chunks(make_member, monkeypatch):
    """A device out of memory during a check retries it in smaller chunks: same curve, and the
    check is not skipped; an evaluation that fails one prompt at a time raises."""

    def run():
        members = [make_member("ffn", 4, 1, s, threshold=-1.0) for s in (0, 1)]
        return train_stack(
            members, StackOptions(batch_size=8, check_every=5, max_steps=10, eval_elements=10**6)
        )

    honest = run()
    plain, seen = FFNFamily.evaluate, []

    def tight(self, P, meta, x, t):
        seen.append(x.shape[1])
        if x.shape[1] > 7:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (planted)")
        return plain(self, P, meta, x, t)

    monkeypatch.setattr(FFNFamily, "evaluate", tight)
    retried = run()
    first_fit = next(i for i, v in enumerate(seen) if v <= 7)
    assert seen[0] == 40 and all(v <= 7 for v in seen[first_fit:])  # smaller chunks stay
    assert sum(seen[first_fit:]) == 2 * 40  # two checks, each over all 40 test prompts
    for a, b in zip(honest, retried, strict=True):
        assert [s for s, _ in a.curve] == [s for s, _ in b.curve] == [5, 10]
        assert a.test_mse == pytest.approx(b.test_mse, rel=1e-12)
    monkeypatch.setattr(
        FFNFamily,
        "evaluate",
        lambda *a: (_ for _ in ()).throw(
            torch.cuda.OutOfMemoryError("CUDA out of memory (planted)")
        ),
    )
    with pytest.raises(torch.cuda.OutOfMemoryError):
        run()


def test_sample_complexity_accounting(make_member):
    """samples = steps * batch at the FIRST check whose test MSE is below the threshold."""
    m = replace(make_member("transformer", 4, 1, 3, threshold=0.95), lr=2e-2)
    r = train_stack([m], StackOptions(batch_size=16, check_every=4, max_steps=200))[0]
    assert r.reached and r.steps % 4 == 0 and r.samples == r.steps * 16
    assert r.curve[-1][0] == r.steps and r.curve[-1][1] < 0.95 and r.test_mse == r.curve[-1][1]
    assert all(v >= 0.95 for _, v in r.curve[:-1])
    assert [s for s, _ in r.curve] == list(range(4, r.steps + 1, 4))


@pytest.mark.gpu
@pytest.mark.parametrize("kind,published,specs", CASES)
def test_batched_equals_sequential_cuda(kind, published, specs, make_member):
    """The same equivalence with everything on CUDA (float64): the stack replays CUDA graphs and
    (RNN) runs torch's fused GRU cell; the reference is each nn.Module with torch.optim.AdamW."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")

    def members():
        return [
            _to_cuda(make_member(kind, N, q, s, published=published, hidden=h or 6))
            for N, q, s, h in specs
        ]

    batched = train_stack(
        members(), StackOptions(batch_size=8, check_every=3, max_steps=12, return_models=True)
    )
    alone = [fit_until_threshold(m, batch_size=8, check_every=3, max_steps=12) for m in members()]
    for a, b in zip(batched, alone, strict=True):
        assert a.steps == b.steps
        diff = max_param_diff(a.model, b.model)
        assert diff < 1e-6, diff


def _to_cuda(m: Member) -> Member:
    """A member moved to CUDA, its training prompts drawn there (seeded like the CPU stream)."""
    m.model.to("cuda")
    m.omega = m.omega.cuda()
    m.test = tuple(v.cuda() for v in m.test)
    m.stream = OnlineStream(m.stream.task, torch.Generator(device="cuda").manual_seed(7), dtype=DT)
    return m


@pytest.mark.gpu
@pytest.mark.parametrize("kind,published,specs", CASES)
def test_cuda_graph_replay_equals_eager(kind, published, specs, make_member):
    """Every family on CUDA: steps replayed as CUDA graphs (re-recorded as members finish at
    different steps) give the eager trajectory: same stopping steps, same weights."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")

    def members():
        out = []
        for N, q, seed, h in specs:
            kw = {"hidden": h} if kind == "rnn" else {}
            out.append(
                _to_cuda(make_member(kind, N, q, seed, published=published, threshold=0.9, **kw))
            )
        out[
            0
        ].threshold = 1e9  # stops at the first check: the stack shrinks, the graph is re-recorded
        return out

    kw = dict(batch_size=8, check_every=3, max_steps=30, return_models=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphed = train_stack(members(), StackOptions(graphs=True, **kw))
    # the replays really ran: a stack that gave up recording would pass the comparison below
    gave_up = [str(w.message) for w in caught if "CUDA graph" in str(w.message)]
    assert not gave_up, gave_up
    eager = train_stack(members(), StackOptions(graphs=False, **kw))
    assert eager[0].steps == 3 and max(r.steps for r in eager) > 3
    for a, b in zip(graphed, eager, strict=True):
        assert (a.steps, a.reached) == (b.steps, b.reached)
        diff = max_param_diff(a.model, b.model)
        assert diff < 1e-6, diff
