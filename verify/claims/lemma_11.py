"""Lemma 11: q-head attention retrieves the q indexed tokens through an output net, within
Lip sqrt(H) 2 delta r_x (docs/derivations/lemma11.md)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from functools import partial
from operator import attrgetter
from typing import Any, Callable, Dict, Optional, Tuple

import torch
from qstr.bounds.attention import lemma11, lemma11_alpha, lemma11_error_bound, lemma12_radius
from qstr.constructions.attention import lemma11_adversarial_prompt, target_leaks
from qstr.constructions.encoding import layout_of, transformer_encoding
from qstr.constructions.links import make_link
from qstr.constructions.task import QSTR, gather_tokens
from qstr.verify.adversarial import (
    WorstCase,
    clip_to_ball,
    lemma11_worst_case,
    worst_case_tokens,
)
from qstr.verify.claim import (
    Claim,
    Context,
    Ref,
    Verdict,
    at_most,
    by_ratio,
    close,
    each,
    mapped,
    replaced,
    worst,
)
from qstr.verify.claims._attention import above_rounding, attention_rounding, export_rounding
from qstr.verify.claims._lemma11 import (
    L11_D,
    L11_EPS,
    L11Star,
    attained,
    chunks_one_late,
    deficit_dropped,
    fused_heads,
    last_head_dropped,
    leaks_from_chunk_rows,
    module_chunk,
    queries_one_late,
    same_target_search,
    scope_line,
    scores_halved,
    some_tuples,
    star_case,
    tuple_prompts,
    wrong_key_block,
)
from qstr.verify.claims._roundtrip import forgot_head_dim_scale, saved_and_reloaded
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

L11_TIGHT_NS, L11_TIGHT_RTOL = (16, 256), 1e-9

claim = register(
    Claim(
        "lemma-11",
        Ref("Lemma 11"),
        statement=f"q-head attention construction (linear link; teacher net with H=3): the built "
        f"module, its fast path and the exported nn.MultiheadAttention stay within the "
        f"guarantee <= eps={L11_EPS}; for the linear link the worst case over every prompt "
        f"(all target tuples: exact up to N^(q+1) <= 2^24, a certified upper bound beyond) is "
        f"attained by its prompt and within the bound; the star code attains the bound itself; "
        f"alpha = O(log N)",
        builds=(lemma11, lemma11_adversarial_prompt, transformer_encoding),
        bounds=(lemma11_error_bound, target_leaks, lemma11_worst_case),
        derivation="docs/derivations/lemma11.md",
    )
)


@dataclass(frozen=True, eq=False)
class L11Case:
    """One (link, q = H, N): the certified construction (its fast path from (alpha, c, codes) and
    its guarantee), the module users get and its export, and the fast path's measured errors."""

    link_name: str
    link: Any
    cons: Any  # the construction as certified: fast path and guarantee
    module: Any  # the built weights users get (a fault edits a copy)
    exported: Any  # small N: the module saved, reloaded as nn.MultiheadAttention; else None
    prompts: Tuple[torch.Tensor, torch.Tensor]  # random prompts in the r_x-ball
    math_heads: torch.Tensor  # the heads at the random prompts, math backend (chunks of 1024)
    probe: Tuple[torch.Tensor, torch.Tensor]  # linear link: the worst prompt; else a random one
    fast_err: float  # the fast path's largest error on random prompts and after ascent
    fast_at_probe: torch.Tensor  # the fast path's prediction at the probe prompt
    gradient: Optional[torch.Tensor]  # linear link: the affine net's gradient (H, d)
    fused_twin: Any = None  # CUDA: the same construction in float32 (no fused kernel takes float64)
    ascent: Optional[Tuple[torch.Tensor, torch.Tensor]] = None  # small N: the ascent's prompts
    worst: Optional[WorstCase] = None  # linear link: lemma11_worst_case over every target tuple
    same_target: Optional[Tuple[torch.Tensor, torch.Tensor]] = None  # linear: the t* prompt

    @property
    def N(self) -> int:
        return self.cons.guarantee.N

    @property
    def net(self):
        return self.link.two_layer_net()

    def name(self) -> str:
        return f"{self.link_name} q=H={self.cons.guarantee.H} N={self.N}"

    @functools.cached_property
    def at_probe(self) -> Dict[str, torch.Tensor]:
        """Predictions at the probe prompt: module, fast path and (small N) the reloaded export,
        fed by ``transformer_encoding`` with Appendix A.1's default prefactor c = sqrt(d/q)."""
        x, t = self.probe
        with torch.no_grad():
            out = {
                "module": self.module.predict(x, t, chunk=module_chunk(self.N)),
                "fast path": self.fast_at_probe,
            }
            if self.exported is not None:
                Z = transformer_encoding(x, t, self.module.omega[: self.N])
                out["nn.MultiheadAttention"] = self.exported(Z).reshape(t.shape[:2])
        return out

    def probe_errors(self) -> Dict[str, float]:
        """|y_hat - g| at the probe prompt, largest over positions, for each path."""
        x, t = self.probe
        with torch.no_grad():
            target = self.link(gather_tokens(x, t))
        return {k: float((y - target).abs().max()) for k, y in self.at_probe.items()}

    def errors_at(self, x: torch.Tensor, t: torch.Tensor) -> Dict[str, float]:
        """|y_hat - g| at prompts (x, t), largest over prompts and positions, for the built module
        and (small N) its reloaded export."""
        with torch.no_grad():
            target = self.link(gather_tokens(x, t))
            out = {"module": self.module.predict(x, t, chunk=module_chunk(self.N))}
            if self.exported is not None:
                Z = transformer_encoding(x, t, self.module.omega[: self.N])
                out["nn.MultiheadAttention"] = self.exported(Z).reshape(t.shape[:2])
        return {k: float((y - target).abs().max()) for k, y in out.items()}

    def built_errors(self) -> Dict[str, float]:
        """Small N (where the ascent runs): the built paths' largest errors on the two random
        prompts the ascent starts from and on the ascent's; at larger N, empty (the built paths
        run at the probe)."""
        if self.ascent is None:
            return {}
        x, t = self.prompts
        found = [self.errors_at(x[:2], t[:2]), self.errors_at(*self.ascent)]
        return {k: max(f[k] for f in found) for k in found[0]}


@dataclass(frozen=True)
class Lemma11Inputs:
    """The cases, the star-code cases, and the functions the checks compare against."""

    cases: Tuple[L11Case, ...]
    star: Tuple[L11Star, ...]
    eps: float = L11_EPS
    error_bound: Callable[..., float] = lemma11_error_bound  # Lip sqrt(H) 2 delta r_x
    lipschitz: Callable[[Any], float] = attrgetter("lipschitz")  # the output net's (TwoLayerNet)
    leaks: Callable[[Any], torch.Tensor] = target_leaks  # off-target softmax mass per target
    fused_heads: Callable[..., torch.Tensor] = fused_heads  # (cons, x, t, chunk): SDPA's kernels
    encoding: Callable[..., torch.Tensor] = transformer_encoding  # (x, t, omega), default c


def _l11_cases(ctx: Context):
    """(link, q = H): the linear link (its worst case is exact, so checked from both sides) and a
    nonlinear teacher net with 3 heads; q = 4 as well on the gpu profile."""
    return ctx.pick(
        quick=(("linear", 2), ("teacher", 3)),
        full=(("linear", 2), ("teacher", 3)),
        gpu=(("linear", 2), ("linear", 4), ("teacher", 3)),
    )


def _l11_sizes(ctx: Context, link: str):
    """N for the case, and the largest N at which ascent runs and the export is checked."""
    Ns = ctx.pick(
        quick=(16, 256, 2048), full=(16, 64, 256, 1024, 4096), gpu=(16, 256, 4096, 16384, 65536)
    )
    if link != "linear":
        Ns = Ns[: ctx.pick(quick=2, full=4, gpu=3)]
    return Ns, ctx.pick(quick=256, full=1024, gpu=4096)


def _affine_gradient(net, H: int, ctx: Context) -> torch.Tensor:
    """(H, d): the gradient of a net that is affine on R^{H d} (the linear link's +- unit pairs)."""
    z = torch.randn(H, L11_D, dtype=torch.float64, generator=ctx.generator("lemma-11/gradient", H))
    z = z.to(ctx.device).requires_grad_(True)
    with torch.enable_grad():
        net(z).backward()
    return z.grad


def _l11_errors(link, predict, x, t):
    return (predict(x, t) - link(gather_tokens(x, t))).abs()


def _l11_case(ctx: Context, link_name: str, q: int, N: int) -> L11Case:
    """The link, its construction for eps (alpha from eps, radius of Lemma 12), random prompts in
    the r_x-ball, ascent on the fast path (small N) and the probe prompt."""
    link = make_link(link_name, q, L11_D, generator=ctx.generator("lemma-11/link", q))
    link = link.to(ctx.device)
    r_x = lemma12_radius(L11_D, n=10_000, N=N)
    cons = lemma11(N, L11_D, q, link.two_layer_net(), eps=L11_EPS, r_x=r_x, device=ctx.device)
    g, small = cons.guarantee, N <= _l11_sizes(ctx, link_name)[1]
    gen = ctx.generator("lemma-11/prompts", q, N, device=ctx.device)
    p = QSTR(N=N, d=L11_D, link=link).sample(
        max(1, min(8, 4096 // N)), generator=gen, device=ctx.device, dtype=torch.float64
    )
    x, t = clip_to_ball(p.x, g.r_x), p.t
    fast = lambda xx, tt: cons.fast_predict(xx, tt, chunk=1024)  # noqa: E731
    with torch.no_grad():
        err = float(_l11_errors(link, fast, x, t).max())
        heads = cons.fast_heads(x, t, chunk=1024, backend="math")
    ascent = None
    if small:
        errors = lambda xx: _l11_errors(link, fast, xx, t[:2])  # noqa: E731
        xs = worst_case_tokens(errors, x[:2], g.r_x, steps=ctx.pick(quick=25, full=100))
        err = max(err, float(_l11_errors(link, fast, xs, t[:2]).detach().max()))
        ascent = (xs.detach(), t[:2])
    gradient, probe, worst, same = None, (x[:1], t[:1]), None, None
    if link_name == "linear":
        gradient = _affine_gradient(link.two_layer_net(), q, ctx)
        worst = lemma11_worst_case(cons, link.two_layer_net())
        probe, same = worst.prompt, lemma11_adversarial_prompt(cons, gradient.sum(0))
    with torch.no_grad():
        at_probe = fast(*probe)
    exported = saved_and_reloaded(cons)[1] if small else None
    twin = None
    if x.is_cuda:  # CUDA's fused attention kernels take float32/16/bf16: users' CUDA fast path
        net, f32 = link.two_layer_net(), torch.float32
        twin = lemma11(N, L11_D, q, net, eps=L11_EPS, r_x=g.r_x, device=ctx.device, dtype=f32)
    found = (link_name, link, cons, cons, exported, (x, t), heads, probe, err, at_probe)
    return L11Case(*found, gradient, twin, ascent, worst, same)


@claim.inputs
def lemma11_inputs(ctx: Context) -> Lemma11Inputs:
    """Every case of ``_l11_cases`` at its sizes, and the star-code cases (Lemma 11)."""
    cases = tuple(
        _l11_case(ctx, name, q, N) for name, q in _l11_cases(ctx) for N in _l11_sizes(ctx, name)[0]
    )
    return Lemma11Inputs(cases, tuple(star_case(ctx, N) for N in L11_TIGHT_NS))


def _l11_bound(inp: Lemma11Inputs, cons, net) -> float:
    """Lemma 11's bound at the construction's (N, H, mu, c, alpha, r_x) and the net's Lipschitz
    constant."""
    g = cons.guarantee
    return inp.error_bound(
        N=g.N, q=g.H, mu=g.mu, c=g.c, alpha=g.alpha, r_x=g.r_x, lipschitz=inp.lipschitz(net)
    )


def _case_rounding(case: L11Case) -> Rounding:
    """The attention rounding, plus the export's where the export is run."""
    rnd = attention_rounding(case.cons.guarantee)
    if case.exported is None:
        return rnd
    scale = float(case.at_probe["module"].abs().max()) + 1.0
    return rnd + export_rounding(case.module.model, scale)


claim.scope_with(scope_line)


@claim.check("error <= bound", evidence="built")
def lemma11_error(inp: Lemma11Inputs) -> Verdict:
    """Lemma 11: every path's error (random prompts, ascent, the probe) is at most the bound; the
    case with the largest error / bound is named."""

    def verdict(case: L11Case) -> Verdict:
        paths, built = case.probe_errors(), case.built_errors()
        err = max(case.fast_err, *paths.values(), *built.values())
        bound = _l11_bound(inp, case.cons, case.net)
        at_probe = ", ".join(f"{k} {v:.3e}" for k, v in paths.items())
        on_random = ", ".join(f"{k} {v:.3e}" for k, v in built.items()) or "- (large N)"
        detail = f"err/bound {err / bound:.3f}: fast path on random prompts and ascent "
        detail += f"{case.fast_err:.3e}; built on random and ascent prompts {on_random}; "
        detail += f"at the probe {at_probe}"
        return at_most(err, bound, _case_rounding(case), detail=detail)

    return worst(((c.name(), verdict(c)) for c in inp.cases), key=by_ratio)


@claim.check("bound <= eps", evidence="formula")
def lemma11_bound_meets_eps(inp: Lemma11Inputs) -> Verdict:
    """Lemma 11 with alpha from eps: the construction's bound is at most the eps asked."""

    def verdict(c: L11Case) -> Verdict:
        return at_most(_l11_bound(inp, c.cons, c.net), inp.eps, detail=f"alpha {c.cons.alpha:.3f}")

    return worst((c.name(), verdict(c)) for c in inp.cases)


def _largest_gap(cases, gap, rounding, what: str) -> Verdict:
    """The case whose ``gap(case)`` (against 0) most exceeds its ``rounding(case)`` term."""
    rows = [(c.name(), at_most(gap(c), 0.0, rounding(c), detail=what)) for c in cases]
    return worst(rows, key=above_rounding)


def _probe_gap(case: L11Case, path: str) -> float:
    """max |path - module| at the probe prompt."""
    return float((case.at_probe[path] - case.at_probe["module"]).abs().max())


@claim.check("module = fast path", evidence="built")
def lemma11_module_is_fast_path(inp: Lemma11Inputs) -> Verdict:
    """The built module equals the fast path (from alpha, c and the codes) at the probe prompt."""
    return _largest_gap(
        inp.cases,
        partial(_probe_gap, path="fast path"),
        lambda c: attention_rounding(c.cons.guarantee),
        "|module - fast path| at the probe prompt",
    )


def _fused_gap(inp: Lemma11Inputs, case: L11Case) -> float:
    """max |fused heads in ragged chunks of N/3 + 1 - math heads| on the case's random prompts
    (SDPA's fused kernels: CUDA's default; torch has a CPU flash kernel)."""
    x, t = case.prompts
    cons = case.cons if case.fused_twin is None else case.fused_twin
    with torch.no_grad():
        fused = inp.fused_heads(cons, x.to(cons.omega.dtype), t, case.N // 3 + 1)
    return float((fused.double() - case.math_heads).abs().max())


def _fused_rounding(case: L11Case) -> Rounding:
    """The attention rounding in the dtype the fused heads ran in (float32 on CUDA)."""
    cons = case.cons if case.fused_twin is None else case.fused_twin
    return replace(attention_rounding(case.cons.guarantee), dtype=cons.omega.dtype)


@claim.check("fused heads = math heads", evidence="built")
def lemma11_fused_heads(inp: Lemma11Inputs) -> Verdict:
    """The fused (SDPA) heads in chunks of N/3 + 1 equal the math heads (float64 on the CPU's
    flash kernel; on CUDA the float32 construction, against float32 rounding)."""
    what = "|fused heads - math heads| on random prompts"
    v = _largest_gap(inp.cases, partial(_fused_gap, inp), _fused_rounding, what)
    twin = any(c.fused_twin is not None for c in inp.cases)
    return replace(v, dtype="float32+float64") if twin else v


@claim.check("exported = module", evidence="built")
def lemma11_export_is_module(inp: Lemma11Inputs) -> Verdict:
    """The saved, reloaded nn.MultiheadAttention equals the built module (Appendix A.1's export)."""
    cases, what = [c for c in inp.cases if c.exported is not None], "at the probe prompt"
    gap = partial(_probe_gap, path="nn.MultiheadAttention")
    return _largest_gap(cases, gap, _case_rounding, f"|exported - module| {what}")


@claim.check("worst prompt attains the worst case", evidence="built")
def lemma11_worst_prompt_attains(inp: Lemma11Inputs) -> Verdict:
    """Linear link: every path's error at lemma11_worst_case's prompt is its value (both sides):
    the formula r_x sum_j ||sum_h (P[t_h, j] - 1[j = t_h]) w_h|| measured on the built objects."""
    rows = [
        (f"{c.name()}, {path}", close(err, c.worst.value, 0.0, _case_rounding(c), attained(c)))
        for c in inp.cases
        if c.worst is not None
        for path, err in c.probe_errors().items()
    ]
    return worst(rows, key=above_rounding)


@claim.check("worst case <= bound", evidence="exact")
def lemma11_worst_within_bound(inp: Lemma11Inputs) -> Verdict:
    """Linear link: the worst case over every prompt (exact, or its certified upper bound
    2 r_x max_t leak[t] sum_h ||w_h||) is at most Lemma 11's bound."""
    return worst(
        (c.name(), at_most(c.worst.upper, _l11_bound(inp, c.cons, c.net), detail=attained(c)))
        for c in inp.cases
        if c.worst is not None
    )


@claim.check("no target tuple beats the worst case", evidence="built")
def lemma11_no_tuple_beats(inp: Lemma11Inputs, ctx: Context) -> Verdict:
    """Linear link, small N: the built module's error at the worst prompts of every target tuple
    (N^q <= 256) or of random ones is at most the worst case found (the supremum where the
    search was exhaustive, else its upper bound)."""

    def verdict(case: L11Case) -> Verdict:
        x, t = tuple_prompts(case, some_tuples(case, ctx, ctx.pick(quick=8, full=64)))
        err = case.errors_at(x, t)["module"]
        return at_most(err, case.worst.upper, _case_rounding(case), detail=attained(case))

    rows = [(c.name(), verdict(c)) for c in inp.cases if c.worst is not None and c.ascent]
    return worst(rows, key=by_ratio)


@claim.check("same-target prompt = 2 r_x max leak ||sum w||", evidence="built")
def lemma11_same_target(inp: Lemma11Inputs) -> Verdict:
    """Linear link: at the prompt whose slots all read t* = argmax leak (the prompt of
    lemma11_adversarial_prompt) the built module's error is 2 r_x leak[t*] ||sum_h w_h||,
    leak from target_leaks (both sides)."""

    def verdict(case: L11Case) -> Verdict:
        err = case.errors_at(*case.same_target)["module"]
        return close(err, _same_target_value(inp, case), 0.0, _case_rounding(case))

    rows = [(c.name(), verdict(c)) for c in inp.cases if c.same_target is not None]
    return worst(rows, key=above_rounding)


@claim.check("Lipschitz constant exact", evidence="built")
def lemma11_lipschitz_exact(inp: Lemma11Inputs) -> Verdict:
    """Linear link: the net's Lipschitz constant in the bound is its exact one, ||gradient||."""

    def verdict(c: L11Case) -> Verdict:
        norm = float(c.gradient.norm())
        return close(inp.lipschitz(c.net), norm, 1e-12 * norm, detail="vs ||gradient||")

    return worst((c.name(), verdict(c)) for c in inp.cases if c.gradient is not None)


@claim.check("star code attains the bound", evidence="built")
def lemma11_star_attains(inp: Lemma11Inputs) -> Verdict:
    """Star codes: the built module's error at the worst prompt / the bound = 1 (the bound is
    attained, docs/derivations/lemma11.md); the case farthest from 1 is named."""
    bounds = {s.N: _l11_bound(inp, s.cons, s.net) for s in inp.star}
    detail = "star codes (mu = 1/2), q = H = 2, w = (u, u)/sqrt 2, target 0: error / bound "
    detail += ", ".join(f"N={s.N}: {s.error / bounds[s.N]:.12f}" for s in inp.star)
    rows = []
    for s in inp.star:
        rnd = attention_rounding(s.cons.guarantee).times(1 / bounds[s.N], "1/bound")
        ratio = s.error / bounds[s.N]
        rows.append((f"N = {s.N}", close(ratio, 1.0, L11_TIGHT_RTOL, rnd, detail=detail)))
    return worst(rows, key=above_rounding)


@claim.check("alpha = O(log N)", evidence="formula")
def lemma11_alpha_log_n(inp: Lemma11Inputs) -> Verdict:
    """alpha = O(log N): for each link, alpha(N_max) / alpha(N_min) <= ln N_max / ln N_min."""
    rows = []
    for name in dict.fromkeys(c.link_name + str(c.cons.guarantee.H) for c in inp.cases):
        cs = [c for c in inp.cases if c.link_name + str(c.cons.guarantee.H) == name]
        a = cs[-1].cons.guarantee.alpha / cs[0].cons.guarantee.alpha
        ln_ratio = math.log(cs[-1].N) / math.log(cs[0].N)
        rows.append((f"link {cs[-1].link_name}", at_most(a, ln_ratio, detail="alpha vs ln N")))
    return worst(rows)


def _code_share(inp: Lemma11Inputs, case: L11Case) -> float:
    """||c omega_{t_i1}||^2 + ... + ||c omega_{t_iq}||^2 over E||x_i||^2 = d, the largest over the
    probe prompt's positions, in the encoding users feed the export."""
    x, t = case.probe
    d, q = x.shape[-1], t.shape[-1]
    Z = inp.encoding(x, t, case.module.omega[: case.N])
    lay = layout_of(Z, d, q)
    codes = sum(Z[..., lay.slot(k)].pow(2).sum(-1) for k in range(q))
    return float(codes.max()) / d


@claim.check("encoding balanced: q c^2 = d", evidence="built")
def lemma11_encoding_balanced(inp: Lemma11Inputs) -> Verdict:
    """Appendix A.1: the prefactor c = sqrt(d/q) makes the query's q code blocks as large as a
    token, q c^2 = d = E||x||^2 (docs/derivations/lemma11.md); the ratio farthest from 1 over
    the cases (c = 1 balances a case with q = d, so no one case may stand for the others)."""

    def verdict(case: L11Case) -> Verdict:
        n = 2 * case.module.omega.shape[1] + 4
        rnd = Rounding(n=n, scale=1.0, what="(2 d_e + 4) eps (unit codes, c^2)")
        return close(_code_share(inp, case), 1.0, 0.0, rnd, detail="q c^2 ||omega||^2 / d")

    return worst(((c.name(), verdict(c)) for c in inp.cases), key=lambda v: abs(v.measured - 1))


def _same_target_value(inp: Lemma11Inputs, case: L11Case) -> float:
    """Linear link: the worst case over prompts whose slots all read one target,
    2 r_x max_t leak[t] ||sum_h w_h|| (docs/derivations/lemma11.md)."""
    leak = float(inp.leaks(case.cons).max())
    return 2 * case.cons.guarantee.r_x * leak * float(case.gradient.sum(0).norm())


# ---------------------------------------------------------------- faults


def _module_edited(edit: Callable[..., None]) -> Callable[[L11Case], L11Case]:
    """A case edit: a copy of the built module with ``edit(W_QK, construction)`` applied (and
    exported as users would export it), in each case small enough to be exported."""

    def broken(case: L11Case) -> L11Case:
        if case.exported is None:
            return case
        module = case.cons.with_alpha(case.cons.alpha)
        with torch.no_grad():
            edit(module.model.W_QK, case.cons)
        return replace(case, module=module, exported=saved_and_reloaded(module)[1])

    return broken


MODULE_CHECKS = (lemma11_error, lemma11_module_is_fast_path)
claim.fault("scores halved", MODULE_CHECKS, mapped("cases", _module_edited(scores_halved)))
claim.fault("slot -> slot0 block", MODULE_CHECKS, mapped("cases", _module_edited(wrong_key_block)))
claim.fault(
    "last head's block dropped", MODULE_CHECKS, mapped("cases", _module_edited(last_head_dropped))
)


def _op_norm(net) -> float:
    """||a|| ||W||_op for the Lipschitz constant: 2 ||w|| for a +- pair net."""
    return float(net.a.norm() * torch.linalg.matrix_norm(net.W, ord=2))


claim.fault(
    "bound with ||a|| ||W||_op",
    breaks=(lemma11_lipschitz_exact, lemma11_star_attains),
    apply=replaced(lipschitz=_op_norm),
)


def _rechosen_alpha(choose):
    """Each case rebuilt at alpha = ``choose(N, alpha_2)``, alpha_2 the alpha lemma11_alpha picks
    for the same (q, mu, c, r_x, Lip, eps) at N = 2, i.e. ln((1 - delta)/delta) / (c^2 (1 - mu))
    with delta = eps / (2 r_x Lip sqrt(H)): the Lemma 11 bound without its (N - 1) factor."""

    def rebuilt(inp: Lemma11Inputs, case: L11Case) -> L11Case:
        g = case.cons.guarantee
        alpha_2 = lemma11_alpha(
            N=2, q=g.H, mu=g.mu, c=g.c, r_x=g.r_x, lipschitz=g.lipschitz, eps=inp.eps
        )
        alpha, book, dev = choose(case.N, alpha_2), case.cons.codebook, case.cons.model.W_QK.device
        cons = lemma11(
            case.N, L11_D, g.H, case.net, alpha=alpha, r_x=g.r_x, codebook=book, device=dev
        )
        return replace(case, cons=cons, module=cons)

    def apply(inp: Lemma11Inputs) -> Lemma11Inputs:
        return replace(inp, cases=tuple(rebuilt(inp, c) for c in inp.cases))

    return apply


claim.fault(
    "alpha from eps without the (N - 1) factor",
    breaks=lemma11_bound_meets_eps,
    apply=_rechosen_alpha(lambda N, alpha_2: alpha_2),
)
claim.fault(
    "ln((N - 1) X) taken as (N - 1) ln X in alpha",
    breaks=lemma11_alpha_log_n,
    apply=_rechosen_alpha(lambda N, alpha_2: (N - 1) * alpha_2),
)


claim.fault(
    "fused chunks read the queries one position late",
    lemma11_fused_heads,
    replaced(fused_heads=chunks_one_late),
)


@claim.fault("exporter forgets torch's 1/sqrt(head_dim)", breaks=lemma11_export_is_module)
@each()
def _export_forgets_scale(case: L11Case) -> L11Case:
    """The case's export without torch's 1/sqrt(head_dim) compensated (where it is exported)."""
    if case.exported is None:
        return case
    return replace(case, exported=forgot_head_dim_scale(case.exported))


claim.fault("module's query chunks one row late", lemma11_error, mapped("cases", queries_one_late))
claim.fault(
    "leaks from the chunk's rows, not the diagonal",
    breaks=lemma11_same_target,
    apply=replaced(leaks=leaks_from_chunk_rows),
)


claim.fault(
    "target deficit dropped from the worst case",
    breaks=(lemma11_worst_prompt_attains, lemma11_worst_within_bound),
    apply=mapped("cases", deficit_dropped),
)


claim.fault(
    "worst case over same-target tuples only",
    breaks=lemma11_no_tuple_beats,
    apply=mapped("cases", same_target_search),
)


@claim.fault("the published code's prefactor c = 1", breaks=lemma11_encoding_balanced)
def _published_prefactor(inp: Lemma11Inputs) -> Lemma11Inputs:
    """The encoding with the published experiment code's prefactor c = 1."""
    return replace(inp, encoding=lambda x, t, omega: transformer_encoding(x, t, omega, c=1.0))
