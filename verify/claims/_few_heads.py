"""What Props 21 and 3 share (verify/claims/prop_21.py, verify/claims/prop_3.py): the claims'
shapes, their inputs (the explicit H = q - 1 model, the trained H < q models, the adversaries of
_few_heads_adversary.py), the checks both declare and the edits of their faults
(docs/derivations/few-heads.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any, Callable, Optional, Tuple

import torch
from qstr.bounds.attention import lemma11, lemma12_radius
from qstr.bounds.transformer import few_heads_floor_per_position
from qstr.constructions.layout import token_layout
from qstr.constructions.paper_models import MergedAttention
from qstr.constructions.relu import sqnorm_net
from qstr.verify.claim import Context, Verdict, at_least, at_most, close, worst
from qstr.verify.claims._few_heads_adversary import (
    FLOOR_POINTS,
    FLOOR_RTOL,
    Adversary,
    RiskEstimate,
    adversary_search,
    few_heads_batch,
    floor_gap,
    infimum_exact,
    reread,
    restrict,
    risk_rounding,
    unseen_label,
    unseen_second_moment,
)
from qstr.verify.training import OnlineFit, fit_online, position_risk

# ---------------------------------------------------------------- the two claims' inputs and checks

# prop-3's quick profile trains one model (H = 1 at d = 16, q = 2) for QUICK_STEPS steps; prop-21
# trains in full and gpu only (at d = 1, 200 steps leave its H = 2 model at 1.06 +- 0.09, too near
# the H = 1 floor 4/3 for the fault; 600 steps cost 1.7 s)
QUICK_STEPS = 200
TRAINED = {"prop-21": ("full", "gpu"), "prop-3": ("quick", "full", "gpu")}
FEW_CONFIDENCE = 0.999  # family confidence of each Monte Carlo check over its cases
SQ_R, SQ_KNOTS = 6.0, 121
PROMPT_CHUNK = 4096  # the explicit model's prompts are drawn and scored this many at a time
LABEL_CHUNK = 2**15  # the control variate's prompts are drawn this many at a time
LABEL_FULL = 2**19  # its prompts in the full and gpu profiles
Q_HEADS_N = 64  # prompts of the H = q fault: its risk ~ 1e-4 against floors >= 1/6
# the adversary (few-heads.md, 7): |v_h| of its candidates (0: logits free of the data; Prop 21's
# class has only 0, one candidate per draw of the logits), prompts (search each, evaluate the best)
ADV_SCALES = {"quick": (0.0, 1.0), "full": (0.0, 0.5, 1.0, 2.0)}
ADV_N = {"quick": (1024, 8192), "full": (4096, 65536)}


@dataclass(frozen=True)
class Shape:
    """One (N, d, q) of the few-heads task; Prop 21's class when ``restricted`` (d = 1);
    ``explicit_n`` prompts score the explicit model and ``label_n`` its control variate's mean in
    the quick profile."""

    N: int
    d: int
    q: int
    restricted: bool
    explicit_n: int
    label_n: int

    @property
    def label(self) -> str:
        return f"N={self.N} d={self.d} q={self.q}"


# per claim: (quick cases, full and gpu cases); the trained models have H = 1..q-1 heads
FEW = {
    "prop-21": ((Shape(8, 1, 3, True, 1024, 2**17),),) * 2,
    "prop-3": (
        (Shape(8, 16, 2, False, 1024, 2**15), Shape(8, 16, 3, False, 1024, 2**15)),
        tuple(Shape(8, d, q, False, 4096, 2**15) for q in (2, 3) for d in (8, 16)),
    ),
}


@dataclass(frozen=True)
class ExplicitModel:
    """Lemma 11 heads retrieving ``heads`` of the q tokens and a ReLU net for their squared norm:
    its risk, its error budget e (net + heads), the net and its certified error."""

    estimate: RiskEstimate
    e: float  # the squared-norm net's certified error + the heads' guarantee
    sq_err: float  # the squared-norm net's certified sup error
    net: Any  # the squared-norm net (sqnorm_net with SQ_KNOTS knots on [-SQ_R, SQ_R])


@dataclass(frozen=True)
class FewCase:
    """One shape: the explicit H = q - 1 model, the adversary at H = q - 1 (full: every H < q),
    and (full, gpu) the trained H < q models."""

    shape: Shape
    H: int  # the heads the floor is claimed for: q - 1
    explicit: ExplicitModel
    trained: Tuple[RiskEstimate, ...]
    adversary: Tuple[Adversary, ...] = ()


@dataclass(frozen=True)
class FewHeadsInputs:
    """Props 3 and 21: one case per shape, and the per-position floor function they are
    compared against."""

    claim: str
    cases: Tuple[FewCase, ...]
    floor: Callable[[int, int, int, bool], float] = few_heads_floor_per_position

    def floor_at(self, case: FewCase, H: Optional[int] = None) -> float:
        """The floor of ``case`` at H heads (default its H = q - 1)."""
        s = case.shape
        return self.floor(s.q, case.H if H is None else H, s.d, s.restricted)


def _key(cid: str, s: Shape, H: int) -> Tuple[int, ...]:
    """The generators' index of an H-head model of ``s``: (H,) for the claim's first shape (its
    draws from before the other shapes were added), (H, N, d, q) for the others."""
    return (H,) if s == FEW[cid][0][0] else (H, s.N, s.d, s.q)


def _trained_risks(cid: str, s: Shape, ctx: Context) -> Tuple[RiskEstimate, ...]:
    """Models with H < q heads fitted online to the squared norm at positions i >= N/2 (Prop 21's
    class: W_QK without data-position cross blocks)."""
    f32 = torch.float32
    task, book, batch = few_heads_batch(s, f32, ctx.device)
    layout = token_layout(s.d, s.q, book.d_e)
    floor_pos = slice(s.N // 2, None)
    out = []
    fit = OnlineFit(ctx.pick(quick=QUICK_STEPS, full=3000), lr=3e-3)
    n = ctx.pick(1024, 8192, 10 * 1024)
    for H in (s.q - 1,) if ctx.profile == "quick" else range(1, s.q):
        key = _key(cid, s, H)
        torch.manual_seed(ctx.seed_of(f"{cid}/torch", *key))
        fit_gen, risk_gen = (
            ctx.generator(f"{cid}/{p}", *key, device=ctx.device) for p in ("fit", "risk")
        )
        init = ctx.generator(f"{cid}/init", *key)
        model = MergedAttention(layout.dim, H, 64, dtype=f32, device=ctx.device, generator=init)
        project = restrict(layout) if s.restricted else None
        if project:
            with torch.no_grad():
                project(model)
        fit_online(model, batch, fit, positions=floor_pos, generator=fit_gen, project=project)
        risk, se = position_risk(model, batch, n=n, positions=floor_pos, generator=risk_gen)
        rnd = risk_rounding(n * (s.N - s.N // 2), s.N + layout.dim + 64, risk, f32)
        out.append(RiskEstimate(H, risk, se, n, rnd))
    return tuple(out)


def _sqnorm_attained(net, q: int, d: int, H: int) -> float:
    """|net - (1/sqrt(q d)) sum (||x_k||^2 - d)| with every coordinate at the midpoint of the first
    knot interval, where each square's interpolation error h^2/4 is attained
    (docs/derivations/few-heads.md)."""
    mid = -SQ_R + SQ_R / (SQ_KNOTS - 1)  # h / 2 with h = 2 R / (knots - 1)
    z = torch.full((H * d,), mid, dtype=torch.float64)
    target = (float((z * z).sum()) - H * d) / math.sqrt(q * d)
    return abs(float(net(z[None, :].reshape(1, H, d))) - target)


def _explicit_model(cid: str, s: Shape, H: int, ctx: Context, n: Tuple[int, int]) -> ExplicitModel:
    """Lemma 11 heads retrieving H of the q tokens + a ReLU net for the squared norm of those;
    its risk at the positions i >= N/2: the squared error less the unseen tokens' squared label
    on n[0] prompts (drawn and scored PROMPT_CHUNK at a time), plus that control's mean on n[1]
    fresh prompts (few-heads.md, 6)."""
    N = s.N
    net, sq_err = sqnorm_net(s.q, s.d, H, R=SQ_R, knots=SQ_KNOTS)
    r_x = lemma12_radius(s.d, n=10_000, N=N)
    cons = lemma11(N, s.d, s.q, net, eps=1e-3, r_x=r_x, slots=list(range(H)), device=ctx.device)
    task, _, _ = few_heads_batch(s, torch.float64, ctx.device)
    gen = ctx.generator(f"{cid}/explicit", *_key(cid, s, H), device=ctx.device)
    per_prompt = []
    for start in range(0, n[0], PROMPT_CHUNK):
        B = min(PROMPT_CHUNK, n[0] - start)
        p = task.sample(B, generator=gen, device=ctx.device, dtype=torch.float64)
        with torch.no_grad():
            err = ((cons.predict(p.x, p.t) - p.y)[:, N // 2 :] ** 2).mean(dim=1)
        per_prompt.append(err - unseen_label(p, H, s.q, s.d) ** 2)
    per_prompt = torch.cat(per_prompt)
    label_gen = ctx.generator(f"{cid}/unseen", *_key(cid, s, H))
    mean, var = unseen_second_moment(task, H, n[1], label_gen, LABEL_CHUNK)
    risk = float(per_prompt.mean()) + mean
    fan_in = N + cons.guarantee.d_e + net.W.shape[0]
    rnd = risk_rounding(n[0] * (N - N // 2) + n[1], fan_in, risk, torch.float64)
    se = math.sqrt(float(per_prompt.var()) / n[0] + var / n[1])
    estimate = RiskEstimate(H, risk, se, n[0], rnd)
    return ExplicitModel(estimate, sq_err + cons.guarantee.error_bound, sq_err, net)


def few_heads_inputs(cid: str, ctx: Context) -> FewHeadsInputs:
    """Per shape: the explicit H = q - 1 model and (full, gpu) the trained H < q models."""
    shapes, cases = ctx.pick(quick=FEW[cid][0], full=FEW[cid][1]), []
    for s in shapes:
        n = (
            ctx.pick(quick=s.explicit_n, full=32768, gpu=10 * s.explicit_n),
            ctx.pick(s.label_n, LABEL_FULL),
        )
        quick_skip = ctx.profile not in TRAINED[cid] or (
            ctx.profile == "quick" and s != FEW[cid][0][0]
        )
        trained = () if quick_skip else _trained_risks(cid, s, ctx)
        explicit = _explicit_model(cid, s, s.q - 1, ctx, n)
        cases.append(FewCase(s, s.q - 1, explicit, trained, _adversaries(cid, s, ctx)))
    return FewHeadsInputs(cid, tuple(cases))


def _adversaries(cid: str, s: Shape, ctx: Context) -> Tuple[Adversary, ...]:
    """The adversary at H = q - 1 (full, gpu: every H < q): the best of its candidates, read by
    the exact conditional mean (few-heads.md, 7)."""
    profile = "quick" if ctx.profile == "quick" else "full"
    scales = (0.0,) * len(ADV_SCALES[profile]) if s.restricted else ADV_SCALES[profile]
    heads = (s.q - 1,) if profile == "quick" else range(1, s.q)
    return tuple(
        adversary_search(
            s,
            H,
            ADV_N[profile],
            [
                ctx.generator(f"{cid}/adversary/{p}", *_key(cid, s, H))
                for p in ("weights", "prompts")
            ],
            scales,
        )
        for H in heads
    )


def _z(cases: int, sides: int = 1) -> float:
    """The normal critical value at family confidence FEW_CONFIDENCE over ``cases`` estimates
    (Bonferroni), one- or two-sided."""
    return NormalDist().inv_cdf(1 - (1 - FEW_CONFIDENCE) / (sides * cases))


def _allowance(cases: int, sides: int = 1) -> str:
    return (
        f"allowance z se, z = {_z(cases, sides):.3f} ({'one' if sides == 1 else 'two'}-sided, "
        f"family confidence {FEW_CONFIDENCE} over {cases} case(s))"
    )


def few_heads_scope(inp: FewHeadsInputs) -> str:
    """Every (N, d, q) with its H = q - 1 and prompts; how many trained models."""
    shapes = "; ".join(
        f"N = {c.shape.N}, d = {c.shape.d}, q = {c.shape.q}, H = {c.H} "
        f"({c.explicit.estimate.prompts} prompts)"
        for c in inp.cases
    )
    return f"{shapes}; {sum(len(c.trained) for c in inp.cases)} trained"


def few_heads_explicit_above_floor(inp: FewHeadsInputs) -> Verdict:
    """Props 3 and 21: each shape's explicit model's risk is at least its H = q - 1 floor, less z
    standard errors (one-sided, family confidence FEW_CONFIDENCE over the shapes)."""
    z, k = _z(len(inp.cases)), len(inp.cases)

    def above(case: FewCase) -> Verdict:
        est, floor = case.explicit.estimate, inp.floor_at(case)
        detail = f"{est.heads}-head explicit model: risk {est.risk:.4f} +- {est.se:.4f}, floor "
        detail += f"{floor:.4f} (H = {case.H}); risk - floor = {(est.risk - floor) / est.se:.2f} "
        detail += f"se; {_allowance(k)}; {_explicit_margin(case)}"
        return at_least(est.risk, floor - z * est.se, est.rnd, detail=detail)

    return worst((c.shape.label, above(c)) for c in inp.cases)


def _explicit_margin(case: FewCase) -> str:
    """Where the explicit model's true risk lies against the floor; how often the check fails."""
    if case.shape.restricted:
        return (
            f"its true risk is the floor + O(e) (Prop 21 is exact): the check fails for about "
            f"{100 * (1 - FEW_CONFIDENCE):.1f}% of seeds (0.13% with a 3 se margin)"
        )
    return f"its true risk is the floor + 2H/d = {closed_form(case):.4f}"


def closed_form(case: FewCase, H: Optional[int] = None) -> float:
    """2 (q - H) / q: the variance of the q - H squared tokens the model cannot see (Lemma 40);
    H defaults to the explicit model's q - 1."""
    q = case.shape.q
    return 2 * (q - (case.H if H is None else H)) / q


def few_heads_explicit_closed_form(inp: FewHeadsInputs) -> Verdict:
    """Each explicit H = q - 1 model's risk is its closed form 2 (q - H) / q, within
    2 e sqrt(value) + e^2 + z se (e: its error budget; z two-sided over the shapes) on both
    sides."""
    z, k = _z(len(inp.cases), sides=2), len(inp.cases)

    def closed(case: FewCase) -> Verdict:
        est, value, e = case.explicit.estimate, closed_form(case), case.explicit.e
        slack = 2 * e * math.sqrt(value) + e * e + z * est.se
        detail = f"{est.heads}-head explicit model, error budget e = {e:.3e}; allowance 2 e "
        detail += (
            f"sqrt(value) + e^2 + z se = {slack:.4f} ({100 * slack / value:.1f}% of the value); "
        )
        detail += f"{_allowance(k, 2)}; se {est.se:.4f} (control variate: few-heads.md, 6)"
        return close(est.risk, value, slack, est.rnd, detail=detail)

    return worst((c.shape.label, closed(c)) for c in inp.cases)


def few_heads_floor_pinned(inp: FewHeadsInputs) -> Verdict:
    """The per-position floor function equals few-heads.md's formula evaluated in sympy rationals
    (2 (q - H)/q for Prop 21, 2 (1 - H (q + d)/(q d)) for Prop 3, clipped at 0) at the claim's
    shapes, every H up to q + 1, and edge points; the largest relative gap (absolute at 0)."""
    restricted = inp.claim == "prop-21"
    points = [p for p in FLOOR_POINTS if p[3] == restricted]
    gap, point = max((floor_gap(inp.floor, p), p) for p in points)
    detail = (
        f"{len(points)} points (q, H, d, restricted), largest at {point}; relative {FLOOR_RTOL}"
    )
    return at_most(gap, FLOOR_RTOL, detail=detail)


def _adversary_cases(inp: FewHeadsInputs):
    """(label, case, adversary) for every adversary of every shape."""
    return [(f"{c.shape.label} H={a.estimate.heads}", c, a) for c in inp.cases for a in c.adversary]


def _infimum(case: FewCase, H: int) -> float:
    s = case.shape
    return float(infimum_exact(s.q, H, s.d, s.restricted))


def few_heads_adversary_above_floor(inp: FewHeadsInputs) -> Verdict:
    """Props 3 and 21 against the adversary (few-heads.md, 7): the best W_QK found, read by the
    exact conditional mean E[y | heads], does not beat the floor, less z se (one-sided, family
    confidence FEW_CONFIDENCE over its cases); floor / risk in the detail."""
    rows = _adversary_cases(inp)
    z = _z(len(rows))

    def above(case: FewCase, adv: Adversary) -> Verdict:
        est, floor = adv.estimate, inp.floor_at(case, adv.estimate.heads)
        inf = _infimum(case, est.heads)
        detail = f"adversary (best |v_h| = {adv.weights.scale:g}; candidates (|v_h|, risk on the "
        detail += "search prompts) "
        detail += f"{[(s, round(r, 3)) for s, r in adv.candidates]}): risk {est.risk:.4f} +- "
        detail += f"{est.se:.4f} on {est.prompts} prompts, floor {floor:.4f}, floor / risk "
        detail += f"{floor / est.risk:.3f}; the class's infimum {inf:.4f} "
        detail += (
            "(the floor: exact)"
            if case.shape.restricted
            else ("(the floor counts H^2 functionals twice: few-heads.md, 2b)")
        )
        detail += f"; {_allowance(len(rows))}"
        return at_least(est.risk, floor - z * est.se, est.rnd, detail=detail)

    return worst((label, above(c, a)) for label, c, a in rows)


def few_heads_adversary_infimum(inp: FewHeadsInputs) -> Verdict:
    """The adversary attains the class's infimum 2 (1 - H (q + d - H)/(q d)) (Prop 3's class) or
    2 (q - H)/q (Prop 21's), within z se two-sided (few-heads.md, 2b, 3, 7)."""
    rows = _adversary_cases(inp)
    z = _z(len(rows), sides=2)

    def attained(case: FewCase, adv: Adversary) -> Verdict:
        est = adv.estimate
        detail = f"risk {est.risk:.4f} +- {est.se:.4f}; {_allowance(len(rows), 2)}"
        return close(est.risk, _infimum(case, est.heads), z * est.se, est.rnd, detail=detail)

    return worst((label, attained(c, a)) for label, c, a in rows)


def few_heads_sqnorm_attained(inp: FewHeadsInputs) -> Verdict:
    """The squared-norm net's certified error h^2/4 per square is attained at the knot midpoints,
    for each shape's net."""

    def attained(case: FewCase) -> Verdict:
        m, s = case.explicit, case.shape
        err = _sqnorm_attained(m.net, s.q, s.d, m.estimate.heads)
        detail = "error at the knot midpoints vs certified"
        return close(err, m.sq_err, 1e-9 * m.sq_err, detail=detail)

    return worst((c.shape.label, attained(c)) for c in inp.cases)


def few_heads_trained_above_floor(inp: FewHeadsInputs) -> Verdict:
    """Props 3 and 21: trained H < q models never beat their floor, less z standard errors over
    every shape's models (prop-3's quick: H = 1 at its first shape, QUICK_STEPS AdamW steps; full
    and gpu: every H < q at every shape, 3000 steps); floor / risk in the detail."""
    k = sum(len(c.trained) for c in inp.cases)
    z = _z(k)
    rows = []
    for c in inp.cases:
        for t in c.trained:
            floor = inp.floor_at(c, t.heads)
            detail = f"trained: risk {t.risk:.3f} +- {t.se:.3f} vs floor {floor:.3f} (floor / risk "
            detail += f"{floor / t.risk:.2f}: an online fit, not the best model; the adversary "
            detail += "check shows how near the floor a model comes: few-heads.md, 6)"
            rows.append(
                (f"{c.shape.label} H={t.heads}", at_least(t.risk, floor - z * t.se, t.rnd, detail))
            )
    return worst(rows, key=lambda v: v.bound - v.measured).labelled(_allowance(k))


def q_heads(inp: FewHeadsInputs, ctx: Context) -> FewHeadsInputs:
    """Each shape's explicit construction with H = q heads (every token retrieved), held to the
    H = q - 1 floor: it goes below (Q_HEADS_N prompts do: its risk is ~ 1e-4, each floor >= 1/6)."""

    def q_heads(case: FewCase) -> FewCase:
        s = case.shape
        return replace(case, explicit=_explicit_model(inp.claim, s, s.q, ctx, (Q_HEADS_N,) * 2))

    return replace(inp, cases=tuple(map(q_heads, inp.cases)))


def one_knot_fewer(case: FewCase) -> FewCase:
    """The squared-norm net built with SQ_KNOTS - 1 knots, certified for SQ_KNOTS."""
    s, H = case.shape, case.explicit.estimate.heads
    net, _ = sqnorm_net(s.q, s.d, H, R=SQ_R, knots=SQ_KNOTS - 1)
    return replace(case, explicit=replace(case.explicit, net=net))


def reread_each(readout: Callable[[Adversary], dict]):
    """Every adversary read by bayes_readout with the options ``readout(adversary)``."""

    def case(c: FewCase) -> FewCase:
        return replace(c, adversary=tuple(reread(a, c.shape, **readout(a)) for a in c.adversary))

    return lambda inp: replace(inp, cases=tuple(map(case, inp.cases)))
