"""Tests for constructions/export.py: merged <-> nn.MultiheadAttention, noisy inits, state dicts."""

from __future__ import annotations

import importlib.metadata
import re
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qstr.bounds.attention import lemma11, sparse_average_head
from qstr.bounds.transition import teacher_rnn
from qstr.constructions.attention import lemma11_weights
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.encoding import rnn_encoding, transformer_encoding
from qstr.constructions.experiment_models import PracticalTransformer
from qstr.constructions.export import (
    construction_state,
    from_multihead,
    init_from_construction,
    load_construction_state,
    load_multihead,
    load_rnn,
    logical_parameters,
    to_multihead,
)
from qstr.constructions.links import make_link
from qstr.constructions.paper_models import MergedAttention
from qstr.constructions.provenance import NewerFileWarning, toolkit_version
from qstr.verify.cli import main
from tests.fixtures import seeded

F64 = torch.float64
FAST = settings(max_examples=15, deadline=None)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max()) / (float(b.abs().max()) + 1e-300)


def lemma11_case(q: int, N: int = 32, d: int = 3, seed: int = 0):
    net = make_link("teacher", q, d, generator=seeded(seed)).two_layer_net()
    con = lemma11(N, d, q, net, eps=0.05, r_x=2.0)
    x = torch.randn(2, N, d, dtype=F64, generator=seeded(seed + 1))
    t = torch.randint(N, (2, N, q), generator=seeded(seed + 2))
    return con, x, t


def sparse_case(q: int = 3, N: int = 64, d: int = 3):
    con = sparse_average_head(
        N, d, q, codebook=rs_hadamard_codebook(N, mu=0.15, dtype=F64), r_x=2.0
    )
    x = torch.randn(2, N, d, dtype=F64, generator=seeded(5))
    t = torch.stack([torch.randperm(N, generator=seeded(k))[:q] for k in range(2 * N)]).reshape(
        2, N, q
    )
    return con, x, t


# ================================================================ to_multihead


@pytest.mark.parametrize("q", [1, 2, 3])
def test_to_multihead_reproduces_lemma11(q):
    con, x, t = lemma11_case(q)
    mt = to_multihead(con.model)
    assert (
        isinstance(mt, PracticalTransformer)
        and mt.q == q
        and mt.D_e == con.model.D_e
        and mt.width == con.model.m
    )
    if q == 1:
        assert mt.mha.in_proj_weight is not None  # torch's stacked layout for q = 1
    assert torch.allclose(mt.merged_qk(), con.model.W_QK, rtol=0, atol=1e-12)
    with torch.no_grad():
        Z = con.encode(x, t)
        y = con.predict(x, t)
        assert rel_err(mt(Z), y) <= 1e-9
        assert torch.allclose(mt.attention(Z), con.model.attention(Z), atol=1e-12)


def test_to_multihead_vector_output_sparse_head():
    con, x, t = sparse_case()
    mt = to_multihead(con)  # a Construction is accepted too
    assert mt.out_dim == x.shape[-1]
    with torch.no_grad():
        y = con.predict(x, t)
        assert y.shape == (2, 64, 3)
        assert rel_err(mt(con.encode(x, t)), y) <= 1e-9


# ================================================================ from_multihead


@FAST
@given(
    H=st.integers(1, 3),
    D=st.integers(1, 6),
    m=st.integers(1, 5),
    out_dim=st.integers(1, 3),
    seed=st.integers(0, 10**6),
)
def test_round_trip_merged_mha_merged(H, D, m, out_dim, seed):
    model = MergedAttention(D, H, m, out_dim=out_dim, generator=seeded(seed), dtype=F64)
    with torch.no_grad():
        model.W_QK.mul_(30.0)  # sharp attention, not just the small init
        model.b.normal_(generator=seeded(seed + 1))
    Z = torch.randn(2, 7, D, dtype=F64, generator=seeded(seed + 2))
    back = from_multihead(to_multihead(model))
    assert back.m == m and back.H == H and back.out_dim == out_dim
    assert torch.allclose(back.W_QK, model.W_QK, rtol=1e-13, atol=1e-13)
    assert (
        torch.equal(back.W, model.W)
        and torch.equal(back.a, model.a)
        and torch.equal(back.b, model.b)
    )
    with torch.no_grad():
        assert rel_err(back(Z), model(Z)) <= 1e-9


@pytest.mark.parametrize("q, out_dim", [(1, 1), (3, 1), (2, 4)])
def test_from_multihead_of_trained_like_weights_folds_readout_bias(q, out_dim):
    D = 5
    mt = PracticalTransformer(D, q, width=6, out_dim=out_dim, generator=seeded(q), dtype=F64)
    with torch.no_grad():
        for P in logical_parameters(mt).values():
            P.normal_(generator=seeded(7 + P.numel()))
        mt.readout.bias.fill_(0.3)
    Z = torch.randn(3, 9, D, dtype=F64, generator=seeded(0))
    model = from_multihead(mt)
    assert model.m == 7  # one extra unit carries the bias
    with torch.no_grad():
        assert rel_err(model(Z), mt(Z)) <= 1e-9
        # the merged form really is W_eff = hidden @ out_proj @ blockdiag(V_h)
        Wv = mt.projection_weights()[2]
        W_eff = mt.hidden.weight @ mt.mha.out_proj.weight @ torch.block_diag(*Wv.split(D))
        assert torch.allclose(model.W[:6], W_eff, atol=1e-13)
    with pytest.raises(ValueError, match="readout.bias is nonzero"):
        from_multihead(mt, readout_bias="raise")
    with torch.no_grad():
        mt.readout.bias.zero_()
    assert from_multihead(mt, readout_bias="raise").m == 6
    with pytest.raises(ValueError, match="readout_bias must be"):
        from_multihead(mt, readout_bias="drop")
    with pytest.raises(ValueError, match="PracticalTransformer"):
        from_multihead(MergedAttention(D, 1, 2))
    with (
        torch.no_grad()
    ):  # an out_proj bias (none by default) folds into the hidden bias, before the ReLU
        bias = torch.randn(D * q, dtype=F64, generator=seeded(5))
        mt.mha.out_proj.bias = torch.nn.Parameter(bias)
        assert rel_err(from_multihead(mt)(Z), mt(Z)) <= 1e-9


# ================================================================ init_from_construction


def test_init_from_construction_noise():
    con, x, t = lemma11_case(2, N=64)
    Z = con.encode(x, t)
    with torch.no_grad():
        y = con.predict(x, t)
        exact = init_from_construction(con)
        assert rel_err(exact(Z), y) <= 1e-9
        base = logical_parameters(exact)
        noisy = init_from_construction(con, noise=0.1, generator=seeded(3))
        again = init_from_construction(con.model, noise=0.1, generator=seeded(3))
        other = init_from_construction(con, noise=0.1, generator=seeded(4))
        for name, P in logical_parameters(noisy).items():
            P0 = base[name]
            assert torch.equal(P, logical_parameters(again)[name])  # reproducible
            if float(P0.norm()) == 0:
                assert torch.equal(P, P0)  # zero tensors stay zero (relative noise)
                continue
            assert not torch.equal(P, logical_parameters(other)[name])
            rel = float((P - P0).norm() / P0.norm())
            if P0.numel() >= 200:
                assert 0.08 <= rel <= 0.12, (name, rel)
            else:
                assert 0 < rel <= 0.5, (name, rel)
        assert float((noisy(Z) - y).abs().max()) > 1e-4  # the perturbation reaches the outputs
    assert all(p.requires_grad for p in noisy.parameters())  # trainable
    with pytest.raises(ValueError, match="noise"):
        init_from_construction(con, noise=-0.1)
    with pytest.raises(ValueError, match="generator"):
        init_from_construction(con, noise=0.1, generator=3)
    with pytest.raises(ValueError, match="pass generator"):  # no silent global RNG
        init_from_construction(con, noise=0.1)


# ================================================================ state dicts


@pytest.mark.parametrize("which", ["lemma11-q1", "lemma11-q3", "sparse"])
def test_state_save_load_weights_only(tmp_path, which):
    con, x, t = sparse_case() if which == "sparse" else lemma11_case(int(which[-1]))
    state = construction_state(con)
    path = tmp_path / "construction.pt"
    torch.save(state, path)
    loaded = torch.load(path, weights_only=True)
    assert set(loaded) == {
        "config",
        "omega",
        "W_QK",
        "ffn",
        "mha_state_dict",
        "mha_config",
        "guarantee",
        "layout",
        "versions",
    }
    assert loaded["versions"] == {
        "qstr-toolkit": importlib.metadata.version("qstr-toolkit"),
        "torch": torch.__version__,
    }
    cfg, g = loaded["config"], loaded["guarantee"]
    assert (
        cfg["N"] == con.N
        and cfg["q"] == con.q
        and cfg["H"] == con.H
        and cfg["slots"] == list(con.slots)
    )
    assert cfg["alpha"] == con.alpha and cfg["c"] == con.c and cfg["D_e"] == con.model.D_e
    assert g["error_bound"] == con.guarantee.error_bound and g["mu"] == con.guarantee.mu
    assert isinstance(g["assumptions"], list) and isinstance(g["weight_norms"]["W_QK"], list)
    assert loaded["omega"].shape == (con.N, con.d_e) and torch.equal(loaded["omega"], con.omega)
    assert loaded["layout"] == [[n, s] for n, s in con.layout.blocks]
    model, mt = load_construction_state(loaded)
    Z = con.encode(x, t)
    with torch.no_grad():
        y = con.predict(x, t)
        assert torch.equal(model(Z), y)
        assert rel_err(mt(Z), y) <= 1e-9
    # the stored codes rebuild the encoding

    assert torch.equal(transformer_encoding(x, t, loaded["omega"], c=cfg["c"]), Z)


def test_state_of_weights_without_a_bound(tmp_path):
    """Weights built at a given alpha (no guarantee attached) save and load; ``guarantee`` is
    None."""
    net = make_link("teacher", 2, 2, generator=torch.Generator().manual_seed(0)).two_layer_net()
    con = lemma11_weights(16, 2, 2, net, alpha=3.0)
    torch.save(construction_state(con), tmp_path / "w.pt")
    loaded = torch.load(tmp_path / "w.pt", weights_only=True)
    assert loaded["guarantee"] is None and loaded["config"]["alpha"] == 3.0
    model, _ = load_construction_state(loaded)
    assert torch.equal(model.W_QK, con.model.W_QK)


def test_load_state_validation():
    con, _, _ = lemma11_case(1)
    state = construction_state(con)
    bad = dict(state)
    del bad["ffn"]
    with pytest.raises(ValueError, match="missing keys \\['ffn'\\]"):
        load_construction_state(bad)
    bad = dict(state, mha_config=dict(state["mha_config"], width=3))
    with pytest.raises(ValueError, match="mha_state_dict"):
        load_construction_state(bad)
    with pytest.raises(ValueError, match="Construction"):
        construction_state(con.model)
    with pytest.raises(ValueError, match="state must be a dict"):
        load_construction_state([1, 2])
    for key in (
        "D_e",
        "q",
        "width",
        "out_dim",
    ):  # every mha_config entry is checked, one line naming it
        cfg = {k: v for k, v in state["mha_config"].items() if k != key}
        with pytest.raises(ValueError, match=f"state\\['mha_config'\\] is missing '{key}'"):
            load_construction_state(dict(state, mha_config=cfg))
    for key in ("D_e", "H", "m", "out_dim"):  # and every config entry
        cfg = {k: v for k, v in state["config"].items() if k != key}
        with pytest.raises(ValueError, match=f"state\\['config'\\] is missing '{key}'"):
            load_construction_state(dict(state, config=cfg))
    for key in ("a", "W", "b"):  # and every output-net entry
        ffn = {k: v for k, v in state["ffn"].items() if k != key}
        with pytest.raises(ValueError, match=f"state\\['ffn'\\] is missing '{key}'"):
            load_construction_state(dict(state, ffn=ffn))


@pytest.mark.gpu
def test_to_multihead_on_cuda():
    net = make_link("teacher", 2, 3, generator=seeded(0)).two_layer_net()
    con = lemma11(64, 3, 2, net, eps=0.05, r_x=2.0, device="cuda")
    mt = to_multihead(con.model)
    assert mt.hidden.weight.device.type == "cuda"
    x = torch.randn(2, 64, 3, dtype=F64, device="cuda")
    t = torch.randint(64, (2, 64, 2), device="cuda")
    with torch.no_grad():
        assert rel_err(mt(con.encode(x, t)), con.predict(x, t)) <= 1e-9


def test_load_multihead_from_a_saved_file_in_one_call(tmp_path):
    con, x, t = lemma11_case(2)
    torch.save(construction_state(con), tmp_path / "c.pt")
    mt = load_multihead(tmp_path / "c.pt", dtype=torch.float32)
    assert (
        isinstance(mt.mha, torch.nn.MultiheadAttention) and mt.hidden.weight.dtype == torch.float32
    )
    with torch.no_grad():
        y = mt(con.encode(x, t).float())
        ref = con.predict(x, t)
    assert torch.allclose(y.double(), ref, atol=1e-4 * (1 + float(ref.abs().max())))
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a construction file"):
        load_multihead(tmp_path / "junk.pt")


def test_init_from_construction_casts_to_the_prompts_dtype():
    con, x, t = lemma11_case(1)
    mt = init_from_construction(con, noise=0.0, dtype=torch.float32)
    with torch.no_grad():
        assert mt(con.encode(x, t).float()).dtype == torch.float32


def test_load_rnn_from_a_file_written_by_the_cli_in_one_call(tmp_path):
    """`qstr construct rnn` -> load_rnn: the module answers like the construction, its codebook
    rides along."""
    assert (
        main(
            [
                "construct",
                "rnn",
                "--N",
                "16",
                "--d",
                "2",
                "--q",
                "2",
                "--out",
                str(tmp_path / "r.pt"),
            ]
        )
        == 0
    )
    rnn = load_rnn(tmp_path / "r.pt")
    cons = teacher_rnn(16, 2, 2)
    g = torch.Generator().manual_seed(3)
    x, t = torch.randn(3, 16, 2, generator=g, dtype=F64), torch.randint(16, (3, 16, 2), generator=g)
    assert torch.equal(rnn.omega, cons.omega.to(rnn.omega))
    with torch.no_grad():
        assert (rnn(rnn_encoding(x, t, rnn.omega)) - cons.predict(x, t)).abs().max() <= 1e-10
    assert load_rnn(tmp_path / "r.pt", dtype=torch.float32).omega.dtype == torch.float32
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not an RNN file"):
        load_rnn(tmp_path / "junk.pt")


def test_export_options_as_documented_on_a_reloaded_construction(tmp_path):
    """Software facts the export-roundtrip claim once folded in (Appendix A.1): noise 0 is the
    export itself, logical_parameters covers every parameter (with an out_proj bias and a readout
    bias c), c folds into exactly one extra unit and readout_bias='raise' refuses it, the reloaded
    module is a torch nn.MultiheadAttention, and the float32 loaders hold every parameter in
    float32."""
    con, x, t = lemma11_case(2, N=16, d=2)
    exact = logical_parameters(init_from_construction(con, noise=0.0))
    exported = logical_parameters(to_multihead(con.model))
    assert exact.keys() == exported.keys()
    assert all(torch.equal(exact[k], exported[k]) for k in exact)
    torch.save(construction_state(con), tmp_path / "c.pt")
    mt = load_multihead(tmp_path / "c.pt")
    assert isinstance(mt.mha, torch.nn.MultiheadAttention)
    with torch.no_grad():
        mt.readout.bias.fill_(0.25)
        E = mt.q * mt.D_e
        mt.mha.out_proj.bias = torch.nn.Parameter(torch.linspace(-0.1, 0.1, E, dtype=F64))
    count = sum(p.numel() for p in logical_parameters(mt).values())
    assert count == sum(p.numel() for p in mt.parameters())
    assert from_multihead(mt).m == con.model.m + 1
    with pytest.raises(ValueError, match="readout.bias is nonzero"):
        from_multihead(mt, readout_bias="raise")
    for m32 in (
        load_multihead(tmp_path / "c.pt", dtype=torch.float32),
        init_from_construction(con, dtype=torch.float32),
    ):
        assert all(p.dtype == torch.float32 for p in m32.parameters())


def test_init_noise_moves_each_large_tensor_by_its_share():
    """init_from_construction(noise=0.1) on the export-roundtrip claim's Lemma 11 construction
    (N = 128, d = 3, q = 3): each tensor of >= 100 entries moves by 0.1 ||P||_F within 20%."""
    net = make_link("teacher", 3, 3, generator=seeded(50)).two_layer_net()
    con = lemma11(128, 3, 3, net, eps=0.05, r_x=3.0)
    exact = logical_parameters(init_from_construction(con, noise=0.0))
    noisy = logical_parameters(init_from_construction(con, noise=0.1, generator=seeded(53)))
    with torch.no_grad():
        rel = {
            k: float((noisy[k] - P).norm() / P.norm())
            for k, P in exact.items()
            if P.numel() >= 100 and P.norm() > 0
        }
    assert rel and all(0.8 <= r / 0.1 <= 1.2 for r in rel.values()), rel
    assert all(bool((noisy[k] == 0).all()) for k, P in exact.items() if bool((P == 0).all()))


@pytest.mark.parametrize("load", [load_multihead, load_rnn])
def test_a_load_that_fails_says_its_real_cause(tmp_path, monkeypatch, load):
    """Issue 52: a missing file and an unavailable device were both 'not a construction file'."""
    what = "a construction file" if load is load_multihead else "an RNN file"
    torch.save({"omega": torch.zeros(2)}, tmp_path / "c.pt")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(ValueError) as err:
        load(tmp_path / "missing.pt")
    assert str(err.value) == f"{tmp_path / 'missing.pt'}: no such file"
    with pytest.raises(ValueError) as err:
        load(tmp_path / "junk.pt")
    assert str(err.value) == f"{tmp_path / 'junk.pt'} is not {what} written by torch.save (error)"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError) as err:
        load(tmp_path / "c.pt", device="cuda")
    assert str(err.value) == "device=cuda requested but CUDA is not available on this machine"

    def saved_on_cuda(*args, **kwargs):  # what torch.load says of CUDA tensors on a CPU machine
        raise RuntimeError(
            "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is "
            "False. If you are running on a CPU-only machine, please use torch.load with ..."
        )

    monkeypatch.setattr(torch, "load", saved_on_cuda)
    with pytest.raises(ValueError) as err:
        load(tmp_path / "c.pt")
    assert str(err.value) == (
        f"{tmp_path / 'c.pt'} holds CUDA tensors but CUDA is not available on this machine; "
        "pass device='cpu'"
    )


def _newer(version: str) -> str:
    """``version`` with its minor number raised by one: a toolkit newer than it."""
    major, minor = (int(p) for p in version.split(".")[:2])
    return f"{major}.{minor + 1}.0"


def _silently(load, *args):
    """``load(*args)``, failing on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load(*args)


def test_a_file_from_a_newer_toolkit_says_so_on_load(tmp_path):
    """A construction file records the toolkit and torch that wrote it; one written by a newer
    toolkit loads with a NewerFileWarning naming both versions (and the file); one it cannot read
    is the one-line ValueError of any bad file, naming the newer toolkit; an older or equal
    toolkit, or a file without versions (written before they were recorded), loads silently."""
    ours = toolkit_version()
    assert ours != "unknown"  # the suite runs on an installed toolkit
    con, _, _ = lemma11_case(1)
    state = construction_state(con)
    newer = _newer(ours)
    from_newer = dict(state, versions={"qstr-toolkit": newer, "torch": "9.0"})
    with pytest.warns(NewerFileWarning, match=f"qstr-toolkit {newer}, newer than this {ours}"):
        load_construction_state(from_newer)
    torch.save(from_newer, tmp_path / "new.pt")
    torch.save(state, tmp_path / "ours.pt")
    with pytest.warns(NewerFileWarning, match=f"{tmp_path / 'new.pt'} was written by qstr-toolkit"):
        mt = load_multihead(tmp_path / "new.pt")
    same = _silently(load_multihead, tmp_path / "ours.pt")
    assert torch.equal(mt.hidden.weight, same.hidden.weight)  # read as this toolkit reads it
    cut = {k: v for k, v in from_newer.items() if k != "ffn"}  # a format this one cannot read
    note = f"(written by qstr-toolkit {newer}, newer than this {ours}: upgrade)"
    with pytest.raises(ValueError, match=re.escape(f"missing keys ['ffn'] {note}") + "$"):
        load_construction_state(cut)
    with pytest.raises(ValueError, match=re.escape("missing keys ['ffn']") + "$"):
        load_construction_state(dict(cut, versions=state["versions"]))  # ours: no note
    older = "0.0.1" if ours != "0.0.1" else "0.0.0"
    for versions in ({"qstr-toolkit": ours}, {"qstr-toolkit": older}, {"qstr-toolkit": "unknown"}):
        _silently(load_construction_state, dict(state, versions=versions))
    _silently(load_construction_state, {k: v for k, v in state.items() if k != "versions"})


def test_an_rnn_file_from_a_newer_toolkit_says_so_on_load(tmp_path):
    """`qstr construct rnn` writes the versions (through save_torch); load_rnn warns on a newer
    toolkit's file and names it where the file cannot be read."""
    path = tmp_path / "r.pt"
    assert main(["construct", "rnn", "--N", "4", "--d", "2", "--q", "1", "--out", str(path)]) == 0
    state = torch.load(path, weights_only=True)
    assert state["versions"] == {"qstr-toolkit": toolkit_version(), "torch": torch.__version__}
    newer = _newer(toolkit_version())
    torch.save(dict(state, versions={"qstr-toolkit": newer}), path)
    with pytest.warns(NewerFileWarning, match=f"{path} was written by qstr-toolkit {newer}"):
        load_rnn(path)
    torch.save({"versions": {"qstr-toolkit": newer}, "config": {}}, path)
    with pytest.raises(ValueError, match=re.escape(f"codebook) (written by qstr-toolkit {newer}")):
        load_rnn(path)
