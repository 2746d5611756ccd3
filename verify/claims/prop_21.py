"""Prop 21: H < q heads with W_QK restricted (d = 1) cannot beat the per-position floor
2 (q - H)/q, which an explicit H = q - 1 head model nearly attains and the best heads found attain
(docs/derivations/few-heads.md; what it shares with Prop 3 is in _few_heads.py)."""

from __future__ import annotations

from qstr.bounds.attention import lemma11
from qstr.bounds.transformer import few_heads_floor, few_heads_floor_per_position
from qstr.constructions.paper_models import MergedAttention
from qstr.constructions.relu import sqnorm_net
from qstr.verify.claim import Claim, Context, Ref, Verdict, close, each, replaced, worst
from qstr.verify.claims._few_heads import (
    TRAINED,
    FewCase,
    FewHeadsInputs,
    closed_form,
    few_heads_adversary_above_floor,
    few_heads_adversary_infimum,
    few_heads_explicit_above_floor,
    few_heads_explicit_closed_form,
    few_heads_floor_pinned,
    few_heads_inputs,
    few_heads_scope,
    few_heads_sqnorm_attained,
    few_heads_trained_above_floor,
    one_knot_fewer,
    q_heads,
    reread_each,
)
from qstr.verify.claims._few_heads_adversary import floor_half, floor_heads_from_zero
from qstr.verify.registry import register

claim = register(
    Claim(
        "prop-21",
        Ref("Prop 21"),
        statement="H < q heads cannot beat the floor 2(q-H)/q (restricted W_QK, d=1) at positions "
        "i >= N/2 (q=3, d=1); an explicit H-head model nearly attains it, and the best heads "
        "found, read by the exact conditional mean, attain it",
        builds=(lemma11, sqnorm_net, MergedAttention),
        bounds=(few_heads_floor_per_position,),
        derivation="docs/derivations/few-heads.md",
    )
)


@claim.inputs
def prop21_inputs(ctx: Context) -> FewHeadsInputs:
    """Prop 21's explicit H = q - 1 model and (full, gpu) its trained H < q models."""
    return few_heads_inputs("prop-21", ctx)


claim.scope_with(few_heads_scope)

explicit_above_floor = claim.check("explicit risk >= floor", evidence="monte-carlo")(
    few_heads_explicit_above_floor
)
explicit_closed_form = claim.check("explicit risk = closed form", evidence="monte-carlo")(
    few_heads_explicit_closed_form
)


@claim.check("closed form = floor", evidence="formula", agreement=True)
def few_heads_floor_exact(inp: FewHeadsInputs) -> Verdict:
    """Prop 21: at every H < q the floor is the infimum over the restricted class, 2 (q - H) / q
    (few-heads.md, section 3, where it is exact); the largest |closed form - floor|."""

    def exact_at(case: FewCase) -> Verdict:
        q = case.shape.q
        gap, H = max((abs(closed_form(case, H) - inp.floor_at(case, H)), H) for H in range(1, q))
        detail = f"|2 (q - H)/q - floor| over H = 1..{q - 1}, largest at H = {H}"
        return close(gap, 0.0, 0.0, 1e-12, detail=detail)

    return worst((c.shape.label, exact_at(c)) for c in inp.cases)


floor_pinned = claim.check("floor = exact rational", evidence="formula", agreement=True)(
    few_heads_floor_pinned
)
adversary_above_floor = claim.check("adversary risk >= floor", evidence="monte-carlo")(
    few_heads_adversary_above_floor
)
adversary_infimum = claim.check("adversary risk = the class's infimum", evidence="monte-carlo")(
    few_heads_adversary_infimum
)
sqnorm_attained = claim.check("squared-norm net's error attained", evidence="built")(
    few_heads_sqnorm_attained
)
trained_above_floor = claim.check(
    "trained risk >= floor", profiles=TRAINED["prop-21"], evidence="monte-carlo"
)(few_heads_trained_above_floor)

claim.fault(
    "floor (q - H)/q: Var(chi^2_k) = k",
    breaks=(floor_pinned, few_heads_floor_exact),
    apply=replaced(floor=floor_half),
)
claim.fault(
    "adversary held to the floor of H - 1 heads",
    breaks=adversary_above_floor,
    apply=replaced(floor=floor_heads_from_zero),
)
claim.fault(
    "adversary read from one head fewer",
    breaks=adversary_infimum,
    apply=reread_each(lambda a: {"heads": a.estimate.heads - 1}),
)
claim.fault(
    "H = q heads held to the H = q - 1 floor",
    breaks=(explicit_above_floor, explicit_closed_form),
    apply=q_heads,
)
claim.fault(
    "position-averaged floor for the per-position one",  # few_heads_floor: over all N
    breaks=few_heads_floor_exact,
    apply=replaced(floor=few_heads_floor),
)
claim.fault(
    "squared-norm net built with one knot fewer",
    breaks=sqnorm_attained,
    apply=each()(one_knot_fewer),
)
claim.fault(
    "floor with the heads counted from 0",
    breaks=(explicit_above_floor, trained_above_floor),
    apply=replaced(floor=floor_heads_from_zero),
    profiles=TRAINED["prop-21"],
)
