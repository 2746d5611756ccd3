"""What the recurrent claims share (Section 5, Appendix B: Lemmas 22, 24, Props 26, 28, Cor 27;
docs/derivations/rnn-transition.md): a transition's rounding term, the worst-input searches, the
gadget cases and checks, the codebook rotation, worst-case keys and construction edits. Checks
run in float64 on ``ctx.device``; a certificate holds when measured <= bound + rounding term."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Tuple

import torch
from hypothesis import HealthCheck, Verbosity, given, settings, strategies as st, target

from qstr.constructions.codes import Codebook
from qstr.constructions.relu import Gadget
from qstr.constructions.task import QSTR
from qstr.verify.claim import Context, Verdict, at_most, by_measured, by_ratio, close, exact, worst
from qstr.verify.rounding import Rounding, two_layer

F64 = torch.float64


def transition_rounding(tr, N: int = 0, r_h: float = 0.0) -> Rounding:
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


# ---------------------------------- worst-case keys (each check ranks its cases as it always has)


def by_relative_gap(v: Verdict) -> float:
    """The case whose measured value is relatively farthest from the derived one (its bound)."""
    return abs(v.measured - v.bound) / max(abs(v.bound), 1e-300)


def derived_close(got: float, want: float, what: str) -> Verdict:
    """A recorded value against the derivation's, to relative 1e-12."""
    return close(got, want, 1e-12 * max(abs(want), 1e-300), detail=what)


def worst_case(cases, verdict: Callable[[Any], Verdict], key=None) -> Verdict:
    """The worst of ``verdict(case)`` over ``cases`` (each with a ``label``), ranked by ``key``."""
    return worst(((c.label, verdict(c)) for c in cases), key=key)


def none_counted(rows, what: str) -> Verdict:
    """Of ``(label, count)`` rows, the total count is exactly 0 (``what``: what was counted)."""
    counts = ", ".join(f"{label}: {n}" for label, n in rows)
    return exact(sum(n for _, n in rows), 0, detail=f"{what}: {counts}")


def largest_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b|."""
    return float((a - b).abs().max())


def qstr_prompts(
    N: int, d: int, link, B: int, gen: torch.Generator, ctx: Context, variant: str = "simple"
):
    """B prompts of the qSTR ``variant`` on ctx.device, in float64."""
    task = QSTR(N=N, d=d, link=link, variant=variant)
    return task.sample(B, generator=gen, device=ctx.device, dtype=F64)


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


# ------------------------------------------------------------------ the gadgets (Lemmas 22, 24)

ATTAINED_TOL = 1e-3  # the searched sup must reach the certificate to within this fraction


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

    @property
    def shown(self) -> str:
        return f"{self.label}: " + ", ".join(f"{k} {v:.4g}" for k, v in self.found.items())


@dataclass(frozen=True)
class GadgetInputs:
    """The gadgets as built, each with its searched sup error, and the certificate they meet."""

    cases: Tuple[GadgetCase, ...]
    certificate: Callable[..., float]  # Lemma 22: h^2/16; Lemma 24: r_x delta


def on_device(gadget: Gadget, device) -> Gadget:
    """The gadget with its weights on ``device``."""
    return replace(gadget, **{w: getattr(gadget, w).to(device) for w in ("W1", "b1", "W2")})


def searched(name: str, k: int, gadget: Gadget, box, special: torch.Tensor, ctx: Context):
    """Sup-error of a 2-input gadget on the box (lo, hi) by a dense grid, structured points,
    hypothesis and ascent (all on ctx.device), and its rounding term over the box (attained at
    its corners)."""
    (lo, hi), dev = box, ctx.device
    gadget = on_device(gadget, dev)
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


def within_certificate(inp: GadgetInputs) -> Verdict:
    """The largest sup error over the cases, relative to its certificate, is at most it
    (Lemmas 22, 24)."""
    return worst_case(
        inp.cases,
        lambda c: at_most(c.sup_error, inp.certificate(*c.args), c.rounding, detail=c.shown),
        key=by_ratio,
    )


def certificate_attained(inp: GadgetInputs) -> Verdict:
    """The searched sup reaches the certificate (to 0.1%) in every case: the constant is the
    least one (a certificate h^2/8 for h^2/16 fails here). Worst case: the ratio farthest from 1."""

    def case(c: GadgetCase) -> Verdict:
        bound = inp.certificate(*c.args)
        return close(c.sup_error, bound, ATTAINED_TOL * bound, c.rounding, detail=c.shown)

    return worst_case(inp.cases, case, key=lambda v: abs(v.measured / v.bound - 1))


def with_half_the_knots(inp: GadgetInputs, build, special, box, name: str, ctx: Context):
    """The cases rebuilt with half the knots (``build``, ``special`` points and ``box`` of the
    certificate's arguments), the certificate still asked for the full count."""
    cases = []
    for k, c in enumerate(inp.cases):
        used = max(2 if c.gadget.name == "product" else 1, c.args[1] // 2)
        args = (c.args[0], used) + tuple(c.args[2:])
        g = build(*args)
        found, rnd = searched(name, k, g, box(*args), special(*args), ctx)
        label = f"{c.label} built with {used} knots"
        cases.append(replace(c, label=label, gadget=g, found=found, rounding=rnd))
    return replace(inp, cases=tuple(cases))


# ------------------------------------------------------------------ codes and constructions


def orthogonally_rotated(book: Codebook, gen: torch.Generator) -> Codebook:
    """The codes times a random orthogonal matrix: same inner products (so the same mu, attained),
    generic entries (so the Lemma 22 products are approximate, not exact)."""
    Q, _ = torch.linalg.qr(torch.randn(book.d_e, book.d_e, generator=gen, dtype=F64))
    return Codebook(book.omega.to(F64) @ Q, book.mu, "custom", {"rotated": book.kind})


def rnn_with(rnn, **attributes):
    """A shallow copy of an RNN construction with public attributes replaced (``r_h``, its
    ``guarantee``): a slip in its radius or its record."""
    out = copy.copy(rnn)
    for name, value in attributes.items():
        setattr(out, name, value)
    return out


def module_bands_from_zero(inp):
    """The inputs with a copy of their loop ``module`` whose transitions' layer-2 offsets are
    beta_k + M/2: the bands start at tau_k = k delta (the 1/2 of tau_k = 1/2 + k delta dropped),
    so the gate opens at every pair with 0 < <omega_i, omega_t> <= mu."""
    out = copy.deepcopy(inp.module)
    with torch.no_grad():
        for seq in (out.f_fwd, out.f_bwd):
            layer2 = [m for m in seq if isinstance(m, torch.nn.Linear)][1]
            layer2.bias += inp.cases[0].rnn.transition.bands.M / 2
    return replace(inp, module=out)


def certified_eps_as_asked(cases, eps: float) -> Verdict:
    """The largest certified eps of the cases' transitions (``case.rnn``) is at most ``eps``."""

    def largest(case) -> Verdict:
        return at_most(case.rnn.transition.guarantee.eps, eps, detail="the largest")

    return worst_case(cases, largest, key=by_measured)
