"""value/limit of the auxiliary-lemma claims (verify/claims/auxiliary.py); every claim and falsifier runs in
tests/verify/claims/test_registered.py."""
import math

import pytest

from qstr.verify.claims import auxiliary
from qstr.verify.claims import all_claims
from qstr.verify.registry import Context

CTX = Context(profile="quick")


def test_lemma39_checks_hold_and_the_swapped_exponents_break_both():
    """Lemma 39: lhs/rhs <= 1 everywhere and = 1 at the equality case; the swapped form fails both."""
    claim = all_claims()["lemma-39"]
    inp = claim.inputs(CTX)
    bound = claim.check("lhs <= rhs").run(inp, CTX)
    tight = claim.check("equality case attained").run(inp, CTX)
    assert bound.holds and tight.holds and abs(tight.measured - 1.0) <= 1e-13
    swapped = next(f for f in claim.faults if "swapped" in f.name)
    broken = swapped.apply(inp, CTX)
    assert claim.check("lhs <= rhs").run(broken, CTX).measured > 1.5  # the derivation's 2.96
    assert not claim.check("equality case attained").run(broken, CTX).holds
    assert inp.rhs is auxiliary.holder_rhs  # the honest inputs are left as they were


def test_lemma39_a_loose_rhs_is_caught_by_tightness_only():
    """A right-hand side twice too large still bounds lhs; only the equality case catches it."""
    claim = all_claims()["lemma-39"]
    inp = claim.inputs(CTX)
    doubled = next(f for f in claim.faults if "doubled" in f.name).apply(inp, CTX)
    assert claim.check("lhs <= rhs").run(doubled, CTX).holds
    assert claim.check("equality case attained").run(doubled, CTX).measured == \
        pytest.approx(0.5, rel=1e-12)


def _consistent(out):
    assert isinstance(out.value, float) and isinstance(out.limit, float)
    assert math.isfinite(out.value) and math.isfinite(out.limit)
    return out.value <= out.limit  # upper-bound claims: holds means value <= limit


def test_lemma41_checks_hold_with_the_closest_case_in_one_dimension():
    """Lemma 41: every greedy packing within its bound (closest: l2, d = 1, eps = 0.3, M = 7),
    eps-separated, and the R^128 sphere's log M above the Maurey form."""
    claim = all_claims()["lemma-41"]
    inp = claim.inputs(CTX)
    head = claim.check("log M <= bound").run(inp, CTX)
    assert head.holds and -0.2 < head.measured < 0 and "d=1 eps=0.3" in head.detail
    assert claim.check("packings eps-separated").run(inp, CTX).measured > 1.0
    sphere = claim.check("D = 128 sphere beats the Maurey form").run(inp, CTX)
    assert sphere.holds and sphere.measured > sphere.bound


def test_lemma41_faults_break_their_checks_and_leave_the_inputs():
    """Quartered constants exceed by about 3.6 (the derivation's +3.614); a repeated point has
    distance 0; the Maurey form with its constant 8 is not beaten in R^128."""
    claim = all_claims()["lemma-41"]
    inp = claim.inputs(CTX)
    sizes = [P.points.shape[0] for P in inp.packings]
    for fault in claim.faults:
        broken = fault.apply(inp, CTX)
        for name in fault.breaks:
            assert not claim.check(name).run(broken, CTX).holds, (fault.name, name)
    quartered = next(f for f in claim.faults if "divided by 4" in f.name).apply(inp, CTX)
    assert claim.check("log M <= bound").run(quartered, CTX).measured > 3
    assert [P.points.shape[0] for P in inp.packings] == sizes


def test_lipschitz_by_secants_on_a_tent_and_against_net_lipschitz_bound():
    import torch

    from qstr.constructions.links import TwoLayerNet
    from qstr.constructions.lipschitz import net_lipschitz_bound

    tent = TwoLayerNet(a=torch.tensor([1.0, -2.0, 1.0], dtype=torch.float64), W=torch.ones(3, 1, dtype=torch.float64),
                       b=torch.tensor([-1.0, -2.0, -3.0], dtype=torch.float64))
    assert auxiliary.lipschitz_by_secants(tent) == 1.0 == net_lipschitz_bound(tent)
    steep = TwoLayerNet(a=torch.tensor([1.0, -2.0, 1.0], dtype=torch.float64), W=torch.ones(3, 1, dtype=torch.float64),
                        b=torch.tensor([-1.0, -1.5, -2.0], dtype=torch.float64))  # slope 1 on [1, 1.5], -1 after
    assert auxiliary.lipschitz_by_secants(steep) == 1.0
    g = torch.Generator().manual_seed(0)
    net = TwoLayerNet(a=torch.randn(12, generator=g, dtype=torch.float64),
                      W=torch.randn(12, 1, generator=g, dtype=torch.float64), b=torch.randn(12, generator=g, dtype=torch.float64))
    assert math.isclose(auxiliary.lipschitz_by_secants(net), net_lipschitz_bound(net), rel_tol=1e-9)


def test_lemma42_records_as_derived_and_a_slip_in_each():
    import dataclasses

    import torch

    from qstr.constructions.lipschitz import lipschitz_net

    two = lipschitz_net(lambda x: x.norm(dim=-1), L=1.0, R=1.0, k=2, degree=6)
    one = lipschitz_net(lambda x: torch.sin(3 * x[..., 0]), L=3.0, R=1.0, k=1, eps=0.05)
    assert auxiliary.ridges_as_derived(two) and auxiliary.norms_as_derived(two) and auxiliary.interpolation_as_derived(one)
    assert auxiliary.certificate_as_derived(lambda x: x.norm(dim=-1), two, 1.0, 0.05, CTX) and auxiliary.fk_as_derived()
    fewer = tuple((S, max(1, K - 1)) for S, K in two.ridges)  # one interval less per ridge
    assert not auxiliary.ridges_as_derived(dataclasses.replace(two, ridges=fewer))
    assert not auxiliary.norms_as_derived(dataclasses.replace(two, weight_norms={**two.weight_norms, "r_a": 1.0}))
    assert not auxiliary.interpolation_as_derived(dataclasses.replace(one, smooth_error=1e-3))


def test_certificate_as_derived_catches_a_grid_that_stops_short(monkeypatch):
    import torch

    from qstr.constructions import lipschitz as lip

    two = lip.lipschitz_net(lambda x: x.norm(dim=-1), L=1.0, R=1.0, k=2, degree=4)
    real = lip.ball_grid

    def short(R, k, spacing):  # the grid of the ball of radius R - rho (a slip in the filter)
        pts, rho = real(R, k, spacing)
        return pts[pts.norm(dim=1) <= R - rho], rho

    monkeypatch.setattr(auxiliary, "ball_grid", short)
    assert not auxiliary.certificate_as_derived(lambda x: x.norm(dim=-1), two, 1.0, 0.05, CTX)
    assert torch.is_tensor(real(1.0, 2, 0.1)[0])
