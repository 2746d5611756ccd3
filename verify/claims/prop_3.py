"""Prop 3 (Prop 4): H < q heads cannot beat the per-position floor 2 (1 - H (q + d)/(q d)); an
explicit H = q - 1 head model is 2H/d above it, and the best W_QK found attains the class's infimum
(docs/derivations/few-heads.md; what it shares with Prop 21 is in _few_heads.py)."""

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
from qstr.verify.claims._few_heads_adversary import floor_heads_from_zero, floor_without_logits
from qstr.verify.registry import register

claim = register(
    Claim(
        "prop-3",
        Ref("Prop 3", "Prop 4"),
        statement="H < q heads cannot beat the floor 2(1 - H(q+d)/(qd)) at positions i >= N/2 "
        "(quick: (q, d) = (2, 16), (3, 16); full: q in {2, 3} x d in {8, 16}); the best W_QK "
        "found, read by the exact conditional mean, does not beat it and attains the class's "
        "infimum 2(1 - H(q+d-H)/(qd)); an explicit H-head model is 2H/d above the floor",
        builds=(lemma11, sqnorm_net, MergedAttention),
        bounds=(few_heads_floor_per_position,),
        derivation="docs/derivations/few-heads.md",
    )
)


@claim.inputs
def prop3_inputs(ctx: Context) -> FewHeadsInputs:
    """Prop 3's explicit H = q - 1 models and (full, gpu) its trained H < q models, per shape."""
    return few_heads_inputs("prop-3", ctx)


claim.scope_with(few_heads_scope)

explicit_above_floor = claim.check("explicit risk >= floor", evidence="monte-carlo")(
    few_heads_explicit_above_floor
)
explicit_closed_form = claim.check("explicit risk = closed form", evidence="monte-carlo")(
    few_heads_explicit_closed_form
)


@claim.check("closed form - floor = 2H/d", evidence="formula", agreement=True)
def few_heads_floor_reached(inp: FewHeadsInputs) -> Verdict:
    """Prop 3: the explicit models' closed form is the floor + 2 H / d at every H < q (few-heads.md,
    2: 2 (q - H)/q - 2 (1 - H (q + d)/(q d)) = 2 H q / (q d)); (closed form - floor) / (2 H / d)
    farthest from 1 over H and the shapes, two-sided."""

    def reached(case: FewCase) -> Verdict:
        q, d = case.shape.q, case.shape.d
        ratio, H = max(
            (
                ((closed_form(case, H) - inp.floor_at(case, H)) / (2 * H / d), H)
                for H in range(1, q)
            ),
            key=lambda r: abs(r[0] - 1),
        )
        detail = f"(2 (q - H)/q - floor) / (2 H / d) over H = 1..{q - 1}, farthest at H = {H}"
        return close(ratio, 1.0, 0.0, 1e-12, detail=detail)

    return worst((c.shape.label, reached(c)) for c in inp.cases)


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
    "trained risk >= floor", profiles=TRAINED["prop-3"], evidence="monte-carlo"
)(few_heads_trained_above_floor)

claim.fault(
    "floor without the logit functionals (H d for H (q + d))",
    breaks=(floor_pinned, adversary_above_floor, few_heads_floor_reached),
    apply=replaced(floor=floor_without_logits),
)
claim.fault(
    "adversary read without the logit functionals",
    breaks=adversary_infimum,
    apply=reread_each(lambda a: {"logits": False}),
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
    breaks=few_heads_floor_reached,
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
    profiles=TRAINED["prop-3"],
)
