"""Tests for verify/training/streams.py: the online stream of training prompts."""

import torch

from qstr.constructions.links import make_link
from qstr.constructions.task import QSTR
from qstr.verify.training import OnlineStream


def test_online_stream_does_not_depend_on_request_size():
    task = QSTR(5, 3, make_link("linear", 1, 3, generator=torch.Generator().manual_seed(0)))
    a = OnlineStream(task, torch.Generator().manual_seed(1), chunk=50)
    b = OnlineStream(task, torch.Generator().manual_seed(1), chunk=50)
    xs = [a.draw(8)[0] for _ in range(20)]
    xb = b.draw(160)[0]
    assert torch.equal(torch.cat(xs), xb) and a.consumed == b.consumed == 160
