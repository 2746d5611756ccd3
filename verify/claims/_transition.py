"""What the recurrent claims share (Section 5, Appendix B: Lemmas 22, 24, Props 26, 28, Cor 27;
docs/derivations/rnn-transition.md): a transition's rounding term, the worst-input searches, the
gadget cases and checks, the codebook rotation, worst-case keys and construction edits. Checks
run in float64 on ``ctx.device``; a certificate holds when measured <= bound + rounding term."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Iterable, Tuple

import mpmath as mp
import torch
from hypothesis import HealthCheck, Verbosity, given, settings, strategies as st, target

from qstr.bounds.transition import TransitionGuarantee
from qstr.constructions.codes import Codebook
from qstr.constructions.relu import Gadget
from qstr.constructions.task import QSTR
from qstr.verify.adversarial import ball_ascent
from qstr.verify.ball import Certified
from qstr.verify.certified.verdict import certified
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


def _hypothesis_max(err, lo, hi, n: int, device) -> torch.Tensor:
    """The hypothesis-drawn point u in the box [lo, hi] with the largest err(u) (targeted
    search), as a (1, 2) tensor."""
    best = [-1.0, None]

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
        u = torch.tensor([[a, b]], dtype=F64, device=device)
        e = float(err(u).max())
        target(e)
        if e > best[0]:
            best[:] = [e, u]

    prop()
    return best[1]


def _box_ascent(err, lo, hi, starts: torch.Tensor, steps: int) -> torch.Tensor:
    """Projected signed-gradient ascent of err on points in the box [lo, hi] (step size decaying
    from 2% of the box); the point with the largest value seen, as a (1, 2) tensor."""
    lo_t, hi_t = (torch.tensor(v, dtype=F64, device=starts.device) for v in (lo, hi))
    u = starts.clone()
    best, at = -1.0, u[:1]
    for k in range(steps + 1):
        u.requires_grad_(True)
        e = err(u)
        i = int(e.detach().argmax())
        if float(e.detach()[i]) > best:
            best, at = float(e.detach()[i]), u[i : i + 1].detach().clone()
        if k == steps:
            break
        (grad,) = torch.autograd.grad(e.sum(), u)
        with torch.no_grad():
            step = 0.02 * (hi_t - lo_t) * (1 - k / steps)
            u = torch.maximum(torch.minimum(u + step * grad.sign(), hi_t), lo_t)
    return at


# ------------------------------------------------------------------ the gadgets (Lemmas 22, 24)

ATTAINED_TOL = 1e-3  # the searched sup must reach the certificate to within this fraction


@dataclass(frozen=True)
class GadgetCase:
    """One gadget on its box [lo, hi], the knot count its certificate is asked for, and where the
    searches (grid, structured points, hypothesis, ascent) found |gadget - target| largest: the
    error itself is measured on the built gadget at those points (``errors``)."""

    label: str
    args: tuple  # the certificate's arguments: (R, knots) or (r_x, knots, s_max)
    gadget: Gadget
    lo: tuple
    hi: tuple
    found: Dict[str, torch.Tensor]  # each search's worst point, (1, 2), on the CPU
    rounding: Rounding

    def errors(self) -> Dict[str, float]:
        """|gadget - target| of the built gadget at each search's worst point."""
        return {
            k: float((self.gadget(u) - self.gadget.target(u)).abs().max())
            for k, u in self.found.items()
        }

    def sup_error(self) -> float:
        """The largest error the searches found, evaluated on the built gadget."""
        return max(self.errors().values())

    def shown(self) -> str:
        return f"{self.label}: " + ", ".join(f"{k} {v:.4g}" for k, v in self.errors().items())


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
        found = {"grid": grid[err(grid).argmax()][None], "structured": None}
        special = special.to(dev)
        found["structured"] = special[err(special).argmax()][None]
    found["hypothesis"] = _hypothesis_max(err, lo, hi, ctx.pick(quick=150, full=1000), dev)
    found["adversarial"] = _box_ascent(err, lo, hi, starts, ctx.pick(quick=60, full=300))
    return {k: u.cpu() for k, u in found.items()}, two_layer(gadget.W1, gadget.b1, gadget.W2, grid)


def within_certificate(inp: GadgetInputs) -> Verdict:
    """The largest sup error over the cases, relative to its certificate, is at most it
    (Lemmas 22, 24)."""
    return worst_case(
        inp.cases,
        lambda c: at_most(c.sup_error(), inp.certificate(*c.args), c.rounding, detail=c.shown()),
        key=by_ratio,
    )


def certificate_attained(inp: GadgetInputs) -> Verdict:
    """The searched sup reaches the certificate (to 0.1%) in every case: the constant is the
    least one (a certificate h^2/8 for h^2/16 fails here). Worst case: the ratio farthest from 1."""

    def case(c: GadgetCase) -> Verdict:
        bound = inp.certificate(*c.args)
        return close(c.sup_error(), bound, ATTAINED_TOL * bound, c.rounding, detail=c.shown())

    return worst_case(inp.cases, case, key=lambda v: abs(v.measured / v.bound - 1))


ATTAINED_RTOL = 1e-12  # certified_product / certified_gate's default: the weights' rounding


def certified_worst(rows: Iterable[Tuple[str, Verdict]]) -> Verdict:
    """The worst case of certified verdicts (``worst``), never hiding a case the float64 fallback
    decided behind certified ones: when every case holds and some were not certified, the worst
    of those (``certified`` False) with every case listed."""
    rows = list(rows)
    v = worst(rows)
    fell = [(label, r) for label, r in rows if r.certified is False]
    return replace(worst(fell), cases=v.cases) if v.holds and fell else v


def certified_gadgets(inp: GadgetInputs, prove: Callable[..., Certified]) -> Verdict:
    """Lemmas 22, 24 proved on each built gadget by ``prove`` (``certified_product`` or
    ``certified_gate``: branch and bound over the whole box in ball arithmetic); where the balls
    straddle, the float64 search's verdict on that gadget (``within_certificate``'s)."""

    def case(c: GadgetCase) -> Tuple[str, Verdict]:
        bound = inp.certificate(*c.args)
        v = certified(
            prove(c.gadget, rtol=ATTAINED_RTOL),
            fallback=lambda: at_most(c.sup_error(), bound, c.rounding, detail=c.shown()),
        )
        why = f"the bound is attained: met to relative {ATTAINED_RTOL:g} (the weights' rounding)"
        return c.label, replace(v, detail=f"{v.detail}; {why}")

    return certified_worst(case(c) for c in inp.cases)


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


# ------------------------------------------------------------------ Prop 26's inputs


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

    def rest_of_z(self, rows=None) -> torch.Tensor:
        """z without its x block (the codes), on the given rows."""
        return self.z(self.x, rows)[:, self.x.shape[1] :]


@dataclass(frozen=True)
class Prop26Inputs:
    """The transitions on their codes, the guarantees whose budget is checked against the
    derivation (with the codes they were built for), the RNNs whose states are scanned, and the
    transitions the certified checks prove on."""

    cases: Tuple[TransitionCase, ...]
    guarantees: Tuple[TransitionGuarantee, ...]
    codes: Tuple[Tuple[str, torch.Tensor], ...]  # (label, omega) each guarantee was built for
    facts: Tuple[tuple, ...]  # code_facts of each: (R, nu, alphabet knots), exact from the entries
    # (label, RNNConstruction, the prefixes N its states are checked at, the target position and
    # its token: the worst for the transition's target error, by ascent)
    curves: Tuple[tuple, ...]
    eps: float  # the accuracy asked for
    # (label, transition, its codes omega) the certified checks prove on: RS-Hadamard N = 16 in
    # the quick profile, the three N = 64 cases of mu = 1/2 in full (docs/derivations/certified.md)
    certified: Tuple[Tuple[str, object, torch.Tensor], ...] = ()


# ------------------------------------------------------------------ Prop 26's budget at 40 digits

BUDGET_DPS = 40
# float64 budget against 40 digits: a few dozen operations on numbers of order 1e-9 .. 1e3 (the
# margin 1e-9 against mu + delta_1 - 1/2 the smallest), each off by <= 2.2e-16 relative, so far
# below 1e-12 in all; the knots are ceilings of ratios nowhere near an integer (exact compare)
BUDGET_RTOL = 1e-12


def code_facts(omega) -> tuple:
    """(R, nu, alphabet knots or None) of the codes, from their float64 entries taken exactly:
    R = max |omega_ij|, nu = max_i | ||omega_i||^2 - 1 | in mpmath, and 3 (5) knots when every
    entry is in {+-R} ({0, +-R}), else None (rnn-transition.md, section 2)."""
    om = omega.detach().to(device="cpu", dtype=F64)
    mags = om.abs()
    R = float(mags.max())
    alphabet = None
    if bool(((mags == R) | (mags == 0)).all()):
        alphabet = 5 if bool((mags == 0).any()) else 3
    nu = max(abs(mp.fsum(mp.mpf(v) ** 2 for v in row) - 1) for row in om.tolist())
    return mp.mpf(R), nu, alphabet


def _product_knots(eps, r, mu, eta, facts: tuple, d_e: int) -> int:
    """K1 from the eps asked (section 4, "Choosing the knots"): delta_1's target max(dA, dB)."""
    R, nu, alphabet = facts
    if alphabet:
        return alphabet
    half = mp.mpf(1) / 2
    dA = min(eps / (4 * r) - nu, (half - mu - eta) * (1 - mp.mpf(1e-9)))
    dB = (eps / 2 - 2 * r * nu - 4 * r * (mu - half + eta)) / (6 * r)
    dB = dB if dB > half - mu else mp.mpf("-inf")  # the mu ~ 1/2 regime only
    return max(2, int(mp.ceil(1 + mp.sqrt(d_e * R * R / max(dA, dB)))))


def budget_mp(g, facts: tuple, d_e: int) -> dict:
    """Prop 26's knots and eps budget in mpmath at 40 digits, written from rnn-transition.md
    (section 4: "eps budget", "Choosing the knots"; section 2: h = 4R/(K1 - 1), delta_1), from the
    eps asked, r_x, mu, the margin (the guarantee's inputs) and the codes' :func:`code_facts`
    (R, nu and the alphabet read from the codes, not from the guarantee), d_e their width."""
    with mp.workdps(BUDGET_DPS):
        R, nu, alphabet = facts
        eps, r, mu, eta = (mp.mpf(v) for v in (g.eps_requested, g.r_x, g.mu, g.margin))
        half = mp.mpf(1) / 2
        K1 = _product_knots(eps, r, mu, eta, facts, d_e)
        h = 4 * R / (K1 - 1)
        delta1 = mp.mpf(0) if alphabet else d_e * h * h / 16
        s_max = 1 + nu + delta1 + eta
        e = max(mp.mpf(0), mu + delta1 - half) + eta
        budget = eps - 4 * r * e - 2 * r * (delta1 + nu)
        K2 = max(1, int(mp.ceil((s_max - half) * r / budget)))
        delta = (s_max - half) / K2
        b = r * min(4 * e, 2 * e + delta)
        return {
            "product_knots": K1,
            "gate_knots": K2,
            "code_range": R,
            "product_error": h * h / 16,
            "inner_product_error": delta1,
            "s_max": s_max,
            "non_target_excess": e,
            "gate_delta": delta,
            "gate_slope": 2 * r / delta,
            "gate_error": r * delta,
            "threshold": b,
            "eps": b + r * delta + 2 * r * (delta1 + nu),
        }


def state_radius(c):
    """Cor 27's state radius sqrt(q)(r_x + sqrt(d) eps) at 40 digits
    (docs/derivations/rnn-transition.md, section 5)."""
    with mp.workdps(BUDGET_DPS):
        eps = mp.mpf(c.transition.guarantee.eps)
        return mp.sqrt(c.q) * (mp.mpf(c.guarantee.r_x) + mp.sqrt(c.d) * eps)


def pinned(got: float, want, what: str) -> Verdict:
    """A recorded value against its 40-digit derivation: relative gap <= BUDGET_RTOL."""
    gap = float(abs(mp.mpf(got) - want) / max(abs(want), mp.mpf(10) ** -300))
    return at_most(gap, BUDGET_RTOL, detail=f"{what}: relative gap to the 40-digit value")


# the record's norms are closed forms of the structure; the dense norms sum up to ~1e5 squares
# of entries up to M ~ 2e3 in another order: float64 leaves them apart by up to n eps ~ 2e-11
# relative (measured: 6e-13 on the rotated codes' layer 2)
RECORD_RTOL = 1e-10


def record_vs_layers(c) -> Verdict:
    """Prop 26's record against the built object: the case's transition guarantee's widths and
    per-layer norms (||W||_F, max |W_ij|, ||b||) against its dense layers' (read here)."""
    g, layers = c.transition.guarantee, c.transition.layers
    widths = tuple(int(layers[k].W.shape[0]) for k in range(4))
    if tuple(g.widths) != widths:
        return exact(tuple(g.widths), widths, detail="recorded widths vs the dense layers'")
    gaps = []
    for k, rec in enumerate(g.norms):
        W, b = layers[k].W, layers[k].b
        built = {
            "fro": float(W.norm()),
            "max_abs": float(W.abs().max()),
            "bias_norm": 0.0 if b is None else float(b.norm()),
        }
        gaps += [(abs(rec[f] - v) / max(v, 1e-300), f"layer {k + 1} {f}") for f, v in built.items()]
    gap, where = max(gaps)
    return at_most(gap, RECORD_RTOL, detail=f"{where}: recorded vs the dense layer's (relative)")


# ------------------------------------------------------------------ worst targets (Prop 26, Cor 27)


def boundary_tokens(d: int, r_x: float, device) -> torch.Tensor:
    """+-r_x e_k, +-r_x (1, ..., 1)/sqrt(d), the alternating one and 0: the sphere's corners."""
    eye = torch.eye(d, dtype=F64, device=device) * r_x
    ones = torch.ones(d, dtype=F64, device=device) * r_x / math.sqrt(d)
    alt = ones * torch.tensor([(-1.0) ** k for k in range(d)], dtype=F64, device=device)
    return torch.cat(
        [eye, -eye, ones[None], -ones[None], alt[None], torch.zeros(1, d, dtype=F64, device=device)]
    )


def target_errors(tr, x: torch.Tensor, zs: torch.Tensor, hit: torch.Tensor) -> torch.Tensor:
    """|f(z)_l - x|_inf at target slots (0 elsewhere): x (P, d), zs the rest of z (P, D_in - d)."""
    d = x.shape[1]
    e = (tr(torch.cat([x, zs], 1)).view(-1, tr.q, d) - x[:, None, :]).abs().amax(-1)
    return torch.where(hit, e, torch.zeros_like(e))


WORST_TARGET_CHUNK = 16384  # positions per evaluation of worst_target's scan


def worst_target(tr, omega: torch.Tensor, r_x: float, steps: int, k: int = 1):
    """The k positions i whose target output f(z)_l (t_l = i in every slot) errs most at the token
    r_x e_1, and for each the token in the r_x ball that the ascent (``ball_ascent``, ``steps``
    steps from every corner of :func:`boundary_tokens`) finds worst: ((k,), (k, d))."""
    om = omega.to(dtype=F64)
    N, d = om.shape[0], tr.d
    corners = boundary_tokens(d, r_x, om.device)

    def codes(i: torch.Tensor):  # (z without x, hits) at rows i = t_l in every slot
        hit = torch.ones(i.numel(), tr.q, dtype=torch.bool, device=om.device)
        return torch.cat([om[i]] * (tr.q + 1), 1), hit

    errs = []
    with torch.no_grad():  # in chunks of positions (N = 1e6 on the gpu profile)
        for start in range(0, N, WORST_TARGET_CHUNK):
            i = torch.arange(start, min(N, start + WORST_TARGET_CHUNK), device=om.device)
            errs.append(target_errors(tr, corners[0].expand(i.numel(), d), *codes(i)).amax(1))
    pos = torch.cat(errs).argsort(descending=True)[:k]
    C = corners.shape[0]
    zs, hit = codes(pos.repeat_interleave(C))  # every corner at every position
    x0 = corners.repeat(k, 1) * 0.999
    x = ball_ascent(lambda x: target_errors(tr, x, zs, hit), x0, r_x, steps)
    with torch.no_grad():
        e = target_errors(tr, x, zs, hit).amax(1).view(k, C)
    best = e.argmax(1) + C * torch.arange(k, device=e.device)
    return pos, x[best].detach()


def float_target_error(tr, omega: torch.Tensor, steps: int = 25) -> Verdict:
    """The float64 check of Prop 26's target error on ``tr`` itself: ||f(u)_l - x||_inf at the
    position and token in the r_x ball where the ascent finds it largest (``worst_target``),
    against eps with the transition's rounding term (a certified check's fallback)."""
    g = tr.guarantee
    pos, x = worst_target(tr, omega, g.r_x, steps)
    zs = omega.to(F64)[pos].repeat(1, tr.q + 1)
    hit = torch.ones(1, tr.q, dtype=torch.bool, device=zs.device)
    with torch.no_grad():
        err = float(target_errors(tr, x, zs, hit).max())
    what = f"float64 at the ascent's worst position {int(pos[0])} and token"
    return at_most(err, g.eps, transition_rounding(tr), detail=what)
