"""Fixtures shared by the tests of verify/training: one CPU thread, and a small member to train."""

import math

import pytest
import torch

from qstr.constructions.codes import experimental_codebook
from qstr.constructions.experiment_models import build_practical
from qstr.constructions.links import make_link
from qstr.constructions.published_models import BiasedTransformer, EncodedFFN
from qstr.constructions.task import QSTR
from qstr.verify.training import Member, OnlineStream

DT = torch.float64
D = 4
N_TEST = 40  # test prompts of every member
CHUNK = 96  # prompts its stream draws at once


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models: one CPU thread is as fast, and far faster on a busy machine."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _make_member(
    kind,
    N,
    q,
    seed,
    *,
    variant="general",
    published=False,
    threshold=0.9,
    hidden=6,
):
    g = torch.Generator().manual_seed(seed)
    task = QSTR(N, D, make_link("linear", q, D, generator=g), variant=variant)
    book = experimental_codebook(N, generator=g, dtype=DT)
    kw = dict(generator=g, dtype=DT)
    D_e = D + (q + 1) * book.d_e
    c = 1.0
    if kind == "transformer":
        c = math.sqrt(D / q)
        if published:
            model = BiasedTransformer(D_e, q, 8, **kw)
        else:
            model = build_practical("transformer", N=N, d=D, q=q, d_e=book.d_e, width=8, **kw)
    elif kind == "rnn":
        model = build_practical("rnn", N=N, d=D, q=q, d_e=book.d_e, hidden=hidden, **kw)
    elif published:
        model = EncodedFFN(N, D_e, (7, 5), **kw)
    else:
        model = build_practical(
            "ffn", N=N, d=D, q=q, d_e=book.d_e, hidden=(7, 5), task=variant, **kw
        )
    test = task.sample(N_TEST, generator=torch.Generator().manual_seed(seed + 1000), dtype=DT)
    stream = OnlineStream(task, torch.Generator().manual_seed(seed + 2000), dtype=DT, chunk=CHUNK)
    return Member(
        model=model,
        stream=stream,
        test=(test.x, test.t, test.y),
        omega=book.omega,
        c=c,
        threshold=threshold,
        lr=1e-2,
        weight_decay=0.1,
        tag=(kind, N, q, seed),
    )


@pytest.fixture
def make_member():
    """make_member(kind, N, q, seed, ...): a Member on linear-link qSTR with d = 4 (float64), its
    model a practical or published ("transformer", "rnn" or "ffn") net, its test set and stream
    seeded."""
    return _make_member
