"""`qstr sample` draws the link of `qstr construct` at the same seed (docs/commands.md): the
sampled labels are those the construction's weights approximate."""

import pytest
import torch

from qstr.constructions.links import make_link
from qstr.constructions.task import gather_tokens
from qstr.verify.cli import main

SIZES = ["--N", "4", "--d", "2", "--q", "2"]


def _file(tmp_path, name, argv):
    path = tmp_path / name
    assert main([*argv, *SIZES, "--out", str(path)]) == 0
    return torch.load(path, weights_only=True)


@pytest.mark.parametrize(
    "link, construct",
    [("teacher", "transformer"), ("linear", "transformer"), ("teacher", "rnn")],
)
def test_sample_draws_the_link_construct_builds_at_the_same_seed(tmp_path, link, construct):
    sample = _file(tmp_path, "s.pt", ["sample", "--link", link, "--seed", "5"])
    cons = _file(tmp_path, "c.pt", ["construct", construct, "--link", link, "--seed", "5"])
    other = _file(tmp_path, "o.pt", ["construct", construct, "--link", link, "--seed", "6"])
    assert sample["link_params"].keys() == cons["link_params"].keys() != set()
    for key, value in sample["link_params"].items():
        assert torch.equal(value, cons["link_params"][key]), key
        assert not torch.equal(value, other["link_params"][key]), key  # the seed decides it
    # the sampled labels are the construction's link on the prompts (float32, as sampled)
    g = make_link(link, 2, 2, generator=torch.Generator().manual_seed(5))
    y = g(gather_tokens(sample["x"].double(), sample["t"]))
    assert torch.allclose(sample["y"].double(), y, rtol=1e-6, atol=1e-6)
