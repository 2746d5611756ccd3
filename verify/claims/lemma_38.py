"""Lemma 38: sorted scalars with gaps >= eps have an exact width-n ReLU interpolant with ||a'||^2 <=
16 ||y||^2 / eps^2, tight and rebalanced (docs/derivations/interpolation.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Tuple

import mpmath
import torch

from qstr.bounds.interpolation import lemma38_bound
from qstr.constructions.interpolation import Lemma38Net, evaluate_net, interpolate_sorted
from qstr.constructions.interpolation import rounding_allowance
from qstr.constructions.links import TwoLayerNet
from qstr.verify.claim import (
    Claim,
    Context,
    Ref,
    Verdict,
    at_most,
    by_measured,
    close,
    edited,
    fields_edited,
    replaced,
    worst,
)
from qstr.verify.claims._interpolation import PIN_DPS, PIN_RTOL, mp_lemma38_bound, net_norm2
from qstr.verify.claims._interpolation import relative_gap
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

L38_EPS = 0.05
L38_TIGHT_TOL = 1e-6  # the alternating-label ratio must equal (16n - 22)/(16n) this closely

claim = register(
    Claim(
        "lemma-38",
        Ref("Lemma 38"),
        statement="sorted scalars with gaps >= eps: exact width-n ReLU interpolant, "
        "||a'||^2 <= 16 ||y||^2/eps^2 (tight), rebalanced",
        builds=(interpolate_sorted,),
        bounds=(lemma38_bound,),
        derivation="docs/derivations/interpolation.md",
    )
)


@dataclass(frozen=True, eq=False)
class Lemma38Case:
    """Sorted z with every gap >= the certified ``eps``, labels y, and Lemma 38's net for them."""

    z: torch.Tensor
    y: torch.Tensor
    eps: float
    net: Lemma38Net


@dataclass(frozen=True, eq=False)
class Lemma38Inputs:
    """Random cases (gaps eps + Exp(1)), the alternating case (every gap eps) and the bound."""

    cases: Tuple[Lemma38Case, ...]
    alternating: Lemma38Case
    bound: Callable[[torch.Tensor, float], float]  # 16 ||y||^2 / eps^2


def _lemma38_case(z: torch.Tensor, y: torch.Tensor, eps: float) -> Lemma38Case:
    """The net built by ``interpolate_sorted`` at the data's own smallest gap (never above eps:
    the float cumsum may shave an ulp off a gap of exactly eps)."""
    built = min(eps, float(torch.diff(z).min())) * (1 - 1e-9)
    return Lemma38Case(z, y, eps, interpolate_sorted(z, y, built))


@claim.inputs
def lemma38_inputs(ctx: Context) -> Lemma38Inputs:
    """Random cases n = 2 .. 128 (2048 full) and alternating labels at n = the largest."""
    ns = ctx.pick(quick=(2, 8, 32, 128), full=(2, 8, 32, 128, 512, 2048))
    kw = dict(dtype=torch.float64, device=ctx.device)
    cases = []
    for n in ns:
        g = ctx.generator("lemma-38/data", n, device=ctx.device)
        gaps = L38_EPS + torch.empty(n - 1, **kw).exponential_(generator=g)
        y = torch.randn(n, generator=g, **kw)
        z = torch.cat([torch.zeros(1, **kw), gaps.cumsum(0)]) - 3.0
        cases.append(_lemma38_case(z, y, L38_EPS))
    n = ns[-1]
    alt = _lemma38_case(
        torch.arange(n, **kw) * L38_EPS,
        torch.tensor([(-1.0) ** k for k in range(n)], **kw),
        L38_EPS,
    )
    return Lemma38Inputs(tuple(cases), alt, lemma38_bound)


def _all_cases(inp: Lemma38Inputs):
    return (*inp.cases, inp.alternating)


def _worst_n(inp: Lemma38Inputs, verdict: Callable[[Lemma38Case], Verdict], key=None) -> Verdict:
    """The worst case over every case (random and alternating), labelled by its n."""
    return worst(((f"n = {len(c.z)}", verdict(c)) for c in _all_cases(inp)), key=key)


@claim.check("||a'||^2 <= 16 ||y||^2 / eps^2", evidence="built")
def lemma38_ratio(inp: Lemma38Inputs) -> Verdict:
    """Lemma 38: ||a'||^2 <= 16 ||y||^2 / eps^2 at the certified eps; the worst case over n."""

    def ratio(c):
        n = len(c.z)
        rounding = Rounding(n=2 * n + 4, scale=1.0, what="(2n + 4) eps x ratio")
        measured = float(c.net.raw.a @ c.net.raw.a) / inp.bound(c.y, c.eps)
        return at_most(measured, 1.0, rounding, detail="||a'||^2 / bound")

    return _worst_n(inp, ratio, key=by_measured)


def _error(case: Lemma38Case) -> float:
    return float((evaluate_net(case.net.balanced, case.z[:, None]) - case.y).abs().max())


def _allowance(case: Lemma38Case) -> float:
    return max(1e-9, rounding_allowance(case.net.balanced, case.z[:, None]))


@claim.check("exact interpolation", evidence="built", agreement=True)
def lemma38_exact(inp: Lemma38Inputs) -> Verdict:
    """Lemma 38: the interpolant is exact, up to its certified float64 rounding (or 1e-9)."""
    detail = (
        "max |f(z_k) - y_k| (evaluate_net) against max(1e-9, gamma_(D+m+2) sum |a| (|W| |z| + |b|))"
    )
    return _worst_n(inp, lambda c: at_most(_error(c), _allowance(c), detail=detail))


def _higham(net, z: torch.Tensor) -> float:
    """gamma_j sum_k |a_k| (|W_k| |z| + |b_k|) at the largest data point, gamma_j = j u / (1 - j u),
    j = D + m + 2, u = 2^-53 (docs/derivations/rounding.md)."""
    u = torch.finfo(torch.float64).eps / 2
    j = net.W.shape[1] + net.W.shape[0] + 2
    mags = (z[:, None].abs() @ net.W.abs().T + net.b.abs()) @ net.a.abs()
    return j * u / (1 - j * u) * float(mags.max())


@claim.check("rounding allowance as derived", evidence="formula", agreement=True)
def lemma38_allowance(inp: Lemma38Inputs) -> Verdict:
    """The reported float64 allowance is the derived Higham bound (rounding.md), relative 1e-12."""
    gaps = [abs(c.net.rounding / _higham(c.net.balanced, c.z) - 1) for c in _all_cases(inp)]
    return at_most(max(gaps), 1e-12, detail="largest |reported / derived - 1| over the cases")


def _eval1(net, z):
    return torch.relu(z[:, None] * net.W[:, 0] + net.b) @ net.a


def _function_change(case: Lemma38Case) -> float:
    z = case.z
    grid = torch.linspace(float(z[0]) - 1, float(z[-1]) + 1, 2001, dtype=z.dtype, device=z.device)
    raw = _eval1(case.net.raw, grid)
    return float((raw - _eval1(case.net.balanced, grid)).abs().max()) / max(
        1.0, float(raw.abs().max())
    )


@claim.check("rebalancing keeps f", evidence="built", agreement=True)
def lemma38_same_function(inp: Lemma38Inputs) -> Verdict:
    """The rebalancing (a / tau, tau w, tau b) keeps the function: relative change <= 1e-9."""
    detail = "max |f_raw - f_balanced| / max(1, |f_raw|) on a grid"
    return _worst_n(inp, lambda c: at_most(_function_change(c), 1e-9, detail=detail))


@claim.check("rebalancing lowers the norm", evidence="built")
def lemma38_rebalanced(inp: Lemma38Inputs) -> Verdict:
    """The rebalanced parameter norm^2 is at most the raw one (AM-GM), relative 1e-12."""
    largest = max(net_norm2(c.net.balanced) / net_norm2(c.net.raw) for c in _all_cases(inp))
    return at_most(largest, 1 + 1e-12, detail="largest ||theta_balanced||^2 / ||theta_raw||^2")


L38_OPT_RTOL = 1e-12  # a few float64 sums of n <= 2048 squares and one square root: gaps ~1e-16


def _optimum(case: Lemma38Case) -> Verdict:
    """||theta_balanced||^2 against min_tau A / tau^2 + tau^2 P = 2 sqrt(A P) (AM-GM), A and P
    read off the raw net's weights; relative."""
    raw, bal = case.net.raw, case.net.balanced
    A, P = float(raw.a @ raw.a), float((raw.W**2).sum() + raw.b @ raw.b)
    optimum = 2 * (A * P) ** 0.5
    per_unit = 2 * float((raw.a.abs() * torch.sqrt(raw.W[:, 0] ** 2 + raw.b**2)).sum())
    detail = (
        f"||theta_balanced||^2 / 2 sqrt(A P) - 1 (raw norm^2 {A + P:.4g}, optimum {optimum:.4g}; "
        f"a tau per unit would reach sum 2 |a_k| ||(w_k, b_k)|| = {per_unit:.4g}, not Lemma 38's)"
    )
    return at_most(abs(net_norm2(bal) / optimum - 1), L38_OPT_RTOL, detail=detail)


@claim.check("rebalanced norm = 2 sqrt(A P), the optimum", evidence="built", agreement=True)
def lemma38_optimum(inp: Lemma38Inputs) -> Verdict:
    """The rebalanced net attains the optimum of the rebalancing problem: its squared norm,
    read off its weights, equals min_{tau > 0} ||a||^2 / tau^2 + tau^2 (||w||^2 + ||b||^2) =
    2 sqrt(A P) of the raw net (AM-GM, interpolation.md), relative 1e-12, every case."""
    return _worst_n(inp, _optimum, key=by_measured)


@claim.check("alternating labels attain (16n - 22)/(16n)", evidence="built")
def lemma38_tight(inp: Lemma38Inputs) -> Verdict:
    """Tightness: alternating labels with every gap eps attain ||a'||^2 / bound = (16n -
    22)/(16n)."""
    c = inp.alternating
    n = len(c.z)
    ratio = float(c.net.raw.a @ c.net.raw.a) / inp.bound(c.y, c.eps)
    tight = (16 * n - 22) / (16 * n)
    return close(ratio, tight, L38_TIGHT_TOL * tight, detail=f"alternating labels, n = {n}")


L38_PIN_EPS = (L38_EPS, 1e-6, 0.5, 3.0)


@claim.check("bound = 40-digit evaluation", evidence="formula", agreement=True)
def lemma38_pinned(inp: Lemma38Inputs) -> Verdict:
    """16 ||y||^2 / eps^2 at every case's labels and eps = 0.05, 1e-6, 0.5, 3 against its 40-digit
    evaluation from interpolation.md (Lemma 38), relative 1e-12."""
    with mpmath.workdps(PIN_DPS):
        gaps = [
            (
                f"n = {len(c.y)}, eps = {e:g}",
                relative_gap(inp.bound(c.y, e), mp_lemma38_bound(c.y, e)),
            )
            for c in _all_cases(inp)
            for e in L38_PIN_EPS
        ]
    label, gap = max(gaps, key=lambda g: g[1])
    return at_most(gap, PIN_RTOL, detail=f"{len(gaps)} values; largest at {label}")


def _every_case(field: Optional[str] = None):
    """Decorator under ``@claim.fault``: ``edit(case)`` replaces every case (random and
    alternating), or with ``field`` gives that field's new value in each."""

    def declare(edit: Callable[[Lemma38Case], Any]):
        one = edit if field is None else fields_edited(**{field: edit})
        return edited(cases=lambda cases: tuple(one(c) for c in cases), alternating=one)

    return declare


def _with_nets(case: Lemma38Case, raw: TwoLayerNet, balanced: TwoLayerNet) -> Lemma38Net:
    """The case's record with these nets and the allowance reported for the balanced one."""
    allowance = rounding_allowance(balanced, case.z[:, None])
    return replace(case.net, raw=raw, balanced=balanced, rounding=allowance)


# data with one gap eps/100 checked against the bound at the certified eps
@claim.fault("one gap eps/100", breaks=lemma38_ratio)
@_every_case()
def _squeezed(case: Lemma38Case) -> Lemma38Case:
    """One gap eps/100 (opposite labels across it) in the middle; the certified eps kept."""
    z, y = case.z.clone(), case.y.clone()
    k = len(z) // 2
    z[k:] -= float(z[k] - z[k - 1]) - case.eps / 100
    y[k - 1], y[k] = 1.0, -1.0
    return _lemma38_case(z, y, case.eps)


# the bound with constant 8 in place of 16 (the factor 2 of ||a||^2 <= 2 sum ... dropped)
claim.fault(
    "constant 8 for 16",
    breaks=(lemma38_ratio, lemma38_tight, lemma38_pinned),
    apply=replaced(bound=lambda y, eps: lemma38_bound(y, eps) / 2),
)


# the bound with ||y|| for ||y||^2 (a lost power)
claim.fault(
    "||y|| for ||y||^2",
    breaks=lemma38_pinned,
    apply=replaced(bound=lambda y, eps: 16.0 * float(y.norm()) / eps**2),
)


@claim.fault("first breakpoint at z_1", breaks=lemma38_exact)
@_every_case("net")
def _first_breakpoint_at_z1(case: Lemma38Case) -> Lemma38Net:
    """c_1 = z_1 in place of z_1 - eps (the first unit's bias b_1 = -c_1 off by eps, raw and
    balanced): f(z_1) = 0 and every f(z_k) is off by a_1 eps = y_1."""
    raw, bal, tau = case.net.raw, case.net.balanced, case.net.tau
    shift = torch.zeros_like(raw.b)
    shift[0] = case.eps
    return _with_nets(case, replace(raw, b=raw.b - shift), replace(bal, b=bal.b - tau * shift))


@claim.fault("bias not rescaled", breaks=(lemma38_same_function, lemma38_exact))
@_every_case("net")
def _bias_not_rescaled(case: Lemma38Case) -> Lemma38Net:
    """The rebalancing (a / tau, tau w, b): the bias left unscaled."""
    raw, tau = case.net.raw, case.net.tau
    return _with_nets(case, raw, TwoLayerNet(a=raw.a / tau, W=raw.W * tau, b=raw.b))


@claim.fault("rebalanced by tau = (A / P)^(1/2)", breaks=lemma38_optimum)
@_every_case("net")
def _tau_square_root(case: Lemma38Case) -> Lemma38Net:
    """The rebalancing at tau^2 = A / P (a square root for the fourth root): the same function,
    and the norm A + P of the raw net, not lowered to 2 sqrt(A P)."""
    raw = case.net.raw
    tau = (float(raw.a @ raw.a) / float((raw.W**2).sum() + raw.b @ raw.b)) ** 0.5
    return _with_nets(case, raw, TwoLayerNet(a=raw.a / tau, W=raw.W * tau, b=raw.b * tau))


@claim.fault("rebalanced by 1 / tau", breaks=(lemma38_rebalanced, lemma38_optimum))
@_every_case("net")
def _tau_inverted(case: Lemma38Case) -> Lemma38Net:
    """The rebalancing by 1 / tau: (a tau, w / tau, b / tau), the same function, norm raised."""
    raw, tau = case.net.raw, case.net.tau
    return _with_nets(case, raw, TwoLayerNet(a=raw.a * tau, W=raw.W / tau, b=raw.b / tau))


@claim.fault("gamma_(D+m) for gamma_(D+m+2)", breaks=lemma38_allowance)
@_every_case("net")
def _gamma_without_2(case: Lemma38Case) -> Lemma38Net:
    """The reported allowance with gamma_(D+m) for gamma_(D+m+2) (the 2 of j dropped)."""
    u = torch.finfo(torch.float64).eps / 2
    j = case.net.balanced.W.shape[1] + case.net.balanced.W.shape[0] + 2
    ratio = ((j - 2) / (1 - (j - 2) * u)) / (j / (1 - j * u))
    return replace(case.net, rounding=case.net.rounding * ratio)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        "n = "
        + ", ".join(str(c.z.shape[0]) for c in inp.cases)
        + f"; alternating labels at n = {inp.alternating.z.shape[0]}"
    )
)
