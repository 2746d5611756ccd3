"""Lemma 22 (Appendix B): the product gadget's sup error on [-R, R]^2 is h^2/16, certified and
attained. Construction: ``constructions/relu.py``; docs/derivations/rnn-transition.md."""

from __future__ import annotations

import torch

from qstr.bounds.gadgets import product_error
from qstr.constructions.relu import product_gadget
from qstr.verify.certified import certified_product
from qstr.verify.certified.faults import gadget_bias_shifted, gadget_output_scaled
from qstr.verify.claim import Claim, Context, Ref, Verdict, each, replaced
from qstr.verify.claims._transition import F64, GadgetCase, GadgetInputs, certificate_attained
from qstr.verify.claims._transition import certified_gadgets, searched, with_half_the_knots
from qstr.verify.claims._transition import within_certificate
from qstr.verify.registry import register

L22_CASES = ((1.0, 17), (0.125, 9))  # (R, knots)

claim = register(
    Claim(
        "lemma-22",
        Ref("Lemma 22"),
        statement="product gadget (x+y)^2/4 - (x-y)^2/4 by knot interpolation: sup |P(x,y) - xy| "
        "on [-R,R]^2 <= h^2/16 (certified, attained), h = 4R/(knots-1)",
        builds=(product_gadget,),
        bounds=(product_error,),
        derivation="docs/derivations/rnn-transition.md",
    )
)


def _product_special(R: float, knots: int) -> torch.Tensor:
    """Points where x + y is a midpoint and x - y a knot (or the reverse): the certificate is
    attained there."""
    k0, h = -2 * R, 4 * R / (knots - 1)
    knots_t = k0 + h * torch.arange(knots, dtype=F64)
    mids = knots_t[:-1] + h / 2
    a, b = torch.cartesian_prod(torch.cat([knots_t, mids]), torch.cat([mids, knots_t])).T
    pts = torch.cat(
        [torch.stack([(a + b) / 2, (a - b) / 2], 1), torch.stack([(b + a) / 2, (b - a) / 2], 1)]
    )
    return pts[(pts.abs() <= R).all(1)]


def _product_box(R: float, knots: int):
    return (-R, -R), (R, R)


@claim.inputs
def lemma22_inputs(ctx: Context) -> GadgetInputs:
    """Lemma 22's product gadget for each (R, knots), searched on [-R, R]^2."""
    cases = []
    for k, (R, K) in enumerate(L22_CASES):
        K = ctx.pick(quick=K, full=2 * K - 1)
        g, box = product_gadget(R, K), _product_box(R, K)
        found = searched("lemma-22/starts", k, g, box, _product_special(R, K), ctx)
        cases.append(GadgetCase(f"R={R:g} knots={K}", (R, K), g, *box, *found))
    return GadgetInputs(tuple(cases), product_error)


sup_error = claim.check("sup |P(x,y) - xy| <= h^2/16", evidence="built")(within_certificate)
attained = claim.check("h^2/16 attained", evidence="built")(certificate_attained)


@claim.check("sup |P(x,y) - xy| <= h^2/16 (certified)", evidence="certified")
def sup_error_certified(inp: GadgetInputs) -> Verdict:
    """Lemma 22 proved on each built gadget over the whole box [-R, R]^2: branch and bound in
    ball arithmetic (docs/derivations/certified.md); the float64 search decides where it cannot."""
    return certified_gadgets(inp, certified_product)


@claim.fault("half the knots", breaks=(sup_error, attained))
def _product_half_knots(inp: GadgetInputs, ctx: Context) -> GadgetInputs:
    """Half the knots: h doubles, the error quadruples past the certificate for the full count."""
    return with_half_the_knots(
        inp, product_gadget, _product_special, _product_box, "lemma-22/starts", ctx
    )


claim.fault(
    "certificate h^2/8",  # twice Lemma 22's: not attained
    breaks=attained,
    apply=replaced(certificate=lambda R, K: 2 * product_error(R, K)),
)


@claim.fault("unit 2's bias moved by -1e-9 (a knot off its place)", breaks=sup_error_certified)
@each(field="gadget")
def _knot_moved(c: GadgetCase):
    """Unit 2's bias lowered by 1e-9: its interval widens, the sup error passes h^2/16."""
    return gadget_bias_shifted(c.gadget, unit=2, shift=-1e-9)


@claim.fault("output weights times 1 + 1e-9", breaks=sup_error_certified)
@each(field="gadget")
def _output_scaled(c: GadgetCase):
    """W2 times 1 + 1e-9 (a slipped constant): the attained sup error passes h^2/16."""
    return gadget_output_scaled(c.gadget, factor=1 + 1e-9)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: "; ".join(c.label for c in inp.cases)
)
