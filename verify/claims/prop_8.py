"""Prop 8 (Prop 35; conference Prop 6): risk <= c forces the states of e^{Omega(N)} prompts into a
packing, hence width and norm bounds (docs/derivations/rnn-lower-bounds.md)."""

from __future__ import annotations

import math
from dataclasses import replace

import mpmath
import torch

from qstr.bounds.interpolation import slot_memory
from qstr.bounds.prop8 import (
    prop8_packing,
    prop8_log_norm_lower_bound,
    prop8_norm_lower_bound_paper,
    prop8_width_lower_bound,
)
from qstr.bounds.theorem9 import generalising_log_norm2
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.slot_memory import slot_memory_rnn
from qstr.verify.claim import (
    Claim,
    Context,
    Ref,
    Vacuity,
    Verdict,
    at_least,
    at_most,
    close,
    edited,
)
from qstr.verify.claim import exact, replaced, worst
from qstr.verify.claims._interpolation import LIBRARY_BOUNDS, P8_C, P8_GAMMA, P8_K, ROOT2
from qstr.verify.claims._interpolation import bounds_on, fewer_than_two_good
from qstr.verify.claims._interpolation import chernoff_rate, derived_counts
from qstr.verify.claims._interpolation import PIN_RTOL, packing_exists, slipped_packing
from qstr.verify.claims._prop8 import P8_SCAN, prop8_default_gaps, prop8_pin_gaps, width_scan
from qstr.verify.claims._prop8 import _bound_table, _observed, _pairwise
from qstr.verify.claims._prop8 import _state_width, _wrong_rows, with_default_gamma
from qstr.verify.claims._prop8 import _answer_vectors, _width_one_direction, _width_ratio_inverted
from qstr.verify.claims._prop8 import _edited_copy, _transitions_zeroed
from qstr.verify.claims._prop8 import P8_ANSWER_D, P8_ANSWER_N, P8_BIND_M, P8_BIND_N
from qstr.verify.claims._prop8 import Prop8Inputs, SlotMemory, _slot_memory
from qstr.verify.registry import register
from qstr.verify.threads import cpu_threads

FULL = ("full", "gpu")
P8_LOG_N = 623  # (N - 1) I = 60.07: the log branch of prop8_packing, just past its threshold
P8_DERIVED_NS = tuple((N, 0.5) for N in range(2, P8_LOG_N)) + ((150, 0.3), (150, 0.7))

claim = register(
    Claim(
        "prop-8",
        Ref("Prop 8 (Prop 35)", "Prop 6 (Prop 35)"),
        statement="risk <= c at a position forces the states of e^{Omega(N)} prompts sharing x_i "
        "into a packing (quick: answer + state separation; full: trained GRU width grows with N)",
        builds=(slot_memory_rnn,),
        bounds=(
            slot_memory,
            generalising_log_norm2,
            prop8_packing,
            prop8_width_lower_bound,
            prop8_log_norm_lower_bound,
            prop8_norm_lower_bound_paper,
        ),
        derivation="docs/derivations/rnn-lower-bounds.md",
    )
)


@claim.inputs
def prop8_inputs(ctx: Context) -> Prop8Inputs:
    """M prompts of length 256 sharing x_i (general 1STR), the slot-memory RNN and the bounds."""
    M = ctx.pick(quick=200, full=1000, gpu=2000)
    g = ctx.generator("prop-8/answer-prompts", device=ctx.device)
    kw = dict(dtype=torch.float64, device=ctx.device)
    x = torch.randn(M, P8_ANSWER_N, P8_ANSWER_D, generator=g, **kw)
    x[:, P8_ANSWER_N // 2] = x[0, P8_ANSWER_N // 2]  # all prompts share x_i
    u = torch.randn(P8_ANSWER_D, generator=g, **kw)
    full = ctx.profile != "quick"
    widths = width_scan(ctx, simple=False) if full else None
    binding = _slot_memory(ctx, sizes=(P8_BIND_N, P8_BIND_M, 1)) if full else None
    return Prop8Inputs(x, u / u.norm(), None, _slot_memory(ctx), LIBRARY_BOUNDS, widths, binding)


@claim.check("answer separation >= sqrt(2a(N-1)/N)", evidence="monte-carlo")
def prop8_answers(inp: Prop8Inputs) -> Verdict:
    """Prop 35: the answer vectors of prompts sharing x_i are sqrt(2a(N-1)/N) apart (normalised):
    Gaussian draws of the task, no RNN (monte-carlo)."""
    M, N, _ = inp.x.shape
    sep = float(_pairwise(_answer_vectors(inp.x, inp.u, inp.t)).min()) / math.sqrt(N)
    pk = inp.bounds.at(N)
    fail = M * (M - 1) / 2 * math.exp(-(N - 1) * pk.rate)
    task = "general 1STR" if inp.t is None else "simple-1STR"
    detail = (
        f"{task}, N = {N}, {M} prompts sharing x_i: min normalised answer separation (failure "
        f"probability <= {fail:.1e}); theory packs M' = e^{pk.log_M_good:.2f} such prompts"
    )
    return at_least(sep, pk.answer_sep, detail=detail)


@claim.check("conditional errors <= K c", evidence="built")
def prop8_conditional_errors(inp: Prop8Inputs) -> Verdict:
    """The exact generalising RNN has every conditional error e_m <= K c (here 0)."""
    s = inp.slot
    e = ((_observed(s)[1] - s.x @ s.u) ** 2).mean(dim=1)
    return at_most(float(e.max()), P8_K * P8_C, 1e-18, detail="max_m mean_k (P_mk - <u, x_k>)^2")


@claim.check("tokens inside the r_x ball", evidence="monte-carlo")
def prop8_inside(inp: Prop8Inputs) -> Verdict:
    """The prompts' tokens lie in the r_x ball the RNN is exact on (Lemma 12's radius)."""
    s = inp.slot
    detail = "max ||x_j||; Lemma 12's radius holds w.p. 1 - 1/sqrt(M N), loose by ~sqrt(3e)"
    return at_most(float(s.x.norm(dim=-1).max()), s.guarantee.r_x, detail=detail)


@claim.check("states separated by s~/lambda", evidence="built")
def prop8_separated(inp: Prop8Inputs) -> Verdict:
    """Prop 8: the states of the packed prompts are >= s~ / lambda apart (the module's states)."""
    s = inp.slot
    need = inp.bounds.at(s.N).sep / s.guarantee.lipschitz
    detail = (
        "min ||w - w'|| against s~ / lambda; slack = the answers' (s~ / their separation) "
        "times the chain's (<= 1 / sqrt(2N) for this RNN: rnn-lower-bounds.md, 'Slack')"
    )
    return at_least(float(_pairwise(_observed(s)[0]).min()), need, detail=detail)


@claim.check("chain ||dP|| <= lambda ||dw||", evidence="built")
def prop8_chain(inp: Prop8Inputs) -> Verdict:
    """||P - P'|| / sqrt N <= lambda ||w - w'|| for every pair (f_y is lambda-Lipschitz)."""
    s = inp.slot
    w, P = _observed(s)
    dw, dp = _pairwise(w), _pairwise(P) / math.sqrt(s.N)
    ratio = float((dp / (s.guarantee.lipschitz * dw + 1e-9)).max())
    detail = (
        "largest ||dP|| / sqrt N / (lambda ||dw|| + 1e-9); at most 1 / sqrt(2N) = "
        f"{1 / math.sqrt(2 * s.N):.3g} for this RNN (answer k reads state block k only: "
        "rnn-lower-bounds.md, 'Slack')"
    )
    return at_most(ratio, 1 + 1e-9, detail=detail)


def _width_bound(inp: Prop8Inputs) -> float:
    """The width bound at the slot memory's N and UL."""
    return inp.bounds.width(inp.slot.guarantee.N, P8_C, inp.slot.UL, K=P8_K, gamma=P8_GAMMA)


@claim.scope_with
def prop8_scope(inp: Prop8Inputs) -> str:
    """The slot memory's N and width, the prompts, the GRU scan (full)."""
    g = inp.slot.guarantee
    scan = "" if inp.widths is None else f"; GRU widths at N = {[w[0] for w in inp.widths]}"
    return f"slot-memory RNN N = {g.N}, d_h = {g.d_h}; {inp.x.shape[0]} prompts{scan}"


@claim.vacuity_with
def prop8_vacuity(inp: Prop8Inputs) -> Vacuity:
    """Vacuous where the width bound is at most 1 (every RNN has d_h >= 1; 0 where Prop 35's
    packing does not exist): the first N above 1, and the bound at the claim's N."""
    UL, N = inp.slot.UL, inp.slot.guarantee.N
    first = next(
        (M for M in range(2, 10**4) if inp.bounds.width(M, P8_C, UL, K=P8_K, gamma=P8_GAMMA) > 1),
        None,
    )
    w = _width_bound(inp)
    onset = f"above 1 from N = {first}" if first else "at most 1 for every N < 10^4"
    line = f"width bound (c = {P8_C}, UL = {UL:.1f}) {onset}; at the claim's N = {N}: {w:.3g}"
    return Vacuity(w <= 1, line)


@claim.check("d_h >= width bound", evidence="built")
def prop8_width(inp: Prop8Inputs) -> Verdict:
    """Prop 8: the built RNN's state width (read off its transition weights) is at least the width
    bound at its UL; vacuous where the bound is <= 1 (every RNN has d_h >= 1)."""
    bound = _width_bound(inp)
    detail = f"d_h of the module's weights; UL = {inp.slot.UL:.1f}"
    return at_least(_state_width(inp.slot.model), bound, detail=detail, vacuous=bound <= 1)


@claim.check("record = built module", evidence="built")
def prop8_record(inp: Prop8Inputs) -> Verdict:
    """The SlotMemoryGuarantee a user reads against the built module: d_h (= N d) the transitions'
    rows, r_h the module's projection radius, norm2 its ||vec theta||^2 (relative 1e-12)."""
    s, gu = inp.slot, inp.slot.guarantee
    norm2 = sum(float(p.detach().pow(2).sum()) for p in s.model.parameters())
    rows = [
        ("d_h", exact(gu.d_h, _state_width(s.model), detail="record d_h vs the weights' rows")),
        ("N d", exact(gu.d_h, s.N * s.u.shape[0], detail="record d_h vs N d")),
        ("r_h", close(gu.r_h, float(s.model.r_h), 1e-12 * gu.r_h, detail="record vs module r_h")),
        ("norm2", close(gu.norm2, norm2, PIN_RTOL * norm2, detail="record vs module ||vec||^2")),
    ]
    return worst(rows)


@claim.check("bounds = 40-digit evaluation", evidence="formula", agreement=True)
def prop8_pinned(inp: Prop8Inputs) -> Verdict:
    """The packing (rate, M, M', failure, s~, existence), the width bound, the volume and paper norm
    bounds against their 40-digit evaluation written from rnn-lower-bounds.md (sections 1, 2),
    relative 1e-12, at the claim's N (128, 256), the onset N = 339, both sides of the log branch
    and N = 2^20."""
    gaps = prop8_pin_gaps(inp.bounds)
    label, gap = max(gaps, key=lambda g: g[1])
    return at_most(gap, PIN_RTOL, detail=f"{len(gaps)} points; largest at {label}")


@claim.check(
    "defaults = the page's K = 2, gamma = 1/2, C_M = 8", evidence="formula", agreement=True
)
def prop8_defaults(inp: Prop8Inputs) -> Verdict:
    """The bound functions called with their defaults, as a user calls them, at the slot memory's
    N and UL, against the 40-digit evaluation at the page's K = 2, gamma = 1/2, C_M = 8."""
    gaps = prop8_default_gaps(inp.bounds, inp.slot.guarantee.N, inp.slot.UL)
    label, gap = max(gaps, key=lambda g: g[1])
    return at_most(gap, PIN_RTOL, detail=f"largest at {label}")


@claim.check("width bound inverts the volume bound", evidence="formula")
def prop8_width_inverts(inp: Prop8Inputs) -> Verdict:
    """The width bound inverts the volume bound ln M' <= 2 w ln(1 + 2 sqrt2 UL / s~): UL solved
    back from w = the width bound is UL (rnn-lower-bounds.md)."""
    UL, w = inp.slot.UL, _width_bound(inp)
    pk = inp.bounds.at(inp.slot.guarantee.N)
    back = pk.sep / (2 * ROOT2) * math.expm1(pk.log_M_good / (2 * w)) if w > 0 else math.inf
    return close(back / UL, 1.0, 1e-9, detail=f"UL = {UL:.1f}, solved back {back:.1f}")


@claim.check("exact on the r_x sphere", evidence="built", agreement=True)
def prop8_sphere(inp: Prop8Inputs) -> Verdict:
    """Exactness on tokens of the r_x sphere (two prompts and their negatives), random t and t_i = i
    (each position asking for its own token: the e_k^+- branch of either sign)."""
    s = inp.slot
    r_x, N = s.guarantee.r_x, s.N
    xb = s.x[:2] / s.x[:2].norm(dim=-1, keepdim=True) * r_x
    xb = torch.cat([xb, -xb])
    err = 0.0
    for tb in (s.t[:2].repeat(2, 1, 1), torch.arange(N, device=xb.device).expand(4, N)[..., None]):
        with torch.no_grad(), cpu_threads(1):
            yb = s.model(rnn_encoding(xb, tb, s.omega))
        target = torch.gather(xb @ s.u, 1, tb[..., 0])
        err = max(err, float((yb.reshape(target.shape) - target).abs().max()))
    return at_most(err, 1e-9 * r_x, detail="max |y_hat - <u, x_t>|, random t and t_i = i")


@claim.check("width bound positive iff the packing exists", evidence="formula")
def prop8_positive(inp: Prop8Inputs) -> Verdict:
    """The width bound is positive exactly where Prop 35's packing exists (N = 2..200)."""
    table = _bound_table(inp.bounds)
    first = min(r["N"] for r in table if r["width"] > 0 and r["gamma"] == P8_GAMMA)
    v = _wrong_rows(table, lambda r: (r["width"] > 0) == packing_exists(r["packing"]))
    return replace(v, detail=f"{v.detail}; positive from N = {first}")


@claim.check("norm bounds vanish with the width bound", evidence="formula")
def prop8_norms_vanish(inp: Prop8Inputs) -> Verdict:
    """Where the width bound is 0 the norm bounds are too (ln = -inf, the paper's form 0), and
    elsewhere the volume norm bound is finite."""

    def consistent(r):
        positive = r["width"] > 0
        return (
            (r["norm2"] > -math.inf) == positive
            and r["norm2"] < math.inf
            and (positive or r["paper"] == 0.0)
        )

    return _wrong_rows(_bound_table(inp.bounds), consistent)


@claim.check("norm bounds as derived", evidence="formula", agreement=True)
def prop8_norms_derived(inp: Prop8Inputs) -> Verdict:
    """Where the packing exists: the paper's form (s~ / sqrt 2) sqrt(ln M' / (8 ln(16 N + 1))) and
    the volume bound (s~ / (2 sqrt 2)) expm1(ln M' / (2 d_h)) (d_h = 1, 8, 4N), relative."""
    gaps = []
    for r in (r for r in _bound_table(inp.bounds) if r["width"] > 0):
        pk, N = r["packing"], r["N"]
        paper = pk.sep / ROOT2 * math.sqrt(pk.log_M_good / (8 * math.log(16 * N + 1)))
        gaps.append(abs(r["paper"] - paper) / paper)
        for d_h, got in r["log_norm"].items():
            vol = math.log(pk.sep / (2 * ROOT2) * math.expm1(pk.log_M_good / (2 * d_h)))
            gaps.append(abs(got - vol) / max(1.0, abs(vol)))
    return at_most(max(gaps), 1e-12, detail="largest relative gap (log scale for the volume form)")


@claim.check("rate = Chernoff exponent", evidence="formula", agreement=True)
def prop8_rate(inp: Prop8Inputs) -> Verdict:
    """Prop 35's rate I(a) is the chi^2 Chernoff exponent (numerical maximisation), a = 1 -
    gamma."""
    gap = max(
        abs(inp.bounds.packing(200, 0.01, K=P8_K, gamma=gm).rate / chernoff_rate(1 - gm) - 1)
        for gm in (0.3, 0.5, 0.7)
    )
    return at_most(gap, 1e-8, detail="largest relative gap, gamma = 0.3, 0.5, 0.7")


@claim.check("M and M' as derived", evidence="formula")
def prop8_counts(inp: Prop8Inputs) -> Verdict:
    """The packing's M and M' are their 40-digit derivation (N = 2..622)."""
    wrong = []
    for N, gm in P8_DERIVED_NS:
        pk = inp.bounds.at(N, gm)
        M, Mg, _ = derived_counts(N, pk.rate)
        wrong += [(N, gm)] if (pk.M, pk.M_good) != (M, Mg) else []
    return exact(len(wrong), 0, detail=f"lengths where (M, M') differ: {wrong[:4]}")


@claim.check("ln M', failure, separations as derived", evidence="formula", agreement=True)
def prop8_record_derived(inp: Prop8Inputs) -> Verdict:
    """ln M', the failure bound (relative 1e-9), sqrt(2a(N-1)/N) and s~ = it - 2 sqrt(K c)
    (relative 1e-12) are their derivation (N = 2..622); the largest gap / tolerance."""
    largest = 0.0
    for N, gm in P8_DERIVED_NS:
        pk = inp.bounds.at(N, gm)
        _, Mg, fail = derived_counts(N, pk.rate)
        ans = math.sqrt(2 * (1 - gm) * (N - 1) / N)
        largest = max(
            largest,
            abs(pk.log_M_good - math.log(Mg)) / math.log(Mg) / 1e-12 if Mg > 1 else 0,
            abs(pk.failure / fail - 1) / 1e-9,
            abs(pk.answer_sep / ans - 1) / 1e-12,
            abs(pk.sep / (ans - 2 * math.sqrt(P8_K * P8_C)) - 1) / 1e-12,
        )
    return at_most(largest, 1.0, detail="largest relative gap / its tolerance")


@claim.check("log form of ln M' as derived", evidence="formula")
def prop8_log_form(inp: Prop8Inputs) -> Verdict:
    """Past e^{(N-1) I} > e^60 the log form of ln M' is below the exact one by at most 1e-11."""
    big = inp.bounds.packing(P8_LOG_N, P8_C, K=P8_K)
    frac = 1 - 1 / P8_K
    with mpmath.workdps(40):
        X = mpmath.exp((P8_LOG_N - 1) * mpmath.mpf(big.rate))
        exact_log = float(
            mpmath.log(mpmath.ceil(frac * mpmath.floor((1 + mpmath.sqrt(1 + 4 * X)) / 2) / 2))
        )
    what = f"exact ln M' - log form at N = {P8_LOG_N} (in [0, 1e-11])"
    return close(exact_log - big.log_M_good, 0.5e-11, 0.5e-11, detail=what)


@claim.check("trained GRU width grows with N", evidence="built", profiles=("full", "gpu"))
def prop8_width_growth(inp: Prop8Inputs) -> Verdict:
    """Full profile: the smallest trained GRU width with risk <= c grows with N (at least 4x over
    N = 4..16, monotone) on general 1STR."""
    widest = P8_SCAN["widths"][-1]
    ws = [w if w else 2 * widest for _, w, _ in inp.widths]
    mono = all(b >= a for a, b in zip(ws, ws[1:], strict=False))
    detail = "; ".join(f"N={N}: min width {w or '>' + str(widest)}" for N, w, _ in inp.widths)
    return at_least(ws[-1] / ws[0] if mono else 0.0, 4.0, detail=detail)


def _binding_width(inp: Prop8Inputs) -> float:
    """The width bound at the binding slot memory's N and UL."""
    s = inp.binding
    return inp.bounds.width(s.guarantee.N, P8_C, s.UL, K=P8_K, gamma=P8_GAMMA)


@claim.check("where it binds (N = 512): d_h >= width bound", evidence="built", profiles=FULL)
def prop8_binding_width(inp: Prop8Inputs) -> Verdict:
    """Full profile, N = 512 (c = 0.05): the narrowest RNN the toolkit builds with position risk
    <= c (the slot memory at d = 1, d_h = N read off its weights) against the width bound at its
    own UL, which exceeds 1 there (not vacuous)."""
    s, bound = inp.binding, _binding_width(inp)
    detail = f"slot memory d = 1: d_h = N = {s.N}, UL = {s.UL:.1f}, width bound {bound:.3g}"
    return at_least(_state_width(s.model), bound, detail=detail, vacuous=bound <= 1)


@claim.check("where it binds (N = 512): position risk <= c", evidence="built", profiles=FULL)
def prop8_binding_risk(inp: Prop8Inputs) -> Verdict:
    """Full profile: the binding slot memory's position risk at i (its answers for every t_i on
    fresh prompts, run on the module; t_i uniform) is <= c."""
    s = inp.binding
    risk = float(((_observed(s)[1] - s.x @ s.u) ** 2).mean())
    return at_most(risk, P8_C, detail=f"{s.x.shape[0]} prompts x N values of t_i; exact RNN")


@claim.fault("simple-1STR answers", breaks=prop8_answers)
def _simple_1str(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """Simple-1STR answers: the states know t (it is in every z_k), so the answer does not vary."""
    M, N, _ = inp.x.shape
    g = ctx.generator("prop-8/simple-targets", device=ctx.device)
    return replace(inp, t=torch.randint(N, (M,), generator=g, device=inp.x.device))


def _misread_unit(slot: SlotMemory) -> SlotMemory:
    """An e_k^- unit reads relu(-s_2) for relu(xi): wrong only when t_i = i and both are
    negative (a copy of the module, its weight edited)."""
    N = slot.N

    def misread(model):
        W = model.f_y[2].weight
        W[3 * N : 4 * N, 2 + N], W[3 * N : 4 * N, 2 * N] = W[3 * N : 4 * N, 2 * N].clone(), 0.0

    return replace(slot, model=_edited_copy(slot, misread))


claim.fault("e_k^- unit misreads", breaks=prop8_sphere, apply=edited(slot=_misread_unit))


claim.fault(
    "transitions zeroed",
    breaks=(prop8_separated, prop8_conditional_errors),
    apply=edited(slot=_transitions_zeroed),
)


def _state_read_scaled(s: SlotMemory) -> SlotMemory:
    """f_y reads the states through U = r_h I while the guarantee keeps U_op = 1 and lambda =
    sqrt 2 (a copy of the module, its first output layer's state columns scaled)."""

    def scale(model):
        model.f_y[0].weight[:, : 2 * s.guarantee.d_h] *= s.guarantee.r_h

    model = _edited_copy(s, scale)
    return replace(s, model=model)


claim.fault(
    "state read U = r_h I",
    breaks=(prop8_chain, prop8_conditional_errors),
    apply=edited(slot=_state_read_scaled),
)


@claim.fault("r_x without 3 C_x e d", breaks=prop8_inside)
def _radius_without_3eCd(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """The slot-memory RNN built at r_x = sqrt(ln(M N)): Lemma 12's factor 3 C_x e d dropped."""
    return replace(inp, slot=_slot_memory(ctx, radius=lambda d, M, N: math.sqrt(math.log(M * N))))


# the Chernoff rate a - 1 - ln a (its 1/2 dropped), everything after built on it
claim.fault(
    "Chernoff rate without 1/2",
    breaks=prop8_rate,
    apply=replaced(bounds=bounds_on(slipped_packing(rate_factor=2.0))),
)
# M' = ceil((1 - 1/K) M) (the 1/2 of half the pairs dropped), in both of ln M's forms
claim.fault(
    "M' without the 1/2",
    breaks=(prop8_counts, prop8_record_derived, prop8_log_form),
    apply=replaced(bounds=bounds_on(slipped_packing(good_divisor=1.0))),
)
# s~ = sqrt(2a(N-1)/N) - sqrt(K c): the prediction error subtracted for one prompt only
claim.fault(
    "s~ with one prediction error",
    breaks=prop8_record_derived,
    apply=replaced(bounds=bounds_on(slipped_packing(error_factor=1.0))),
)
# every bound vacuous only where M' < 2 (the failure bound < 1 not required)
claim.fault(
    "vacuous only where M' < 2",
    breaks=prop8_positive,
    apply=replaced(
        bounds=bounds_on(
            prop8_packing, vacuous=fewer_than_two_good, norm_vacuous=fewer_than_two_good
        )
    ),
)
# the norm bounds evaluated where the packing does not exist (the width bound still 0)
claim.fault(
    "norm bounds where no packing exists",
    breaks=prop8_norms_vanish,
    apply=replaced(
        bounds=replace(
            bounds_on(prop8_packing, norm_vacuous=lambda pk: False), width=prop8_width_lower_bound
        )
    ),
)
# the volume norm bound with exp for expm1 (the -1 of (1 + 2 sqrt2 UL / s~) dropped)
claim.fault(
    "volume bound exp for expm1",
    breaks=prop8_norms_derived,
    apply=replaced(bounds=bounds_on(prop8_packing, grow=math.exp)),
)
claim.fault(
    "width bound with s~ / UL",
    breaks=(prop8_width, prop8_width_inverts),
    apply=edited(bounds=lambda b: replace(b, width=_width_ratio_inverted)),
)


claim.fault(
    "width bound with D = d_h",
    breaks=(prop8_pinned, prop8_width_inverts),
    apply=edited(bounds=lambda b: replace(b, width=_width_one_direction)),
)
# the paper's form with C_M = 4 (Maurey's constant halved)
claim.fault(
    "paper norm with C_M = 4",
    breaks=prop8_pinned,
    apply=edited(
        bounds=lambda b: replace(
            b, paper=lambda *a, **k: prop8_norm_lower_bound_paper(*a, C_M=4.0, **k)
        )
    ),
)
# every bound function's default gamma 0.4 (a default argument slipped; calls passing gamma agree)
claim.fault(
    "default gamma 0.4",
    breaks=prop8_defaults,
    apply=edited(
        bounds=lambda b: replace(
            b,
            packing=with_default_gamma(b.packing, 0.4),
            width=with_default_gamma(b.width, 0.4),
            log_norm=with_default_gamma(b.log_norm, 0.4),
            paper=with_default_gamma(b.paper, 0.4),
        )
    ),
)
# the record's d_h = N (the token dimension d forgotten)
claim.fault(
    "record d_h = N",
    breaks=prop8_record,
    apply=edited(slot=lambda s: replace(s, guarantee=replace(s.guarantee, d_h=s.N))),
)


claim.fault(
    "binding RNN's transitions zeroed",
    breaks=prop8_binding_risk,
    profiles=FULL,
    apply=edited(binding=_transitions_zeroed),
)
claim.fault(
    "binding width bound with s~ / UL",
    breaks=prop8_binding_width,
    profiles=FULL,
    apply=edited(bounds=lambda b: replace(b, width=_width_ratio_inverted)),
)


@claim.fault("simple-1STR width scan", breaks=prop8_width_growth, profiles=("full", "gpu"))
def _simple_widths(inp: Prop8Inputs, ctx: Context) -> Prop8Inputs:
    """The width scan trained on simple-1STR (t the same at every position: no packing needed)."""
    return replace(inp, widths=width_scan(ctx, simple=True))
