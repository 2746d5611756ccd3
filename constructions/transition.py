"""The four-layer transition of Prop 26 (Appendix C.1): the Lemma 22 products of pos and each
slot, Lemma 24's gate and the soft threshold of layers 3-4, in closed form and as dense layers by
named unit blocks; the RNN of Prop 28 (``qstr.constructions.recurrent``) runs it forward and
backward.

Weights only, from given parameters (the knots, the gate bands, the threshold): what the weights
are (widths, norms, the dense layers), never what the proposition promises. The knots and
threshold chosen from eps, and the certified eps, are ``qstr.bounds.transition.prop26_transition``,
which attaches ``TransitionGuarantee`` as ``.guarantee``. Derivation:
docs/derivations/rnn-transition.md.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch

from qstr.constructions import validate
from qstr.constructions.codes import Codebook
from qstr.constructions.layout import Layout, token_layout
from qstr.constructions.mlp import MLPWeights
from qstr.constructions.relu import GateBands, square_interp, square_units

__all__ = ["codes_of", "code_stats", "Transition", "transition_weights"]

F64 = torch.float64

# ----------------------------------------------------------------------------- helpers


def codes_of(omega) -> tuple[torch.Tensor, Optional[float]]:
    """(the (N, d_e) code tensor, the Codebook's mu or None) of a Codebook or a 2-D tensor."""
    if isinstance(omega, Codebook):
        return omega.omega, float(omega.mu)
    if isinstance(omega, torch.Tensor):
        validate.finite_tensor("omega", omega)
        if omega.dim() != 2 or omega.shape[0] < 1 or omega.shape[1] < 1:
            raise ValueError(
                f"omega must be a 2-D tensor (N, d_e) with N, d_e >= 1, got shape "
                f"{tuple(omega.shape)}"
            )
        return omega, None
    raise ValueError(
        "omega must be a constructions.codes.Codebook or a (N, d_e) tensor, "
        f"got {type(omega).__name__}"
    )


def code_stats(omega: torch.Tensor) -> tuple[float, float, Optional[int]]:
    """(R, nu, alphabet): R = max |omega_ij|, nu = max_i | ||omega_i||^2 - 1 |, and alphabet =
    3 (entries all +-R) or 5 (entries in {0, +-R}) when the codes use such an alphabet, else None.

    With an alphabet, omega_ij +- omega_tj lies in {0, +-R, +-2R}, which are knots of the uniform
    grid on [-2R, 2R] with 3 (resp. 5) knots: the Lemma 22 products are exact on every codeword
    pair.
    """
    mags = omega.abs()
    R = float(mags.max())
    nu = float(((mags * mags).sum(1) - 1).abs().max())
    if R == 0:
        return R, nu, None
    n_top = int((mags == R).sum())
    n_zero = int((mags == 0).sum())
    if n_top + n_zero != mags.numel():
        return R, nu, None
    return R, nu, (5 if n_zero else 3)


# ----------------------------------------------------------------------- transition


class Transition:
    """The four-layer transition of Prop 26 (docs/derivations/rnn-transition.md, section 4).

    Evaluate with ``transition(z)`` (closed form, O(q (d_e + d)) per token, any device)
    or :meth:`dense` (the literal layers). ``layers`` holds the dense weights, an
    :class:`~qstr.constructions.mlp.MLPWeights` ``((W1, b1), (W2, b2), (W3, b3), (W4, None))`` on
    u = (h, z), float64 CPU (built on first use).
    ``rectify=False`` drops layers 3-4 (the soft threshold) and returns Lemma 24's gate output
    G, which the dense layers and the closed form must agree on before the threshold.
    ``exact_products``: the Lemma 22 products are exact on every codeword pair (codes over
    {0, +-R} with knots on that alphabet). ``guarantee``: None as built by
    :func:`transition_weights`; ``qstr.bounds.transition.prop26_transition`` attaches its
    ``TransitionGuarantee``.
    """

    def __init__(
        self,
        d: int,
        q: int,
        d_e: int,
        R: float,
        product_knots: int,
        bands: GateBands,
        threshold: float,
        exact_products: bool,
    ):
        self.d, self.q, self.d_e = d, q, d_e
        self.layout: Layout = token_layout(d, q, d_e)
        self.R, self.product_knots, self.bands, self.threshold = R, product_knots, bands, threshold
        self.exact_products = exact_products
        self.guarantee: Any = None
        self._dense = None
        self._gate_readout = None

    # -------------------------------------------------------------- sizes
    @property
    def D_in(self) -> int:
        return self.layout.dim

    @property
    def d_h(self) -> int:
        return self.q * self.d

    @property
    def units1(self) -> Layout:
        """Layer 1's units by name: ``x+``, ``x-`` (d each: relu(+-x)), then for each slot l
        ``sum{l}`` and ``diff{l}`` (d_e x K1 each: the square units of pos +- slot l)."""
        size = self.d_e * self.product_knots
        slots = tuple((f"{kind}{l}", size) for l in range(self.q) for kind in ("sum", "diff"))
        return Layout((("x+", self.d), ("x-", self.d)) + slots)

    @property
    def units2(self) -> Layout:
        """Layer 2's units by name: for each slot l, ``xgate{l}`` (K2 x d: band k, coordinate c)
        then ``sgate{l}`` (K2: band k), all reading M s_hat_l + beta_k (Lemma 24's gate)."""
        K2 = self.bands.knots
        return Layout(
            tuple(b for l in range(self.q) for b in ((f"xgate{l}", K2 * self.d), (f"sgate{l}", K2)))
        )

    @property
    def widths(self) -> tuple:
        return (self.units1.dim, self.units2.dim, 2 * self.d_h)

    # -------------------------------------------------------------- closed form
    def inner_products(self, pos: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """s_hat_l = sum_j (S(pos_j + slot_lj) - S(pos_j - slot_lj)) / 4: pos (..., d_e), slots
        (..., q, d_e) -> (..., q)."""
        p = pos.unsqueeze(-2)
        S = lambda z: square_interp(z, self.R, self.product_knots)  # noqa: E731
        return (S(p + slots) - S(p - slots)).sum(-1) / 4

    def gate(self, x: torch.Tensor, s_hat: torch.Tensor) -> torch.Tensor:
        """G_l = the Lemma 24 gate on (x, s_hat_l): x (..., d), s_hat (..., q) -> (..., q, d)."""
        return self.bands.evaluate(x.unsqueeze(-2), s_hat)

    def from_parts(
        self, x: torch.Tensor, pos: torch.Tensor, slots: torch.Tensor, *, rectify: bool = True
    ) -> torch.Tensor:
        """f on the blocks of z: x (..., d), pos (..., d_e), slots (..., q, d_e) -> (..., q d)."""
        return self.from_inner_products(x, self.inner_products(pos, slots), rectify=rectify)

    def from_inner_products(
        self, x: torch.Tensor, s_hat: torch.Tensor, *, rectify: bool = True
    ) -> torch.Tensor:
        """Layers 2-4 given x (..., d) and the layer-1 readout s_hat (..., q): returns
        (..., q d)."""
        G = self.gate(x, s_hat)
        if rectify:
            G = torch.relu(G - self.threshold) - torch.relu(-G - self.threshold)
        return G.flatten(-2)

    def __call__(self, z: torch.Tensor, *, rectify: bool = True) -> torch.Tensor:
        """f(z) in closed form for z (..., D_in) (the h part is not read); returns (..., q d)."""
        validate.finite_tensor("z", z)
        if z.shape[-1:] != (self.D_in,):
            raise ValueError(
                f"z must have last axis D_in = d + (q+1) d_e = {self.D_in}, "
                f"got shape {tuple(z.shape)}"
            )
        parts = self.layout.split(z)
        slots = torch.stack([parts[f"slot{k}"] for k in range(self.q)], dim=-2)
        return self.from_parts(parts["x"], parts["pos"], slots, rectify=rectify)

    # -------------------------------------------------------------- dense layers
    def _readouts(self):
        """Row vectors on the layer-1 units: r_s (the s_hat_l readout, one per slot l) and the
        pieces of layer 1."""
        w, beta, coef = square_units(self.R, self.product_knots)
        u1 = self.units1
        r_s = torch.zeros(self.q, u1.dim, dtype=F64)
        for l in range(self.q):
            r_s[l, u1[f"sum{l}"]] = (coef / 4).repeat(self.d_e)  # + coef / 4
            r_s[l, u1[f"diff{l}"]] = -(coef / 4).repeat(self.d_e)  # - coef / 4
        return w, beta, coef, r_s

    def _build_dense(self):
        """The four layers, each a dense float64 matrix (named blocks in the docstring of the
        module)."""
        d, q, d_e, K1 = self.d, self.q, self.d_e, self.product_knots
        bands, K2 = self.bands, self.bands.knots
        lay, off = self.layout, self.d_h  # z columns start after the q d columns of h
        w1, w2, w3 = self.widths
        # W1 (w1, d_h + D_in), W2 (w2, w1), G (d_h, w2), W3 = [G; -G], W4 (d_h, 2 d_h): float64
        entries = w1 * (off + self.D_in) + w2 * w1 + 3 * self.d_h * w2 + 2 * self.d_h**2
        validate.fits_in_memory(
            f"the Prop 26 transition's dense layers (widths {w1}, {w2}, {w3})", 8 * entries, "cpu"
        )
        w, beta, coef, r_s = self._readouts()
        u1, u2 = self.units1, self.units2
        units1, units2 = torch.arange(w1), torch.arange(w2)
        ar = torch.arange(d)
        # ---- layer 1 (units1): x+ = relu(x), x- = relu(-x); sum{l} / diff{l}: the square units
        # of pos + slot l and pos - slot l, coordinate j, knot k
        W1 = torch.zeros(w1, off + self.D_in, dtype=F64)
        b1 = torch.zeros(w1, dtype=F64)
        xcol = off + lay["x"].start + ar
        W1[units1[u1["x+"]], xcol], W1[units1[u1["x-"]], xcol] = 1.0, -1.0
        j = torch.arange(d_e).repeat_interleave(K1)  # coordinate of each unit
        k = torch.arange(K1).repeat(d_e)  # knot of each unit
        for l in range(q):
            for kind, sign in (("sum", 1.0), ("diff", -1.0)):
                r = units1[u1[f"{kind}{l}"]]
                W1[r, off + lay["pos"].start + j] = w[k]
                W1[r, off + lay.slot(l).start + j] = sign * w[k]
                b1[r] = beta[k]
        # ---- layer 2 (units2): xgate{l} (band k, coordinate c) reads x_c, sgate{l} (band k)
        # does not; all read M s_hat_l + beta_k
        W2 = torch.zeros(w2, w1, dtype=F64)
        b2 = torch.zeros(w2, dtype=F64)
        c_of = torch.arange(K2 * d) % d  # the coordinate of each xgate unit
        for l in range(q):
            xg, sg = units2[u2[f"xgate{l}"]], units2[u2[f"sgate{l}"]]
            W2[xg], W2[sg] = bands.M * r_s[l], bands.M * r_s[l]
            W2[xg, units1[u1["x+"]][c_of]] += 1.0  # + relu(x_c)
            W2[xg, units1[u1["x-"]][c_of]] -= 1.0  # - relu(-x_c)
            b2[xg], b2[sg] = bands.beta.repeat_interleave(d), bands.beta
        # ---- gate readout G (q d x w2): 2 delta sum_k (xgate_{l,k,c} - sgate_{l,k})
        G = torch.zeros(self.d_h, w2, dtype=F64)
        for l in range(q):
            xg, sg = units2[u2[f"xgate{l}"]], units2[u2[f"sgate{l}"]]
            for c in range(d):
                G[l * d + c, xg[torch.arange(K2) * d + c]] = 2 * bands.delta
                G[l * d + c, sg] = -2 * bands.delta
        # ---- layer 3: st+ = relu(G - b), st- = relu(-G - b); layer 4: st+ - st-
        W3 = torch.cat([G, -G])
        b3 = torch.full((w3,), -self.threshold, dtype=F64)
        eye = torch.eye(self.d_h, dtype=F64)
        W4 = torch.cat([eye, -eye], dim=1)
        self._dense = MLPWeights(((W1, b1), (W2, b2), (W3, b3), (W4, None)))
        self._gate_readout = G

    def norms(self) -> tuple:
        """Per layer {"fro", "max_abs", "bias_norm"}, computed from the structure (no dense
        matrices)."""
        d, q, d_e, K1, K2 = self.d, self.q, self.d_e, self.product_knots, self.bands.knots
        w, beta, coef = square_units(self.R, K1)
        bands, qd = self.bands, self.d_h
        r2 = 2 * d_e * float(((coef / 4) ** 2).sum())  # ||r_s[l]||^2
        M = bands.M
        return (
            {
                "fro": math.sqrt(2 * d + 4 * q * d_e * K1),
                "max_abs": float(w.abs().max()),
                "bias_norm": math.sqrt(2 * q * d_e * float((beta**2).sum())),
            },
            {
                "fro": math.sqrt(q * K2 * (2 * d + (d + 1) * M * M * r2)),
                "max_abs": max(1.0, M * float(coef.abs().max()) / 4),
                "bias_norm": math.sqrt(q * (d + 1) * float((bands.beta**2).sum())),
            },
            {
                "fro": math.sqrt(2 * qd * 2 * K2) * 2 * bands.delta,
                "max_abs": 2 * bands.delta,
                "bias_norm": self.threshold * math.sqrt(2 * qd),
            },
            {"fro": math.sqrt(2 * qd), "max_abs": 1.0, "bias_norm": 0.0},
        )

    @property
    def layers(self) -> MLPWeights:
        """Dense ``MLPWeights(((W1, b1), (W2, b2), (W3, b3), (W4, None)))`` on u = (h, z)."""
        if self._dense is None:
            self._build_dense()
        return self._dense

    def layers_without_rectifier(self) -> MLPWeights:
        """The transition with layers 3-4 dropped: ``(L1, L2, (G, None))``, G the gate readout."""
        L = self.layers
        return MLPWeights((L[0], L[1], (self._gate_readout, None)))

    # -------------------------------------------------------------- altered copies
    def _copy(self, threshold: float) -> "Transition":
        out = Transition(
            self.d,
            self.q,
            self.d_e,
            self.R,
            self.product_knots,
            self.bands,
            threshold,
            self.exact_products,
        )
        out.guarantee = self.guarantee
        return out

    def with_threshold(self, threshold: float) -> "Transition":
        """Prop 26's transition with layers 3-4 subtracting ``threshold`` in place of b
        (docs/derivations/rnn-transition.md; dense layers built anew on first use): a threshold
        too low or too high; at 0 the soft threshold is the identity (relu(G) - relu(-G) = G), as
        if layers 3-4 were removed. The attached ``guarantee`` is carried over unchanged (it
        records the original threshold, not the copy's)."""
        return self._copy(validate.positive_float("threshold", threshold, allow_zero=True))

    def with_layers(self, layers: MLPWeights) -> "Transition":
        """Prop 26's transition with dense layers ``layers`` (same shapes, e.g. one layer edited by
        ``MLPWeights.replace_layer``) while its closed form and attached ``guarantee`` stay this
        transition's: what a slip in the dense weights looks like. The gate readout of
        :meth:`layers_without_rectifier` is layer 3's first q d rows (W3 = [G; -G])."""

        def shapes(m):
            return [tuple(L.W.shape) for L in m]

        if not isinstance(layers, MLPWeights) or shapes(layers) != shapes(self.layers):
            raise ValueError(
                f"layers must be MLPWeights with the transition's shapes {shapes(self.layers)}"
            )
        out = self._copy(self.threshold)
        out._dense, out._gate_readout = layers, layers[2].W[: self.d_h]
        return out

    def dense(
        self, u: torch.Tensor, *, rectify: bool = True, chunk: Optional[int] = None
    ) -> torch.Tensor:
        """Evaluate the literal dense layers on u = (h, z) of shape (..., q d + D_in), in row
        chunks."""
        validate.finite_tensor("u", u)
        if u.shape[-1:] != (self.d_h + self.D_in,):
            raise ValueError(
                f"u must have last axis q d + D_in = {self.d_h + self.D_in}, "
                f"got shape {tuple(u.shape)}"
            )
        layers = self.layers if rectify else self.layers_without_rectifier()
        return layers(u, chunk=chunk)


def transition_weights(
    omega, d: int, q: int, *, product_knots: int, bands: GateBands, threshold: float
) -> Transition:
    """The Prop 26 transition's weights for the codes ``omega`` (Codebook or (N, d_e) tensor),
    tokens in R^d, q slots, from given parameters: ``product_knots`` K1 of the Lemma 22 square
    interpolants on [-2R, 2R] (R = max |omega_ij|), Lemma 24's gate ``bands``
    (``constructions.relu.gate_bands``), and the soft ``threshold`` b of layers 3-4.

    No guarantee is attached: ``qstr.bounds.transition.prop26_transition`` picks K1, the bands
    and b from eps and attaches ``TransitionGuarantee`` (docs/derivations/rnn-transition.md).
    """
    d = validate.positive_int("d", d)
    q = validate.positive_int("q", q)
    om, _ = codes_of(omega)
    om = om.detach().to(device="cpu", dtype=F64)
    N, d_e = om.shape
    R, _, alpha = code_stats(om)
    if R == 0:
        raise ValueError("omega must not be all zeros")
    K1 = validate.positive_int("product_knots", product_knots, minimum=2)
    if not isinstance(bands, GateBands):
        raise ValueError(
            f"bands must be a constructions.relu.GateBands, got {type(bands).__name__}"
        )
    threshold = validate.positive_float("threshold", threshold, allow_zero=True)
    exact = alpha is not None and (K1 - 1) % (alpha - 1) == 0
    return Transition(d, q, d_e, R, K1, bands, threshold, exact)
