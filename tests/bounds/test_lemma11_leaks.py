"""Lemma 11's exact leak per target and the worst target (bounds/lemma11_leaks.py), and their old
path in constructions/attention.py (issue 56)."""

import functools

import pytest
import torch

from qstr.bounds.attention import lemma11
from qstr.bounds.lemma11_leaks import target_leaks, worst_target
from qstr.constructions import attention
from qstr.constructions.attention import sparse_average_weights
from qstr.constructions.codes import Codebook, rs_hadamard_codebook
from qstr.constructions.links import make_link
from tests.fixtures import via_old_path

F64 = torch.float64


def _head(N: int, seed: int):
    net = make_link("linear", 2, 4, generator=torch.Generator().manual_seed(seed)).two_layer_net()
    return lemma11(N, 4, 2, net, eps=0.05, r_x=3.0)


@pytest.mark.parametrize("chunk", [1, 5, 7, 16])
def test_target_leaks_do_not_depend_on_the_chunk(chunk):
    """target_leaks per target is the same whatever the chunk of targets it computes at once
    (chunk boundaries at 5 and 7 do not divide N = 24; an off-by-one there reads another code's
    self inner product)."""
    cons = _head(24, 14)
    whole = target_leaks(cons, chunk=1024)
    assert torch.allclose(target_leaks(cons, chunk=chunk), whole, rtol=1e-12, atol=0)
    assert float(whole.max()) <= cons.guarantee.leak


def test_target_leaks_is_the_softmax_mass_off_the_target():
    """leak[t] = X / (1 + X), X = sum_{j != t} e^{A (G_tj - G_tt)}, against a direct softmax over
    the Gram row; worst_target is its argmax."""
    cons = _head(16, 13)
    A = cons.alpha * cons.c**2
    G = cons.omega @ cons.omega.T
    P = torch.softmax(A * G, dim=1)
    want = 1 - P.diagonal()
    assert torch.allclose(target_leaks(cons), want, rtol=1e-10, atol=1e-300)
    assert worst_target(cons) == int(want.argmax())


def test_only_a_lemma11_head_is_accepted():
    book = rs_hadamard_codebook(8, mu=0.25)
    with pytest.raises(ValueError, match="Lemma 11 Construction"):
        target_leaks(sparse_average_weights(8, 2, 2, codebook=book, alpha=1.0))
    with pytest.raises(ValueError, match="chunk"):
        target_leaks(_head(8, 1), chunk=0)
    with pytest.raises(ValueError, match="Lemma 11 Construction"):
        worst_target(Codebook.from_tensor(torch.eye(2, dtype=F64)))


def test_old_paths_warn_and_give_the_same_functions():
    """``qstr.constructions.attention.target_leaks`` and ``.separation_limit`` still import, as
    the functions of bounds/, each with one DeprecationWarning naming its new home."""
    for name, home in (
        ("target_leaks", "qstr.bounds.lemma11_leaks"),
        ("separation_limit", "qstr.bounds.sparse_averaging"),
    ):
        fn = via_old_path(functools.partial(getattr, attention, name), f"{home}.{name}")
        assert fn.__module__ == home, (name, fn.__module__)
    with pytest.raises(AttributeError, match="worst_target"):
        attention.worst_target  # noqa: B018 - the attribute access is the test
