"""Theorem 9 (conference Thm 7): memoriser ||vec||^2 <= C n^3 against Prop 8's requirement, the
crossover n*(N) a power of N, and the memoriser built at widths proportional to N against the
requirement at its width (docs/derivations/rnn-lower-bounds.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Tuple

import mpmath
import numpy as np
import torch

from qstr.bounds.interpolation import lemma36_constant, memoriser
from qstr.bounds.prop8 import prop8_log_norm_lower_bound, prop8_norm_lower_bound_paper
from qstr.bounds.theorem7 import Theorem7Params, prop28_norm2
from qstr.bounds.theorem9 import generalising_log_norm2, memoriser_norm2_bound, theorem9_crossover
from qstr.bounds.transformer import loglog_slope
from qstr.bounds.transition import prop28_rnn
from qstr.constructions.codes import rs_hadamard_codebook
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.interpolation import Lemma36Net, MemoriserLayout, memorising_rnn
from qstr.constructions.interpolation import parameter_norm2
from qstr.constructions.links import make_link
from qstr.verify.claim import (
    Claim,
    Context,
    Ref,
    Vacuity,
    Verdict,
    at_least,
    at_most,
    by_ratio,
    exact,
    replaced,
    worst,
)
from qstr.verify.claims._interpolation import C36_DERIVED, K_Y, L36_D, P8_C, am_gm_log_norm2
from qstr.verify.claims._interpolation import ADV_NORM, PIN_DPS, PIN_RTOL, alternating_labels
from qstr.verify.claims._interpolation import codes, collinear_points, labels
from qstr.verify.claims._interpolation import norm_rounding
from qstr.verify.claims._interpolation import prompts, thm9_pin_gaps
from qstr.verify.registry import register
from qstr.verify.threads import cpu_threads

T9_NS = tuple(2**k for k in range(8, 21, 2))
T9_DEPTH = 2
T9_D = 4
T9_NS_BUILT = (16, 64, 256, 1024, 4096)  # N grid for norms measured on constructions.recurrent
# the memoriser built at widths proportional to N: n prompts, labels at position T9_POS, and per
# width (its name, d_h(N), the N it is built at); at T9_BELOW the requirement exceeds it
T9_WIDE_N, T9_POS, T9_BELOW = 8, 5, "N / 512"
# the ratios of the checks below that are findings, not a paper bound's slack (rnn-lower-bounds.md)
T9_FLAT_DETAIL = "last slope, N = 2^18..2^20; a threshold on a finding (no growth), not a bound"
T9_MARGIN = "a margin (the finding), not a bound's slack"
T9_WIDE = (
    ("N d", lambda N: N * T9_D, (64, 128)),
    ("N / 8", lambda N: N // 8, (256, 512)),
    (T9_BELOW, lambda N: N // 512, (512, 1024)),
)

claim = register(
    Claim(
        "thm-9",
        Ref("Thm 9", "Thm 7"),
        statement="memoriser ||vec||^2 <= C n^3 (N-free) vs the Prop 8 requirement: the crossover "
        "n*(N) below which min-norm ERM prefers memorising grows like a power of N where the "
        "chain is rigorous (widths d_h = o(N), checked at sqrt N); at widths proportional to N "
        "the rigorous chain gives a flat n*(N), and the paper's form there is uncertified",
        builds=(memorising_rnn,),
        bounds=(memoriser, memoriser_norm2_bound, theorem9_crossover, generalising_log_norm2),
        derivation="docs/derivations/rnn-lower-bounds.md",
    )
)


@dataclass(frozen=True, eq=False)
class Thm9Inputs:
    """The generalisation requirements (ln ||vec||^2 by N, per form), the memoriser bound, the
    crossover n*(N) computed from it, and memorisers built on general-1STR prompts."""

    requirements: dict  # form -> {N: ln ||vec||^2 a generalising RNN needs}
    wide: dict  # the rigorous form at widths proportional to N (docs: where growth is lost)
    memoriser_bound: Callable[[int], float]  # C n^3
    crossover: Callable[[float], float]  # n* with memoriser_bound(n*) = e^requirement
    memorisers: Tuple[tuple, ...]  # (n, module, labels at the position)
    requirement: Callable = generalising_log_norm2  # the requirements' function
    wide_built: Tuple["WideCase", ...] = ()  # the memoriser built at widths proportional to N


@dataclass(frozen=True, eq=False)
class WideCase:
    """Theorem 9's memoriser built at a width proportional to N: the RNN module (state width d_h,
    its state blocks zero-padded), the Lemma 36 net in its f_y, and the n training prompts."""

    width: str  # "N d", "N / 8", "N / 512"
    N: int
    model: torch.nn.Module  # DeepTransitionBiRNN, d_h = width(N): ||vec||^2 and errors read here
    lemma36: Lemma36Net  # the same net at every N and width (prompts nested in N)
    Z: torch.Tensor  # the prompts' RNN encoding (n, N, d + 2 d_e)
    y: torch.Tensor  # their labels at position T9_POS (n,)

    @property
    def label(self) -> str:
        return f"d_h = {self.width} = {self.model.d_h}, N = {self.N}"


def _requirements(requirement: Callable = generalising_log_norm2, wide: bool = False) -> dict:
    """Prop 8's requirement in the paper's (d_h = N d, uncertified) and the volume (d_h = sqrt N,
    rigorous) forms; ``wide``: the volume form at widths proportional to N (d_h = N d, N / 8)."""

    def form(name, width):
        return {N: requirement(N, P8_C, width(N), depth=T9_DEPTH, form=name) for N in T9_NS}

    if wide:
        return {
            "volume (d_h = N d, rigorous)": form("volume", lambda N: N * T9_D),
            "volume (d_h = N / 8, rigorous)": form("volume", lambda N: N // 8),
        }
    return {
        "paper (d_h = N d, uncertified)": form("paper", lambda N: N * T9_D),
        "volume (d_h = sqrt N, rigorous)": form("volume", math.isqrt),
    }


def _memoriser_bound(n: int) -> float:
    return memoriser_norm2_bound(n, depth=T9_DEPTH, K_y=K_Y)


def _crossover(log_requirement: float) -> float:
    return theorem9_crossover(log_requirement, depth=T9_DEPTH, K_y=K_Y)


def _memorisers(ctx: Context, ns, position) -> tuple:
    """(n, memoriser, labels at position 5) on n general-1STR prompts of length 64."""
    mems = []
    for n in ns:
        x, t, y = prompts(n, 64, ctx.generator("thm-9/prompts", n, device=ctx.device), ctx.device)
        with cpu_threads(1):
            model, _ = memoriser(
                x,
                y,
                D_in=L36_D,
                position=position,
                generator=ctx.generator("thm-9/memoriser", n, device=ctx.device),
            )
        mems.append((n, model, y[:, 5]))
    return tuple(mems)


def _adversarial_memoriser(ctx: Context, n: int) -> tuple:
    """(n, memoriser, labels) on prompts whose tokens at position 5 are collinear, spaced eps_n /
    0.95 at ||z||^2 ~ 1.96 n, with alternating labels of ||y||^2 just under K_y n: where C n^3 is
    near tight (interpolation.md, 'Slack')."""
    g = ctx.generator("thm-9/adversarial", n, device=ctx.device)
    x, _, y = prompts(n, 64, g, ctx.device)
    x[:, 5] = collinear_points(n, L36_D, ADV_NORM * n, ctx.device)
    y[:, 5] = alternating_labels(n, math.sqrt(K_Y * (1 - 1e-9)), ctx.device)
    with cpu_threads(1):
        model, _ = memoriser(x, y, D_in=L36_D, position=5, generator=g)
    return (n, model, y[:, 5])


def _wide_built(ctx: Context) -> Tuple[WideCase, ...]:
    """The memoriser of n = 8 general-1STR prompts (labels at position 5) built by ``memoriser``
    at every width and N of T9_WIDE: f_fwd = f_bwd = 0 (d_h x (d_h + D_in)) and f_y's 2 d_h state
    columns 0, all in the module. The prompts are nested in N (longer ones append tokens; t_5 <
    64) and encoded with the first N codes of one codebook, so the memorised tokens and labels,
    hence the Lemma 36 net, are the same at every N and width."""
    dev, Nmax = ctx.device, max(max(Ns) for *_, Ns in T9_WIDE)
    g = ctx.generator("thm-9/wide-prompts", T9_WIDE_N, device=dev)
    x, t, _ = prompts(T9_WIDE_N, Nmax, g, dev)
    u = torch.randn(L36_D, generator=g, dtype=torch.float64, device=dev)
    t[:, T9_POS, 0] = torch.randint(64, (T9_WIDE_N,), generator=g, device=dev)
    omega = codes(Nmax, dev)
    cases = []
    for width, d_h, Ns in T9_WIDE:
        for N in Ns:
            xN, tN = x[:, :N], t[:, :N] % N
            yN = labels(xN, tN, u / u.norm())
            with cpu_threads(1):
                model, gu = memoriser(
                    xN,
                    yN,
                    D_in=L36_D + 2 * omega.shape[1],
                    position=T9_POS,
                    layout=MemoriserLayout(depth=T9_DEPTH, d_h=d_h(N)),
                    generator=ctx.generator("thm-9/wide-memoriser", T9_WIDE_N, device=dev),
                )
            Z = rnn_encoding(xN, tN, omega[:N])
            cases.append(WideCase(width, N, model, gu.lemma36, Z, yN[:, T9_POS]))
    return tuple(cases)


@claim.inputs
def thm9_inputs(ctx: Context) -> Thm9Inputs:
    """Requirements over N = 2^8..2^20, memorisers at position 5 for n = 8, 32 (.. 128 full), and
    the n = 8 memoriser built at widths proportional to N (T9_WIDE)."""
    mems = _memorisers(ctx, ctx.pick(quick=(8, 32), full=(8, 32, 128)), 5)
    mems += (_adversarial_memoriser(ctx, 32),)
    return Thm9Inputs(
        _requirements(),
        _requirements(wide=True),
        _memoriser_bound,
        _crossover,
        mems,
        wide_built=_wide_built(ctx),
    )


@claim.scope_with
def thm9_scope(inp: Thm9Inputs) -> str:
    """The requirement's forms and N, the memorisers built, and the widths proportional to N the
    memoriser was built at."""
    Ns = sorted(next(iter(inp.requirements.values())))
    forms = "; ".join(inp.requirements)
    built = ", ".join(str(n) for n, *_ in inp.memorisers)
    wide = {}
    for c in inp.wide_built:
        wide.setdefault(c.width, []).append(f"{c.N} (d_h = {c.model.d_h})")
    widths = "; ".join(f"d_h = {w}: N = {', '.join(v)}" for w, v in wide.items())
    return (
        f"N = {Ns[0]}..{Ns[-1]}, L_y = {T9_DEPTH}, c = {P8_C}: {forms}; memorisers n = {built}; "
        f"n = {T9_WIDE_N} memoriser built at widths proportional to N, {widths}"
    )


@claim.vacuity_with
def thm9_vacuity(inp: Thm9Inputs) -> Vacuity:
    """Vacuous where n*(N) < 1: no sample size lies below the crossover. Per form, the first N
    checked with n* >= 1 and n* at the largest N."""
    parts, everywhere = [], True
    for form, logs in {**inp.requirements, **inp.wide}.items():
        stars = {N: inp.crossover(v) for N, v in sorted(logs.items())}
        first = next((N for N, s in stars.items() if s >= 1), None)
        Nmax = max(stars)
        if first is None:
            parts.append(f"{form}: n* < 1 at every N = {min(stars)}..{Nmax} (vacuous)")
        else:
            everywhere = False
            parts.append(f"{form}: n* >= 1 from N = {first}, n*({Nmax}) = {stars[Nmax]:.3g}")
    return Vacuity(everywhere, "; ".join(parts))


def _slopes(inp: Thm9Inputs, logs: dict) -> np.ndarray:
    """The log-log slopes of n*(N) over the grid of ``logs`` (N -> ln requirement)."""
    Ns = sorted(logs)
    return loglog_slope(lambda N: inp.crossover(logs[N]), Ns)


@claim.check("rigorous n*(N) slopes >= 1/(L_y+4)", evidence="formula")
def thm9_slopes(inp: Thm9Inputs) -> Verdict:
    """Theorem 9 where the chain is rigorous (d_h = o(N); here sqrt N): n*(N) grows like a power
    of N, every log-log slope >= 1 / (L_y + 4) as derived; the uncertified paper form is
    reported, not held to it (rnn-lower-bounds.md, "Theorem 9 at widths proportional to N")."""
    shown = "; ".join(
        f"{form}: {float(np.min(_slopes(inp, logs))):.3f}"
        for form, logs in inp.requirements.items()
    )
    rows = [
        (form, at_least(float(np.min(_slopes(inp, logs))), 1 / (T9_DEPTH + 4), detail=shown))
        for form, logs in inp.requirements.items()
        if "uncertified" not in form
    ]
    return worst(rows)


@claim.check("widths proportional to N: rigorous n*(N) flat", evidence="formula")
def thm9_flat_when_wide(inp: Thm9Inputs) -> Verdict:
    """The volume bound at d_h proportional to N: ln M' / (2 d_h) tends to a constant, so the
    norm requirement and n*(N) stop growing (the step where growth is lost,
    rnn-lower-bounds.md): the last log-log slope is at most 0.01, the largest over the widths."""
    rows = [
        (form, at_most(float(_slopes(inp, logs)[-1]), 0.01, detail=T9_FLAT_DETAIL))
        for form, logs in inp.wide.items()
    ]
    return worst(rows, key=by_ratio)


@claim.check("memoriser ||vec||^2 <= C n^3", evidence="built")
def thm9_memoriser(inp: Thm9Inputs) -> Verdict:
    """The memoriser side: ||vec||^2 <= C n^3 (on the module), where ||y||^2 <= K_y n holds."""
    held = [(n, m) for n, m, y in inp.memorisers if float(y @ y) <= K_Y * n]
    if not held:
        return exact("no memoriser with ||y||^2 <= K_y n", "one at least")

    def within(n, m):
        norm2 = parameter_norm2(m)
        rounding = norm_rounding(m, norm2)
        return at_most(norm2, inp.memoriser_bound(n), rounding, detail=f"of {[n for n, _ in held]}")

    return worst(((f"n = {n}", within(n, m)) for n, m in held), key=by_ratio)


@claim.check("C = C36 sqrt(6)", evidence="formula", agreement=True)
def thm9_constant(inp: Thm9Inputs) -> Verdict:
    """The memoriser bound at depth 2, K_y = 6 is Lemma 36's C36 sqrt(6) n^3, C36 = 2 sqrt((144/pi)
    (5 + pi/72)) (docs/derivations/interpolation.md)."""
    C = C36_DERIVED * math.sqrt(6.0)
    gap = max(abs(inp.memoriser_bound(n) / (C * n**3) - 1) for n in (2, 8, 64, 1000, 10**6))
    return at_most(gap, 1e-9, detail=f"C = {C:.4f}, n = 2 .. 1e6, largest relative gap")


@claim.check("crossover inverts the memoriser bound", evidence="formula", agreement=True)
def thm9_inverts(inp: Thm9Inputs) -> Verdict:
    """The crossover inverts the memoriser bound: n*(ln memoriser_bound(n)) = n."""
    gap = max(abs(inp.crossover(math.log(inp.memoriser_bound(n))) / n - 1) for n in (10, 1000))
    return at_most(gap, 1e-9, detail="n = 10, 1000, largest relative gap")


@claim.check("requirement = AM-GM over L layers", evidence="formula", agreement=True)
def thm9_requirement(inp: Thm9Inputs) -> Verdict:
    """generalising_log_norm2 = ln L + (2 / L)(ln UL_min - ln r_h) (AM-GM over L layers), both forms
    of UL_min (docs/derivations/rnn-lower-bounds.md)."""
    gaps = []
    for depth, r_h in ((2, 1.0), (3, 2.5)):
        for form, lg in (
            ("paper", math.log(prop8_norm_lower_bound_paper(4096, P8_C, 64))),
            ("volume", prop8_log_norm_lower_bound(4096, P8_C, 64)),
        ):
            want = am_gm_log_norm2(lg, depth, r_h)
            got = inp.requirement(4096, P8_C, 64, depth=depth, r_h=r_h, form=form)
            gaps.append(abs(got / want - 1))
    return at_most(max(gaps), 1e-9, detail="N = 4096, d_h = 64, depth 2 and 3")


def _wide_error(c: WideCase) -> float:
    """max |y_hat_5 - y_5| of the module over its n prompts (the literal recurrence, float64)."""
    with torch.no_grad():
        return float((c.model(c.Z)[:, T9_POS] - c.y).abs().max())


@claim.check("widths proportional to N: built memoriser exact", evidence="built", agreement=True)
def thm9_wide_exact(inp: Thm9Inputs) -> Verdict:
    """The memoriser built at d_h = N d, N / 8, N / 512 (its zero padding in the module) has zero
    training error on the literal recurrence: max |y_hat_5 - y_5| over its n = 8 prompts <= 1e-9
    (measured 4.0e-15 at every N and width)."""
    detail = "max |y_hat - y| at position 5 over the n prompts"
    return worst((c.label, at_most(_wide_error(c), 1e-9, detail=detail)) for c in inp.wide_built)


def _against_requirement(inp: Thm9Inputs, c: WideCase, relation: Callable) -> Verdict:
    """``relation``(||vec||^2 of the module, the rigorous requirement at its N and its d_h, read
    off the module), the margin requirement / ||vec||^2 in the detail."""
    norm2, d_h = parameter_norm2(c.model), c.model.d_h
    log_req = inp.requirement(c.N, P8_C, d_h, depth=T9_DEPTH, form="volume")
    req = math.exp(log_req)
    margin = (
        f"requirement / ||vec||^2 = {req / norm2:.3g}: {T9_MARGIN}; "
        f"n*(N) = {inp.crossover(log_req):.3g}"
    )
    return relation(norm2, req, norm_rounding(c.model, norm2), detail=margin)


@claim.check("widths proportional to N: built memoriser below the requirement", evidence="built")
def thm9_wide_below(inp: Thm9Inputs) -> Verdict:
    """Theorem 9's relation, built, at d_h = N / 512 (N = 512, 1024; d_h = 1, 2): the exact
    memoriser's ||vec||^2 (n = 8; 276.58 at every N and width, its padding included) <= Prop 8's
    volume requirement at that width (2.955e4, 4.236e4: margins requirement / ||vec||^2 = 107,
    153). Every RNN of that width with risk <= c at position 5 costs more, so the min-norm
    interpolant of these n prompts (norm <= 276.58) does not generalise: min-norm ERM prefers
    memorising. Flat in N (the requirement tends to 6.07e4, n*(N) = 7.35, 8.28 -> 9.34): the
    bound C n^3 = 3.81e4 (||y||^2 = 9.8 <= K_y n) covers n = 8 from N = 1024 on, the built
    memoriser at both N."""
    below = [c for c in inp.wide_built if c.width == T9_BELOW]
    return worst(((c.label, _against_requirement(inp, c, at_most)) for c in below), key=by_ratio)


@claim.check("widths N d, N / 8: built memoriser above the requirement", evidence="built")
def thm9_wide_above(inp: Thm9Inputs) -> Verdict:
    """The same memoriser at d_h = N d (N = 64, 128) and N / 8 (N = 256, 512): the volume
    requirement there (8.92e-4, 1.20e-3; 4.81e-2, 5.17e-2) is below its ||vec||^2 (276.58) by
    factors 3.1e5 .. 5.3e3 (margins requirement / ||vec||^2 = 3.2e-6 .. 1.9e-4), so the rigorous
    chain certifies no preference for memorising at these widths (n*(N) < 0.09: for no n >= 1;
    rnn-lower-bounds.md, "Theorem 9 at widths proportional to N"). Not Lemma 36's slack: any RNN
    with a depth-2 f_y interpolating these labels (the min-norm one too) has ||vec||^2 >= 2.14."""
    above = [c for c in inp.wide_built if c.width != T9_BELOW]
    v = worst((c.label, _against_requirement(inp, c, at_least)) for c in above)
    floor = f"any interpolating RNN (depth-2 f_y, r_h = 1) has ||vec||^2 >= {_floor(above[0]):.3g}"
    return replace(v, detail=f"{v.detail}; {floor}")


def _floor(c: WideCase) -> float:
    """A floor on ||vec||^2 of ANY RNN with a depth-2 f_y (no last bias) and states in the
    r_h-ball that interpolates the case's labels: |y_j| <= ||a|| ||[W b]||_F ||(h_fwd, h_bwd, z_j,
    1)|| <= (||vec||^2 / 2) sqrt(2 r_h^2 + ||z_j||^2 + 1), so ||vec||^2 >= max_j 2 |y_j| / sqrt(...)
    (the min-norm interpolant included)."""
    z2 = (c.Z[:, T9_POS] ** 2).sum(-1)
    return float((2 * c.y.abs() / (2 * c.model.r_h**2 + z2 + 1).sqrt()).max())


@claim.check("bounds = 40-digit evaluation", evidence="formula", agreement=True)
def thm9_pinned(inp: Thm9Inputs) -> Verdict:
    """C n^3 (n = 2 .. 1e6), the crossover n*, the requirement ln L + (2/L)(ln UL_min - ln r_h) in
    both forms (N = 2^8, 2^14, 2^20; d_h = sqrt N, N / 8, N d; depth 2 at the defaults and 3) and
    the requirement tables against their 40-digit evaluation, relative 1e-12."""
    with mpmath.workdps(PIN_DPS):
        gaps = thm9_pin_gaps(inp, P8_C, T9_D, T9_DEPTH)
    label, gap = max(gaps, key=lambda g: g[1])
    return at_most(gap, PIN_RTOL, detail=f"{len(gaps)} values; largest at {label}")


def _state_width(model: torch.nn.Module) -> int:
    """d_h read off the weights: the transitions' rows (both directions) and half of f_y's state
    columns (its first layer's columns less D_in); -1 where they disagree."""
    widths = {f[-1].weight.shape[0] for f in (model.f_fwd, model.f_bwd)}
    widths.add((model.f_y[0].weight.shape[1] - model.D_in) // 2)
    return widths.pop() if len(widths) == 1 else -1


@claim.check("widths proportional to N: built d_h = the width asked", evidence="built")
def thm9_wide_widths(inp: Thm9Inputs) -> Verdict:
    """Every memoriser built at a width proportional to N has the state width T9_WIDE asks (N d,
    N / 8, N / 512 at its N), read off its weights."""
    asked = {name: fn for name, fn, _ in T9_WIDE}
    return worst(
        (c.label, exact(_state_width(c.model), asked[c.width](c.N), detail="d_h of the weights"))
        for c in inp.wide_built
    )


def _built_prop28_log_norm2(N: int, ctx: Context) -> float:
    """ln ||vec theta||^2 of the Prop 28 RNN of bounds.transition.prop28_rnn (on the module)."""
    g = ctx.generator("thm-9/prop28-link")
    net = make_link("linear", 1, T9_D, generator=g).two_layer_net()
    book = rs_hadamard_codebook(N, dtype=torch.float64)
    with cpu_threads(1):
        rnn = prop28_rnn(book, T9_D, net, eps=0.1).module(device=ctx.device)
        return math.log(parameter_norm2(rnn))


@claim.fault("simple-1STR, Prop 28 built", breaks=thm9_slopes)
def _simple_built(inp: Thm9Inputs, ctx: Context) -> Thm9Inputs:
    """Simple-1STR: the requirement is the built Prop 28 RNN's ||vec||^2 (N-free, polylog)."""
    logs = {N: _built_prop28_log_norm2(N, ctx) for N in T9_NS_BUILT}
    return replace(inp, requirements={"Prop 28 built (measured ||vec||^2)": logs})


@claim.fault("simple-1STR, Prop 28 radii", breaks=thm9_slopes)
def _simple_radii(inp: Thm9Inputs) -> Thm9Inputs:
    """Simple-1STR: the requirement is Prop 28's layer-radius norm (bounds.theorem7)."""
    logs = {N: math.log(prop28_norm2(N, Theorem7Params(q=1, d=T9_D))) for N in T9_NS}
    return replace(inp, requirements={"Prop 28 layer radii": logs})


# the memoriser bound with exponent 2 (C n^2) in place of Lemma 36's n^3; the crossover still
# computed from n^3
claim.fault(
    "memoriser bound C n^2",
    breaks=(thm9_constant, thm9_inverts, thm9_pinned),
    apply=replaced(memoriser_bound=lambda n: _memoriser_bound(n) / n),
)
# the crossover computed from the exponent 2 (n* = (e^req / C)^(1/2)) in place of 3
claim.fault(
    "crossover from exponent 2",
    breaks=thm9_inverts,
    apply=replaced(crossover=lambda lr: math.exp((lr - math.log(lemma36_constant(K_Y))) / 2)),
)


@claim.fault("width sqrt N read for N d", breaks=thm9_flat_when_wide)
def _wide_at_sqrt_n(inp: Thm9Inputs) -> Thm9Inputs:
    """The wide forms evaluated at d_h = sqrt N (a width slip): growth where the derivation has
    none."""
    sqrt_n = {
        N: generalising_log_norm2(N, P8_C, math.isqrt(N), depth=T9_DEPTH, form="volume")
        for N in T9_NS
    }
    return replace(inp, wide={"volume (d_h = sqrt N read as N d)": sqrt_n})


@claim.fault("memorise every position", breaks=thm9_memoriser)
def _memoriser_of_every_position(inp: Thm9Inputs, ctx: Context) -> Thm9Inputs:
    """A memoriser of the labels at every position (n N points, n = 8) in place of position 5."""
    return replace(inp, memorisers=_memorisers(ctx, (8,), "all"))


# the memoriser bound and crossover at K_y = 5 (C36 sqrt 5) in place of 6
claim.fault(
    "K_y = 5",
    breaks=thm9_constant,
    apply=replaced(
        memoriser_bound=lambda n: memoriser_norm2_bound(n, K_y=5.0),
        crossover=lambda lr: theorem9_crossover(lr, K_y=5.0),
    ),
)


def _requirement_without_L(N: int, c: float, d_h: int, *, depth: int = 2, **kw) -> float:
    """The requirement with AM-GM's factor L dropped: (2 / L)(ln UL_min - ln r_h)."""
    return generalising_log_norm2(N, c, d_h, depth=depth, **kw) - math.log(depth)


@claim.fault("AM-GM without the factor L", breaks=thm9_requirement)
def _am_gm_without_L(inp: Thm9Inputs) -> Thm9Inputs:
    """The requirement function and its table with AM-GM's factor L dropped (a constant in
    ln ||vec||^2: the slopes of n*(N) do not see it)."""
    return replace(
        inp, requirement=_requirement_without_L, requirements=_requirements(_requirement_without_L)
    )


def _requirement_at_sqrt_n(N: int, c: float, d_h: int, **kw) -> float:
    """The requirement at d_h = sqrt N whatever the width: the rigorous table's width read for the
    built module's (a width slip)."""
    return generalising_log_norm2(N, c, math.isqrt(N), **kw)


# the built memoriser at d_h = N / 512 compared with the requirement at d_h = sqrt N
claim.fault(
    "requirement at sqrt N for the built width",
    breaks=thm9_wide_below,
    apply=replaced(requirement=_requirement_at_sqrt_n),
)


def _paper_with_c_m_4(N: int, c: float, d_h: int, **kw) -> float:
    """The requirement with the paper form's Maurey constant C_M = 4 (halved): ln UL_min up by
    ln 2 / 2, the volume form unchanged."""
    shift = (
        2.0 / kw.get("depth", 2) * math.log(2.0) / 2 if kw.get("form", "paper") == "paper" else 0
    )
    return generalising_log_norm2(N, c, d_h, **kw) + shift


@claim.fault("paper form with C_M = 4", breaks=thm9_pinned)
def _c_m_4(inp: Thm9Inputs) -> Thm9Inputs:
    """The requirement function and its tables with C_M = 4 in the paper's form."""
    return replace(
        inp, requirement=_paper_with_c_m_4, requirements=_requirements(_paper_with_c_m_4)
    )


def _rebuilt(c: WideCase, d_h: int) -> torch.nn.Module:
    """The case's Lemma 36 net in ``memorising_rnn`` at state width ``d_h``."""
    layout = MemoriserLayout(depth=T9_DEPTH, d_h=d_h)
    return memorising_rnn(c.lemma36, D_in=c.Z.shape[-1], layout=layout)


@claim.fault("padding doubled (2 d_h)", breaks=thm9_wide_widths)
def _padding_doubled(inp: Thm9Inputs) -> Thm9Inputs:
    """Every wide memoriser built at twice its width (the state blocks of both directions counted
    as d_h)."""
    return replace(
        inp,
        wide_built=tuple(replace(c, model=_rebuilt(c, 2 * c.model.d_h)) for c in inp.wide_built),
    )


@claim.fault("built memoriser not padded (d_h = 1)", breaks=thm9_wide_above)
def _not_padded(inp: Thm9Inputs) -> Thm9Inputs:
    """The memoriser left at ``memorising_rnn``'s default state width d_h = 1 (never embedded at
    the width proportional to N) and compared at the width of the module: at N = 512 the
    requirement at d_h = 1 (2.955e4) is above its ||vec||^2."""
    return replace(inp, wide_built=tuple(replace(c, model=_rebuilt(c, 1)) for c in inp.wide_built))


@claim.fault("padding after z, not in the state blocks", breaks=thm9_wide_exact)
def _padded_after_z(inp: Thm9Inputs) -> Thm9Inputs:
    """The d_h = 1 memoriser's f_y first layer zero-padded at the end of its input (after z), in
    place of the state blocks, at d_h = N d, N = 64: the x-block's weights land on state columns
    (the states are 0), so f_y answers a constant."""
    c = inp.wide_built[0]
    model, w = _rebuilt(c, c.model.d_h), _rebuilt(c, 1).f_y[0].weight
    with torch.no_grad():
        model.f_y[0].weight.zero_()
        model.f_y[0].weight[:, : w.shape[1]] = w
    return replace(inp, wide_built=(replace(c, model=model),))
