"""The Prop 26 transition (constructions/transition.py): the weights, the closed form and the
dense layers built at the parameters qstr.bounds.transition picks (its guarantee:
tests/bounds/test_recurrent.py), the builder from given parameters, and the altered copies
(``Transition.with_threshold``, ``Transition.with_layers``) through which the prop-26 claim builds
its broken transitions (verify/claims/prop_26.py)."""

import pytest
import torch

import qstr.constructions.transition as transition
from qstr.bounds.transition import prop26_transition
from qstr.constructions.codes import Codebook, rs_hadamard_codebook
from qstr.constructions.relu import gate_bands
from qstr.constructions.transition import transition_weights
from tests.fixtures import rotated, seeded

F64 = torch.float64


def all_pairs(tr, book, x):
    """z for every (i, j) pair in slot 0 (slot l uses j + 5 l): returns z, hit (P, q)."""
    N, q = book.N, tr.q
    i, j = (v.flatten() for v in torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij"))
    t = torch.stack([(j + 5 * l) % N for l in range(q)], 1)
    om = book.omega.to(F64)
    z = torch.cat([x[: i.numel()], om[i]] + [om[t[:, l]] for l in range(q)], 1)
    return z, t == i[:, None]


@pytest.mark.parametrize("kind", ["rs-hadamard", "rotated"])
def test_transition_exact_zeros_and_target_error(book64, kind):
    book = book64 if kind == "rs-hadamard" else rotated(book64)
    d, q, r_x = 3, 2, 2.0
    tr = prop26_transition(book, d, q, eps=0.1, r_x=r_x)
    gu = tr.guarantee
    assert gu.eps <= 0.1 and gu.product_certificate == (
        "alphabet" if kind == "rs-hadamard" else "uniform"
    )
    P = book.N**2
    x = torch.randn(P, d, generator=seeded(1), dtype=F64)
    x = x / x.norm(dim=1, keepdim=True) * r_x  # boundary of the ball
    z, hit = all_pairs(tr, book, x)
    u = torch.cat([torch.randn(P, q * d, generator=seeded(2), dtype=F64), z], 1)  # h is ignored
    out = tr.dense(u, chunk=1024).view(P, q, d)
    assert int((out[~hit] != 0).sum()) == 0  # EXACT zeros off target (Prop 26, case 2)
    err = (out - x[:, None, :]).abs()[hit]
    assert float(err.max()) <= gu.eps
    assert torch.allclose(out.flatten(1), tr(z), atol=1e-10)  # closed form == literal layers


def test_transition_layers_shapes_and_h_columns(book64):
    tr = prop26_transition(book64, 2, 3, eps=0.2, r_x=1.5)
    L = tr.layers
    assert [layer.b is not None for layer in L] == [True] * 3 + [False]
    w1, w2, w3 = tr.widths
    n_u = tr.d_h + tr.D_in
    assert L[0].W.shape == (w1, n_u) and L[1].W.shape == (w2, w1)
    assert L[2].W.shape == (w3, w2) and L[3].W.shape == (tr.d_h, w3)
    assert L.widths == (w1, w2, w3) and (L.in_dim, L.out_dim) == (n_u, tr.d_h)
    assert bool((L[0].W[:, : tr.d_h] == 0).all())  # f does not read h
    assert tr.guarantee.widths == (w1, w2, w3, tr.d_h)
    for layer, norms in zip(L, tr.guarantee.norms, strict=True):
        assert norms["fro"] == pytest.approx(float(layer.W.norm()))
        assert norms["max_abs"] == pytest.approx(float(layer.W.abs().max()))
        assert norms["bias_norm"] == pytest.approx(
            float(layer.b.norm()) if layer.b is not None else 0.0
        )


def test_closed_form_equals_layers_off_codebook(book64):
    tr = prop26_transition(rotated(book64, 3), 2, 2, eps=0.3, r_x=2.0)
    z = torch.randn(
        500, tr.D_in, generator=seeded(4), dtype=F64
    )  # not codewords: only the function matters
    u = torch.cat([torch.zeros(500, tr.d_h, dtype=F64), z], 1)
    assert torch.allclose(tr.dense(u), tr(z), atol=1e-9)
    assert torch.allclose(tr.dense(u, rectify=False), tr(z, rectify=False), atol=1e-9)


def test_dropping_layers_3_4_leaks_at_coherence_half():
    book = rotated(rs_hadamard_codebook(16384, dtype=F64), 7)  # mu = 1/2 attained, generic entries
    tr = prop26_transition(book, 2, 1, eps=0.1, r_x=2.0)
    om = book.omega
    t = om[8192]
    s = om @ t
    at_half = ((s - 0.5).abs() < 1e-9).nonzero().flatten()
    x = torch.tensor([[2.0, 0.0]], dtype=F64).expand(at_half.numel(), 2)
    z = torch.cat([x, om[at_half], t.expand(at_half.numel(), -1)], 1)
    assert bool((tr(z) == 0).all())
    leak = tr(z, rectify=False)
    assert int((leak != 0).any(1).sum()) > 10  # the gate alone is not exactly zero there
    assert float(leak.abs().max()) <= tr.guarantee.threshold  # ... but within the certified b


def test_transition_errors(book64):
    tr = prop26_transition(book64, 2, 1, eps=0.1, r_x=1.0)
    with pytest.raises(ValueError, match="D_in"):
        tr(torch.zeros(3, tr.D_in + 1, dtype=F64))
    with pytest.raises(ValueError, match="NaN"):
        tr(torch.full((1, tr.D_in), float("nan"), dtype=F64))
    with pytest.raises(ValueError, match="last axis"):
        tr.dense(torch.zeros(1, tr.D_in, dtype=F64))


def test_transition_for_a_low_coherence_code_with_approximate_products():
    """mu = 1/8 < 1/2, generic entries: the products' budget comes from the dA branch (the mu ~ 1/2
    branch dB would spend delta_1 = 0.25 and leave the gate nothing: it used to raise "eps = 0.1 is
    too small")."""
    book = rs_hadamard_codebook(64, mu=0.25, dtype=F64)
    Q, _ = torch.linalg.qr(
        torch.randn(book.d_e, book.d_e, generator=torch.Generator().manual_seed(0), dtype=F64)
    )
    rotated = Codebook(book.omega @ Q, book.mu, "custom", {})
    g = prop26_transition(rotated, 2, 2, eps=0.1, r_x=2.5).guarantee
    assert g.product_certificate == "uniform" and g.eps <= 0.1
    assert g.inner_product_error <= 0.1 / (4 * 2.5) - g.norm_defect  # the dA target


def test_transition_widths_and_norms_record_are_its_dense_layers(transitions):
    """Widths (2d + 2q d_e K1, q K2 (d + 1), 2qd, qd) of docs/derivations/rnn-transition.md,
    section 4, in ``Transition.widths``, the guarantee and the dense layers; the reported norms
    are theirs."""
    for _, tr in transitions:
        g = tr.guarantee
        sizes = tuple(int(layer.W.shape[0]) for layer in tr.layers)
        derived = (
            2 * g.d + 2 * g.q * g.d_e * g.product_knots,
            g.q * g.gate_knots * (g.d + 1),
            2 * g.q * g.d,
            g.q * g.d,
        )
        assert sizes == tuple(g.widths) == derived and sizes[:-1] == tuple(tr.widths)
        assert len(g.norms) == len(sizes)
        for rep, layer in zip(g.norms, tr.layers, strict=True):
            W, b = layer
            measured = {
                "fro": float(W.norm()),
                "max_abs": float(W.abs().max()),
                "bias_norm": 0.0 if b is None else float(b.norm()),
            }
            for key, value in measured.items():
                assert rep[key] == pytest.approx(value, rel=1e-9, abs=1e-300), key


def test_transition_dense_without_rectifier_batches_and_empty_batch(transitions):
    """``dense(u, rectify=False)`` equals the closed form's gate; ``dense`` keeps leading axes
    ((2, m, D) gives the rows of (2m, D)) and an empty batch keeps the output width."""
    for book, tr in transitions:
        gen = seeded(7)
        N = book.N
        i, t = torch.randint(N, (64,), generator=gen), torch.randint(N, (64, 2), generator=gen)
        om = book.omega.to(F64)
        z = torch.cat(
            [torch.randn(64, 3, generator=gen, dtype=F64)] + [om[i], om[t[:, 0]], om[t[:, 1]]], 1
        )
        u = torch.cat([torch.randn(64, tr.d_h, generator=gen, dtype=F64), z], 1)
        assert float((tr.dense(u, rectify=False) - tr(z, rectify=False)).abs().max()) <= 1e-9
        dense = tr.dense(u)
        assert float((tr.dense(u.view(2, 32, -1)) - dense.view(2, 32, -1)).abs().max()) <= 1e-12
        assert tuple(tr.dense(u[:0]).shape) == (0, dense.shape[-1])


def test_transition_weights_are_the_certified_transition_at_its_parameters(transitions):
    """transition_weights at the knots, bands and threshold prop26_transition picked: the same
    dense layers, the product flag of the guarantee's certificate, and no guarantee attached."""
    for book, tr in transitions:
        bare = transition_weights(
            book, tr.d, tr.q, product_knots=tr.product_knots, bands=tr.bands, threshold=tr.threshold
        )
        assert bare.guarantee is None and tr.guarantee is not None
        assert bare.exact_products == (tr.guarantee.product_certificate == "alphabet")
        for A, B in zip(tr.layers, bare.layers, strict=True):
            assert torch.equal(A.W, B.W) and (A.b is B.b is None or torch.equal(A.b, B.b))


def test_transition_weights_errors(book64):
    bands = gate_bands(1.0, 4, 1.5)
    with pytest.raises(ValueError, match="all zeros"):
        transition_weights(
            torch.zeros(8, 4, dtype=F64), 2, 1, product_knots=3, bands=bands, threshold=0.1
        )
    with pytest.raises(ValueError, match="product_knots"):
        transition_weights(book64, 2, 1, product_knots=1, bands=bands, threshold=0.1)
    with pytest.raises(ValueError, match="bands"):
        transition_weights(book64, 2, 1, product_knots=3, bands=None, threshold=0.1)
    with pytest.raises(ValueError, match="threshold"):
        transition_weights(book64, 2, 1, product_knots=3, bands=bands, threshold=-0.1)
    with pytest.raises(ValueError, match="omega"):
        transition_weights(torch.zeros(4), 2, 1, product_knots=3, bands=bands, threshold=0.1)


def test_dense_layers_memory_check_counts_every_float64_entry(monkeypatch):
    """The memory guard before the dense layers are built is asked for exactly their bytes: W1,
    W2, W3 = [G; -G], W4 and the gate readout G, float64."""
    asked = []
    monkeypatch.setattr(
        transition.validate, "fits_in_memory", lambda what, nbytes, device: asked.append(nbytes)
    )
    book = rs_hadamard_codebook(16, dtype=torch.float64)
    tr = prop26_transition(book, 2, 2, eps=0.2, r_x=1.5)
    dense = tr.layers
    G = tr.layers_without_rectifier()[-1].W
    assert asked == [8 * (sum(L.W.numel() for L in dense) + G.numel())]


# ------------------------------------------------ the altered copies


@pytest.fixture(scope="module")
def rotated_case(transitions):
    """The transition on the rotated RS-Hadamard code (approximate products; tests/conftest.py),
    and 32 inputs z and u = (h, z) on it (tokens in the r_x ball's cube, h = 0)."""
    book, tr = transitions[1]
    g = seeded(26)
    i, t = torch.randint(64, (32,), generator=g), torch.randint(64, (32, 2), generator=g)
    om = book.omega
    x = torch.randn(32, 3, generator=g, dtype=F64)
    z = torch.cat([x, om[i], om[t[:, 0]], om[t[:, 1]]], 1)
    u = torch.cat([torch.zeros(32, tr.d_h, dtype=F64), z], 1)
    return tr, z, u


def test_with_threshold_subtracts_the_new_threshold_and_zero_passes_the_gate(rotated_case):
    """At threshold 0 layers 3-4 pass the gate G unchanged (closed form and dense layers); a
    threshold 3 b is layer 3's bias; the guarantee rides along and the original is untouched."""
    tr, z, u = rotated_case
    before = tr.dense(u)
    gate = tr.with_threshold(0.0)
    assert gate is not tr and gate.guarantee is tr.guarantee and gate.threshold == 0.0
    assert torch.equal(gate(z), tr(z, rectify=False))
    assert float((gate.dense(u) - tr.dense(u, rectify=False)).abs().max()) <= 1e-12
    high = tr.with_threshold(3 * tr.threshold)
    assert torch.equal(high.layers[2].b, torch.full_like(tr.layers[2].b, -3 * tr.threshold))
    assert float((high(z) - high.dense(u)).abs().max()) <= 1e-9
    with pytest.raises(ValueError, match="threshold"):
        tr.with_threshold(-1.0)
    assert tr.threshold > 0 and torch.equal(tr.dense(u), before)


def test_with_layers_swaps_the_dense_layers_only(rotated_case):
    """A copy with layer 3 halved: its dense layers (and gate readout, layer 3's top rows) are the
    given ones, its closed form and guarantee the original's; other shapes are refused."""
    tr, z, u = rotated_case
    L = tr.layers
    half = tr.with_layers(L.replace_layer(2, W=L[2].W / 2))
    assert half is not tr and half.guarantee is tr.guarantee and torch.equal(half(z), tr(z))
    assert torch.equal(half.layers[2].W, L[2].W / 2) and tr.layers is L
    readout = half.layers_without_rectifier()[2].W
    assert torch.equal(readout, tr.layers_without_rectifier()[2].W / 2)
    gap = half.dense(u, rectify=False) - tr.dense(u, rectify=False) / 2
    assert float(gap.abs().max()) <= 1e-12
    with pytest.raises(ValueError, match="shapes"):
        tr.with_layers(tr.layers_without_rectifier())  # three layers, not four
