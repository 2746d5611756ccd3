"""Lemmas 23 and 25 (Appendix C.1): the transition's layers 1 and 2 as Equations C.3-C.9 build
them from Lemma 22's product gadget and Lemma 24's gate, checked on codeword pairs and held equal
to the transition the RNN evaluates. Construction: ``constructions/transition_layers.py``;
docs/derivations/rnn-transition.md, section 4a."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Tuple

import torch

from qstr.bounds.gadgets import gate_error
from qstr.bounds.transition import prop26_transition
from qstr.constructions.codes import Codebook, rs_hadamard_codebook
from qstr.constructions.mlp import MLPWeights
from qstr.constructions.transition_layers import TransitionGadgets, lemma23_layer, lemma25_layer
from qstr.constructions.transition_layers import transition_gadgets
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, by_measured, by_ratio, close
from qstr.verify.claim import each, exact
from qstr.verify.claims._transition import F64, largest_gap, none_counted, orthogonally_rotated
from qstr.verify.claims._transition import transition_rounding, worst_case
from qstr.verify.registry import register

L23_D, L23_Q, L23_RX, L23_EPS = 3, 2, 2.5, 0.1  # Prop 26's sizes (the prop-26 claim's)

lemma23 = register(
    Claim(
        "lemma-23",
        Ref("Lemma 23"),
        statement="layer 1 from the identity pair and Lemma 22's product gadget per code "
        "coordinate (Equations C.3-C.7) reads out x exactly and s_hat_l with |s_hat_l - "
        "<omega_i, omega_{t_l}>| <= delta_1 = d_e h^2/16 (0 on alphabet codes) at every pair",
        builds=(lemma23_layer,),
        bounds=(prop26_transition,),
        derivation="docs/derivations/rnn-transition.md",
    )
)
lemma25 = register(
    Claim(
        "lemma-25",
        Ref("Lemma 25"),
        statement="layer 2 from Lemma 24's gate gadget per (slot, coordinate) on Lemma 23's "
        "readout (Equations C.8-C.9): |G_lc - 2 x_c relu(s_hat_l - 1/2)| <= r_x delta, G_lc = 0 "
        "exactly where s_hat_l <= 1/2; with the soft threshold, the transition the RNN evaluates",
        builds=(lemma25_layer,),
        bounds=(gate_error,),
        derivation="docs/derivations/rnn-transition.md",
    )
)


# ------------------------------------------------------------------ the inputs


@dataclass(frozen=True)
class LayerCase:
    """A Prop 26 transition, the gadgets it is made of, Lemma 23's layer (W1, b1, A) and Lemma
    25's (W2, b2, G) built from them, and rows u = (h, z) at codeword pairs with tokens in the
    r_x ball and on its corners."""

    label: str
    transition: object  # Transition
    gadgets: TransitionGadgets
    layer1: tuple  # (W1, b1, A): A relu(W1 u + b1) = (x, s_hat)
    layer2: tuple  # (W2, b2, G): G relu(W2 relu(W1 u + b1) + b2) = the gate
    delta1: float  # Lemma 23's certificate (the guarantee's inner_product_error)
    u: torch.Tensor  # (P, q d + D_in)
    s: torch.Tensor  # (P, q) <omega_i, omega_{t_l}>

    @property
    def x(self) -> torch.Tensor:
        tr = self.transition
        return self.u[:, tr.d_h : tr.d_h + tr.d]

    def units(self) -> torch.Tensor:
        W1, b1, _ = (v.to(self.u.device) for v in self.layer1)
        return torch.relu(self.u @ W1.T + b1)

    def readout(self) -> torch.Tensor:
        """Lemma 23's (x, s_hat): (P, d + q)."""
        return self.units() @ self.layer1[2].to(self.u.device).T

    def gate(self) -> torch.Tensor:
        """Lemma 25's gate G: (P, q, d)."""
        W2, b2, G = (v.to(self.u.device) for v in self.layer2)
        out = torch.relu(self.units() @ W2.T + b2) @ G.T
        return out.view(-1, self.transition.q, self.transition.d)

    def four_layers(self) -> MLPWeights:
        """Layers 1 and 2 with the rectifier gadget on G (layers 3-4)."""
        (W1, b1, _), (W2, b2, G), st = self.layer1, self.layer2, self.gadgets.rectifier
        return MLPWeights(((W1, b1), (W2, b2), (st.W1 @ G, st.b1), (st.W2, None)))


@dataclass(frozen=True)
class LayerInputs:
    cases: Tuple[LayerCase, ...]


def _books(ctx: Context):
    """RS-Hadamard N = 64 (alphabet codes: exact products) and rotated (generic entries:
    approximate products), and in full a rotated code with mu = 1/8."""
    base = rs_hadamard_codebook(64, dtype=F64)
    books = [
        ("rs-hadamard N=64 (exact products)", base),
        ("rotated rs-hadamard N=64", orthogonally_rotated(base, ctx.generator("lemma-23/rot"))),
    ]
    if ctx.profile != "quick":
        quarter = rs_hadamard_codebook(64, mu=0.25, dtype=F64)
        books.append(
            ("rotated, mu = 1/8", orthogonally_rotated(quarter, ctx.generator("lemma-23/rot8")))
        )
    return books


def _corners(d: int, r_x: float) -> torch.Tensor:
    """+-r_x e_k and +-r_x (1, ..., 1)/sqrt(d): where the gate's error is largest."""
    eye = torch.eye(d, dtype=F64) * r_x
    ones = torch.full((1, d), r_x / math.sqrt(d), dtype=F64)
    return torch.cat([eye, -eye, ones, -ones])


def _rows(book: Codebook, tr, k: int, ctx: Context):
    """u at the pairs (i, t_l = j + 7 l mod N): every target pair and random others (all pairs in
    full), once with tokens drawn in the r_x ball and once on its corners; and s."""
    N, q, d = book.N, tr.q, tr.d
    ar = torch.arange(N)
    i, j = (v.flatten() for v in torch.meshgrid(ar, ar, indexing="ij"))
    t = torch.stack([(j + 7 * l) % N for l in range(q)], 1)
    gen = ctx.generator("lemma-23/rows", k)
    if ctx.profile == "quick":
        hit = (t == i[:, None]).any(1)
        others = (~hit).nonzero().flatten()
        pick = others[torch.randperm(others.numel(), generator=gen)[:128]]
        keep = torch.cat([hit.nonzero().flatten(), pick])
        i, t = i[keep], t[keep]
    P = i.numel()
    x = torch.randn(P, d, generator=gen, dtype=F64)
    x = x / x.norm(dim=1, keepdim=True) * L23_RX * torch.rand(P, 1, generator=gen, dtype=F64).sqrt()
    corners = _corners(d, L23_RX)
    x = torch.cat([x, corners[torch.arange(P) % corners.shape[0]]])
    i, t = i.repeat(2), t.repeat(2, 1)
    om = book.omega.to(F64)
    z = torch.cat([x, om[i]] + [om[t[:, l]] for l in range(q)], 1)
    h = torch.randn(2 * P, tr.d_h, generator=gen, dtype=F64) * L23_RX
    s = torch.stack([(om[i] * om[t[:, l]]).sum(1) for l in range(q)], 1)
    return torch.cat([h, z], 1).to(ctx.device), s.to(ctx.device)


def _built(label: str, tr, gadgets: TransitionGadgets, delta1: float, u, s) -> LayerCase:
    W1, b1, A = lemma23_layer(tr, gadgets)
    layer2 = lemma25_layer(tr, gadgets, A)
    return LayerCase(label, tr, gadgets, (W1, b1, A), layer2, delta1, u, s)


def _inputs(ctx: Context) -> LayerInputs:
    cases = []
    for k, (label, book) in enumerate(_books(ctx)):
        tr = prop26_transition(book, L23_D, L23_Q, eps=L23_EPS, r_x=L23_RX)
        g = tr.guarantee
        u, s = _rows(book, tr, k, ctx)
        cases.append(_built(label, tr, transition_gadgets(tr), g.inner_product_error, u, s))
    return LayerInputs(tuple(cases))


@lemma23.inputs
def lemma23_inputs(ctx: Context) -> LayerInputs:
    """The transitions of Prop 26 at (d, q, r_x, eps) = (3, 2, 2.5, 0.1) on N = 64 codes, with
    Lemmas 23 and 25's layers rebuilt from their gadgets."""
    return _inputs(ctx)


@lemma25.inputs
def lemma25_inputs(ctx: Context) -> LayerInputs:
    """The same transitions and rows as lemma-23."""
    return _inputs(ctx)


def _scope(inp: LayerInputs) -> str:
    rows = inp.cases[0].u.shape[0]
    return "; ".join(c.label for c in inp.cases) + f"; {rows} rows (pairs x tokens) each"


lemma23.scope_with(_scope)
lemma25.scope_with(_scope)


# ------------------------------------------------------------------ Lemma 23


@lemma23.check("x read exactly", evidence="built")
def x_exact(inp: LayerInputs) -> Verdict:
    """The identity pair: relu(x) - relu(-x) = x exactly, every row."""
    gap = max(largest_gap(c.readout()[:, : c.transition.d], c.x) for c in inp.cases)
    return exact(gap, 0.0, detail="max |x readout - x|")


@lemma23.check("|s_hat - <omega_i, omega_t>| <= delta_1", evidence="built")
def inner_products_within(inp: LayerInputs) -> Verdict:
    """Lemma 23: the product gadgets summed over the d_e coordinates give the inner product to
    within d_e h^2/16 (0 on alphabet codes), at every pair."""

    def case(c: LayerCase) -> Verdict:
        err = largest_gap(c.readout()[:, c.transition.d :], c.s)
        return at_most(err, c.delta1, transition_rounding(c.transition))

    return worst_case(inp.cases, case, key=by_measured)


@lemma23.check("s_hat = the transition's closed form", evidence="built")
def readout_is_closed_form(inp: LayerInputs) -> Verdict:
    """Lemma 23's readout equals the inner products the RNN's transition evaluates
    (``Transition.inner_products``, square interpolants in closed form)."""

    def case(c: LayerCase) -> Verdict:
        tr = c.transition
        parts = tr.layout.split(c.u[:, tr.d_h :])
        slots = torch.stack([parts[f"slot{k}"] for k in range(tr.q)], dim=-2)
        gap = largest_gap(c.readout()[:, tr.d :], tr.inner_products(parts["pos"], slots))
        return close(gap, 0.0, 0.0, transition_rounding(tr), detail="max |Lemma 23 - closed form|")

    return worst_case(inp.cases, case, key=by_measured)


def _rebuilt(c: LayerCase, **gadget_changes) -> LayerCase:
    """The case with gadgets replaced and both layers rebuilt from them."""
    g = replace(c.gadgets, **gadget_changes)
    return _built(c.label, c.transition, g, c.delta1, c.u, c.s)


@lemma23.fault(
    "Lemma 22's readout with its sign flipped",
    breaks=(inner_products_within, readout_is_closed_form),
)
@each()
def _product_sign_flipped(c: LayerCase) -> LayerCase:
    """The product gadget's second layer negated ((S(a - b) - S(a + b)) / 4): s_hat = -s."""
    p = c.gadgets.product
    return _rebuilt(c, product=replace(p, W2=-p.W2))


@lemma23.fault("slot 1 wired to slot 2's codes", breaks=inner_products_within)
@each()
def _slot_misread(c: LayerCase) -> LayerCase:
    """Equation C.6's slot-l columns misplaced: the first slot's product units read the second
    slot's code block (s_hat_1 = <omega_i, omega_{t_2}>)."""
    tr, (W1, b1, A) = c.transition, c.layer1
    rows = slice(
        c.gadgets.identity.width, c.gadgets.identity.width + tr.d_e * c.gadgets.product.width
    )
    c0, c1 = (
        slice(tr.d_h + tr.layout.slot(k).start, tr.d_h + tr.layout.slot(k).stop) for k in (0, 1)
    )
    W1 = W1.clone()
    W1[rows, c1], W1[rows, c0] = W1[rows, c0], 0.0
    return replace(c, layer1=(W1, b1, A))


@lemma23.fault("delta_1 without its d_e factor", breaks=inner_products_within)
@each(field="delta1")
def _delta1_one_coordinate(c: LayerCase) -> float:
    """The certificate of one product, h^2/16, where d_e of them are summed."""
    return c.delta1 / c.transition.d_e


@lemma23.fault("identity pair read as relu(x) + relu(-x)", breaks=x_exact)
@each()
def _identity_absolute(c: LayerCase) -> LayerCase:
    """The identity gadget's second layer [I, I]: the readout is |x|, not x."""
    ident = c.gadgets.identity
    return _rebuilt(c, identity=replace(ident, W2=ident.W2.abs()))


# ------------------------------------------------------------------ Lemma 25


@lemma25.check("|G - 2x relu(s_hat - 1/2)| <= r_x delta", evidence="built")
def gate_within(inp: LayerInputs) -> Verdict:
    """Lemma 25: each (slot, coordinate) gate on Lemma 23's readout is within Lemma 24's r_x delta
    of 2 x_c relu(s_hat_l - 1/2), tokens in the r_x ball and on its corners."""

    def case(c: LayerCase) -> Verdict:
        s_hat = c.readout()[:, c.transition.d :]
        want = 2 * c.x[:, None, :] * torch.relu(s_hat - 0.5)[..., None]
        err = largest_gap(c.gate(), want)
        bands = c.transition.bands
        bound = gate_error(bands.r_x, bands.knots, bands.s_max)
        return at_most(err, bound, transition_rounding(c.transition))

    return worst_case(inp.cases, case, key=by_ratio)


@lemma25.check("G = 0 where s_hat < 1/2", evidence="built")
def gate_zero_below_half(inp: LayerInputs) -> Verdict:
    """Lemma 24's exact zero carried through Lemma 25: no gate output is nonzero at a slot whose
    s_hat is below 1/2 by more than the transition's floating margin eta (at s_hat = 1/2 exactly
    and |x_c| = r_x a unit sits at 0 up to rounding, which the threshold's eta absorbs)."""
    rows = []
    for c in inp.cases:
        low = c.readout()[:, c.transition.d :] <= 0.5 - c.transition.guarantee.margin
        nonzero = int(((c.gate() != 0) & low[..., None]).sum())
        rows.append((f"{c.label} ({int(low.sum())} slots)", nonzero))
    return none_counted(rows, "nonzero gates with s_hat <= 1/2 - eta")


@lemma25.check("four layers = the transition's dense layers", evidence="built")
def layers_are_the_transition(inp: LayerInputs) -> Verdict:
    """Lemmas 23 and 25 with the soft threshold equal the transition's dense layers (which share
    the s-units over coordinates), before and after the threshold, on every row."""

    def case(c: LayerCase) -> Verdict:
        tr = c.transition
        gap = max(
            largest_gap(c.four_layers()(c.u), tr.dense(c.u)),
            largest_gap(c.gate().flatten(1), tr.dense(c.u, rectify=False)),
        )
        return close(gap, 0.0, 0.0, transition_rounding(tr), detail="max |gadget layers - dense|")

    return worst_case(inp.cases, case, key=by_measured)


@lemma25.fault("bands opened before 1/2 (offsets + M/10)", breaks=gate_zero_below_half)
@each()
def _bands_early(c: LayerCase) -> LayerCase:
    """Lemma 24's offsets beta_k raised by a tenth of its slope M inside the transition."""
    g = c.gadgets.gate
    return _rebuilt(c, gate=replace(g, b1=g.b1 + 0.1 * g.params["M"]))


@lemma25.fault("Lemma 24's readout without its 2", breaks=(gate_within, layers_are_the_transition))
@each()
def _gate_half(c: LayerCase) -> LayerCase:
    """The gate's second layer delta sum_k H_k (C.9 without the factor 2)."""
    g = c.gadgets.gate
    return _rebuilt(c, gate=replace(g, W2=g.W2 / 2))


@lemma25.fault("Lemma 22's readout sign flipped", breaks=layers_are_the_transition)
@each()
def _transition_product_flipped(c: LayerCase) -> LayerCase:
    """A product gadget with its sign flipped inside the transition's layers: they no longer
    compute what the RNN evaluates."""
    p = c.gadgets.product
    return _rebuilt(c, product=replace(p, W2=-p.W2))
