"""Cor 27 states and the Prop 28 RNN (constructions/recurrent.py): the weights, the scan, the
module and the state dict, built at the parameters qstr.bounds.transition picks (its guarantees:
tests/bounds/test_recurrent.py); the transition itself: tests/constructions/test_transition.py."""

import copy
import io
import math

import pytest
import torch

from qstr.bounds.transition import prop28_rnn, token_radius
from qstr.constructions.codes import (
    Codebook,
    rs_hadamard_codebook,
)
from qstr.constructions.links import make_link
from qstr.constructions.paper_models import DeepTransitionBiRNN
from qstr.constructions.recurrent import (
    module_from_state,
    projected_prefix,
    rnn_state,
    rnn_weights,
    transition_weights,
)
from qstr.constructions.task import QSTR, gather_tokens
from qstr.constructions import recurrent, transition
from qstr.verify.adversarial import clip_to_ball
from tests.fixtures import seeded

F64 = torch.float64


# ------------------------------------------------------------------------- the scan


def literal(F, r_h, reverse=False):
    B, N, D = F.shape
    H = torch.zeros_like(F)
    h = torch.zeros(B, D, dtype=F.dtype)
    order = range(N - 1, 0, -1) if reverse else range(N - 1)
    for i in order:
        v = h + F[:, i]
        h = v * torch.clamp(r_h / v.norm(dim=-1, keepdim=True), max=1.0)
        H[:, i - 1 if reverse else i + 1] = h
    return H


@pytest.mark.parametrize("r_h", [math.inf, 100.0, 2.0])
def test_projected_prefix_equals_the_recurrence(r_h):
    F = torch.randn(3, 57, 4, generator=seeded(5), dtype=F64) * 0.5
    for reverse in (False, True):
        H, active = projected_prefix(F, r_h, reverse=reverse, chunk=8)
        assert torch.allclose(H, literal(F, r_h, reverse), atol=1e-12)
        assert (active > 0) == (r_h == 2.0)
    with pytest.raises(ValueError, match="r_h"):
        projected_prefix(F, 0.0)


# -------------------------------------------------------------------------- the RNN


@pytest.fixture(scope="module")
def rnn64(book64):
    link = make_link("teacher", 2, 3, generator=seeded(8))
    return link, prop28_rnn(book64, 3, link.two_layer_net(), eps=0.1)


def simple_prompts(link, N, B, r_x, seed):
    p = QSTR(N=N, d=link.d, link=link, variant="simple").sample(
        B, generator=seeded(seed), dtype=F64
    )
    return clip_to_ball(p.x, r_x), p.t


def test_module_literal_loop_equals_scan(rnn64):
    link, c = rnn64
    x, t = simple_prompts(link, 64, 4, c.guarantee.r_x, 9)
    m = c.module()
    assert isinstance(m, DeepTransitionBiRNN) and m.r_h == c.r_h
    Z = c.encode(x, t)
    with torch.no_grad():
        hf, hb = m.states(Z)
        y_loop = m(Z)
    st = c.states(x, t)
    assert torch.allclose(hf, st.h_fwd, atol=1e-11) and torch.allclose(hb, st.h_bwd, atol=1e-11)
    assert torch.equal(hf == 0, st.h_fwd == 0) and torch.equal(hb == 0, st.h_bwd == 0)
    assert st.projection_active == 0
    assert torch.allclose(y_loop, c.predict(x, t), atol=1e-11)


def test_cor27_states_and_prop28_predictions(rnn64):
    link, c = rnn64
    x, t = simple_prompts(link, 64, 8, c.guarantee.r_x, 10)
    st = c.states(x, t)
    tf, tb = c.targets(x, t)
    for h, tgt in ((st.h_fwd, tf), (st.h_bwd, tb)):
        assert bool((h[tgt == 0] == 0).all())  # exactly 0 before (after) the target
        assert float((h - tgt).abs().max()) <= c.guarantee.state_eps
        assert float(h.norm(dim=-1).max()) <= c.r_h
    y = link(gather_tokens(x, t))
    assert float((c.predict(x, t) - y).abs().max()) <= c.guarantee.prediction_error
    # without the output gate the positions i = t_l lose x_{t_l}: the bound breaks there
    assert (
        float((c.predict(x, t, output_gate=False) - y).abs().max()) > c.guarantee.prediction_error
    )
    m = c.module()
    with torch.no_grad():
        assert torch.allclose(m(c.encode(x, t)), c.predict(x, t), atol=1e-11)


def test_general_prompts_break_the_construction(rnn64):
    link, c = rnn64
    p = QSTR(N=64, d=3, link=link, variant="general").sample(8, generator=seeded(11), dtype=F64)
    x = clip_to_ball(p.x, c.guarantee.r_x)
    assert (
        float((c.predict(x, p.t) - link(gather_tokens(x, p.t))).abs().max())
        > c.guarantee.prediction_error
    )


def test_state_dict_round_trip(rnn64, tmp_path):
    link, c = rnn64
    state = rnn_state(c)
    assert set(state) == {"config", "omega", "forward_transition", "backward_transition", "output"}
    assert set(state["config"]) == {"N", "d", "q", "d_e", "eps", "r_h", "r_x"}
    for key in ("forward_transition", "backward_transition"):
        assert [sorted(L) for L in state[key]] == [["W", "b"]] * 3 + [["W"]]
    assert [sorted(L) for L in state["output"]] == [["W", "b"]] * 4 + [["W"]]
    path = tmp_path / "rnn.pt"
    torch.save(state, path)
    loaded = torch.load(path, weights_only=True)
    assert loaded["config"] == state["config"] and torch.equal(loaded["omega"], c.omega)
    x, t = simple_prompts(link, 64, 2, c.guarantee.r_x, 12)
    m1, m2 = c.module(), module_from_state(loaded)
    Z = c.encode(x, t)
    with torch.no_grad():
        assert torch.equal(m1(Z), m2(Z))
    # the transition dict is the documented function
    # h <- P(h + W4 relu(W3 relu(W2 relu(W1 u + b1) + b2) + b3))
    L = loaded["forward_transition"]
    u = torch.cat([torch.zeros(64, c.q * c.d, dtype=F64), Z[0]], 1)
    f = L[3]["W"] @ torch.relu(
        L[2]["W"]
        @ torch.relu(
            L[1]["W"] @ torch.relu(L[0]["W"] @ u.T + L[0]["b"][:, None]) + L[1]["b"][:, None]
        )
        + L[2]["b"][:, None]
    )
    assert torch.allclose(f.T, c.transition(Z[0]), atol=1e-10)
    with pytest.raises(ValueError, match="state"):
        module_from_state({"config": {}})


def test_rnn_input_errors(book64):
    net = make_link("teacher", 2, 3, generator=seeded(0)).two_layer_net()
    c = prop28_rnn(book64, 3, net)
    x = torch.zeros(1, 64, 3, dtype=F64)
    with pytest.raises(ValueError, match="t entries"):
        c.states(x, torch.full((1, 2), 64, dtype=torch.long))
    with pytest.raises(ValueError, match="x must have shape"):
        c.states(torch.zeros(1, 64, 4, dtype=F64), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="codebook has 64"):
        c.states(torch.zeros(1, 65, 3, dtype=F64), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="simple-qSTR"):
        c.targets(x, torch.randint(64, (1, 64, 2), generator=seeded(0)))


def test_scan_at_1e5_on_cpu():
    """N = 1e5 states by the scan, exact zeros and flat error (the quick cor-27 claim also does
    this)."""
    book = rs_hadamard_codebook(100_000, dtype=F64)
    link = make_link("teacher", 1, 2, generator=seeded(13))
    c = prop28_rnn(book, 2, link.two_layer_net(), eps=0.1)
    x, t = simple_prompts(link, 100_000, 1, c.guarantee.r_x, 14)
    st = c.states(x, t)
    tf, tb = c.targets(x, t)
    assert bool((st.h_fwd[tf == 0] == 0).all()) and bool((st.h_bwd[tb == 0] == 0).all())
    assert float((st.h_fwd - tf).abs().max()) <= c.guarantee.state_eps and st.projection_active == 0


@pytest.mark.gpu
def test_scan_at_1e6_on_cuda():
    book = rs_hadamard_codebook(1_000_000, dtype=F64, device="cuda")
    link = make_link("teacher", 2, 4, generator=seeded(15))
    c = prop28_rnn(book, 4, link.two_layer_net(), eps=0.1)
    gen = torch.Generator(device="cuda").manual_seed(16)
    task = QSTR(N=1_000_000, d=4, link=link.to("cuda"), variant="simple")  # the link's net on CUDA
    p = task.sample(1, generator=gen, device="cuda", dtype=F64)
    x = clip_to_ball(p.x, c.guarantee.r_x)
    st = c.states(x, p.t)
    tf, tb = c.targets(x, p.t)
    assert bool((st.h_fwd[tf == 0] == 0).all()) and bool((st.h_bwd[tb == 0] == 0).all())
    assert float((st.h_fwd - tf).abs().max()) <= c.guarantee.state_eps
    assert float((st.h_bwd - tb).abs().max()) <= c.guarantee.state_eps


def test_saved_state_reloaded_runs_the_gated_model_on_a_rotated_code():
    """torch.save -> torch.load(weights_only=True) -> module_from_state computes predict exactly,
    and on a rotated code (approximate products) the error is a real fraction of Prop 28's bound."""
    book = rs_hadamard_codebook(64, dtype=torch.float64)
    Q, _ = torch.linalg.qr(
        torch.randn(
            book.d_e, book.d_e, generator=torch.Generator().manual_seed(3), dtype=torch.float64
        )
    )
    book = Codebook(book.omega @ Q, book.mu, "custom", {"rotated": book.kind, "seed": 3})
    link = make_link("teacher", 2, 3, generator=torch.Generator().manual_seed(280))
    c = prop28_rnn(book, 3, link.two_layer_net(), eps=0.1, r_x=token_radius(3, 64 * 16))
    assert c.transition.guarantee.eps <= 0.1
    p = QSTR(N=64, d=3, link=link, variant="simple").sample(
        4, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    x = clip_to_ball(p.x, c.guarantee.r_x)
    buf = io.BytesIO()
    torch.save(rnn_state(c), buf)
    buf.seek(0)
    m = module_from_state(torch.load(buf, weights_only=True))
    with torch.no_grad():
        y = m(c.encode(x, p.t))
        assert float((y - c.predict(x, p.t)).abs().max()) <= 1e-9
        err = float((y - link(gather_tokens(x, p.t))).abs().max())
    assert 1e-3 * c.guarantee.prediction_error < err <= c.guarantee.prediction_error


def test_module_projects_onto_the_r_h_ball_like_the_scan():
    book = rs_hadamard_codebook(64, dtype=torch.float64)
    link = make_link("teacher", 2, 3, generator=torch.Generator().manual_seed(270))
    c = prop28_rnn(book, 3, link.two_layer_net(), eps=0.1, r_x=token_radius(3, 64))
    p = QSTR(N=64, d=3, link=link, variant="simple").sample(
        2, generator=torch.Generator().manual_seed(2), dtype=torch.float64
    )
    x = clip_to_ball(p.x, c.guarantee.r_x)
    t0 = p.t[0, 0]
    x[0, t0] = x[0, t0] / x[0, t0].norm(dim=-1, keepdim=True) * c.guarantee.r_x
    small = copy.copy(c)
    small.r_h = 0.5 * math.sqrt(2) * c.guarantee.r_x
    m = small.module()
    assert m.r_h == small.r_h
    with torch.no_grad():
        hf, hb = m.states(c.encode(x, p.t))
    st = c.states(x, p.t, r_h=small.r_h)
    assert st.projection_active > 0
    assert float((hf - st.h_fwd).abs().max()) <= 1e-9 and float((hb - st.h_bwd).abs().max()) <= 1e-9


def test_g_net_is_moved_once_per_device_and_kept_on_its_own(rnn64):
    """_g_net_on: the float64 CPU net itself on the CPU; on another device (meta here, standing in
    for CUDA) a copy made on the first call and reused, remade when the device changes."""
    c = rnn64[1]
    assert c._g_net_on(torch.device("cpu")) is c.g_net
    first = c._g_net_on(torch.device("meta"))
    assert first.W.device.type == "meta" and c._g_net_on(torch.device("meta")) is first
    assert c.g_net.W.device.type == "cpu"


# ------------------------ software facts of the Cor 27 scan (from verify/claims/cor_27.py)


def _projected_loop(F, r_h, reverse):
    """The literal loop h <- P(h + F_i) with its count of projected steps that reach a state."""
    G, h, bites = torch.zeros_like(F), torch.zeros_like(F[:, 0]), 0
    steps = range(F.shape[1] - 1, -1, -1) if reverse else range(F.shape[1])
    for k, i in enumerate(steps):
        G[:, i] = h
        v = h + F[:, i]
        norm = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
        if k < F.shape[1] - 1:  # the last update reaches no state
            bites += int((norm > r_h).sum())
        h = v * torch.clamp(r_h / norm, max=1.0)
    return G, bites


@pytest.mark.parametrize("r_h, chunk", [(0.05, 8), (2.0, 8), (math.inf, 8), (2.0, 1)])
def test_projected_prefix_equals_the_loop_and_counts_its_projected_steps(r_h, chunk):
    """projected_prefix (the scan behind every Cor 27 state) equals the literal projected loop in
    both directions with r_h small (the projection bites at every step), in between and infinite,
    with chunks of 8 and of 1, and its count of projected steps is the loop's."""
    F = torch.randn(3, 40, 4, generator=seeded(272), dtype=F64)
    rounding = 40 * torch.finfo(F64).eps * float(F.abs().sum(1).max())
    for reverse in (False, True):
        H, active = projected_prefix(F, r_h, reverse=reverse, chunk=chunk)
        G, bites = _projected_loop(F, r_h, reverse)
        assert float((H - G).abs().max()) <= rounding
        assert active == bites


def test_states_count_the_projected_steps_of_both_directions():
    """RNNConstruction.states reports as projection_active the forward plus the backward scan's
    count, and the module projects like the scan when r_h is below Cor 27's radius."""
    book = rs_hadamard_codebook(100, dtype=F64)
    link = make_link("teacher", 2, 4, generator=seeded(270))
    c = prop28_rnn(book, 4, link.two_layer_net(), eps=0.1, r_x=token_radius(4, 800))
    p = QSTR(N=100, d=4, link=link, variant="simple").sample(8, generator=seeded(271), dtype=F64)
    x = clip_to_ball(p.x, c.guarantee.r_x)
    t0 = p.t[0, 0]
    x[0, t0] = x[0, t0] / x[0, t0].norm(dim=-1, keepdim=True) * c.guarantee.r_x
    small = copy.copy(c)
    small.r_h = 0.5 * math.sqrt(2) * c.guarantee.r_x
    st = c.states(x, p.t, r_h=small.r_h)
    counted = (
        projected_prefix(st.direct, small.r_h)[1]
        + projected_prefix(st.direct, small.r_h, reverse=True)[1]
    )
    assert st.projection_active == counted > 0
    with torch.no_grad():
        hf, hb = small.module().states(c.encode(x, p.t))
    assert float((hf - st.h_fwd).abs().max()) <= 1e-9 and float((hb - st.h_bwd).abs().max()) <= 1e-9


# ------------------------------------------------------ the builders, from given parameters


def test_rnn_weights_are_the_certified_rnn_at_its_parameters(rnn64):
    """rnn_weights with the transition and r_h prop28_rnn picked: the same output layers and
    module, no guarantee attached; rnn_state needs the attached one (the file's eps, r_x)."""
    _, c = rnn64
    bare = rnn_weights(c.omega, c.transition, c.g_net, r_h=c.r_h)
    assert bare.guarantee is None and bare.r_h == c.r_h
    for A, B in zip(c.output_layers, bare.output_layers, strict=True):
        assert torch.equal(A.W, B.W) and (A.b is B.b is None or torch.equal(A.b, B.b))
    with pytest.raises(ValueError, match="prop28_rnn"):
        rnn_state(
            rnn_weights(
                c.omega,
                transition_weights(
                    c.omega,
                    c.d,
                    c.q,
                    product_knots=c.transition.product_knots,
                    bands=c.transition.bands,
                    threshold=c.transition.threshold,
                ),
                c.g_net,
                r_h=c.r_h,
            )
        )
    with pytest.raises(ValueError, match="transition"):
        rnn_weights(c.omega, None, c.g_net, r_h=c.r_h)
    with pytest.raises(ValueError, match="r_h"):
        rnn_weights(c.omega, c.transition, c.g_net, r_h=0.0)
    with pytest.raises(ValueError, match="d_e"):
        rnn_weights(c.omega[:, :8], c.transition, c.g_net, r_h=c.r_h)
    with pytest.raises(ValueError, match="g_net"):
        rnn_weights(c.omega, c.transition, "net", r_h=c.r_h)
    with pytest.raises(ValueError, match="q must"):
        rnn_weights(c.omega[:1], c.transition, c.g_net, r_h=c.r_h)


def test_the_transition_is_still_importable_from_recurrent():
    """The Prop 26 transition moved to constructions/transition.py (by content: issue 56); its
    names at their old path are the same objects."""
    for name in ("Transition", "transition_weights", "codes_of", "code_stats"):
        assert getattr(recurrent, name) is getattr(transition, name), name
        assert name in recurrent.__all__
