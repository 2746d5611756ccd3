"""constructions/exact_rnn.py: the exact four-layer RNN of Theorem 7's class."""

import math

import pytest
import torch

from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.exact_rnn import exact_rnn, exact_transition_layers
from qstr.constructions.links import make_link
from qstr.constructions.task import gather_tokens

F64 = torch.float64


@pytest.fixture
def parts():
    g = torch.Generator().manual_seed(1)
    return rs_hadamard_codebook(32, dtype=F64), make_link("teacher", 3, 2, generator=g), g


def test_the_module_computes_g_at_every_position_and_leaves_states_unclipped(parts):
    book, link, g = parts
    r_x, N, B = 3.0, 32, 4
    m = exact_rnn(book, 2, link.two_layer_net(), r_x=r_x, mu=0.5)
    assert m.r_h == pytest.approx(math.sqrt(3) * r_x)
    x = torch.randn(B, N, 2, generator=g, dtype=F64)
    x = x * torch.clamp(r_x / x.norm(dim=-1, keepdim=True), max=1.0)
    t = torch.randint(0, N, (B, 3), generator=g)[:, None].expand(B, N, 3).contiguous()
    with torch.no_grad():
        y = m(rnn_encoding(x, t, book.omega))
    assert float((y - link(gather_tokens(x, t))).abs().max()) < 1e-12


def test_the_transition_outputs_the_token_at_its_target_and_zero_elsewhere():
    book = rs_hadamard_codebook(16, dtype=F64)
    f = exact_transition_layers(2, 1, book.omega.shape[1], mu=0.5, r_x=2.0)
    x = torch.tensor([[1.5, -0.5]], dtype=F64)
    for i, t in ((3, 3), (3, 4)):
        u = torch.cat(
            [torch.zeros(1, 2, dtype=F64), x, book.omega[i][None], book.omega[t][None]], 1
        )
        want = x if i == t else torch.zeros_like(x)
        assert torch.equal(f(u), want)


def test_codes_off_the_alphabet_or_above_mu_are_refused(parts):
    book, link, _ = parts
    with pytest.raises(ValueError, match=r"\+-1/sqrt\(d_e\)"):
        exact_rnn(book.omega * 1.1, 2, link.two_layer_net(), r_x=1.0, mu=0.5)
    with pytest.raises(ValueError, match="coherence"):
        exact_rnn(book, 2, link.two_layer_net(), r_x=1.0, mu=0.01)
    with pytest.raises(ValueError, match=r"mu must lie in \(0, 1\)"):
        exact_rnn(book, 2, link.two_layer_net(), r_x=1.0, mu=1.0)
    with pytest.raises(ValueError, match="q d columns"):
        exact_rnn(book, 5, link.two_layer_net(), r_x=1.0, mu=0.5)
