"""Claims about recurrent networks (Section 5, Appendix B): the certified ReLU gadgets of
Lemmas 22 and 24, the four-layer transition of Prop 26 (exact zeros off target), the state
guarantee of Cor 27 (flat in N) and the end-to-end simple-qSTR RNN of Prop 28.

Constructions: ``constructions/relu.py`` and ``constructions/recurrent.py``; derivation of
every constant: ``docs/derivations/rnn-transition.md``. All certified checks run in float64 on
``ctx.device``; a certificate holds when measured <= bound + its rounding term
(``verify.rounding``), stated in the detail.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Callable, Dict, Tuple

import torch
from hypothesis import HealthCheck, Verbosity, given, settings, target
from hypothesis import strategies as st

from qstr.bounds.recurrent import prop26_transition, prop28_rnn, teacher_rnn, token_radius
from qstr.constructions.codes import Codebook, build_codebook, rs_hadamard_codebook
from qstr.constructions.encoding import rnn_encoding
from qstr.constructions.export import load_rnn
from qstr.constructions.links import make_link
from qstr.constructions.recurrent import (
    Transition,
    module_from_state,
    rnn_state,
    rnn_weights,
    transition_weights,
)
from qstr.constructions.relu import Gadget, gate_bands, gate_gadget, product_error, product_gadget
from qstr.constructions.task import QSTR, gather_tokens
from qstr.verify.adversarial import clip_to_ball
from qstr.verify.claim import Check, Claim as Declared, Context, Fault, Ref, Verdict, at_most, close
from qstr.verify.claim import exact
from qstr.verify.claims.export import through_file, through_path
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding, two_layer

F64 = torch.float64


def _transition_rounding(tr, N: int = 0, r_h: float = 0.0) -> Rounding:
    """Rounding of one transition output: a chain of d_e K1 interpolant units (s_hat) and K2
    gate bands, every term at most r_x M s_max d_e (M = 2 r_x / delta the gate slope). A state
    sums N outputs of which at most q are nonzero (the rest are exact zeros): q such terms plus
    the N-term prefix sum of vectors of norm <= r_h."""
    g = tr.guarantee
    one = Rounding(
        n=tr.d_e * g.product_knots + g.gate_knots + 4,
        scale=g.r_x * g.gate_slope * g.s_max * tr.d_e,
        what="(d_e K1 + K2 + 4) eps r_x M s_max d_e",
    )
    if not N:
        return one
    return replace(one, n=tr.q * one.n, what="q " + one.what) + Rounding(
        n=N, scale=r_h, what="N eps r_h"
    )


# ------------------------------------------------------------------ search helpers


def _hypothesis_max(err, lo, hi, n: int, device) -> float:
    """Largest err(u) over hypothesis-drawn points u in the box [lo, hi] (targeted search)."""
    best = [0.0]

    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        derandomize=True,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.floats(lo[0], hi[0]), st.floats(lo[1], hi[1]))
    def prop(a, b):
        e = float(err(torch.tensor([[a, b]], dtype=F64, device=device)).max())
        target(e)
        best[0] = max(best[0], e)

    prop()
    return best[0]


def _box_ascent(err, lo, hi, starts: torch.Tensor, steps: int) -> float:
    """Projected signed-gradient ascent of err on points in the box [lo, hi] (step size decaying
    from 2% of the box); the largest value seen."""
    lo_t, hi_t = (torch.tensor(v, dtype=F64, device=starts.device) for v in (lo, hi))
    u = starts.clone()
    best = 0.0
    for k in range(steps):
        u.requires_grad_(True)
        e = err(u)
        best = max(best, float(e.detach().max()))
        (grad,) = torch.autograd.grad(e.sum(), u)
        with torch.no_grad():
            step = 0.02 * (hi_t - lo_t) * (1 - k / steps)
            u = torch.maximum(torch.minimum(u + step * grad.sign(), hi_t), lo_t)
    with torch.no_grad():
        return max(best, float(err(u).max()))


def _ball_ascent(err, x0: torch.Tensor, r: float, steps: int) -> torch.Tensor:
    """Worst-case tokens inside ||x_j|| <= r: projected normalised-gradient ascent on sum(err(x)^2)
    from x0; returns the iterate with the largest max error (never worse than x0).

    (The search of ``verify.adversarial.worst_case_tokens`` without ``torch.optim``, whose first
    use imports torch._dynamo: seconds that the quick profile cannot spend.)
    """
    x = clip_to_ball(x0.detach().clone(), r)
    with torch.no_grad():
        best, best_val = x.clone(), float(err(x).max())
    for k in range(steps):
        x.requires_grad_(True)
        e = err(x)
        (grad,) = torch.autograd.grad((e**2).sum(), x)
        with torch.no_grad():
            val = float(e.max())
            if val > best_val:
                best, best_val = x.detach().clone(), val
            g = grad / grad.norm(dim=-1, keepdim=True).clamp_min(1e-300)
            x = clip_to_ball(x + 0.1 * r * (1 - k / steps) * g, r)
    with torch.no_grad():
        if float(err(x).max()) > best_val:
            best = x.detach().clone()
    return best


# ------------------------------------------------------------------ the gadget claims


@dataclass(frozen=True)
class GadgetCase:
    """One gadget on its box [lo, hi], the knot count its certificate is asked for, and what the
    searches found: sup |gadget - target| by grid, structured points, hypothesis and ascent."""

    label: str
    args: tuple  # the certificate's arguments: (R, knots) or (r_x, knots, s_max)
    gadget: Gadget
    lo: tuple
    hi: tuple
    found: Dict[str, float]
    rounding: Rounding

    @property
    def sup_error(self) -> float:
        return max(self.found.values())


@dataclass(frozen=True)
class GadgetInputs:
    """The gadgets as built, each with its searched sup error, and the certificate they meet."""

    cases: Tuple[GadgetCase, ...]
    certificate: Callable[..., float]  # Lemma 22: h^2/16; Lemma 24: r_x delta


def _search(name: str, k: int, gadget: Gadget, lo, hi, special: torch.Tensor, ctx: Context):
    """Sup-error of a 2-input gadget by a dense grid, structured points, hypothesis and ascent
    (all on ctx.device), and its rounding term over the box (attained at its corners)."""
    dev = ctx.device
    gadget = replace(gadget, W1=gadget.W1.to(dev), b1=gadget.b1.to(dev), W2=gadget.W2.to(dev))
    err = lambda u: (gadget(u) - gadget.target(u)).abs()[..., 0]  # noqa: E731
    n_grid = ctx.pick(quick=241, full=1201)
    grid = torch.cartesian_prod(
        *(torch.linspace(lo[j], hi[j], n_grid, dtype=F64, device=dev) for j in range(2))
    )
    lo_t, hi_t = (torch.tensor(v, dtype=F64, device=dev) for v in (lo, hi))
    n_starts = ctx.pick(quick=256, full=2048)
    u0 = torch.rand(
        n_starts, 2, generator=ctx.generator(name, k, device=dev), dtype=F64, device=dev
    )
    starts = lo_t + u0 * (hi_t - lo_t)
    with torch.no_grad():
        found = {"grid": float(err(grid).max()), "structured": float(err(special.to(dev)).max())}
    found["hypothesis"] = _hypothesis_max(err, lo, hi, ctx.pick(quick=150, full=1000), dev)
    found["adversarial"] = _box_ascent(err, lo, hi, starts, ctx.pick(quick=60, full=300))
    return found, two_layer(gadget.W1, gadget.b1, gadget.W2, grid)


ATTAINED_TOL = 1e-3  # the searched sup must reach the certificate to within this fraction


def _shown(case: GadgetCase) -> str:
    return f"{case.label}: " + ", ".join(f"{k} {v:.4g}" for k, v in case.found.items())


def gadget_within_certificate(inp: GadgetInputs, ctx: Context) -> Verdict:
    """The largest sup error over the cases, relative to its certificate, is at most it
    (Lemmas 22, 24)."""
    worst = max(inp.cases, key=lambda c: c.sup_error / inp.certificate(*c.args))
    bound = inp.certificate(*worst.args)
    return at_most(worst.sup_error, bound, worst.rounding, detail=f"worst case {_shown(worst)}")


def gadget_certificate_attained(inp: GadgetInputs, ctx: Context) -> Verdict:
    """The searched sup reaches the certificate (to 0.1%) in every case: the constant is the
    least one (a certificate h^2/8 for h^2/16 fails here). Worst case: the ratio farthest from 1."""
    worst = max(inp.cases, key=lambda c: abs(c.sup_error / inp.certificate(*c.args) - 1))
    bound = inp.certificate(*worst.args)
    return close(
        worst.sup_error,
        bound,
        ATTAINED_TOL * bound,
        worst.rounding,
        detail=f"worst case {_shown(worst)}",
    )


def _fewer_knots(cases, build, special, lo_hi, name: str, ctx: Context):
    """The cases rebuilt with half the knots, the certificate still asked for the full count."""
    out = []
    for k, c in enumerate(cases):
        used = max(2 if c.gadget.name == "product" else 1, c.args[1] // 2)
        args = (c.args[0], used) + tuple(c.args[2:])
        g = build(*args)
        lo, hi = lo_hi(*args)
        found, rnd = _search(name, k, g, lo, hi, special(*args), ctx)
        out.append(
            replace(
                c, label=f"{c.label} built with {used} knots", gadget=g, found=found, rounding=rnd
            )
        )
    return tuple(out)


# ---------------------------------------------------------------------- lemma-22

L22_CASES = ((1.0, 17), (0.125, 9))


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


def lemma22_inputs(ctx: Context) -> GadgetInputs:
    """Lemma 22's product gadget for each (R, knots), searched on [-R, R]^2."""
    cases = []
    for k, (R, K) in enumerate(L22_CASES):
        K = ctx.pick(quick=K, full=2 * K - 1)
        g = product_gadget(R, K)
        found, rnd = _search(
            "lemma-22/starts", k, g, *_product_box(R, K), _product_special(R, K), ctx
        )
        cases.append(GadgetCase(f"R={R:g} knots={K}", (R, K), g, *_product_box(R, K), found, rnd))
    return GadgetInputs(tuple(cases), product_error)


def _product_half_knots(inp: GadgetInputs, ctx: Context) -> GadgetInputs:
    """Half the knots: h doubles, the error quadruples past the certificate for the full count."""
    return replace(
        inp,
        cases=_fewer_knots(
            inp.cases, product_gadget, _product_special, _product_box, "lemma-22/starts", ctx
        ),
    )


def _product_h2_over_8(inp: GadgetInputs, ctx: Context) -> GadgetInputs:
    """The certificate h^2/8 (twice Lemma 22's): not attained."""
    return replace(inp, certificate=lambda R, K: 2 * product_error(R, K))


L22_SUP, L22_ATTAINED = "sup |P(x,y) - xy| <= h^2/16", "h^2/16 attained"

register(
    Declared(
        id="lemma-22",
        ref=Ref("Lemma 22", "Lemma 22"),
        statement="product gadget (x+y)^2/4 - (x-y)^2/4 by knot interpolation: "
        "sup |P(x,y) - xy| on [-R,R]^2 "
        "<= h^2/16 (certified, attained), h = 4R/(knots-1)",
        inputs=lemma22_inputs,
        checks=[
            Check(L22_SUP, gadget_within_certificate),
            Check(L22_ATTAINED, gadget_certificate_attained),
        ],
        faults=[
            Fault("half the knots", _product_half_knots, breaks=(L22_SUP, L22_ATTAINED)),
            Fault("certificate h^2/8", _product_h2_over_8, breaks=(L22_ATTAINED,)),
        ],
        builds=(product_gadget,),
        bounds=(product_error,),
        derivation="docs/derivations/rnn-transition.md",
    )
)

# ---------------------------------------------------------------------- lemma-24

L24_CASES = ((3.0, 16, 1.05), (0.5, 8, 1.0))


def _gate_special(r_x: float, knots: int, s_max: float) -> torch.Tensor:
    """x = +-r_x at band midpoints (where the certificate r_x delta is attained) and band edges."""
    delta = (s_max - 0.5) / knots
    mids = 0.5 + delta * (torch.arange(knots, dtype=F64) + 0.5)
    s = torch.cat([mids, 0.5 + delta * torch.arange(knots + 1, dtype=F64)])
    x = torch.tensor([-r_x, r_x, 0.5 * r_x, -0.5 * r_x], dtype=F64)
    return torch.cartesian_prod(x, s)


def _gate_box(r_x: float, knots: int, s_max: float):
    return (-r_x, -1.5), (r_x, s_max)


def gate_error(r_x: float, knots: int, s_max: float) -> float:
    """Lemma 24's certificate r_x delta, delta = (s_max - 1/2) / knots (``GateBands.error``)."""
    return gate_bands(r_x, knots, s_max).error


def lemma24_inputs(ctx: Context) -> GadgetInputs:
    """Lemma 24's gate gadget for each (r_x, knots, s_max), searched on
    [-r_x, r_x] x [-1.5, s_max]."""
    cases = []
    for k, (r_x, K, s_max) in enumerate(L24_CASES):
        args = (r_x, ctx.pick(quick=K, full=4 * K), s_max)
        g = gate_gadget(*args)
        found, rnd = _search("lemma-24/starts", k, g, *_gate_box(*args), _gate_special(*args), ctx)
        cases.append(
            GadgetCase(
                f"r_x={r_x:g} s<={s_max:g} knots={args[1]}", args, g, *_gate_box(*args), found, rnd
            )
        )
    return GadgetInputs(tuple(cases), gate_error)


def gate_zero_below_half(inp: GadgetInputs, ctx: Context) -> Verdict:
    """Lemma 24: the gadget is exactly 0 for s < 1/2 (a 201 x 201 grid of
    [-r_x, r_x] x [-1.5, 1/2))."""
    nonzero, where = 0, []
    for c in inp.cases:
        r_x = c.args[0]
        grid = torch.cartesian_prod(
            torch.linspace(-r_x, r_x, 201, dtype=F64, device=ctx.device),
            torch.linspace(-1.5, 0.5 - 1e-9, 201, dtype=F64, device=ctx.device),
        )
        gadget = replace(
            c.gadget,
            W1=c.gadget.W1.to(ctx.device),
            b1=c.gadget.b1.to(ctx.device),
            W2=c.gadget.W2.to(ctx.device),
        )
        count = int((gadget(grid) != 0).sum())
        nonzero += count
        where.append(f"{c.label}: {count}")
    return exact(nonzero, 0, detail="nonzero outputs for s < 1/2: " + ", ".join(where))


def gate_gadget_is_unit_sum(inp: GadgetInputs, ctx: Context) -> Verdict:
    """Lemma 24's gate three ways on one 121 x 121 grid of each box: the dense gadget users load,
    the literal sum of its 2K units (``GateBands.evaluate_units``, the lemma's formula) and the
    closed form the Prop 26 transition evaluates (``GateBands.evaluate``); the largest gap."""
    gap, worst = -1.0, inp.cases[0]
    for c in inp.cases:
        bands = gate_bands(*c.args)
        grid = torch.cartesian_prod(
            *(torch.linspace(c.lo[j], c.hi[j], 121, dtype=F64) for j in range(2))
        )
        x, s = grid[:, :1], grid[:, 1]
        units = bands.evaluate_units(x, s)
        g = max(
            float((c.gadget(grid) - units).abs().max()),
            float((bands.evaluate(x, s) - units).abs().max()),
        )
        if g > gap:
            gap, worst = g, c
    return close(
        gap,
        0.0,
        0.0,
        worst.rounding + worst.rounding,
        detail=f"largest |gadget - unit sum| or |closed form - unit sum|, worst case "
        f"{_shown(worst)}",
    )


def _gate_half_knots(inp: GadgetInputs, ctx: Context) -> GadgetInputs:
    """Half the knots: delta doubles, and so does the attained error."""
    return replace(
        inp,
        cases=_fewer_knots(
            inp.cases, gate_gadget, _gate_special, _gate_box, "lemma-24/starts", ctx
        ),
    )


def _gate_beta_shifted(inp: GadgetInputs, ctx: Context) -> GadgetInputs:
    """The band offsets beta moved up by a tenth of the slope M: bands open before s = 1/2."""
    cases = []
    for c in inp.cases:
        M = c.gadget.params["M"]
        cases.append(replace(c, gadget=replace(c.gadget, b1=c.gadget.b1 + 0.1 * M)))
    return replace(inp, cases=tuple(cases))


def _gate_2_delta(inp: GadgetInputs, ctx: Context) -> GadgetInputs:
    """The certificate 2 r_x delta (twice Lemma 24's): not attained."""
    return replace(inp, certificate=lambda r_x, K, s_max: 2 * gate_error(r_x, K, s_max))


L24_SUP, L24_ATTAINED, L24_ZERO, L24_UNITS = (
    "sup |G(x,s) - 2x relu(s-1/2)| <= r_x delta",
    "r_x delta attained",
    "G = 0 for s < 1/2",
    "gadget = unit sum = closed form",
)

register(
    Declared(
        id="lemma-24",
        ref=Ref("Lemma 24", "Lemma 24"),
        statement="gate gadget: sup |G(x,s) - 2x relu(s-1/2)| over |x| <= r_x, s <= s_max "
        "is <= r_x delta "
        "(certified, attained), delta = (s_max - 1/2)/knots; exactly 0 for s <= 1/2",
        inputs=lemma24_inputs,
        checks=[
            Check(L24_SUP, gadget_within_certificate),
            Check(L24_ATTAINED, gadget_certificate_attained),
            Check(L24_ZERO, gate_zero_below_half),
            Check(L24_UNITS, gate_gadget_is_unit_sum),
        ],
        faults=[
            Fault("half the knots", _gate_half_knots, breaks=(L24_SUP, L24_ATTAINED)),
            Fault("certificate 2 r_x delta", _gate_2_delta, breaks=(L24_ATTAINED,)),
            Fault(
                "band offsets shifted up by M/10", _gate_beta_shifted, breaks=(L24_ZERO, L24_UNITS)
            ),
        ],
        builds=(gate_gadget,),
        bounds=(gate_error,),
        derivation="docs/derivations/rnn-transition.md",
    )
)

# ---------------------------------------------------------------------- prop-26

P26_D, P26_Q, P26_RX, P26_EPS = 3, 2, 2.5, 0.1
P26_ROTATED_NS = (512, 2048, 8192, 32768)  # RS-Hadamard with d_e = 64 (mu = 1/2) stops at N = 32768
P26_LONG_NS = (1000, 10_000, 100_000, 1_000_000)  # gpu: the transition scanned at N = 1e6


def _rotated(book: Codebook, gen: torch.Generator) -> Codebook:
    """The codes times a random orthogonal matrix: same inner products (so the same mu, attained),
    generic entries (so the Lemma 22 products are approximate, not exact)."""
    Q, _ = torch.linalg.qr(torch.randn(book.d_e, book.d_e, generator=gen, dtype=F64))
    return Codebook(book.omega.to(F64) @ Q, book.mu, "custom", {"rotated": book.kind})


def _short_rows(book: Codebook) -> Codebook:
    """Every other row scaled by 0.999: the norm defect nu = max | ||w||^2 - 1 | = 0.002 enters
    every budget of the transition (products, gate, certified eps); the coherence stays <= 1/2."""
    omega = book.omega.clone()
    omega[::2] *= 0.999
    return Codebook(omega, book.mu, "custom", dict(book.params, short_rows=0.999))


def _quarter(ctx: Context) -> Codebook:
    """A rotated RS-Hadamard code built for mu <= 1/4 (measured mu = 1/8): approximate products."""
    book = rs_hadamard_codebook(64, mu=0.25, dtype=F64)
    return _rotated(book, ctx.generator("prop-26/quarter-rotation")).to(device=ctx.device)


def _p26_books(ctx: Context):
    """RS-Hadamard N = 64 (d_e = 16, mu = 1/2 attained), rotated, rotated with short rows (and
    in full, the mu = 1/8 code)."""
    base = rs_hadamard_codebook(64, dtype=F64)
    rotated = _rotated(base, ctx.generator("prop-26/rotation"))
    books = [
        ("rs-hadamard N=64 (exact products)", base),
        ("rotated rs-hadamard N=64 (approx. products)", rotated),
        (
            "rotated rs-hadamard N=64, every other row of norm 0.999 (nu = 0.002)",
            _short_rows(rotated),
        ),
    ]
    if ctx.profile != "quick":  # mu = 1/8 < 1/2 with approximate products: K1 from the dA branch
        books.append(("rotated rs-hadamard N=64, mu = 1/8", _quarter(ctx)))
    return [(label, book.to(device=ctx.device)) for label, book in books]


def _boundary_tokens(d: int, r_x: float, device) -> torch.Tensor:
    """+-r_x e_k, +-r_x (1, ..., 1)/sqrt(d), the alternating one and 0: the sphere's corners."""
    eye = torch.eye(d, dtype=F64, device=device) * r_x
    ones = torch.ones(d, dtype=F64, device=device) * r_x / math.sqrt(d)
    alt = ones * torch.tensor([(-1.0) ** k for k in range(d)], dtype=F64, device=device)
    return torch.cat(
        [eye, -eye, ones[None], -ones[None], alt[None], torch.zeros(1, d, dtype=F64, device=device)]
    )


@dataclass(frozen=True)
class TransitionCase:
    """One transition with its codes and tokens: every pair (i, t_l) in every slot (t_l = j + 7l
    mod N), random tokens x in the r_x ball, boundary tokens, a dense-layer subset and the rows
    the adversarial searches start from (targets and pairs at the coherence)."""

    label: str
    book: Codebook
    transition: object  # Transition (or a broken one)
    i: torch.Tensor  # (P,)
    t: torch.Tensor  # (P, q)
    x: torch.Tensor  # (P, d) in the ball
    boundary: torch.Tensor  # (P, d) on the sphere's corners
    sub: torch.Tensor  # rows checked through the literal dense layers
    h: torch.Tensor  # the h part of u = (h, z) on those rows
    sel: torch.Tensor  # rows of the adversarial searches (targets and pairs at the coherence)
    starts: torch.Tensor  # their start: boundary tokens pulled in by 0.1%
    worst_target: torch.Tensor  # the tokens the ascent found for the target error
    worst_leak: torch.Tensor  # and for the gate off target

    @property
    def hit(self) -> torch.Tensor:
        return self.t == self.i[:, None]

    def z(self, x: torch.Tensor, rows=None) -> torch.Tensor:
        """z = (x, omega_i, omega_{t_1}, ..., omega_{t_q}) on the given rows (of x too)."""
        om = self.book.omega.to(dtype=F64, device=x.device)
        if rows is not None:
            x = x[rows]
        i, t = (self.i, self.t) if rows is None else (self.i[rows], self.t[rows])
        return torch.cat([x, om[i]] + [om[t[:, l]] for l in range(t.shape[1])], 1)


def _transition_case(label: str, book: Codebook, k: int, ctx: Context) -> TransitionCase:
    tr = prop26_transition(book, P26_D, P26_Q, eps=P26_EPS, r_x=P26_RX)
    dev, N, q, d, r_x = ctx.device, book.N, P26_Q, P26_D, P26_RX
    ar = torch.arange(N, device=dev)
    i, j = (v.flatten() for v in torch.meshgrid(ar, ar, indexing="ij"))
    t = torch.stack([(j + 7 * l) % N for l in range(q)], 1)
    P = i.numel()
    gen = ctx.generator("prop-26/tokens", k, device=dev)
    x = torch.randn(P, d, generator=gen, dtype=F64, device=dev)
    x = (
        x
        / x.norm(dim=1, keepdim=True)
        * r_x
        * torch.rand(P, 1, generator=gen, dtype=F64, device=dev).sqrt()
    )
    bnd = _boundary_tokens(d, r_x, dev)
    hit = t == i[:, None]
    sub = torch.cat(
        [
            hit.any(1).nonzero().flatten(),
            torch.randperm(P, generator=gen, device=dev)[: ctx.pick(quick=384, full=4096)],
        ]
    )
    h = torch.randn(sub.numel(), tr.d_h, generator=gen, dtype=F64, device=dev) * r_x
    om = book.omega.to(dtype=F64, device=dev)
    s_pair = torch.stack([(om[i] * om[t[:, l]]).sum(1) for l in range(q)], 1)
    at_mu = (((s_pair - book.mu).abs() < 1e-9) & ~hit).any(1)  # the gate is closest to on there
    sel = torch.cat([hit.any(1).nonzero().flatten()[:64], at_mu.nonzero().flatten()[:192]])
    boundary = bnd[torch.arange(P, device=dev) % bnd.shape[0]]
    x0 = boundary[: sel.numel()] * 0.999 + 1e-3 * x[sel]
    zs = torch.cat([om[i[sel]]] + [om[t[sel, l]] for l in range(q)], 1)
    xa, xl = _ascents(tr, x0, zs, hit[sel], ctx)
    return TransitionCase(label, book, tr, i, t, x, boundary, sub, h, sel, x0, xa, xl)


@dataclass(frozen=True)
class Prop26Inputs:
    """The transitions on their codes, the guarantees whose budget is checked against the
    derivation (with the codes they were built for), and the RNNs whose states are scanned."""

    cases: Tuple[TransitionCase, ...]
    guarantees: Tuple[tuple, ...]  # (label, TransitionGuarantee, omega)
    curves: Tuple[tuple, ...]  # (label, RNNConstruction, Ns)
    eps: float  # the accuracy asked for


def _curve_rnn(N: int, rotate: bool, ctx: Context):
    """The RNN on the RS-Hadamard codes of N (rotated: d_e = 64, mu = 1/2, approximate products)."""
    book = rs_hadamard_codebook(N, dtype=F64)
    book = (_rotated(book, ctx.generator("prop-26/curve-rotation")) if rotate else book).to(
        device=ctx.device
    )
    link = make_link("linear", 1, P26_D, generator=ctx.generator("prop-26/link"))
    return prop28_rnn(book, P26_D, link.two_layer_net(), eps=P26_EPS, r_x=P26_RX)


def prop26_inputs(ctx: Context) -> Prop26Inputs:
    """The transitions of :func:`_p26_books`, plus guarantees built for their knots only: the
    mu = 1/8 code (at r_x = 0.05 and 0.04 the dA budget is capped at 1/2 - mu; at 0.05 the
    ceiling of K1 hides the cap's value, at 0.04 a cap twice as high gives 6 knots, not 7) and
    zero-padded RS-Hadamard codes (entries in {0, +-R}: the alphabet certificate with 5 knots, at
    the default eps)."""
    cases = tuple(
        _transition_case(label, book, k, ctx) for k, (label, book) in enumerate(_p26_books(ctx))
    )
    extra = []
    quarter = _quarter(ctx)
    if ctx.profile == "quick":
        extra.append(
            ("mu = 1/8", prop26_transition(quarter, P26_D, P26_Q, eps=P26_EPS, r_x=P26_RX), quarter)
        )
    for r_x in (0.05, 0.04):  # the cap binds at both; at 0.04 its value decides K1
        extra.append(
            (
                f"mu = 1/8, r_x = {r_x}",
                prop26_transition(quarter, P26_D, P26_Q, eps=P26_EPS, r_x=r_x),
                quarter,
            )
        )
    padded = build_codebook(64, kind="rs-hadamard", d_e=300, dtype=F64, device=ctx.device)
    extra.append(
        ("zero-padded rs-hadamard", prop26_transition(padded, P26_D, P26_Q, r_x=P26_RX), padded)
    )
    guarantees = tuple((c.label, c.transition.guarantee, c.book.omega) for c in cases)
    guarantees += tuple((label, tr.guarantee, book.omega) for label, tr, book in extra)
    curves = [
        (
            f"rotated N={P26_ROTATED_NS[-1]}",
            _curve_rnn(P26_ROTATED_NS[-1], True, ctx),
            P26_ROTATED_NS,
        )
    ]
    if ctx.profile == "gpu":  # the transition scanned over N = 1e6 positions (exact products)
        curves.append(
            (
                f"rs-hadamard N={P26_LONG_NS[-1]}",
                _curve_rnn(P26_LONG_NS[-1], False, ctx),
                P26_LONG_NS,
            )
        )
    return Prop26Inputs(cases, guarantees, tuple(curves), P26_EPS)


def _worst(rows, key):
    """The row with the largest key (the worst case of a check over many)."""
    return max(rows, key=key)


def _target_errors(tr, x: torch.Tensor, zs: torch.Tensor, hit: torch.Tensor) -> torch.Tensor:
    """|f(z)_l - x|_inf at target slots (0 elsewhere): x (P, d), zs the rest of z (P, D_in - d)."""
    d = x.shape[1]
    e = (tr(torch.cat([x, zs], 1)).view(-1, tr.q, d) - x[:, None, :]).abs().amax(-1)
    return torch.where(hit, e, torch.zeros_like(e))


def _gate_leaks(tr, x: torch.Tensor, zs: torch.Tensor, hit: torch.Tensor) -> torch.Tensor:
    """max |gate|_inf at non-target slots (0 at targets): the gate before layers 3-4."""
    G = tr(torch.cat([x, zs], 1), rectify=False).view(-1, tr.q, x.shape[1]).abs().amax(-1)
    return torch.where(hit, torch.zeros_like(G), G)


def _ascents(tr, x0: torch.Tensor, zs: torch.Tensor, hit: torch.Tensor, ctx: Context):
    """The worst tokens in the r_x ball for the target error and for the gate off target (ascent
    from x0 on the adversarial rows)."""
    steps, r_x = ctx.pick(quick=25, full=100), tr.guarantee.r_x
    xa = _ball_ascent(lambda x: _target_errors(tr, x, zs, hit), x0, r_x, steps)
    xl = _ball_ascent(lambda x: _gate_leaks(tr, x, zs, hit), x0, r_x, steps)
    return xa, xl


def _case_target_error(c: TransitionCase) -> float:
    """max |f(z)_l - x_i|_inf over target slots: every pair (random and boundary tokens) and the
    worst tokens found."""
    zs = c.z(c.x)[:, c.x.shape[1] :]
    with torch.no_grad():
        errs = [_target_errors(c.transition, x, zs, c.hit) for x in (c.x, c.boundary)]
        errs.append(_target_errors(c.transition, c.worst_target, zs[c.sel], c.hit[c.sel]))
    return max(float(e.max()) for e in errs)


def transition_target_error(inp: Prop26Inputs, ctx: Context) -> Verdict:
    """Prop 26: ||f(u)_l - x_i||_inf <= eps at target slots t_l = i, for all ||x_i|| <= r_x."""
    rows = [(c, _case_target_error(c)) for c in inp.cases]
    c, err = _worst(rows, lambda r: r[1] / r[0].transition.guarantee.eps)
    g = c.transition.guarantee
    return at_most(
        err,
        g.eps,
        _transition_rounding(c.transition),
        detail=f"worst case {c.label} ({g.product_certificate} products, K1={g.product_knots}, "
        f"K2={g.gate_knots}); every pair, boundary tokens and the ascent's",
    )


def _nonzero_off_target(c: TransitionCase) -> Tuple[int, int]:
    """(nonzero, checked) outputs at non-target slots: every pair (closed form), the dense subset,
    and the worst tokens found for the gate."""
    tr, hit, d = c.transition, c.hit, c.x.shape[1]
    nonzero, checked = 0, 0
    zs = c.z(c.x)[:, d:]
    with torch.no_grad():
        outs = [(tr(c.z(x)), ~hit) for x in (c.x, c.boundary)]
        outs.append((tr.dense(torch.cat([c.h, c.z(c.x, c.sub)], 1)), ~hit[c.sub]))
        outs.append((tr(torch.cat([c.worst_leak, zs[c.sel]], 1)), ~hit[c.sel]))
        for out, off in outs:
            nonzero += int((out.view(-1, tr.q, d)[off] != 0).sum())
            checked += int(off.sum()) * d
    return nonzero, checked


def transition_zeros_off_target(inp: Prop26Inputs, ctx: Context) -> Verdict:
    """Prop 26: f(u)_l == 0 exactly when t_l != i (no outputs off target)."""
    rows = [(c.label, *_nonzero_off_target(c)) for c in inp.cases]
    return exact(
        sum(r[1] for r in rows),
        0,
        detail="nonzero of checked outputs: " + ", ".join(f"{a}: {n} of {m}" for a, n, m in rows),
    )


def transition_gate_below_threshold(inp: Prop26Inputs, ctx: Context) -> Verdict:
    """The gate at non-target slots stays below the threshold b the layers 3-4 subtract
    (docs/derivations/rnn-transition.md: b = r_x min(4e, 2e + delta)); worst tokens by ascent."""
    rows = []
    for c in inp.cases:
        zs = c.z(c.x, c.sel)[:, c.x.shape[1] :]
        with torch.no_grad():
            leak = max(
                float(_gate_leaks(c.transition, x, zs, c.hit[c.sel]).max())
                for x in (c.starts, c.worst_leak)
            )
        rows.append((c, leak))
    c, leak = _worst(rows, lambda r: r[1] / r[0].transition.threshold)
    return at_most(
        leak,
        c.transition.threshold,
        _transition_rounding(c.transition),
        detail=f"worst case {c.label}: adversarial max |gate| off target vs the threshold",
    )


def transition_dense_equals_closed_form(inp: Prop26Inputs, ctx: Context) -> Verdict:
    """The literal four dense layers on u = (h, z) equal the closed form f(z) the checks evaluate
    (all target pairs and a random subset; h is not read)."""
    rows = []
    for c in inp.cases:
        with torch.no_grad():
            z = c.z(c.x, c.sub)
            rows.append(
                (
                    c.label,
                    float(
                        (c.transition.dense(torch.cat([c.h, z], 1)) - c.transition(z)).abs().max()
                    ),
                )
            )
    label, gap = _worst(rows, lambda r: r[1])
    return at_most(
        gap, 1e-9, detail=f"worst case {label}: max |dense - closed form| (absolute 1e-9)"
    )


def transition_eps_as_asked(inp: Prop26Inputs, ctx: Context) -> Verdict:
    """The certified eps meets the accuracy asked for (Prop 26 builds for any eps > 0)."""
    label, g, _ = _worst(inp.guarantees, lambda r: r[1].eps)
    return at_most(g.eps, inp.eps, detail=f"largest certified eps: {label}")


def derived_knots(g) -> tuple:
    """(K1, K2) as docs/derivations/rnn-transition.md ("Choosing the knots") prescribes for the
    eps asked: uniform products K1 = max(2, ceil(1 + sqrt(d_e R^2 / max(dA, dB)))) (alphabet
    codes: their own 3 or 5, see the certificate check),
    K2 = max(1, ceil((s_max - 1/2) r_x / budget)).
    """
    eps, r, nu, mu, eta = g.eps_requested, g.r_x, g.norm_defect, g.mu, g.margin
    K1 = g.product_knots
    if g.product_certificate == "uniform":
        dA = min(eps / (4 * r) - nu, (0.5 - mu - eta) * (1 - 1e-9))
        dB = (eps / 2 - 2 * r * nu - 4 * r * (mu - 0.5 + eta)) / (6 * r)
        dB = dB if dB > 0.5 - mu else -math.inf  # the mu ~ 1/2 regime only
        K1 = max(2, math.ceil(1 + math.sqrt(g.d_e * g.code_range**2 / max(dA, dB))))
    budget = eps - 4 * r * g.non_target_excess - 2 * r * (g.inner_product_error + nu)
    return K1, max(1, math.ceil((g.s_max - 0.5) * r / budget))


def transition_knots_as_derived(inp: Prop26Inputs, ctx: Context) -> Verdict:
    """The knots (K1, K2) prop26_transition picks for each eps are the derivation's."""
    got = tuple((g.product_knots, g.gate_knots) for _, g, _ in inp.guarantees)
    want = tuple(derived_knots(g) for _, g, _ in inp.guarantees)
    return exact(
        got, want, detail="(K1, K2) per guarantee: " + ", ".join(l for l, _, _ in inp.guarantees)
    )


def derived_budget(g) -> Dict[str, float]:
    """Prop 26's error budget (docs/derivations/rnn-transition.md): product error h^2/16, delta_1 =
    d_e h^2/16 (0 on an alphabet), s_max = 1 + nu + delta_1 + margin, excess e = max(0, mu +
    delta_1 - 1/2) + margin, threshold b = r_x min(4e, 2e + delta), eps = b + r_x delta + 2 r_x
    (delta_1 + nu)."""
    h = 4 * g.code_range / (g.product_knots - 1)
    delta1 = 0.0 if g.product_certificate == "alphabet" else g.d_e * h * h / 16
    e = max(0.0, g.mu + delta1 - 0.5) + g.margin
    b = g.r_x * min(4 * e, 2 * e + g.gate_delta)
    return {
        "product_error": h * h / 16,
        "inner_product_error": delta1,
        "s_max": 1 + g.norm_defect + delta1 + g.margin,
        "non_target_excess": e,
        "threshold": b,
        "eps": b + g.gate_error + 2 * g.r_x * (delta1 + g.norm_defect),
    }


def _budget_check(field_name: str):
    """The check that the guarantee's ``field_name`` is the derivation's (relative 1e-12)."""

    def run(inp: Prop26Inputs, ctx: Context) -> Verdict:
        rows = [
            (label, getattr(g, field_name), derived_budget(g)[field_name])
            for label, g, _ in inp.guarantees
        ]
        label, got, want = _worst(rows, lambda r: abs(r[1] - r[2]) / max(abs(r[2]), 1e-300))
        return close(
            got,
            want,
            1e-12 * max(abs(want), 1e-300),
            detail=f"worst case {label}: the guarantee's {field_name} vs the derivation's",
        )

    return run


def transition_certificate_as_derived(inp: Prop26Inputs, ctx: Context) -> Verdict:
    """Lemma 22 on an alphabet: codes whose entries all lie in {+-R} ({0, +-R}) get the exact
    "alphabet" products with 3 (5) knots on [-2R, 2R]; any other codes the uniform certificate."""
    got, want = [], []
    for _, g, omega in inp.guarantees:
        mags = omega.abs()
        alphabet = bool(((mags == mags.max()) | (mags == 0)).all())
        got.append((g.product_certificate, g.product_knots if alphabet else "-"))
        want.append(
            ("alphabet", 5 if bool((mags == 0).any()) else 3) if alphabet else ("uniform", "-")
        )
    return exact(
        tuple(got), tuple(want), detail="(certificate, knots on an alphabet) per guarantee"
    )


def _curve_errors(rnn, Ns) -> list:
    """max |h_fwd - target| on the prefixes N of tokens x_j = r_x e_1 (the sphere: the gate leaks
    most), simple t = (N/2)."""
    N = Ns[-1]
    x = torch.zeros(1, N, P26_D, dtype=F64, device=rnn.omega.device)
    x[..., 0] = P26_RX
    t = torch.full((1, 1), N // 2, dtype=torch.long, device=x.device)
    with torch.no_grad():
        h = rnn.states(x, t, r_h=math.inf).h_fwd
        tf, _ = rnn.targets(x, t)
    return [float((h[:, :n] - tf[:, :n]).abs().max()) for n in Ns]


def states_within_eps(inp: Prop26Inputs, ctx: Context) -> Verdict:
    """The transition scanned over N positions: every state within eps of its target at every
    prefix N (the exact zeros keep the error from accumulating)."""
    rows = []
    for label, rnn, Ns in inp.curves:
        errs = _curve_errors(rnn, Ns)
        eps = rnn.transition.guarantee.eps
        shown = ", ".join(f"N={n}: {e:.3g}" for n, e in zip(Ns, errs))
        rows.append(
            (
                f"{label} ({shown})",
                max(errs),
                eps,
                _transition_rounding(rnn.transition, Ns[-1], rnn.r_h),
            )
        )
    label, err, eps, rnd = _worst(rows, lambda r: r[1] / r[2])
    return at_most(err, eps, rnd, detail=f"worst curve {label}")


class _GateOnly(Transition):
    """A transition without its rectifying layers 3-4: every evaluation returns the gate."""

    def from_inner_products(self, x, s_hat, *, rectify: bool = True):
        return super().from_inner_products(x, s_hat, rectify=False)

    def dense(self, u, *, rectify: bool = True, chunk=None):
        return super().dense(u, rectify=False, chunk=chunk)


def _gate_only(tr) -> Transition:
    out = copy.copy(tr)
    out.__class__ = _GateOnly
    return out


def _with_transition(rnn, tr):
    out = copy.copy(rnn)
    out.transition = tr
    return out


def _no_rectifier(inp: Prop26Inputs, ctx: Context) -> Prop26Inputs:
    """Layers 3-4 removed from every transition (and the scanned RNNs'): the gate leaks at pairs
    with <omega_i, omega_t> = 1/2 and the state error grows with N past eps."""
    cases = tuple(replace(c, transition=_gate_only(c.transition)) for c in inp.cases)
    curves = tuple(
        (label, _with_transition(rnn, _gate_only(rnn.transition)), Ns)
        for label, rnn, Ns in inp.curves
    )
    return replace(inp, cases=cases, curves=curves)


def _with_threshold(tr, b: float):
    """A copy of the transition whose layer 3 subtracts b (its dense layers rebuilt)."""
    out = copy.copy(tr)
    out.threshold = b
    out._dense, out._gate_readout = None, None
    return out


def _threshold_scaled(factor: float):
    def apply(inp: Prop26Inputs, ctx: Context) -> Prop26Inputs:
        return replace(
            inp,
            cases=tuple(
                replace(
                    c, transition=_with_threshold(c.transition, factor * c.transition.threshold)
                )
                for c in inp.cases
            ),
        )

    apply.__doc__ = f"The threshold b of layer 3 scaled by {factor:g}."
    return apply


def _guarantees_edited(**edit):
    """The guarantees with a slip in the record: ``edit`` maps a field to a function of the
    guarantee."""

    def apply(inp: Prop26Inputs, ctx: Context) -> Prop26Inputs:
        out = []
        for label, g, omega in inp.guarantees:
            out.append((label, replace(g, **{k: f(g) for k, f in edit.items()}), omega))
        return replace(inp, guarantees=tuple(out))

    return apply


def _gate_readout_halved(inp: Prop26Inputs, ctx: Context) -> Prop26Inputs:
    """Layer 3 of every transition reads G = delta sum_k H_k (the factor 2 of Lemma 24 dropped
    from the dense matrix), while the closed form keeps it: copies, the honest layers untouched."""
    cases = []
    for c in inp.cases:
        tr = copy.copy(c.transition)
        L = c.transition.layers
        tr._dense = L.replace_layer(2, W=L[2].W / 2)
        tr._gate_readout = c.transition.layers_without_rectifier()[2].W / 2
        cases.append(replace(c, transition=tr))
    return replace(inp, cases=tuple(cases))


def _built_for_twice_eps(inp: Prop26Inputs, ctx: Context) -> Prop26Inputs:
    """Every guarantee rebuilt for 2 eps (the accuracy asked for, doubled on its way to
    prop26_transition): the knots are chosen for a budget twice the one asked."""
    out = []
    for label, g, omega in inp.guarantees:
        tr = prop26_transition(
            omega, g.d, g.q, eps=2 * inp.eps, r_x=g.r_x, mu=g.mu, margin=g.margin
        )
        out.append((label, tr.guarantee, omega))
    return replace(inp, guarantees=tuple(out))


P26_TARGET, P26_ZEROS, P26_GATE = (
    "target error <= eps",
    "exactly 0 off target",
    "|gate| <= b off target",
)
P26_DENSE, P26_ASKED, P26_KNOTS = (
    "dense layers = closed form",
    "certified eps <= asked",
    "knots as derived",
)
P26_CERT, P26_STATES = "product certificate as the codes prescribe", "states within eps at every N"
P26_BUDGET = {
    "product_error": "product error = h^2/16",
    "inner_product_error": "delta_1 = d_e h^2/16",
    "s_max": "s_max = 1 + nu + delta_1 + margin",
    "non_target_excess": "excess as derived",
    "threshold": "b = r_x min(4e, 2e + delta)",
    "eps": "eps = b + r_x delta + 2 r_x (delta_1 + nu)",
}

register(
    Declared(
        id="prop-26",
        ref=Ref("Prop 26", "Prop 26"),
        statement="four-layer transition: output exactly 0 off target and within eps of x_i on "
        "target, for all ||x|| <= r_x and all codeword pairs (mu = 1/2 attained; exact and "
        "approximate products)",
        inputs=prop26_inputs,
        checks=[
            Check(P26_TARGET, transition_target_error),
            Check(P26_ZEROS, transition_zeros_off_target),
            Check(P26_GATE, transition_gate_below_threshold),
            Check(P26_STATES, states_within_eps),
            Check(P26_DENSE, transition_dense_equals_closed_form),
            Check(P26_ASKED, transition_eps_as_asked),
            Check(P26_KNOTS, transition_knots_as_derived),
            Check(P26_CERT, transition_certificate_as_derived),
        ]
        + [Check(name, _budget_check(key)) for key, name in P26_BUDGET.items()],
        faults=[
            Fault("rectifying layers 3-4 removed", _no_rectifier, breaks=(P26_ZEROS, P26_STATES)),
            Fault("threshold b / 8", _threshold_scaled(0.125), breaks=(P26_GATE,)),
            Fault("threshold 3 b", _threshold_scaled(3.0), breaks=(P26_TARGET,)),
            Fault(
                "s_max without the margin",
                _guarantees_edited(s_max=lambda g: g.s_max - g.margin),
                breaks=(P26_BUDGET["s_max"],),
            ),
            Fault(
                "eps certified 1.5 times too small",
                _guarantees_edited(eps=lambda g: g.eps / 1.5),
                breaks=(P26_BUDGET["eps"],),
            ),
            Fault(
                "layer 3 reads delta sum_k H_k (factor 2 dropped)",
                _gate_readout_halved,
                breaks=(P26_DENSE,),
            ),
            Fault("built for twice the eps asked", _built_for_twice_eps, breaks=(P26_ASKED,)),
            Fault(
                "product error h^2/4 (the square's, not the product's)",
                _guarantees_edited(product_error=lambda g: 4 * g.product_error),
                breaks=(P26_BUDGET["product_error"],),
            ),
            Fault(
                "delta_1 without its d_e factor",
                _guarantees_edited(inner_product_error=lambda g: g.inner_product_error / g.d_e),
                breaks=(P26_BUDGET["inner_product_error"],),
            ),
            Fault(
                "excess without its max(0, .)",
                _guarantees_edited(
                    non_target_excess=lambda g: g.mu + g.inner_product_error - 0.5 + g.margin
                ),
                breaks=(P26_BUDGET["non_target_excess"],),
            ),
            Fault(
                "threshold r_x min(2e, 2e + delta)",
                _guarantees_edited(threshold=lambda g: 2 * g.r_x * g.non_target_excess),
                breaks=(P26_BUDGET["threshold"],),
            ),
            Fault(
                "one gate knot fewer",
                _guarantees_edited(gate_knots=lambda g: g.gate_knots - 1),
                breaks=(P26_KNOTS,),
            ),
            Fault(
                "uniform certificate on alphabet codes",
                _guarantees_edited(product_certificate=lambda g: "uniform"),
                breaks=(P26_CERT,),
            ),
        ],
        builds=(transition_weights, rnn_weights),
        bounds=(prop26_transition, prop28_rnn, derived_budget, derived_knots),
        derivation="docs/derivations/rnn-transition.md",
    )
)

# ---------------------------------------------------------------------- cor-27

C27_D, C27_Q, C27_EPS = 4, 2, 0.1


@dataclass(frozen=True)
class StateCase:
    """An RNN on N positions, B simple-qSTR prompts in its r_x ball (prompt 0's selected tokens on
    the sphere), and the states the scan computes for them with their targets."""

    label: str
    N: int
    rnn: object  # RNNConstruction
    x: torch.Tensor
    t: torch.Tensor
    states: object  # RNNStates
    targets: tuple  # (forward, backward)


def _evaluated(label: str, rnn, x: torch.Tensor, t: torch.Tensor) -> StateCase:
    """The case with its states by the scan (at the RNN's own r_h) and their targets."""
    with torch.no_grad():
        return StateCase(label, x.shape[1], rnn, x, t, rnn.states(x, t), rnn.targets(x, t))


def _c27_case(N: int, rotate: bool, k: int, ctx: Context) -> StateCase:
    book = rs_hadamard_codebook(N, dtype=F64)
    if rotate:
        book = _rotated(book, ctx.generator("cor-27/rotation"))
    book = book.to(device=ctx.device)
    link = make_link("teacher", C27_Q, C27_D, generator=ctx.generator("cor-27/link")).to(ctx.device)
    B = 1 if rotate else max(1, min(8, ctx.pick(quick=200_000, full=1_000_000, gpu=4_000_000) // N))
    rnn = prop28_rnn(book, C27_D, link.two_layer_net(), eps=C27_EPS, r_x=token_radius(C27_D, N * B))
    r_x = rnn.guarantee.r_x
    p = QSTR(N=N, d=C27_D, link=link, variant="simple").sample(
        B,
        generator=ctx.generator("cor-27/prompts", k, device=ctx.device),
        device=ctx.device,
        dtype=F64,
    )
    x = clip_to_ball(p.x, r_x)
    t0 = p.t[0, 0]
    x[0, t0] = x[0, t0] / x[0, t0].norm(dim=-1, keepdim=True) * r_x  # on the sphere
    label = f"N={N} ({'rotated, ' if rotate else ''}B={B}, d_e={rnn.d_e}, mu={rnn.guarantee.mu:g})"
    return _evaluated(label, rnn, x, p.t)


@dataclass(frozen=True)
class Cor27Inputs:
    """The state cases (RS-Hadamard codes up to N = 1e5, 1e6 on GPU, and a rotated code with
    approximate products), and the literal module of the first case (a loop over positions)."""

    cases: Tuple[StateCase, ...]
    module: object  # DeepTransitionBiRNN of cases[0]
    eps: float
    clipped: Tuple[object, StateCase]  # cases[0] at r_h = sqrt(q) r_x / 2: its module and scan


def cor27_inputs(ctx: Context) -> Cor27Inputs:
    """Ns: 1e2 to 1e5 (1e3 to 1e6 on GPU), then the rotated code at N = 16384 (32768 in full)."""
    Ns = ctx.pick(quick=(100, 1000, 10_000, 100_000), gpu=(1000, 10_000, 100_000, 1_000_000))
    plan = [(N, False) for N in Ns] + [(ctx.pick(quick=16_384, full=32_768), True)]
    cases = tuple(_c27_case(N, rotate, k, ctx) for k, (N, rotate) in enumerate(plan))
    return Cor27Inputs(cases, cases[0].rnn.module(device=ctx.device), C27_EPS, _clipped(cases[0]))


def _clipped(c: StateCase) -> Tuple[object, StateCase]:
    """The first case at r_h = sqrt(q) r_x / 2, below Cor 27's radius (the projection clips the
    states that carry x_t): the module users get at that r_h, and the scan's states there."""
    rnn = copy.copy(c.rnn)
    rnn.r_h = 0.5 * math.sqrt(C27_Q) * rnn.guarantee.r_x
    case = _evaluated(f"{c.label}, r_h = {rnn.r_h:.3g}", rnn, c.x, c.t)
    return rnn.module(device=c.x.device), case


def _state_error(c: StateCase) -> float:
    (tf, tb), st = c.targets, c.states
    return max(float((st.h_fwd - tf).abs().max()), float((st.h_bwd - tb).abs().max()))


def states_within_state_eps(inp: Cor27Inputs, ctx: Context) -> Verdict:
    """Cor 27: every state within eps of x_{t_l} after (before) its target, at every N."""
    c = _worst(inp.cases, lambda c: _state_error(c) / c.rnn.guarantee.state_eps)
    ratios = ", ".join(
        f"{k.N}: {_state_error(k) / k.rnn.guarantee.state_eps:.3g}" for k in inp.cases
    )
    return at_most(
        _state_error(c),
        c.rnn.guarantee.state_eps,
        _transition_rounding(c.rnn.transition, c.N, c.rnn.r_h),
        detail=f"worst case {c.label}; err/eps by N: {ratios}",
    )


def states_zero_off_target(inp: Cor27Inputs, ctx: Context) -> Verdict:
    """Cor 27: every state is exactly 0 before (after) its target."""
    rows = []
    for c in inp.cases:
        (tf, tb), st = c.targets, c.states
        rows.append(
            (
                c.label,
                int(((tf == 0) & (st.h_fwd != 0)).sum() + ((tb == 0) & (st.h_bwd != 0)).sum()),
            )
        )
    return exact(
        sum(n for _, n in rows),
        0,
        detail="nonzero states where the target is 0: " + ", ".join(f"{a}: {n}" for a, n in rows),
    )


def states_projection_inactive(inp: Cor27Inputs, ctx: Context) -> Verdict:
    """Cor 27: at r_h = sqrt(q)(r_x + sqrt(d) eps) the projection onto the r_h ball never acts."""
    rows = [(c.label, c.states.projection_active) for c in inp.cases]
    return exact(
        sum(n for _, n in rows),
        0,
        detail="projected steps: " + ", ".join(f"{a}: {n}" for a, n in rows),
    )


def states_eps_as_asked(inp: Cor27Inputs, ctx: Context) -> Verdict:
    """The transition's certified eps meets the accuracy asked for."""
    c = _worst(inp.cases, lambda c: c.rnn.transition.guarantee.eps)
    return at_most(c.rnn.transition.guarantee.eps, inp.eps, detail=f"largest: {c.label}")


def _module_states(inp: Cor27Inputs):
    c = inp.cases[0]
    with torch.no_grad():
        return inp.module.states(c.rnn.encode(c.x, c.t))


def module_states_equal_scan(inp: Cor27Inputs, ctx: Context) -> Verdict:
    """The literal module (a loop h <- P(h + f(h, z_i))) computes the scan's states (first case)."""
    (hf, hb), st = _module_states(inp), inp.cases[0].states
    gap = max(float((hf - st.h_fwd).abs().max()), float((hb - st.h_bwd).abs().max()))
    return at_most(gap, 1e-9, detail=f"{inp.cases[0].label}: max |loop - scan| (absolute 1e-9)")


def module_zeros_equal_scan(inp: Cor27Inputs, ctx: Context) -> Verdict:
    """The literal module's states are exactly 0 where the scan's are (first case)."""
    (hf, hb), st = _module_states(inp), inp.cases[0].states
    differ = int(((hf == 0) != (st.h_fwd == 0)).sum() + ((hb == 0) != (st.h_bwd == 0)).sum())
    return exact(differ, 0, detail=f"{inp.cases[0].label}: states zero in one and not the other")


def module_projection_equals_scan(inp: Cor27Inputs, ctx: Context) -> Verdict:
    """The literal module's projection h <- P(h + f) (Appendix B.1, Thm 9's class) is the scan's
    where it clips: the first case at r_h = sqrt(q) r_x / 2; +inf when nothing was clipped."""
    module, c = inp.clipped
    with torch.no_grad():
        hf, hb = module.states(c.rnn.encode(c.x, c.t))
    gap = max(float((hf - c.states.h_fwd).abs().max()), float((hb - c.states.h_bwd).abs().max()))
    active = c.states.projection_active
    return at_most(
        gap if active else math.inf,
        1e-9,
        detail=f"{c.label}: max |loop - scan|, {active} projected steps (absolute 1e-9)",
    )


def _module_at_cor27_radius(inp: Cor27Inputs, ctx: Context) -> Cor27Inputs:
    """The clipped case's module built at Cor 27's radius (its r_h not passed on)."""
    module, c = inp.clipped
    return replace(inp, clipped=(inp.cases[0].rnn.module(device=c.x.device), c))


def _r_h_halved(inp: Cor27Inputs, ctx: Context) -> Cor27Inputs:
    """r_h = sqrt(q) r_x / 2, below Cor 27's radius, at N = 1000 (tokens on the r_x sphere): the
    projection clips the states that carry x_t."""
    c = next(c for c in inp.cases if c.N == 1000)
    rnn = copy.copy(c.rnn)
    rnn.r_h = 0.5 * math.sqrt(C27_Q) * rnn.guarantee.r_x
    return replace(inp, cases=(_evaluated(f"{c.label}, r_h = {rnn.r_h:.3g}", rnn, c.x, c.t),))


def _inclusive_scan(inp: Cor27Inputs, ctx: Context) -> Cor27Inputs:
    """States by inclusive prefix sums (an index off by one: h_fwd_i has read z_i, h_bwd_i too):
    at i = t_l the state already holds x_{t_l}, where Cor 27 says it is exactly 0 (the cases
    up to N = 1000: the slip does not depend on N)."""
    cases = []
    for c in inp.cases[:2]:
        st = replace(
            c.states, h_fwd=c.states.h_fwd + c.states.direct, h_bwd=c.states.h_bwd + c.states.direct
        )
        cases.append(replace(c, states=st))
    return replace(inp, cases=tuple(cases))


def _built_for_twice_eps_c27(inp: Cor27Inputs, ctx: Context) -> Cor27Inputs:
    """The first RNN rebuilt for 2 eps (the accuracy asked for, doubled on its way to
    prop28_rnn), its states evaluated again."""
    c = inp.cases[0]
    g = c.rnn.guarantee
    rnn = prop28_rnn(c.rnn.omega, c.rnn.d, c.rnn.g_net, eps=2 * inp.eps, r_x=g.r_x, mu=g.mu)
    return replace(inp, cases=(_evaluated(f"{c.label}, eps = {2 * inp.eps:g}", rnn, c.x, c.t),))


def _bands_from_zero(module, tr):
    """A copy of the loop module whose transitions' layer-2 offsets are beta_k + M/2: the bands
    start at tau_k = k delta (the 1/2 of tau_k = 1/2 + k delta dropped), so the gate opens at
    every pair with 0 < <omega_i, omega_t> <= mu."""
    out = copy.deepcopy(module)
    with torch.no_grad():
        for seq in (out.f_fwd, out.f_bwd):
            layer2 = [m for m in seq if isinstance(m, torch.nn.Linear)][1]
            layer2.bias += tr.bands.M / 2
    return out


def _module_bands_from_zero_c27(inp: Cor27Inputs, ctx: Context) -> Cor27Inputs:
    """The loop module with its gate bands from 0 (see :func:`_bands_from_zero`)."""
    return replace(inp, module=_bands_from_zero(inp.module, inp.cases[0].rnn.transition))


C27_ERR, C27_ZERO, C27_PROJ = (
    "state error <= eps at every N",
    "exactly 0 off target",
    "projection inactive",
)
C27_ASKED, C27_LOOP, C27_LOOP0 = (
    "certified eps <= asked",
    "module loop = scan",
    "module zeros = scan zeros",
)
C27_CLIP = "module projection = scan where it clips"

register(
    Declared(
        id="cor-27",
        ref=Ref("Cor 27", "Cor 27"),
        statement="every hidden state is exactly 0 before (after) its target and within eps of "
        "x_{t_l} after "
        "(before) it, for N up to 1e5 (1e6 on GPU): the error does not accumulate",
        inputs=cor27_inputs,
        checks=[
            Check(C27_ERR, states_within_state_eps),
            Check(C27_ZERO, states_zero_off_target),
            Check(C27_PROJ, states_projection_inactive),
            Check(C27_ASKED, states_eps_as_asked),
            Check(C27_LOOP, module_states_equal_scan),
            Check(C27_LOOP0, module_zeros_equal_scan),
            Check(C27_CLIP, module_projection_equals_scan),
        ],
        faults=[
            Fault("r_h = sqrt(q) r_x / 2", _r_h_halved, breaks=(C27_ERR, C27_PROJ)),
            Fault(
                "inclusive prefix sums (index off by one)",
                _inclusive_scan,
                breaks=(C27_ZERO, C27_ERR),
            ),
            Fault("built for twice the eps asked", _built_for_twice_eps_c27, breaks=(C27_ASKED,)),
            Fault(
                "the clipped module built at Cor 27's radius",
                _module_at_cor27_radius,
                breaks=(C27_CLIP,),
            ),
            Fault(
                "module gate bands from 0, not 1/2",
                _module_bands_from_zero_c27,
                breaks=(C27_LOOP, C27_LOOP0),
            ),
        ],
        builds=(rnn_weights,),
        bounds=(prop28_rnn,),
        derivation="docs/derivations/rnn-transition.md",
    )
)

# ---------------------------------------------------------------------- prop-28

P28_D, P28_Q, P28_EPS = 3, 2, 0.1
P28_CLI = (16, 2, 2, 0.1)  # N, d, q, eps of the `qstr construct rnn` file checked


def _mlp(layers: list, u: torch.Tensor) -> torch.Tensor:
    """W_L relu(... relu(W_1 u + b_1) ...) from a list of {"W", "b"} dicts (the last without
    "b")."""
    for L in layers[:-1]:
        u = torch.relu(u @ L["W"].T + L["b"])
    return u @ layers[-1]["W"].T


def plain_birnn(state: dict, x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """y_hat (B, N) of the file `qstr construct rnn` writes (docs/formats.md), from its tensors
    alone: no qstr module, a Python loop over positions (Section 5.1, Appendix B.1).

    z_i = (x_i, omega_i, omega_{t_i1}, ..., omega_{t_iq}) (the RNN encoding, no prefactor);
    h_fwd_1 = 0, h_fwd_{i+1} = P(h_fwd_i + f_fwd(h_fwd_i, z_i)); h_bwd_N = 0,
    h_bwd_{i-1} = P(h_bwd_i + f_bwd(h_bwd_i, z_i)); P(h) = min(1, r_h / ||h||) h;
    y_hat_i = f_y(h_fwd_i, h_bwd_i, z_i). x: (B, N, d), t: (B, N, q) long. Also returns the
    number of (prompt, step) pairs where the projection was active.
    """
    on = lambda key: [{k: v.to(x) for k, v in L.items()} for L in state[key]]  # noqa: E731
    f_fwd, f_bwd, f_y = on("forward_transition"), on("backward_transition"), on("output")
    cfg = state["config"]
    r_h, d_h = float(cfg["r_h"]), int(cfg["q"]) * int(cfg["d"])
    B, N, _ = x.shape
    omega = state["omega"].to(x)[:N]
    Z = torch.cat([x, omega.expand(B, N, -1), omega[t].flatten(2)], -1)
    active = 0

    def run(f, order):
        nonlocal active
        H, h = x.new_zeros(B, N, d_h), x.new_zeros(B, d_h)
        for i in order:
            H[:, i] = h
            v = h + _mlp(f, torch.cat([h, Z[:, i]], -1))
            norm = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
            active += int((norm > r_h).sum())
            h = v * torch.clamp(r_h / norm, max=1.0)
        return H

    H_fwd, H_bwd = run(f_fwd, range(N)), run(f_bwd, range(N - 1, -1, -1))
    return _mlp(f_y, torch.cat([H_fwd, H_bwd, Z], -1)).squeeze(-1), active


@dataclass(frozen=True)
class PredictionCase:
    """An RNN with its link g and simple-qSTR prompts in the r_x ball (adversarial rows included
    where the label says so); ``state`` is its file saved and reloaded, where one is checked."""

    label: str
    rnn: object  # RNNConstruction
    link: object
    x: torch.Tensor
    t: torch.Tensor
    state: object = None  # dict read back from torch.save, or None


def _p28_rnn(N: int, rotate: bool, ctx: Context):
    book = rs_hadamard_codebook(N, dtype=F64)
    if rotate:
        book = _rotated(book, ctx.generator("prop-28/rotation"))
    link = make_link("teacher", P28_Q, P28_D, generator=ctx.generator("prop-28/link")).to(
        ctx.device
    )
    # eps left at prop28_rnn's default (0.1, documented; tests/bounds/test_recurrent.py)
    return link, prop28_rnn(
        book.to(device=ctx.device), P28_D, link.two_layer_net(), r_x=token_radius(P28_D, 64 * N)
    )


def _p28_error(c, link, x, t) -> torch.Tensor:
    return (c.predict(x, t) - link(gather_tokens(x, t))).abs()


def _p28_case(
    N: int,
    rotate: bool,
    B: int,
    k: int,
    ctx: Context,
    adversarial: int = 0,
    saved: bool = False,
    variant: str = "simple",
) -> PredictionCase:
    """B prompts of the given qSTR variant, plus B adversarial ones when ``adversarial`` steps are
    asked (ascent on the prediction error), and the file saved and reloaded when ``saved``."""
    link, c = _p28_rnn(N, rotate, ctx)
    p = QSTR(N=N, d=P28_D, link=link, variant=variant).sample(
        B,
        generator=ctx.generator("prop-28/prompts", k, device=ctx.device),
        device=ctx.device,
        dtype=F64,
    )
    x, t = clip_to_ball(p.x, c.guarantee.r_x), p.t
    if adversarial:
        xa = _ball_ascent(lambda xx: _p28_error(c, link, xx, t), x, c.guarantee.r_x, adversarial)
        x, t = torch.cat([x, xa]), torch.cat([t, t])
    label = f"N={N} ({'rotated, ' if rotate else ''}B={B}{' + adversarial' if adversarial else ''})"
    return PredictionCase(label, c, link, x, t, through_file(rnn_state(c)) if saved else None)


@dataclass(frozen=True)
class Prop28Inputs:
    """The RNNs on their prompts (the first with its literal module, the saved ones run by the
    plain recurrence), and the `qstr construct rnn` file read back by load_rnn."""

    cases: Tuple[PredictionCase, ...]
    module: object  # DeepTransitionBiRNN of cases[0]
    cli: PredictionCase  # rnn: the built construction; state: the model load_rnn returns
    eps: float


def _cli_case(ctx: Context) -> PredictionCase:
    """The file `qstr construct rnn` writes (teacher_rnn, torch.save) read back by load_rnn;
    its link is the width-8 teacher of the seed, as the CLI draws it."""
    N, d, q, eps = P28_CLI
    c = teacher_rnn(N, d, q, eps=eps, seed=ctx.seed)
    state = rnn_state(c)
    model = through_path(state, load_rnn, device=ctx.device)
    link = make_link(
        "teacher", q, d, generator=torch.Generator().manual_seed(ctx.seed), width=8
    ).to(ctx.device)
    p = QSTR(N=N, d=d, link=link, variant="simple").sample(
        4,
        generator=ctx.generator("prop-28/cli-prompts", device=ctx.device),
        device=ctx.device,
        dtype=F64,
    )
    return PredictionCase(
        f"`qstr construct rnn` file N={N} d={d} q={q}",
        c,
        link,
        clip_to_ball(p.x, c.guarantee.r_x),
        p.t,
        model,
    )


def prop28_inputs(ctx: Context) -> Prop28Inputs:
    """RS-Hadamard N = 64, 4096 (and 32768 or 1e6), the rotated N = 64 code (approximate products:
    the bound is approached), and the rotated N = 32 one saved to a file with adversarial prompts.
    """
    Ns = ctx.pick(quick=(64, 4096), full=(64, 4096, 32768), gpu=(64, 4096, 1_000_000))
    steps = ctx.pick(quick=20, full=80)
    cases = [
        _p28_case(
            N,
            False,
            max(1, min(16, 65536 // N)),
            k,
            ctx,
            adversarial=steps if k == 0 else 0,
            saved=k == 0,
        )
        for k, N in enumerate(Ns)
    ]
    cases.append(_p28_case(64, True, 16, len(Ns), ctx))
    cases.append(
        _p28_case(
            ctx.pick(quick=32, full=64),
            True,
            ctx.pick(quick=4, full=8),
            len(Ns) + 1,
            ctx,
            adversarial=ctx.pick(quick=10, full=40),
            saved=True,
        )
    )
    return Prop28Inputs(
        tuple(cases), cases[0].rnn.module(device=ctx.device), _cli_case(ctx), P28_EPS
    )


def _p28_rounding(c, N: int) -> Rounding:
    """The state rounding term carried through g_net (Lipschitz constant Lip), plus g_net's own
    sums (qd inputs, m units) on states of norm <= 2 r_h + r_x."""
    states = _transition_rounding(c.transition, N, c.r_h).times(
        max(c.guarantee.lipschitz, 1.0), "max(1, Lip)"
    )
    net = c.g_net
    scale = float(net.a.abs() @ (net.W.abs().sum(1) * (2 * c.r_h + c.guarantee.r_x) + net.b.abs()))
    return states + Rounding(
        n=c.transition.d_h + net.m + 2,
        scale=scale,
        what="(qd + m + 2) eps |a|(|W| (2 r_h + r_x) + |b|)",
    )


def _errors(inp: Prop28Inputs):
    """(label, max |y_hat - g(x_t)|, construction): the scan on every case and the CLI file's module
    (the saved files' plain recurrence equals the scan: :func:`plain_recurrence_equals_scan`)."""
    rows = []
    with torch.no_grad():
        for c in inp.cases:
            y_t = c.link(gather_tokens(c.x, c.t))
            rows.append((c.label, float((c.rnn.predict(c.x, c.t) - y_t).abs().max()), c.rnn))
        k = inp.cli
        y = k.state(rnn_encoding(k.x, k.t, k.state.omega))
        rows.append((k.label, float((y - k.link(gather_tokens(k.x, k.t))).abs().max()), k.rnn))
    return rows


def prediction_within_bound(inp: Prop28Inputs, ctx: Context) -> Verdict:
    """Prop 28: |y_hat_i - g(x_t)| <= ||a|| ||W||_op sqrt(qd) eps at every position."""
    rows = _errors(inp)
    label, err, c = _worst(rows, lambda r: r[1] / r[2].guarantee.prediction_error)
    return at_most(
        err,
        c.guarantee.prediction_error,
        _p28_rounding(c, c.N),
        detail=f"worst case {label}; err/bound: "
        + ", ".join(f"{a}: {e / k.guarantee.prediction_error:.3g}" for a, e, k in rows),
    )


def module_equals_scan(inp: Prop28Inputs, ctx: Context) -> Verdict:
    """The literal module (nn.Linear layers, a loop over positions) predicts what the scan does."""
    c = inp.cases[0]
    with torch.no_grad():
        gap = float(
            (inp.module(c.rnn.encode(c.x, c.t)).reshape(c.x.shape[:2]) - c.rnn.predict(c.x, c.t))
            .abs()
            .max()
        )
    return at_most(gap, 1e-9, detail=f"{c.label}: max |module - scan| (absolute 1e-9)")


def saved_module_equals_scan(inp: Prop28Inputs, ctx: Context) -> Verdict:
    """The first case's file reloaded by module_from_state, and the CLI's through load_rnn, predict
    what the construction's scan does."""
    c, rows = inp.cases[0], []
    with torch.no_grad():
        y = module_from_state(c.state, device=ctx.device)(c.rnn.encode(c.x, c.t)).reshape(
            c.x.shape[:2]
        )
        rows.append((c.label, float((y - c.rnn.predict(c.x, c.t)).abs().max())))
        k = inp.cli
        y = k.state(rnn_encoding(k.x, k.t, k.state.omega)).reshape(k.x.shape[:2])
        rows.append((k.label, float((y - k.rnn.predict(k.x, k.t)).abs().max())))
    label, gap = _worst(rows, lambda r: r[1])
    return at_most(
        gap, 1e-9, detail=f"worst case {label}: max |reloaded module - scan| (absolute 1e-9)"
    )


def plain_recurrence_equals_scan(inp: Prop28Inputs, ctx: Context) -> Verdict:
    """Each saved file, run by a plain recurrence from its tensors alone (docs/formats.md),
    predicts what the scan does, within twice the Prop 28 rounding term."""
    rows = []
    with torch.no_grad():
        for c in inp.cases:
            if c.state is not None:
                gap = float(
                    (plain_birnn(c.state, c.x, c.t)[0] - c.rnn.predict(c.x, c.t)).abs().max()
                )
                rows.append((c.label, gap, _p28_rounding(c.rnn, c.rnn.N).times(2.0, "2")))
    label, gap, rnd = _worst(rows, lambda r: r[1] / r[2].term)
    return at_most(gap, 0.0, rnd, detail=f"worst case {label}: max |plain recurrence - scan|")


def _constructions(inp: Prop28Inputs):
    return [(c.label, c.rnn) for c in inp.cases] + [(inp.cli.label, inp.cli.rnn)]


def prediction_eps_as_asked(inp: Prop28Inputs, ctx: Context) -> Verdict:
    """The transitions' certified eps meets the accuracy asked for (the CLI's too)."""
    label, c = _worst(_constructions(inp), lambda r: r[1].transition.guarantee.eps)
    return at_most(c.transition.guarantee.eps, inp.eps, detail=f"largest: {label}")


def net_lipschitz(c) -> float:
    """||a|| ||W||_op of the output net g (Prop 28's Lipschitz constant)."""
    return float(c.g_net.a.double().norm()) * float(torch.linalg.svdvals(c.g_net.W.double())[0])


def prediction_bound(c) -> float:
    """Prop 28's bound Lip sqrt(qd) eps, eps the transition's certified one."""
    tg = c.transition.guarantee
    return net_lipschitz(c) * math.sqrt(tg.q * tg.d) * tg.eps


def _derived_close(name: str, measured, derived):
    """The check that each construction's ``measured(c)`` is ``derived(c)`` (relative 1e-12)."""

    def run(inp: Prop28Inputs, ctx: Context) -> Verdict:
        rows = [(label, measured(c), derived(c)) for label, c in _constructions(inp)]
        label, got, want = _worst(rows, lambda r: abs(r[1] - r[2]) / max(abs(r[2]), 1e-300))
        return close(got, want, 1e-12 * abs(want), detail=f"worst case {label}: {name}")

    return run


def state_radius(c) -> float:
    """Cor 27's state radius sqrt(q)(r_x + sqrt(d) eps) (docs/derivations/rnn-transition.md)."""
    return math.sqrt(c.q) * (c.guarantee.r_x + math.sqrt(c.d) * c.transition.guarantee.eps)


def _general_prompts(inp: Prop28Inputs, ctx: Context) -> Prop28Inputs:
    """General qSTR prompts (a fresh t_i per position) through the simple-qSTR construction: the
    states add up x_j at positions j = t_{j,l}, which says nothing about position i's own tuple."""
    cases = []
    for k, c in enumerate(inp.cases):
        B = c.x.shape[0]
        p = QSTR(N=c.rnn.N, d=P28_D, link=c.link, variant="general").sample(
            B,
            generator=ctx.generator("prop-28/general", k, device=ctx.device),
            device=ctx.device,
            dtype=F64,
        )
        cases.append(replace(c, x=clip_to_ball(p.x, c.rnn.guarantee.r_x), t=p.t, state=None))
    return replace(inp, cases=tuple(cases))


def _saved_edited(edit):
    """The saved files with an export mistake: ``edit(state, construction)`` returns the new
    dict."""

    def apply(inp: Prop28Inputs, ctx: Context) -> Prop28Inputs:
        return replace(
            inp,
            cases=tuple(
                c if c.state is None else replace(c, state=edit(dict(c.state), c.rnn))
                for c in inp.cases
            ),
        )

    return apply


def _layer1_in_zh_order(state: dict, c) -> dict:
    """Layer 1 of both transitions written with its columns in the order (z, h) (a module that
    concatenates (z, h)), while the file's layout is u = (h, z)."""
    d_h = c.transition.d_h
    for key in ("forward_transition", "backward_transition"):
        first = dict(state[key][0])
        first["W"] = torch.cat([first["W"][:, d_h:], first["W"][:, :d_h]], 1)
        state[key] = [first] + list(state[key][1:])
    return state


def _output_layers_without_direct_term(rnn) -> list:
    """Prop 28's output net f_y of ``rnn`` without the direct term f(z_i): layer 4 is
    W_g [0, I, -I] in place of W_g [W4_transition, I, -I] (docs/derivations/rnn-transition.md,
    section 6), so g_net(h_fwd + h_bwd) misses x_{t_l} at i = t_l. The other layers are the
    construction's (shared, not copied); the file's layout, dicts {"W", "b"}."""
    layers = rnn.output_layers.as_dicts()
    eye = torch.eye(rnn.transition.d_h, dtype=torch.float64)
    direct = torch.zeros_like(rnn.transition.layers[3].W)
    W_g = rnn.g_net.W.to(torch.float64).cpu()
    layers[3]["W"] = W_g @ torch.cat([direct, eye, -eye], dim=1)
    return layers


def _without_direct_term(state: dict, c) -> dict:
    """The output net written without f(z_i) (:func:`_output_layers_without_direct_term`: layer
    4's columns that read the transition's output zero), so g(h_fwd + h_bwd) misses x_{t_l} at
    i = t_l."""
    state["output"] = _output_layers_without_direct_term(c)
    return state


def _saved_in_float32(state: dict, c) -> dict:
    """Every layer of the file written in float32 (read back in float64, the digits lost)."""
    for key in ("forward_transition", "backward_transition", "output"):
        state[key] = [{k: v.float().double() for k, v in L.items()} for L in state[key]]
    return state


def _rnns_edited(edit):
    """Each case's construction copied and ``edit``ed (a slip in its record or radius)."""

    def apply(inp: Prop28Inputs, ctx: Context) -> Prop28Inputs:
        cases = []
        for c in inp.cases:
            rnn = copy.copy(c.rnn)
            edit(rnn)
            cases.append(replace(c, rnn=rnn))
        return replace(inp, cases=tuple(cases))

    return apply


def _lipschitz_doubled(rnn) -> None:
    """The guarantee records twice the Lipschitz constant of g."""
    rnn.guarantee = replace(rnn.guarantee, lipschitz=2 * rnn.guarantee.lipschitz)


def _bound_at_asked_eps(rnn) -> None:
    """The guarantee's bound Lip sqrt(qd) eps taken at the eps asked, not the certified one."""
    g, tg = rnn.guarantee, rnn.transition.guarantee
    rnn.guarantee = replace(
        g, prediction_error=g.lipschitz * math.sqrt(tg.q * tg.d) * tg.eps_requested
    )


def _r_h_without_eps(rnn) -> None:
    """r_h = sqrt(q) r_x: the sqrt(d) eps of Cor 27's radius dropped."""
    rnn.r_h = math.sqrt(rnn.q) * rnn.guarantee.r_x


def _module_bands_from_zero_p28(inp: Prop28Inputs, ctx: Context) -> Prop28Inputs:
    """The loop module with its gate bands from 0 (see :func:`_bands_from_zero`)."""
    return replace(inp, module=_bands_from_zero(inp.module, inp.cases[0].rnn.transition))


def _cli_for_twice_eps(inp: Prop28Inputs, ctx: Context) -> Prop28Inputs:
    """The `qstr construct rnn` construction built for 2 eps (its --eps doubled)."""
    N, d, q, eps = P28_CLI
    c = teacher_rnn(N, d, q, eps=2 * eps, seed=ctx.seed)
    return replace(inp, cli=replace(inp.cli, rnn=c))


P28_ERR = "|y_hat - g(x_t)| <= Lip sqrt(qd) eps"
P28_LOOP, P28_SAVED, P28_PLAIN = (
    "module = scan",
    "reloaded files = scan",
    "plain recurrence on the file = scan",
)
P28_ASKED, P28_LIP, P28_BOUND = (
    "certified eps <= asked",
    "Lip = ||a|| ||W||_op",
    "bound = Lip sqrt(qd) eps",
)
P28_RH = "r_h = sqrt(q)(r_x + sqrt(d) eps)"

register(
    Declared(
        id="prop-28",
        ref=Ref("Prop 28", "Prop 28"),
        statement="end-to-end RNN on simple-qSTR: |y_hat_i - g_net(x_t)| <= ||a_g|| ||W_g|| "
        "sqrt(qd) eps at every position (random, adversarial tokens in the r_x ball; literal "
        "module == scan; the saved file run by a "
        "plain recurrence == scan, within the bound)",
        inputs=prop28_inputs,
        checks=[
            Check(P28_ERR, prediction_within_bound),
            Check(P28_LOOP, module_equals_scan),
            Check(P28_SAVED, saved_module_equals_scan),
            Check(P28_PLAIN, plain_recurrence_equals_scan),
            Check(P28_ASKED, prediction_eps_as_asked),
            Check(P28_LIP, _derived_close("Lip", lambda c: c.guarantee.lipschitz, net_lipschitz)),
            Check(
                P28_BOUND,
                _derived_close("bound", lambda c: c.guarantee.prediction_error, prediction_bound),
            ),
            Check(P28_RH, _derived_close("r_h", lambda c: c.r_h, state_radius)),
        ],
        faults=[
            Fault("general qSTR prompts", _general_prompts, breaks=(P28_ERR,)),
            Fault(
                "saved layer 1 in (z, h) order",
                _saved_edited(_layer1_in_zh_order),
                breaks=(P28_PLAIN,),
            ),
            Fault(
                "saved output without the direct term",
                _saved_edited(_without_direct_term),
                breaks=(P28_PLAIN,),
            ),
            Fault("saved in float32", _saved_edited(_saved_in_float32), breaks=(P28_SAVED,)),
            Fault(
                "module gate bands from 0, not 1/2", _module_bands_from_zero_p28, breaks=(P28_LOOP,)
            ),
            Fault("CLI built for twice the eps asked", _cli_for_twice_eps, breaks=(P28_ASKED,)),
            Fault(
                "Lipschitz constant doubled in the guarantee",
                _rnns_edited(_lipschitz_doubled),
                breaks=(P28_LIP,),
            ),
            Fault(
                "bound at the eps asked, not the certified",
                _rnns_edited(_bound_at_asked_eps),
                breaks=(P28_BOUND,),
            ),
            Fault("r_h without sqrt(d) eps", _rnns_edited(_r_h_without_eps), breaks=(P28_RH,)),
        ],
        builds=(rnn_weights, rnn_state),
        bounds=(prop28_rnn, teacher_rnn, prediction_bound, net_lipschitz, state_radius),
        derivation="docs/derivations/rnn-transition.md",
    )
)
