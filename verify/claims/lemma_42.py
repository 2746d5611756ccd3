"""Lemma 42 (Appendix D): an explicit two-layer ReLU net for an L-Lipschitz function on a ball,
its sup-error certified within its bound (docs/derivations/lemmas-39-41-42.md)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Iterable, Tuple

import mpmath as mp
import torch

from qstr.bounds.lipschitz import (
    LipschitzNet,
    SupCertificate,
    ball_grid,
    certify_sup_error,
    fk_moments,
    lemma42_net,
    net_lipschitz_bound,
    ridge_curvatures,
    ridge_interval_counts,
    smoothing_error_bound,
)
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.lipschitz import (
    fourier_ridges,
    interpolation_net,
    ridge_net,
)
from qstr.verify.adversarial import worst_case_tokens
from qstr.verify.claim import (
    Claim,
    Context,
    Ref,
    Verdict,
    at_most,
    by_measured,
    each,
    replaced,
    worst,
)
from qstr.verify.claims._lemma42 import DPS, RTOL, counts_h2_over_4, curvatures_without_v
from qstr.verify.claims._lemma42 import fk_points, fk_smoothing, grid_moments, guarantee_gap
from qstr.verify.claims._lemma42 import moments_mp, record_gap, rel, ridge_pin, smoothing_mp
from qstr.verify.claims._lemma42 import smoothing_pi_minus_1, sphere_probes
from qstr.verify.claims._lemma42 import Lemma42Inputs, LipschitzCase, _case, _functions, _starts
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

FK_CASES = ((1, 1), (3, 3), (8, 2), (16, 2))  # (degree n, coordinates k)
COVER_SPACING = {1: 2e-3, 2: 2.5e-2}  # grid spacing of the covering check, per k
# step 6: the ridges' share f of the error when a degree is given, restated from the derivation
# (independent of qstr.bounds.lipschitz.RIDGE_FRACTION, which the check holds to it)
RIDGE_FRACTION = 0.1

claim = register(
    Claim(
        "lemma-42",
        Ref("Lemma 42"),
        marks=("slow",),  # over 3 s in quick on 2 cores (docs/claims.md, "Markers")
        statement=(
            "explicit two-layer ReLU net for an L-Lipschitz f on the R-ball of R^k (k=1 "
            "interpolation, k=2 Fourier-ridge): sup-error, certified on the ball by grid + "
            "Lipschitz slack, within its bound"
        ),
        builds=(interpolation_net, fourier_ridges, ridge_net),
        bounds=(
            lemma42_net,
            smoothing_error_bound,
            fk_moments,
            ridge_curvatures,
            ridge_interval_counts,
            certify_sup_error,
            ball_grid,
            net_lipschitz_bound,
        ),
        derivation="docs/derivations/lemmas-39-41-42.md",
    )
)


@claim.inputs
def lemma42_inputs(ctx: Context) -> Lemma42Inputs:
    """The nets lemma42_net builds for six functions (k = 1: interpolation; k = 2:
    Fourier-ridge)."""
    cases = []
    for i, (name, f, L, R, k, kw) in enumerate(_functions(ctx)):
        built = lemma42_net(f, L=L, R=R, k=k, **kw)
        cases.append(_case(ctx, name, f, L, built, kw.get("eps"), _starts(ctx, i, k, R)))
    probes = (sphere_probes(ctx, 1), sphere_probes(ctx, 2))
    return Lemma42Inputs(tuple(cases), probes, steps=ctx.pick(quick=15, full=60))


def _certificate(f, b: LipschitzNet, L: float, R: float, ctx: Context) -> SupCertificate:
    """certify_sup_error of f and b's net on the R-ball, on ctx.device, at the profile's spacing."""
    spacing = ctx.pick(quick=2e-4 if b.k == 1 else 2.5e-2, full=2e-5 if b.k == 1 else 8e-3)
    net = b.net.to(device=ctx.device)
    return certify_sup_error(f, net, L=L, R=R, k=b.k, spacing=spacing)


def _largest(ratio: Callable[[LipschitzCase], Verdict], cases: Iterable[LipschitzCase]) -> Verdict:
    """The verdict of the case with the largest ratio (or gap): the measure these checks rank by."""
    return worst(((str(c), ratio(c)) for c in cases), key=by_measured)


def _ridged(inp: Lemma42Inputs) -> Iterable[LipschitzCase]:
    """The k >= 2 cases (the Fourier-ridge nets)."""
    return (c for c in inp.cases if c.built.k >= 2)


@claim.check("certified sup-error <= error bound", evidence="built")
def lemma42_certified(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """Lemma 42: the certified sup_ball |f - net| is within the net's error bound; the largest
    certified / bound over the functions (docs/derivations/lemmas-39-41-42.md, step 7)."""

    def ratio(c: LipschitzCase) -> Verdict:  # the built net evaluated on the grid, here
        upper, bound = _certificate(c.f, c.built, c.L, c.cert_R, ctx).upper, c.built.error_bound
        rnd = c.rounding.times(1 / bound, "1/bound")
        return at_most(
            upper / bound, 1.0, rnd, detail=f"certified {upper:.4f} vs bound {bound:.4f}"
        )

    return _largest(ratio, inp.cases)


@claim.check("error bound <= eps asked", evidence="formula")
def lemma42_eps(inp: Lemma42Inputs) -> Verdict:
    """A net built for a sup-error eps has an error bound within eps (the record's bound, whose
    formula the 40-digit pin holds); the largest bound / eps."""
    rnd = Rounding(n=4, scale=1.0, what="4 eps (L h / 2 / eps, sums of two terms), relative")

    def ratio(c: LipschitzCase) -> Verdict:
        bound = c.built.error_bound
        return at_most(bound / c.eps, 1.0, rnd, detail=f"bound {bound:.4f} vs eps {c.eps:g}")

    return _largest(ratio, (c for c in inp.cases if c.eps is not None))


@claim.check("error seen <= certified", evidence="built")
def lemma42_seen(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """No error found (grid maximum, projected Adam) exceeds the certificate; the largest seen /
    certified."""

    def ratio(c: LipschitzCase) -> Verdict:
        net = c.built.net.to(device=ctx.device)

        def err(x):  # |f - net|, which projected Adam climbs from the case's starting points
            return (c.f(x[:, 0]) - net(x)).abs()

        x = worst_case_tokens(err, c.starts.to(ctx.device), c.built.R, steps=inp.steps, lr=0.05)
        cert = _certificate(c.f, c.built, c.L, c.cert_R, ctx)
        found, upper = max(cert.lower, float(err(x).max())), cert.upper
        rnd = c.rounding.times(1 / upper, "1/certified")
        return at_most(found / upper, 1.0, rnd, detail=f"seen {found:.4f} vs certified {upper:.4f}")

    return _largest(ratio, inp.cases)


def _ridge_error(built: LipschitzNet) -> float:
    """Step 6: sum_v S_v (2R / K_v)^2 / 8 over the ridges (S_v, K_v)."""
    return sum(S * (2 * built.R / K) ** 2 / 8 for S, K in built.ridges)


@claim.check("ridge error <= ridge budget", evidence="formula")
def lemma42_ridges(inp: Lemma42Inputs) -> Verdict:
    """Step 6 (k >= 2): the ridges' interpolation error sum_v S_v (2R / K_v)^2 / 8 is within the
    ridge budget eps_ridge; the largest error / budget."""

    def ratio(c: LipschitzCase) -> Verdict:
        n = len(c.built.ridges)
        rnd = Rounding(n=4 * n, scale=1.0, what="4 (ridges) eps, relative")
        return at_most(_ridge_error(c.built) / c.built.ridge_budget, 1.0, rnd, detail=f"{n} ridges")

    return _largest(ratio, _ridged(inp))


def _split_gap(c: LipschitzCase, smoothing) -> float:
    """Relative gap of c's eps_smooth and eps_ridge to steps 4 and 6: eps_smooth(n, k, L, R), and
    eps_ridge = f / (1 - f) eps_smooth (a degree given) or eps - eps_smooth (a target eps)."""
    b = c.built
    smooth = smoothing(b.degree, b.k, b.L, b.R)
    ridge = RIDGE_FRACTION / (1 - RIDGE_FRACTION) * smooth if c.eps is None else c.eps - smooth
    return max(abs(b.smooth_error - smooth) / smooth, abs(b.ridge_budget - ridge) / ridge)


@claim.check("error split as derived (eps_smooth, eps_ridge)", evidence="formula")
def lemma42_split(inp: Lemma42Inputs) -> Verdict:
    """Steps 4 and 6 (k >= 2): the error splits into eps_smooth, the kernel's bound, and the ridge
    budget eps_ridge as derived; the largest relative gap over the nets."""
    rnd = Rounding(n=8, scale=1.0, what="8 eps (a ratio, a difference), relative")
    return _largest(lambda c: at_most(_split_gap(c, inp.smoothing), 0.0, rnd), _ridged(inp))


@claim.check("net = FK smoothing T within the ridge error", evidence="built")
def lemma42_ridges_of_t(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """Steps 5-6 (k >= 2): the net is the smoothing T, a sum of ridges, up to the ridges'
    interpolation error: max |net - T| over the probes of the R-ball (T by the discrete
    convolution of step 2, not by the FFT the builder uses) is within sum_v S_v h_v^2 / 8."""

    def ratio(c: LipschitzCase) -> Verdict:
        b = c.built
        x = b.R * inp.probes[b.k - 1].to(ctx.device)
        T = fk_smoothing(c.f, b.degree, b.k, b.R, x)
        gap = float((b.net.to(device=ctx.device)(x[:, None, :]).reshape(-1) - T).abs().max())
        error = _ridge_error(b)
        what = f"|net - T| {gap:.3g} against the ridges' {error:.3g}"
        return at_most(gap / error, 1.0, c.rounding.times(1 / error, "1/ridge error"), detail=what)

    return _largest(ratio, (c for c in _ridged(inp) if c.built.method == "fourier-ridge"))


@claim.check("FK moments as summed over the grid", evidence="formula")
def lemma42_moments(inp: Lemma42Inputs) -> Verdict:
    """Steps 3-4: the kernel moments m2, m4 and the smoothing error equal the same quantities
    summed over the tensor grid of the discrete FK weights, G = n + 3; the largest relative gap."""

    def gap(n: int, k: int) -> Verdict:
        m2, m4 = grid_moments(n, k)
        e = (2 / math.pi) * (2 * math.sqrt(m2) + (math.pi - 2) * math.sqrt(m2 * m4))  # L = R = 1
        theirs = (*inp.moments(n, k), inp.smoothing(n, k, 1.0, 1.0))
        what = "(n + 2) G^k eps (n cosines per weight, G^k terms), relative"
        rnd = Rounding(n=(n + 2) * (n + 3) ** k, scale=1.0, what=what)
        rel = max(abs(a - b) / abs(b) for a, b in zip((m2, m4, e), theirs, strict=True))
        return at_most(rel, 0.0, rnd)

    return worst(((f"n={n}, k={k}", gap(n, k)) for n, k in FK_CASES), key=by_measured)


@claim.check("grid covers the ball within rho", evidence="monte-carlo")
def lemma42_covering(inp: Lemma42Inputs) -> Verdict:
    """The certificate's grid: every point of the R-ball (4096 probes, half on the sphere) lies
    within rho = spacing sqrt(k) / 2 of a grid point; the largest distance / rho."""
    rnd = Rounding(n=8, scale=1.0, what="8 eps (differences, squares, a root), relative")

    def reach(R: float, k: int) -> Verdict:
        pts, _ = inp.grid(R, k, COVER_SPACING[k])
        rho = COVER_SPACING[k] * math.sqrt(k) / 2
        dist = torch.cdist(R * inp.probes[k - 1], pts, compute_mode="donot_use_mm_for_euclid_dist")
        return at_most(float(dist.min(dim=1).values.max()) / rho, 1.0, rnd)

    balls = sorted({(c.built.R, c.built.k) for c in inp.cases})
    cases = ((f"R={R:.3g}, k={k}, spacing {COVER_SPACING[k]:g}", reach(R, k)) for R, k in balls)
    return worst(cases, key=by_measured)


def _steepest_slope(case: LipschitzCase, probes: torch.Tensor, ctx: Context) -> float:
    """The largest ||grad net(x)|| over the probes scaled to the case's R-ball."""
    net = case.built.net.to(device=ctx.device)
    x = (probes.to(ctx.device) * case.built.R).unsqueeze(-2).requires_grad_(True)
    with torch.enable_grad():
        (g,) = torch.autograd.grad(net(x).sum(), x)
    return float(g.norm(dim=-1).max())


@claim.check("Lip(net) bound >= the net's slopes", evidence="built")
def lemma42_net_lipschitz(inp: Lemma42Inputs, ctx: Context) -> Verdict:
    """Lemma 42, step 7 of docs/derivations/lemmas-39-41-42.md: the slack (L + Lip(net)) rho needs
    Lip(net) at least every slope of the net on the ball; the largest gradient norm at the probes
    over the bound (for k = 1 the bound is exact and the probes meet every piece: ratio 1)."""

    def ratio(c: LipschitzCase) -> Verdict:
        slope, lip = _steepest_slope(c, inp.probes[c.built.k - 1], ctx), inp.lipschitz(c.built.net)
        measured = slope / lip if lip > 0 else (math.inf if slope > 0 else 0.0)
        what = "2 (width + k) eps, relative (sums over the units)"
        rnd = Rounding(n=2 * (c.built.net.W.shape[0] + c.built.k), scale=1.0, what=what)
        return at_most(measured, 1.0, rnd, detail="steepest slope / Lip(net) bound")

    return _largest(ratio, inp.cases)


def _width_and_rows(c: LipschitzCase) -> Verdict:
    """The net's width against step 7's (k = 1: K + 2; k >= 2: sum_v (K_v + 1) + 1) and its
    largest non-constant row ||(w_i, b_i)|| against sqrt(1 + R^2), as one relative excess."""
    b = c.built
    W, bias = b.net.W.detach().cpu(), b.net.b.detach().cpu()
    width = b.degree + 2 if b.k == 1 else sum(K + 1 for _, K in b.ridges) + 1
    moving = W.norm(dim=1) > 0
    rows = torch.cat([W, bias[:, None]], 1).norm(dim=1)[moving]
    excess = max(float(rows.max()) / math.sqrt(1.0 + b.R**2) - 1.0, 0.0)
    off = abs(W.shape[0] - width) + max(int((~moving).sum()) - 1, 0)
    detail = (
        f"width {W.shape[0]} vs {width}, {int((~moving).sum())} constant unit(s), largest row "
        f"{float(rows.max()):.6g} vs sqrt(1 + R^2) = {math.sqrt(1.0 + b.R**2):.6g}"
    )
    return at_most(off + excess, 1e-12, detail=detail)


@claim.check("width and rows as step 7 builds them", evidence="built", agreement=True)
def lemma42_width_and_rows(inp: Lemma42Inputs) -> Verdict:
    """Lemma 42's explicit width and weight bounds, step 7 of docs/derivations/lemmas-39-41-42.md:
    every net has the derived width, one constant unit, and rows ||(w_i, b_i)|| <= sqrt(1 + R^2)
    (so Assumption 2's r_w <= sqrt(1 + R^2) up to the constant unit); measured: units off the
    width plus extra constant units plus the rows' relative excess."""
    return _largest(_width_and_rows, inp.cases)


@claim.check("FK moments and eps_smooth = 40-digit evaluation", evidence="formula", agreement=True)
def lemma42_pin_smoothing(inp: Lemma42Inputs) -> Verdict:
    """fk_moments and smoothing_error_bound against steps 2-4 evaluated in mpmath at 40 digits
    (the FK coefficients from a_j = sin((j + 1) pi / (n + 2))), at the nets' (n, k, L, R) and
    n = 1, 2, 3, 8, 16; the largest relative gap, relative 1e-12."""
    gaps = []
    with mp.workdps(DPS):
        for n, k, L, R in fk_points(inp, FK_CASES):
            m2, m4 = moments_mp(n, k)
            got = (*inp.moments(n, k), inp.smoothing(n, k, L, R))
            want = (m2, m4, smoothing_mp(n, k, L, R))
            gaps += [
                (rel(g, w), f"n={n} k={k} L={L:g} R={R:g}") for g, w in zip(got, want, strict=True)
            ]
    gap, where = max(gaps)
    return at_most(gap, RTOL, detail=f"{len(gaps)} values, largest gap at {where}")


@claim.check(
    "ridge curvatures and counts = 40-digit evaluation", evidence="formula", agreement=True
)
def lemma42_pin_ridges(inp: Lemma42Inputs) -> Verdict:
    """Steps 5-6 (k >= 2): S_v = sum_m A (w0 m |v|)^2, K_v = ceil(2R / h_v) and the ridge error,
    from the ridges of every net, against mpmath at 40 digits; counts must agree exactly."""
    with mp.workdps(DPS):
        rows = [(str(c), ridge_pin(c, inp)) for c in _ridged(inp) if c.fourier is not None]
    return worst(rows, key=by_measured)


@claim.check("guarantee = 40-digit evaluation", evidence="formula", agreement=True)
def lemma42_pin_guarantee(inp: Lemma42Inputs) -> Verdict:
    """lemma42_net's record against step 7 at 40 digits: k = 1: K = ceil(L R / eps), bound L h / 2;
    k >= 2: the least degree with eps_smooth <= 0.9 eps (or the one given), eps_ridge, the counts,
    the ridge error and error_bound = eps_smooth + ridge error; units off plus the largest gap."""
    with mp.workdps(DPS):
        return _largest(lambda c: guarantee_gap(c, inp), inp.cases)


@claim.check("record = the built net (width, norms, Lip, K_v)", evidence="built", agreement=True)
def lemma42_record(inp: Lemma42Inputs) -> Verdict:
    """Every field of lemma42_net's record a user reads (width, ||a||, ||W||, ||b||, r_a, r_w, the
    path norm, the Lipschitz bound, the interval counts K_v as blocks of rows) equals what the
    built net's weights give; units off plus the largest relative gap, 1e-12."""
    return _largest(lambda c: record_gap(c, inp), inp.cases)


@claim.fault("ridge rows along v, not v / |v| (|v| = 2)", breaks=lemma42_width_and_rows)
@each()
def _rows_unnormalised(c: LipschitzCase) -> LipschitzCase:
    """Every non-constant row (w_i, b_i) doubled and a_i halved, as a builder that lifts a ridge
    along v with |v| = 2 instead of v / |v| would: the same function, rows of twice the norm."""
    net = c.built.net
    moving = (net.W.norm(dim=1) > 0).to(net.W.dtype)
    scale = 1.0 + moving
    doubled = TwoLayerNet(a=net.a / scale, W=net.W * scale[:, None], b=net.b * scale)
    return replace(c, built=replace(c.built, net=doubled))


@claim.fault("constants left in two units", breaks=lemma42_width_and_rows)
@each()
def _constants_split(c: LipschitzCase) -> LipschitzCase:
    """The constant unit split in two halves (the constants not merged into one unit): the same
    function, one unit more."""
    net = c.built.net
    const = int((net.W.norm(dim=1) == 0).nonzero()[0])
    a = torch.cat([net.a, net.a[const : const + 1] / 2])
    a[const] = a[const] / 2
    one = slice(const, const + 1)
    split = TwoLayerNet(a=a, W=torch.cat([net.W, net.W[one]]), b=torch.cat([net.b, net.b[one]]))
    return replace(c, built=replace(c.built, net=split))


@claim.fault("functions twice as steep as the nets were built for", breaks=lemma42_certified)
def _steeper(inp: Lemma42Inputs, ctx: Context) -> Lemma42Inputs:
    """Nets built for L = 1 applied to 2-Lipschitz functions: a tent 2 dist(x, knots) between the
    knots of the k = 1 construction, and the cone 2 ||x|| (k = 2)."""
    line = lemma42_net(lambda x: x[..., 0], L=1.0, R=1.0, k=1, eps=0.05)
    knots = torch.linspace(-1.0, 1.0, line.degree + 1, dtype=torch.float64)

    def tent(x):
        return 2 * (x[..., 0, None] - knots.to(x.device)).abs().min(dim=-1).values

    def cone(x):
        return 2 * x.norm(dim=-1)

    cases, degree = [], ctx.pick(quick=8, full=16)
    for name, f, k, kw in (
        ("tent 2L", tent, 1, dict(eps=0.05)),
        ("cone 2L", cone, 2, dict(degree=degree)),
    ):
        built = lemma42_net(f, L=1.0, R=1.0, k=k, **kw)
        cases.append(_case(ctx, name, f, 2.0, built, None, _starts(ctx, 100 + k, k, 1.0)))
    return replace(inp, cases=tuple(cases))


@claim.fault("output weights scaled by 1.1", breaks=lemma42_certified)
@each()
def _scaled(c: LipschitzCase, ctx: Context) -> LipschitzCase:
    """Every net's output weights a scaled by 1.1 (a copy of the net)."""
    net = TwoLayerNet(a=1.1 * c.built.net.a, W=c.built.net.W.clone(), b=c.built.net.b.clone())
    return _case(ctx, c.name, c.f, c.L, replace(c.built, net=net), c.eps, c.starts)


@claim.fault("certificates of the unit ball whatever R", breaks=lemma42_seen)
@each()
def _unit_ball(c: LipschitzCase, ctx: Context) -> LipschitzCase:
    """Certificates of the unit ball whatever R (the radius left at its default 1)."""
    if c.built.R == 1.0:  # the same certificate
        return c
    return replace(c, cert_R=1.0)


@claim.fault("one degree less than eps needs", breaks=lemma42_eps)
@each()
def _degree_lower(c: LipschitzCase, ctx: Context) -> LipschitzCase:
    """The nets built for an eps rebuilt at one degree (k = 1: one interval) less than eps needs."""
    if c.eps is None:
        return c
    b = c.built
    built = lemma42_net(c.f, L=b.L, R=b.R, k=b.k, degree=b.degree - 1)
    return _case(ctx, c.name, c.f, c.L, built, c.eps, c.starts)


@claim.fault(
    "one interval less per ridge", breaks=(lemma42_ridges, lemma42_pin_guarantee, lemma42_record)
)
@each()
def _interval_less(c: LipschitzCase) -> LipschitzCase:
    """One interval less per ridge: K_v - 1 (at least 1) in the net's ridge record (k >= 2)."""
    ridges = tuple((S, max(1, K - 1)) for S, K in c.built.ridges)
    return replace(c, built=replace(c.built, ridges=ridges))


@claim.fault("half the error given to the ridges", breaks=lemma42_split)
@each()
def _half_to_ridges(c: LipschitzCase) -> LipschitzCase:
    """A k >= 2 net built for a degree rebuilt with half the error given to the ridges."""
    b = c.built
    if b.k == 1 or c.eps is not None:
        return c
    half = lemma42_net(c.f, L=b.L, R=b.R, k=b.k, degree=b.degree, ridge_fraction=0.5)
    return replace(c, built=half)


@claim.fault("the merged constant unit dropped", breaks=lemma42_ridges_of_t)
@each()
def _constant_unit_dropped(c: LipschitzCase) -> LipschitzCase:
    """A k >= 2 net without its merged constant unit (its output weight zeroed)."""
    if c.built.k == 1:
        return c
    a = c.built.net.a.clone()
    a[-1] = 0.0
    net = TwoLayerNet(a=a, W=c.built.net.W.clone(), b=c.built.net.b.clone())
    return replace(c, built=replace(c.built, net=net))


@claim.fault("kernel moments of degree n + 1", breaks=lemma42_moments)
def _moments_off_by_one(inp: Lemma42Inputs) -> Lemma42Inputs:
    """The kernel moments of degree n + 1 in place of n."""
    return replace(inp, moments=lambda n, k: fk_moments(n + 1, k))


def _short_grid(R: float, k: int, spacing: float) -> Tuple[torch.Tensor, float]:
    """A grid of the ball of radius R - rho (a slip in the filter of ball_grid)."""
    pts, rho = ball_grid(R, k, spacing)
    return pts[pts.norm(dim=1) <= R - rho], rho


claim.fault(
    "grid of the ball of radius R - rho", breaks=lemma42_covering, apply=replaced(grid=_short_grid)
)


@claim.fault("the net's Lipschitz bound halved", breaks=lemma42_net_lipschitz)
def _lipschitz_halved(inp: Lemma42Inputs) -> Lemma42Inputs:
    """The net's Lipschitz bound halved (a difference quotient over 2h read as one over h)."""
    return replace(inp, lipschitz=lambda net: 0.5 * net_lipschitz_bound(net))


claim.fault(
    "eps_smooth with (pi - 1) for (pi - 2)",
    breaks=(lemma42_pin_smoothing, lemma42_moments),
    apply=replaced(smoothing=smoothing_pi_minus_1),
)
claim.fault(
    "S_v without |v|^2", breaks=lemma42_pin_ridges, apply=replaced(curvatures=curvatures_without_v)
)


claim.fault(
    "interval counts from h^2/4",
    breaks=lemma42_pin_ridges,
    apply=replaced(counts=counts_h2_over_4),
)


@claim.fault("k = 1 error bound L h, not L h / 2", breaks=lemma42_pin_guarantee)
@each()
def _bound_lh(c: LipschitzCase) -> LipschitzCase:
    """The k = 1 record's error bound L h (the interpolation's 1/2 lost)."""
    b = c.built
    return c if b.k >= 2 else replace(c, built=replace(b, error_bound=2 * b.error_bound))


@claim.fault(
    "error bound eps_smooth + eps_ridge (the budget, not the error)", breaks=lemma42_pin_guarantee
)
@each()
def _bound_budget(c: LipschitzCase) -> LipschitzCase:
    """The k >= 2 record's error bound with the ridge budget in place of the ridge error."""
    b = c.built
    bound = b.smooth_error + b.ridge_budget
    return c if b.k == 1 else replace(c, built=replace(b, error_bound=bound))


@claim.fault("record's r_w without the bias column", breaks=lemma42_record)
@each()
def _r_w_without_bias(c: LipschitzCase) -> LipschitzCase:
    """The record's r_w = ||W||_F / sqrt(m), the biases left out."""
    b = c.built
    norms = dict(b.weight_norms, r_w=float(b.net.W.norm()) / math.sqrt(b.net.m))
    return replace(c, built=replace(b, weight_norms=norms))


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: (
        "functions " + "; ".join(c.name for c in inp.cases) + f"; {inp.probes[0].shape[0]} probes"
    )
)
