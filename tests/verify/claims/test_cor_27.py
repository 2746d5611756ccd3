"""Cor 27 (verify/claims/cor_27.py) through its public structure: inputs, named checks and
faults (tests/verify/claims/test_registered.py runs every claim with all its faults)."""

from dataclasses import replace

import torch

from qstr.bounds.transition import prop28_rnn, token_radius
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.verify.claim import Context
from qstr.verify.claims.cor_27 import C27_CERTIFIED_N, SCAN_CHUNK, _chunked_gap, _proved_rnn

CID = "cor-27"


def test_cor27_checks_hold_and_the_error_is_flat_in_N(declared):
    assert [c.N for c in declared(CID).inputs.cases][:4] == [100, 1000, 10_000, 100_000]


def test_cor27_small_r_h_clips_the_states(declared):
    d = declared(CID)
    small = d.broken("r_h = sqrt(q) r_x / 2")
    (c,) = small.cases
    assert (
        c.N == 1000 and c.rnn is not d.inputs.cases[1].rnn and d.inputs.cases[1].rnn.r_h > c.rnn.r_h
    )
    v = d.verdict("state error <= eps at every N", small)
    assert not v.holds and v.measured > 10 * v.bound
    assert d.verdict("projection inactive", small).measured > 0


def test_cor27_off_by_one_scan_and_eps_doubled(declared):
    """Inclusive prefix sums put x_{t_l} into the state at i = t_l, where it must be 0; an RNN
    built for 2 eps certifies more than asked."""
    d = declared(CID)
    incl = d.broken("inclusive prefix sums (index off by one)")
    assert d.verdict("exactly 0 off target", incl).measured > 0
    assert not d.verdict("state error <= eps at every N", incl).holds
    assert d.verdict("exactly 0 off target").holds
    v = d.verdict("certified eps <= asked", d.broken("built for twice the eps asked"))
    assert not v.holds and v.measured > 1.5 * v.bound


def test_cor27_perturbed_module_is_a_copy(declared):
    """Gate bands from 0 in the loop module: it leaves the scan, its zeros move, and the honest
    module keeps its weights."""
    d = declared(CID)
    early = d.broken("module gate bands from 0, not 1/2")
    assert early.module is not d.inputs.module
    assert d.verdict("module zeros = scan zeros", early).measured > 0
    assert d.verdict("module loop = scan").holds


def test_cor27_keeps_its_reference(declared):
    claim = declared(CID).claim
    assert claim.ref.seed == claim.ref.conference == "Cor 27"
    assert claim.derivation == "docs/derivations/rnn-transition.md"


def test_cor27_boundary_prompts_sit_at_the_chunk_boundaries_and_clip_at_half_radius(declared):
    """The boundary prompts' targets include the first and last positions and both sides of
    every chunk boundary the check crosses; at half the radius the projected loop runs."""
    d = declared(CID)
    x, t = d.inputs.boundary
    targets = set(t[:, 0, :].flatten().tolist())
    k, N = SCAN_CHUNK, x.shape[1]
    assert {0, N - 1, k - 1, k, k + 1, 2 * k - 1, 2 * k} <= targets and N % k
    gap, active = _chunked_gap(d.inputs, d.inputs.clipped[0], d.inputs.clipped[1].rnn)
    assert active > 0 and gap < 1e-9


def test_cor27_radius_pinned(declared):
    """r_h of every case equals sqrt(q)(r_x + sqrt(d) eps) at 40 digits; sqrt(q) on r_x alone
    fails."""
    d = declared("cor-27")
    name = "r_h = sqrt(q)(r_x + sqrt(d) eps), 40 digits"
    v = d.verdict(name)
    assert v.holds and v.measured < 1e-14
    assert not d.verdict(name, d.broken("sqrt q on r_x only")).holds


def test_cor27_certified_runs_in_full_on_its_small_rnn(declared):
    """The certified check runs in the full and gpu profiles only; on an RNN at N = C27_CERTIFIED_N
    (built here as the gpu inputs build it): certified with the states inside the r_h ball, and
    the dense readout halved is proved violated."""
    d = declared(CID)
    check = d.claim.check_named("state error <= eps, projection inactive (certified)")
    assert check.profiles == ("full", "gpu") and check not in d.claim.checks_in("quick")
    assert d.inputs.certified_rnn is None  # quick builds none
    book = rs_hadamard_codebook(C27_CERTIFIED_N, dtype=torch.float64)
    g_net = d.inputs.cases[0].rnn.g_net
    rnn = prop28_rnn(book, 4, g_net, eps=0.1, r_x=token_radius(4, C27_CERTIFIED_N))
    inp = replace(d.inputs, certified_rnn=rnn)
    v = check.run(inp, d.ctx)
    assert v.holds and v.certified is True and "states inside the r_h ball" in v.detail
    assert 0 < v.enclosure[0] <= v.enclosure[1] < 1e-5 * rnn.transition.guarantee.eps
    broken = check.run(d.fault("layer 3 (G and -G) halved").apply(inp, d.ctx), d.ctx)
    assert not broken.holds and broken.certified is True and broken.enclosure[0] > 1.0


def test_the_full_profile_proves_the_first_cases_own_rnn(declared):
    """Which RNN the certified check proves: none in quick, the first case's own in full (N = 100,
    an RNN the float64 checks run), an RS-Hadamard one at N = C27_CERTIFIED_N with the first
    case's g_net in gpu (whose first case has N = 1000)."""
    first = declared(CID).inputs.cases[0].rnn
    assert _proved_rnn(first, Context(profile="quick")) is None
    assert _proved_rnn(first, Context(profile="full")) is first and first.N == 100
    built = _proved_rnn(first, Context(profile="gpu"))
    assert built.N == C27_CERTIFIED_N and built.g_net is not first.g_net
    assert torch.equal(built.g_net.W, first.g_net.W.double().cpu())
