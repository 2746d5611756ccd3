"""Lemma 36 (Theorem 9's memoriser): an interpolating RNN on n general-1STR prompts with ||vec||^2
<= C n^3, independent of N (docs/derivations/interpolation.md)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Callable, Tuple

import torch

from qstr.bounds.interpolation import MemoriserGuarantee, lemma36_constant, lemma36_net, memoriser
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.interpolation import MemoriserLayout, interpolate_points, memorising_rnn
from qstr.constructions.interpolation import parameter_norm2
from qstr.constructions.links import TwoLayerNet
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, by_ratio, each, exact
from qstr.verify.claim import replaced, worst
import mpmath

from qstr.bounds.interpolation import C36, C36_PRIME
from qstr.verify.claims._interpolation import ADV_NORM, C36_DERIVED, K_Y, L36_D, PIN_DPS, PIN_RTOL
from qstr.verify.claims._interpolation import alternating_labels, codes, collinear_points, labels
from qstr.verify.claims._interpolation import mp_c36_prime, mp_lemma36_bounds, net_norm2
from qstr.verify.claims._interpolation import norm_rounding, prompts, relative_gap
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding
from qstr.verify.threads import cpu_threads


def lemma36_bound(n: int) -> float:
    """Lemma 36's C n^3, C = C36 sqrt(K_y), K_y = 6 (docs/derivations/interpolation.md)."""
    return lemma36_constant(K_Y) * n**3


claim = register(
    Claim(
        "lemma-36",
        Ref("Lemma 36 (Thm 9 memoriser)", "Lemma 36 (Thm 7 memoriser)"),
        statement="interpolating RNN on n general-1STR prompts (labels at one position): zero "
        "training error, ||vec||^2 <= C36 sqrt(6) n^3 (~74.5 n^3) independent of N",
        builds=(interpolate_points, memorising_rnn),
        bounds=(memoriser, lemma36_net, lemma36_bound, lemma36_constant),
        derivation="docs/derivations/interpolation.md",
    )
)


@dataclass(frozen=True, eq=False)
class Lemma36Case:
    """One memoriser: built by ``memoriser`` on n prompts of length N (labels at
    ``position``)."""

    n: int
    N: int
    depth: int
    model: torch.nn.Module
    guarantee: MemoriserGuarantee
    prompts: tuple  # (x, t, y)
    omega: torch.Tensor
    position: object  # 2, or "all"
    labels: torch.Tensor  # the memorised labels
    kind: str = "gaussian"  # or an adversarial data set (collinear points, alternating labels)

    @property
    def label(self) -> str:
        extra = "" if self.kind == "gaussian" else f", {self.kind}"
        return f"n = {self.n}, N = {self.N}, depth {self.depth}{extra}"


@dataclass(frozen=True, eq=False)
class Lemma36Inputs:
    """The memorisers for n in ns and N in Ns (prompts nested in N) and the bound C n^3."""

    cases: Tuple[Lemma36Case, ...]
    bound: Callable[[int], float]  # C36 sqrt(K_y) n^3
    constant: Callable[..., float] = lemma36_constant  # K_y -> C36 sqrt(K_y)


def _nested_prompts(n: int, Ns, g: torch.Generator, device, position: int):
    """Prompt sets for every N in Ns that agree on the first min(Ns) tokens and on t_position.

    The longer prompts append fresh tokens and redraw t elsewhere, so the n inputs x_position and
    labels y_position the point-wise memoriser sees are identical for every N."""
    x, t, _ = prompts(n, max(Ns), g, device)
    u = torch.randn(L36_D, generator=g, dtype=torch.float64, device=device)
    u = u / u.norm()
    t[:, position, 0] = torch.randint(min(Ns), (n,), generator=g, device=device)
    out = {}
    for N in Ns:
        tN = t[:, :N] % N
        tN[:, position] = t[:, position]
        out[N] = (x[:, :N], tN, labels(x[:, :N], tN, u))
    return out


def _lemma36_case(n, N, depth, data, position, ctx, kind="gaussian") -> Lemma36Case:
    """The memoriser of the prompts ``data`` = (x, t, y) at ``position``, at this depth."""
    x, t, y = data
    omega = codes(N, ctx.device)
    with cpu_threads(1):
        model, gu = memoriser(
            x,
            y,
            D_in=L36_D + 2 * omega.shape[1],
            position=position,
            layout=MemoriserLayout(depth=depth),
            generator=ctx.generator("lemma-36/memoriser", n, device=ctx.device),
        )
    memorised = y[:, position] if position != "all" else y.reshape(-1)
    return Lemma36Case(n, N, depth, model, gu, data, omega, position, memorised, kind)


def _lemma36_cases(ctx: Context, ns, Ns, position) -> Tuple[Lemma36Case, ...]:
    """Depth 2 for every (n, N); depth 3 once (n = 8, N = the smallest)."""
    cases = []
    for n in ns:
        g = ctx.generator("lemma-36/prompts", n, device=ctx.device)
        sets = _nested_prompts(n, Ns, g, ctx.device, position=2)
        cases += [_lemma36_case(n, N, 2, sets[N], position, ctx) for N in Ns]
        if n == 8:
            cases.append(_lemma36_case(n, Ns[0], 3, sets[Ns[0]], position, ctx))
    return tuple(cases)


# the adversarial data (interpolation.md, 'Slack'): collinear points spaced eps_n / 0.95 with
# alternating labels; centred (||z|| ~ 0: the certified bound's worst case) or at ||z||^2 ~ 1.96 n
# with ||y||^2 = K_y n (the n-only bounds' worst case)
L36_ADVERSARIAL = (("centred, y = +-1", 0.0, 1.0), ("||z||^2 ~ 2n, y = +-sqrt 6", ADV_NORM, K_Y))


def _adversarial_cases(ctx: Context, n: int, N: int = 8, position: int = 2) -> tuple:
    """Depth-2 memorisers of n prompts whose tokens at ``position`` are L36_ADVERSARIAL's points
    and labels (the other tokens Gaussian)."""
    cases = []
    for kind, norm2, y2 in L36_ADVERSARIAL:
        g = ctx.generator("lemma-36/adversarial", n, device=ctx.device)
        x, t, y = prompts(n, N, g, ctx.device)
        x[:, position] = collinear_points(n, L36_D, norm2 * n, ctx.device)
        y[:, position] = alternating_labels(n, math.sqrt(y2), ctx.device)
        cases.append(_lemma36_case(n, N, 2, (x, t, y), position, ctx, kind))
    return tuple(cases)


@claim.inputs
def lemma36_inputs(ctx: Context) -> Lemma36Inputs:
    """Memorisers at position 2 for n = 4, 8, 16 (.. 64 full) and N = 8, 64 (.. 512 full), and two
    on adversarial data (n = 16, 64 full)."""
    ns = ctx.pick(quick=(4, 8, 16), full=(4, 8, 16, 32, 64))
    Ns = ctx.pick(quick=(8, 64), full=(8, 64, 512))
    cases = _lemma36_cases(ctx, ns, Ns, 2) + _adversarial_cases(ctx, ns[-1])
    return Lemma36Inputs(cases, lemma36_bound)


def _depth2(inp: Lemma36Inputs):
    return [c for c in inp.cases if c.depth == 2]


def _norm_within(cases, bound: Callable[[Lemma36Case], float], detail: str = "") -> Verdict:
    """The memoriser's ||vec||^2 (on the module) against ``bound(case)``, the case with the
    largest ratio."""

    def within(c):
        rounding = norm_rounding(c.model, c.guarantee.norm2)
        return at_most(parameter_norm2(c.model), bound(c), rounding, detail=detail)

    return worst(((c.label, within(c)) for c in cases), key=by_ratio)


@claim.check("||vec||^2 <= C n^3", evidence="built")
def lemma36_cn3(inp: Lemma36Inputs) -> Verdict:
    """Lemma 36: ||vec||^2 <= C n^3 (measured on the module), the worst depth-2 memoriser."""
    return _norm_within(_depth2(inp), lambda c: inp.bound(c.n), f"C = C36 sqrt({K_Y:g})")


def _training_error(c: Lemma36Case) -> float:
    x, t, y = c.prompts
    Z = rnn_encoding(x, t, c.omega)
    with torch.no_grad():
        diff = (c.model(Z) - y).abs()
    return float(diff.max() if c.position == "all" else diff[:, c.position].max())


@claim.check("zero training error", evidence="built", agreement=True)
def lemma36_exact(inp: Lemma36Inputs) -> Verdict:
    """Lemma 36: zero training error (float64, 1e-9) at the memorised position."""
    detail = "max |y_hat - y| over the prompts"
    return worst((c.label, at_most(_training_error(c), 1e-9, detail=detail)) for c in inp.cases)


@claim.check("||vec||^2 <= certified bound", evidence="built")
def lemma36_certified(inp: Lemma36Inputs) -> Verdict:
    """||vec||^2 is at most the memoriser's certified bound (depth 2 and 3)."""
    return _norm_within(inp.cases, lambda c: c.guarantee.bound)


@claim.check("||vec||^2 <= C36 n^(5/2) ||y||", evidence="built")
def lemma36_n_only(inp: Lemma36Inputs) -> Verdict:
    """||vec||^2 <= C36 n^(5/2) ||y|| (depth 2), C36 = 2 sqrt((144/pi)(5 + pi/72))."""
    return _norm_within(
        _depth2(inp), lambda c: C36_DERIVED * c.guarantee.n_points**2.5 * float(c.labels.norm())
    )


def _bound_gaps(gu, labels: torch.Tensor) -> list:
    """Relative gaps of the reported bounds against their 40-digit evaluation from
    interpolation.md: A = Lemma 38's 16 ||y||^2 / eps^2, Lemma 36's 2 sqrt(A P) with P = m + 2
    ||z||^2 + 2 eps^2, the depth-L rebalanced L (A P m^(L-2))^(1/L), and the n-only C36 m^(5/2)
    ||y|| (the memoriser's and its Lemma 36 net's)."""
    l36, l36_gu = gu.lemma36, gu.lemma36_guarantee
    eps, m = l36.direction.threshold, gu.n_points
    y2, z2 = float(labels @ labels), l36.direction.z_norm2
    with mpmath.workdps(PIN_DPS):
        A, two_layer, n_only = mp_lemma36_bounds(y2, eps, z2, m)
        _, deep, _ = mp_lemma36_bounds(y2, eps, z2, m, gu.depth)
        return [
            relative_gap(l36_gu.a_bound, A),
            relative_gap(l36_gu.bound, two_layer),
            relative_gap(gu.bound, deep),
            relative_gap(gu.bound_n, n_only),
            relative_gap(l36_gu.bound_n, n_only),
        ]


@claim.check("bounds as derived", evidence="formula", agreement=True)
def lemma36_bounds_derived(inp: Lemma36Inputs) -> Verdict:
    """The reported bounds equal their 40-digit evaluation from interpolation.md, relative 1e-12."""
    gap = max(max(_bound_gaps(c.guarantee, c.labels)) for c in inp.cases)
    return at_most(gap, PIN_RTOL, detail="A, 2 sqrt(A P), L (A P m^(L-2))^(1/L), C36 m^(5/2) ||y||")


L36_PIN_NS = (2, 4, 8, 16, 64, 1000, 10**6)
L36_PIN_KS = (1.0, 2.5, K_Y, 100.0)


@claim.check("constants = 40-digit evaluation", evidence="formula", agreement=True)
def lemma36_constants(inp: Lemma36Inputs) -> Verdict:
    """C36' = 16 (9/pi)(5 + pi/72), C36 = 2 sqrt(C36'), C = C36 sqrt(K_y) (K_y = 1, 2.5, 6, 100 and
    the default, the page's 6) and the claim's C n^3 (n = 2 .. 1e6) against their 40-digit
    evaluation from interpolation.md, relative 1e-12."""
    with mpmath.workdps(PIN_DPS):
        c36p = mp_c36_prime()
        c36 = 2 * mpmath.sqrt(c36p)
        gaps = [("C36'", relative_gap(C36_PRIME, c36p)), ("C36", relative_gap(C36, c36))]
        gaps += [
            (f"K_y = {k:g}", relative_gap(inp.constant(k), c36 * mpmath.sqrt(k)))
            for k in L36_PIN_KS
        ]
        gaps.append(("default K_y", relative_gap(inp.constant(), c36 * mpmath.sqrt(6))))
        gaps += [
            (f"C n^3, n = {n}", relative_gap(inp.bound(n), c36 * mpmath.sqrt(K_Y) * n**3))
            for n in L36_PIN_NS
        ]
    label, gap = max(gaps, key=lambda g: g[1])
    return at_most(gap, PIN_RTOL, detail=f"C36 = {float(c36):.6g}; largest at {label}")


def _record_rows(c: Lemma36Case) -> list:
    """The MemoriserGuarantee's width, n_points, depth and norm2, and its Lemma 36 net's eps,
    against the built module: f_y's first-layer rows, its layer count, its ||vec||^2 (relative
    1e-12), and the smallest gap of <v, x_j> over the memorised points, v read off f_y's first
    layer (>= eps)."""
    gu = c.guarantee
    linears = [m for m in c.model.f_y if isinstance(m, torch.nn.Linear)]
    W1 = linears[0].weight.detach()
    x = c.prompts[0][:, c.position] if c.position != "all" else c.prompts[0].reshape(-1, L36_D)
    v = W1[0, 2 * c.model.d_h : 2 * c.model.d_h + L36_D]  # the x-block after the states
    gaps = torch.diff(torch.sort(x @ (v / v.norm())).values)
    norm2 = parameter_norm2(c.model)
    return [
        ("width", exact(gu.width, W1.shape[0], detail="record width vs f_y's first-layer rows")),
        ("n_points", exact(gu.n_points, int(c.labels.numel()), detail="record vs labels")),
        ("depth", exact(gu.depth, len(linears), detail="record depth vs f_y's layers")),
        ("norm2", at_most(abs(gu.norm2 - norm2) / norm2, PIN_RTOL, detail="record ||vec||^2")),
        ("eps", at_most(gu.lemma36_guarantee.eps, float(gaps.min()), detail="eps vs module gap")),
    ]


@claim.check("record = built module", evidence="built")
def lemma36_record(inp: Lemma36Inputs) -> Verdict:
    """Every memoriser's record (width, n_points, depth, ||vec||^2, Lemma 36's eps) against its
    built module."""
    return worst((f"{c.label}: {k}", v) for c in inp.cases for k, v in _record_rows(c))


@claim.check("Lemma 36 net within its bound", evidence="built")
def lemma36_net_bound(inp: Lemma36Inputs) -> Verdict:
    """The Lemma 36 net inside each memoriser: ||a||^2 + ||W||^2 + ||b||^2 <= 2 sqrt(A P)."""

    def within(c):
        gu = c.guarantee
        norm2 = net_norm2(gu.lemma36.net)
        rounding = Rounding(n=3 * gu.n_points, scale=norm2, what="3 m eps ||theta||^2")
        return at_most(norm2, gu.lemma36_guarantee.bound, rounding)

    return worst(((c.label, within(c)) for c in inp.cases), key=by_ratio)


def _balance_gap(model) -> float:
    """Relative spread of the squared norms ||W_l||^2 + ||b_l||^2 of the output net's layers: the
    depth rebalancing makes them equal (the equality case of AM-GM, where ||vec||^2 is smallest for
    the function)."""
    sq = [
        float(
            m.weight.detach().pow(2).sum()
            + (0.0 if m.bias is None else m.bias.detach().pow(2).sum())
        )
        for m in model.f_y
        if isinstance(m, torch.nn.Linear)
    ]
    return (max(sq) - min(sq)) / max(sq)


@claim.check("output layers balanced", evidence="built", agreement=True)
def lemma36_balanced(inp: Lemma36Inputs) -> Verdict:
    """Depth rebalancing: the output layers have equal squared norms (AM-GM's equality case)."""
    detail = "relative spread of ||W_l||^2 + ||b_l||^2"
    return worst((c.label, at_most(_balance_gap(c.model), 1e-9, detail=detail)) for c in inp.cases)


@claim.check("||vec||^2 independent of N", evidence="built", agreement=True)
def lemma36_n_free(inp: Lemma36Inputs) -> Verdict:
    """||vec||^2 does not depend on N (the same n inputs and labels for every N)."""

    gaussian = [c for c in _depth2(inp) if c.kind == "gaussian"]

    def spread(n):
        norms = [parameter_norm2(c.model) for c in gaussian if c.n == n]
        detail = "relative spread of ||vec||^2 over N"
        return at_most((max(norms) - min(norms)) / max(norms), 1e-12, detail=detail)

    return worst((f"n = {n}", spread(n)) for n in sorted({c.n for c in gaussian}))


@claim.fault("labels at every position", breaks=(lemma36_cn3, lemma36_n_free))
def _labels_at_every_position(inp: Lemma36Inputs, ctx: Context) -> Lemma36Inputs:
    """Memorise the labels at every position (n N points), at the quick sizes."""
    return replace(inp, cases=_lemma36_cases(ctx, (4, 8, 16), (8, 64), "all"))


@claim.fault("tokens one position late", breaks=lemma36_exact)
@each()
def _tokens_one_late(c: Lemma36Case, ctx: Context) -> Lemma36Case:
    """Memorisers built on the tokens one position late (x_(i+1) with the labels y_i), checked on
    the prompts as drawn."""
    x, t, y = c.prompts
    late = _lemma36_case(c.n, c.N, c.depth, (x.roll(-1, dims=1), t, y), c.position, ctx)
    return replace(late, prompts=c.prompts)


# Lemma 38's and the depth rebalancing skipped (tau = 1): the raw net, norm A + P
@claim.fault(
    "rebalancing skipped (tau = 1)",
    breaks=(lemma36_certified, lemma36_n_only, lemma36_net_bound, lemma36_balanced),
)
@each()
def _unbalanced(c: Lemma36Case) -> Lemma36Case:
    """The case with tau = 1: the raw Lemma 38 net in f_y (first layer v^T x + b', identities,
    then a') and in the Lemma 36 record, the same function."""
    model = copy.deepcopy(c.model)
    layers = [m for m in model.f_y if isinstance(m, torch.nn.Linear)]
    l36 = c.guarantee.lemma36
    raw = l36.lemma38.raw
    with torch.no_grad():
        tau1 = float(layers[0].weight[0].norm())  # the rows of layer 1 are tau1 v, |v| = 1
        layers[0].weight /= tau1
        layers[0].bias /= tau1
        for mid in layers[1:-1]:
            mid.weight /= float(mid.weight[0, 0])
        layers[-1].weight.copy_(raw.a[None, :])
    net = TwoLayerNet(a=raw.a, W=torch.ones_like(l36.net.W) * l36.direction.v[None, :], b=raw.b)
    l36 = replace(l36, net=net, norm2=net_norm2(net))
    gu = replace(c.guarantee, lemma36=l36, norm2=parameter_norm2(model))
    return replace(c, model=model, guarantee=gu)


@claim.fault("n-only bound m^2 for m^(5/2)", breaks=lemma36_bounds_derived)
@each(field="guarantee")
def _bound_n_squared(c: Lemma36Case) -> MemoriserGuarantee:
    """The reported n-only bounds with m^2 for m^(5/2): C36 m^2 ||y||."""
    gu, root = c.guarantee, math.sqrt(c.guarantee.n_points)
    l36_gu = replace(gu.lemma36_guarantee, bound_n=gu.lemma36_guarantee.bound_n / root)
    return replace(gu, bound_n=gu.bound_n / root, lemma36_guarantee=l36_gu)


def _c36_without_pi_over_72(K_y: float = K_Y) -> float:
    """C = C36 sqrt(K_y) with Lemma 36's P <= 5 n (the 2 eps_n^2 <= (pi/72) n term dropped)."""
    return 2.0 * math.sqrt(16.0 * 9.0 / math.pi * 5.0) * math.sqrt(K_y)


# C36 = 2 sqrt((144/pi) 5): the pi/72 of 2 eps_n^2 dropped, in the constant and in C n^3
claim.fault(
    "C36 without pi/72",
    breaks=lemma36_constants,
    apply=replaced(
        constant=_c36_without_pi_over_72, bound=lambda n: _c36_without_pi_over_72() * n**3
    ),
)


@claim.fault("record width n N", breaks=lemma36_record)
@each(field="guarantee")
def _width_n_N(c: Lemma36Case) -> MemoriserGuarantee:
    """The record's width n N (every position's tokens counted) for the n memorised points."""
    return replace(c.guarantee, width=c.n * c.N)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        "(n, N, depth) = "
        + ", ".join(f"({c.n}, {c.N}, {c.depth})" for c in inp.cases if c.kind == "gaussian")
        + "; adversarial (n = 16): "
        + ", ".join(c.kind for c in inp.cases if c.kind != "gaussian")
    )
)
