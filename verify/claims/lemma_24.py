"""Lemma 24 (Appendix B): the gate gadget's sup error is r_x delta, certified and attained, and
it is exactly 0 for s < 1/2. Construction: ``constructions/relu.py``;
docs/derivations/rnn-transition.md."""

from __future__ import annotations

from dataclasses import replace

import torch

from qstr.bounds.gadgets import gate_error
from qstr.constructions.relu import gate_bands, gate_gadget
from qstr.verify.certified import certified_gate
from qstr.verify.certified.faults import gadget_bias_shifted, gadget_output_scaled
from qstr.verify.claim import Claim, Context, Ref, Verdict, by_measured, close, each, replaced
from qstr.verify.claims._transition import F64, GadgetCase, GadgetInputs, certified_gadgets
from qstr.verify.claims._transition import certificate_attained, largest_gap, none_counted
from qstr.verify.claims._transition import on_device, searched, with_half_the_knots
from qstr.verify.claims._transition import within_certificate, worst_case
from qstr.verify.registry import register

L24_CASES = ((3.0, 16, 1.05), (0.5, 8, 1.0))  # (r_x, knots, s_max)


claim = register(
    Claim(
        "lemma-24",
        Ref("Lemma 24"),
        statement="gate gadget: sup |G(x,s) - 2x relu(s-1/2)| over |x| <= r_x, s <= s_max is <= "
        "r_x delta (certified, attained), delta = (s_max - 1/2)/knots; exactly 0 for s <= 1/2",
        builds=(gate_gadget,),
        bounds=(gate_error,),
        derivation="docs/derivations/rnn-transition.md",
    )
)


def _gate_special(r_x: float, knots: int, s_max: float) -> torch.Tensor:
    """x = +-r_x at band midpoints (where the certificate r_x delta is attained) and band edges."""
    delta = (s_max - 0.5) / knots
    mids = 0.5 + delta * (torch.arange(knots, dtype=F64) + 0.5)
    s = torch.cat([mids, 0.5 + delta * torch.arange(knots + 1, dtype=F64)])
    x = torch.tensor([-r_x, r_x, 0.5 * r_x, -0.5 * r_x], dtype=F64)
    return torch.cartesian_prod(x, s)


def _gate_box(r_x: float, knots: int, s_max: float):
    return (-r_x, -1.5), (r_x, s_max)


@claim.inputs
def lemma24_inputs(ctx: Context) -> GadgetInputs:
    """Lemma 24's gate gadget for each (r_x, knots, s_max), searched on
    [-r_x, r_x] x [-1.5, s_max]."""
    cases = []
    for k, (r_x, K, s_max) in enumerate(L24_CASES):
        args = (r_x, ctx.pick(quick=K, full=4 * K), s_max)
        g, box = gate_gadget(*args), _gate_box(*args)
        found = searched("lemma-24/starts", k, g, box, _gate_special(*args), ctx)
        label = f"r_x={r_x:g} s<={s_max:g} knots={args[1]}"
        cases.append(GadgetCase(label, args, g, *box, *found))
    return GadgetInputs(tuple(cases), gate_error)


sup_error = claim.check("sup |G(x,s) - 2x relu(s-1/2)| <= r_x delta", evidence="built")(
    within_certificate
)
attained = claim.check("r_x delta attained", evidence="built")(certificate_attained)


@claim.check("sup |G(x,s) - 2x relu(s-1/2)| <= r_x delta (certified)", evidence="certified")
def sup_error_certified(inp: GadgetInputs) -> Verdict:
    """Lemma 24 proved on each built gadget over the whole box [-r_x, r_x] x [-1.5, s_max]: branch
    and bound in ball arithmetic (docs/derivations/certified.md); the float64 search decides where
    it cannot."""
    return certified_gadgets(inp, certified_gate)


@claim.check("G = 0 for s < 1/2", evidence="built")
def zero_below_half(inp: GadgetInputs, ctx: Context) -> Verdict:
    """Lemma 24: the gadget is exactly 0 for s < 1/2 (a 201 x 201 grid of
    [-r_x, r_x] x [-1.5, 1/2))."""
    rows = []
    for c in inp.cases:
        r_x = c.args[0]
        grid = torch.cartesian_prod(
            torch.linspace(-r_x, r_x, 201, dtype=F64, device=ctx.device),
            torch.linspace(-1.5, 0.5 - 1e-9, 201, dtype=F64, device=ctx.device),
        )
        rows.append((c.label, int((on_device(c.gadget, ctx.device)(grid) != 0).sum())))
    return none_counted(rows, "nonzero outputs for s < 1/2")


@claim.check("gadget = unit sum = closed form", evidence="built")
def gadget_is_unit_sum(inp: GadgetInputs) -> Verdict:
    """Lemma 24's gate three ways on one 121 x 121 grid of each box: the dense gadget users load,
    the literal sum of its 2K units (``GateBands.evaluate_units``, the lemma's formula) and the
    closed form the Prop 26 transition evaluates (``GateBands.evaluate``); the largest gap."""

    def case(c: GadgetCase) -> Verdict:
        bands = gate_bands(*c.args)
        grid = torch.cartesian_prod(
            *(torch.linspace(c.lo[j], c.hi[j], 121, dtype=F64) for j in range(2))
        )
        x, s = grid[:, :1], grid[:, 1]
        units = bands.evaluate_units(x, s)
        gap = max(largest_gap(c.gadget(grid), units), largest_gap(bands.evaluate(x, s), units))
        what = f"largest |gadget - unit sum| or |closed form - unit sum|, {c.label}"
        return close(gap, 0.0, 0.0, c.rounding + c.rounding, detail=what)

    return worst_case(inp.cases, case, key=by_measured)


@claim.fault("half the knots", breaks=(sup_error, attained))
def _gate_half_knots(inp: GadgetInputs, ctx: Context) -> GadgetInputs:
    """Half the knots: delta doubles, and so does the attained error."""
    return with_half_the_knots(inp, gate_gadget, _gate_special, _gate_box, "lemma-24/starts", ctx)


claim.fault(
    "certificate 2 r_x delta",  # twice Lemma 24's: not attained
    breaks=attained,
    apply=replaced(certificate=lambda r_x, K, s_max: 2 * gate_error(r_x, K, s_max)),
)


@claim.fault("band offsets shifted up by M/10", breaks=(zero_below_half, gadget_is_unit_sum))
@each(field="gadget")
def _offsets_raised(c: GadgetCase):
    """The band offsets beta moved up by a tenth of the slope M: bands open before s = 1/2."""
    return replace(c.gadget, b1=c.gadget.b1 + 0.1 * c.gadget.params["M"])


@claim.fault("unit 2's bias moved by +1e-9 (a band edge off its place)", breaks=sup_error_certified)
@each(field="gadget")
def _band_edge_moved(c: GadgetCase):
    """Unit 2's bias raised by 1e-9: its band widens, the sup error passes r_x delta."""
    return gadget_bias_shifted(c.gadget, unit=2, shift=1e-9)


@claim.fault("output weights times 1 + 1e-9", breaks=sup_error_certified)
@each(field="gadget")
def _output_scaled(c: GadgetCase):
    """W2 times 1 + 1e-9 (a slipped constant): the attained sup error passes r_x delta."""
    return gadget_output_scaled(c.gadget, factor=1 + 1e-9)


claim.scope_with(  # what the run checked (docs/claims.md, "Scope")
    lambda inp: "; ".join(c.label for c in inp.cases)
)
