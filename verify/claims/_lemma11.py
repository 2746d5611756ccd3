"""Lemma 11's claim (verify/claims/lemma_11.py): its cases and star-code cases, the prompts of
target tuples, the guarantee measured on the built module and evaluated at 40 digits, and the
mistakes its faults plant (docs/derivations/lemma11.md)."""

from __future__ import annotations

import functools
import math
import types
import weakref
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Optional, Tuple

import mpmath as mp
import torch

from qstr.bounds.attention import lemma11, lemma11_alpha, lemma11_leak, lemma12_radius
from qstr.bounds.lemma11_leaks import worst_target
from qstr.constructions.attention import lemma11_adversarial_prompt, place_block
from qstr.constructions.codes import star_codebook
from qstr.constructions.encoding import layout_of, transformer_encoding
from qstr.constructions.links import TwoLayerNet, make_link
from qstr.constructions.task import QSTR, gather_tokens
from qstr.verify.adversarial import (
    WorstCase,
    clip_to_ball,
    lemma11_tuple_prompt,
    lemma11_worst_case,
    worst_case_tokens,
)
from qstr.verify.certified import certified_lemma11
from qstr.verify.certified.verdict import certified
from qstr.verify.claim import Context
from qstr.verify.claims._roundtrip import saved_and_reloaded

L11_D, L11_EPS = 4, 0.05
L11_DPS = 40  # the pins' working precision (decimal digits)
# star codes attain the bound, so its enclosure straddles the worst case's: the certificate
# tolerates the bound to (1 + 1e-12) there (measured: the worst case's lower end is the bound)
L11_STAR_RTOL = 1e-12


@dataclass(frozen=True, eq=False)
class L11Star:
    """Star codes (mu = 1/2), q = H = 2 and the net <w, z>, w = (u, u)/sqrt 2 written as the
    linear link's +- pair; its built module at the worst prompt (lemma11.md, tightness)."""

    N: int
    cons: Any
    net: Any
    error: float  # the built module's error at the worst prompt, target 0


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


def l11_cases(ctx: Context):
    """(link, q = H): the linear link (its worst case is exact, so checked from both sides) and a
    nonlinear teacher net with 3 heads; q = 4 as well on the gpu profile."""
    return ctx.pick(
        quick=(("linear", 2), ("teacher", 3)),
        full=(("linear", 2), ("teacher", 3)),
        gpu=(("linear", 2), ("linear", 4), ("teacher", 3)),
    )


def l11_sizes(ctx: Context, link: str):
    """N for the case, and the largest N at which ascent runs and the export is checked."""
    Ns = ctx.pick(
        quick=(16, 256, 2048), full=(16, 64, 256, 1024, 4096), gpu=(16, 256, 4096, 16384, 65536)
    )
    if link != "linear":
        Ns = Ns[: ctx.pick(quick=2, full=4, gpu=3)]
    return Ns, ctx.pick(quick=256, full=1024, gpu=4096)


def affine_gradient(net, H: int, ctx: Context) -> torch.Tensor:
    """(H, d): the gradient of a net that is affine on R^{H d} (the linear link's +- unit pairs)."""
    z = torch.randn(H, L11_D, dtype=torch.float64, generator=ctx.generator("lemma-11/gradient", H))
    z = z.to(ctx.device).requires_grad_(True)
    with torch.enable_grad():
        net(z).backward()
    return z.grad


def l11_errors(link, predict, x, t):
    return (predict(x, t) - link(gather_tokens(x, t))).abs()


def l11_case(ctx: Context, link_name: str, q: int, N: int) -> L11Case:
    """The link, its construction for eps (alpha from eps, radius of Lemma 12), random prompts in
    the r_x-ball, ascent on the fast path (small N) and the probe prompt."""
    link = make_link(link_name, q, L11_D, generator=ctx.generator("lemma-11/link", q))
    link = link.to(ctx.device)
    r_x = lemma12_radius(L11_D, n=10_000, N=N)
    cons = lemma11(N, L11_D, q, link.two_layer_net(), eps=L11_EPS, r_x=r_x, device=ctx.device)
    g, small = cons.guarantee, N <= l11_sizes(ctx, link_name)[1]
    gen = ctx.generator("lemma-11/prompts", q, N, device=ctx.device)
    p = QSTR(N=N, d=L11_D, link=link).sample(
        max(1, min(8, 4096 // N)), generator=gen, device=ctx.device, dtype=torch.float64
    )
    x, t = clip_to_ball(p.x, g.r_x), p.t
    fast = lambda xx, tt: cons.fast_predict(xx, tt, chunk=1024)  # noqa: E731
    with torch.no_grad():
        err = float(l11_errors(link, fast, x, t).max())
        heads = cons.fast_heads(x, t, chunk=1024, backend="math")
    ascent = None
    if small:
        errors = lambda xx: l11_errors(link, fast, xx, t[:2])  # noqa: E731
        xs = worst_case_tokens(errors, x[:2], g.r_x, steps=ctx.pick(quick=25, full=100))
        err = max(err, float(l11_errors(link, fast, xs, t[:2]).detach().max()))
        ascent = (xs.detach(), t[:2])
    gradient, probe, worst, same = None, (x[:1], t[:1]), None, None
    if link_name == "linear":
        gradient = affine_gradient(link.two_layer_net(), q, ctx)
        worst = lemma11_worst_case(cons, link.two_layer_net())
        same = lemma11_adversarial_prompt(cons, gradient.sum(0), target=worst_target(cons))
        probe = worst.prompt
    with torch.no_grad():
        at_probe = fast(*probe)
    exported = saved_and_reloaded(cons)[1] if small else None
    twin = None
    if x.is_cuda:  # CUDA's fused attention kernels take float32/16/bf16: users' CUDA fast path
        net, f32 = link.two_layer_net(), torch.float32
        twin = lemma11(N, L11_D, q, net, eps=L11_EPS, r_x=g.r_x, device=ctx.device, dtype=f32)
    found = (link_name, link, cons, cons, exported, (x, t), heads, probe, err, at_probe)
    return L11Case(*found, gradient, twin, ascent, worst, same)


def fused_heads(cons, x: torch.Tensor, t: torch.Tensor, chunk: int) -> torch.Tensor:
    """The construction's heads on SDPA's fused kernels, queries in chunks of ``chunk``."""
    return cons.fast_heads(x, t, chunk=chunk, backend="fused")


def pair_net(w: torch.Tensor) -> TwoLayerNet:
    """<w, z> as relu(<w, z>) - relu(-<w, z>): the linear link's form (exactly linear)."""
    one = torch.ones(1, dtype=w.dtype, device=w.device)
    return TwoLayerNet(a=torch.cat([one, -one]), W=torch.stack([w, -w]), b=torch.zeros(2).to(w))


def star_case(ctx: Context, N: int) -> L11Star:
    """Star codes, q = H = 2, w = (u, u)/sqrt 2, r_x = 2: the worst prompt attains the bound."""
    u = torch.full((L11_D,), 0.5, dtype=torch.float64, device=ctx.device)
    net = pair_net(torch.cat([u, u]) / math.sqrt(2))
    book = star_codebook(N, mu=0.5, device=ctx.device)
    cons = lemma11(N, L11_D, 2, net, eps=L11_EPS, r_x=2.0, device=ctx.device, codebook=book)
    x, t = lemma11_adversarial_prompt(cons, u, target=0)
    with torch.no_grad():
        err = float((cons.predict(x, t) - net(gather_tokens(x, t))).abs().max())
    return L11Star(N, cons, net, err)


def attained(case: Any) -> str:
    """The worst case's line in a check's detail."""
    w = case.worst
    kind = "exact, all tuples" if w.exact else f"best of {w.tuples} tuples, upper {w.upper:.6e}"
    return f"worst {w.value:.6e} at targets {w.targets} ({kind}); same-target {w.same_target:.6e}"


EVERY_TUPLE = 256  # up to this many target tuples, all of them run through the built module


def some_tuples(case: Any, ctx: Context, n: int) -> torch.Tensor:
    """Every target tuple in [0, N)^q when there are at most EVERY_TUPLE, else n drawn uniformly
    (a fresh draw per case): (., q)."""
    dev, q = case.cons.omega.device, case.worst.prompt[1].shape[-1]
    if case.N**q <= EVERY_TUPLE:
        return torch.cartesian_prod(*[torch.arange(case.N, device=dev)] * q).reshape(-1, q)
    gen = ctx.generator("lemma-11/tuples", case.N, device=dev)
    return torch.randint(case.N, (n, q), generator=gen, device=dev)


def tuple_prompts(case: Any, tuples: torch.Tensor):
    """Each tuple's worst prompt (every position reading it), stacked: (n, N, d), (n, N, q)."""
    r_x = case.cons.guarantee.r_x
    one = [lemma11_tuple_prompt(case.cons, case.gradient, tt, r_x) for tt in tuples.tolist()]
    return torch.cat([o[0] for o in one]), torch.cat([o[1] for o in one])


def scores_halved(W, cons):
    """Scores at half scale: an exporter folding c into W_QK once instead of twice, or alpha / 2."""
    W.mul_(0.5)


def wrong_key_block(W, cons):
    """Slot blocks pointing at the key's slot0 block instead of its position block."""
    W.zero_()
    for h in range(cons.H):
        place_block(W[h], cons.layout, f"slot{h}", "slot0", cons.alpha)


def last_head_dropped(W, cons):
    W[-1].zero_()


def chunks_one_late(cons, x: torch.Tensor, t: torch.Tensor, chunk: int) -> torch.Tensor:
    """A fused path whose chunk at offset s reads the query indices of t[s + 1 : s + 1 + chunk]
    (an off-by-one in the chunk offset; the last chunk wraps round to t[0])."""
    return cons.fast_heads(x, t.roll(-1, dims=1), chunk=chunk, backend="fused")


def code_share(encoding: Callable[..., torch.Tensor], case: Any) -> float:
    """||c omega_{t_i1}||^2 + ... + ||c omega_{t_iq}||^2 over E||x_i||^2 = d, the largest over the
    probe prompt's positions, in the ``encoding`` users feed the export."""
    x, t = case.probe
    d, q = x.shape[-1], t.shape[-1]
    Z = encoding(x, t, case.module.omega[: case.N])
    lay = layout_of(Z, d, q)
    codes = sum(Z[..., lay.slot(k)].pow(2).sum(-1) for k in range(q))
    return float(codes.max()) / d


def same_target_value(leaks: Callable[[Any], torch.Tensor], case: Any) -> float:
    """Linear link: the worst case over prompts whose slots all read one target,
    2 r_x max_t leak[t] ||sum_h w_h|| (docs/derivations/lemma11.md), leak from ``leaks``."""
    leak = float(leaks(case.cons).max())
    return 2 * case.cons.guarantee.r_x * leak * float(case.gradient.sum(0).norm())


def module_chunk(N: int) -> int:
    """The built module's query chunk in the claim: N/3 + 1 rows (no divisor of N, so the last
    chunk is ragged and every chunk but the first starts off a multiple of a power of 2)."""
    return N // 3 + 1


def _heads_queries_one_late(self, Z: torch.Tensor, c: int) -> torch.Tensor:
    """MergedAttention's heads with the query rows of every chunk after the first read one
    position late (Z[:, s + 1 : s + 1 + c], wrapping round at the end)."""
    late, keys, outs = Z.roll(-1, dims=1), Z.unsqueeze(1), []
    for s in range(0, Z.shape[1], c):
        A = torch.softmax(self._scores((late if s else Z)[:, s : s + c], Z), dim=-1)
        outs.append((A @ keys).transpose(1, 2))
    return torch.cat(outs, dim=1)


def queries_one_late(case: Any) -> Any:
    """The case with a copy of its built module whose query chunks after the first read one
    position late (an off-by-one in the chunk offset of MergedAttention's heads)."""
    module = case.cons.with_alpha(case.cons.alpha)
    module.model._heads = types.MethodType(_heads_queries_one_late, module.model)
    return replace(case, module=module)


def leaks_from_chunk_rows(cons, chunk: int = 1024) -> torch.Tensor:
    """target_leaks with the chunk offset dropped from the self score: row s + i of the Gram
    matrix is compared with G[s + i, i] instead of its diagonal G[s + i, s + i]."""
    omega, A = cons.omega, cons.alpha * cons.c**2
    out = []
    for s in range(0, omega.shape[0], chunk):
        G = omega[s : s + chunk] @ omega.T
        rows = torch.arange(G.shape[0], device=G.device)
        E = torch.exp(A * (G - G[rows, rows].clone()[:, None]))
        E[rows, rows] = 0
        X = E.sum(dim=1)
        out.append(X / (1 + X))
    return torch.cat(out)


def deficit_dropped(case: Any) -> Any:
    """The worst case computed with v_j = sum_h P[t_h, j] w_h, each head's target deficit
    -1[j = t_h] dropped (a slot misread as plain averaging): its value and its prompt, at the
    targets the honest search found; unchanged where the case has no worst case."""
    if case.worst is None:
        return case
    cons, w = case.cons, case.worst
    idx = torch.tensor(w.targets, device=cons.omega.device)
    P = torch.softmax(cons.alpha * cons.c**2 * (cons.omega[idx] @ cons.omega.T), dim=-1)
    v = P.T @ case.gradient
    r_x = cons.guarantee.r_x
    x = (r_x * v / v.norm(dim=-1, keepdim=True).clamp_min(1e-300)).unsqueeze(0)
    value = r_x * float(v.norm(dim=-1).sum())
    wrong = replace(w, value=value, upper=value, prompt=(x, w.prompt[1]))
    return replace(case, worst=wrong, probe=wrong.prompt)


def same_target_search(case: Any) -> Any:
    """The worst case read as 2 r_x max_t leak[t] ||sum_h w_h|| (every slot at one target) and
    called exact: this toolkit's own mistake until 2026-11-27."""
    if case.worst is None:
        return case
    w, (x, t) = case.worst, case.same_target
    same = replace(w, value=w.same_target, upper=w.same_target, exact=True, prompt=(x, t))
    return replace(case, worst=replace(same, targets=tuple(t[0, 0].tolist())), probe=(x, t))


def scope_line(inp: Any) -> str:
    """Lemma 11's scope: links, q, N; which worst cases were exact (all target tuples) and
    which bracketed."""
    cases = "; ".join(
        f"{c.link_name} q={c.cons.guarantee.H} N={c.N}"
        + ("" if c.worst is None else (" exact" if c.worst.exact else " bracketed"))
        for c in inp.cases
    )
    stars = ", ".join(str(s.N) for s in inp.star)
    proved = ", ".join(str(c.N) for c in certified_cases(inp.cases, inp.certified_n))
    proved_stars = ", ".join(str(s.N) for s in inp.star if s.N <= inp.certified_n)
    return (
        f"d = {L11_D}, eps = {L11_EPS}, RS-Hadamard codes: {cases}; star codes N = {stars}; "
        "the module's queries and the fused heads in chunks of N/3 + 1; certified in ball "
        f"arithmetic (every target tuple): linear N = {proved}, star N = {proved_stars}"
    )


def certified_cases(cases, largest: int):
    """The linear link's cases with N <= ``largest``: those the certified check encloses."""
    return [c for c in cases if c.link_name == "linear" and c.N <= largest]


def certified_rows(cases, star, largest: int):
    """(label, verdict) of Lemma 11 certified (``certified_lemma11``, docs/derivations/certified.md)
    on the linear cases and star cases with N <= ``largest``; no float64 fallback: a failed
    premise (a weight off its block, an unpaired unit) fails."""
    rows = [
        (c.name(), certified(certified_lemma11(c.cons))) for c in certified_cases(cases, largest)
    ]
    attained = "star codes attain the bound: without the tolerance the enclosures straddle"
    for s in star:
        if s.N <= largest:
            v = certified(certified_lemma11(s.cons, rtol=L11_STAR_RTOL))
            rows.append((f"star N={s.N}", replace(v, detail=f"{v.detail} ({attained})")))
    return rows


def construction_edited(edit: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A case edit: the linear link's construction, and so the module users get, replaced by
    ``edit(construction)`` (a fault of verify/certified/faults.py); other cases as they are."""

    def broken(case: Any) -> Any:
        if case.link_name != "linear":
            return case
        cons = edit(case.cons)
        return replace(case, cons=cons, module=cons)

    return broken


def module_edited(edit: Callable[..., None]) -> Callable[[Any], Any]:
    """A case edit: a copy of the built module with ``edit(W_QK, construction)`` applied (and
    exported as users would export it), in each case small enough to be exported."""

    def broken(case: Any) -> Any:
        if case.exported is None:
            return case
        module = case.cons.with_alpha(case.cons.alpha)
        with torch.no_grad():
            edit(module.model.W_QK, case.cons)
        return replace(case, module=module, exported=saved_and_reloaded(module)[1])

    return broken


def op_norm(net) -> float:
    """||a|| ||W||_op for the Lipschitz constant: 2 ||w|| for a +- pair net."""
    return float(net.a.norm() * torch.linalg.matrix_norm(net.W, ord=2))


def rechosen_alpha(choose):
    """Each case rebuilt at alpha = ``choose(N, alpha_2)``, alpha_2 the alpha lemma11_alpha picks
    for the same (q, mu, c, r_x, Lip, eps) at N = 2, i.e. ln((1 - delta)/delta) / (c^2 (1 - mu))
    with delta = eps / (2 r_x Lip sqrt(H)): the Lemma 11 bound without its (N - 1) factor."""

    def rebuilt(inp: Any, case: Any) -> Any:
        g = case.cons.guarantee
        alpha_2 = lemma11_alpha(
            N=2, q=g.H, mu=g.mu, c=g.c, r_x=g.r_x, lipschitz=g.lipschitz, eps=inp.eps
        )
        alpha, book, dev = choose(case.N, alpha_2), case.cons.codebook, case.cons.model.W_QK.device
        cons = lemma11(
            case.N, L11_D, g.H, case.net, alpha=alpha, r_x=g.r_x, codebook=book, device=dev
        )
        return replace(case, cons=cons, module=cons)

    def apply(inp: Any) -> Any:
        return replace(inp, cases=tuple(rebuilt(inp, c) for c in inp.cases))

    return apply


def gap_with_plus_mu(case: Any) -> Any:
    """The case (or star case) with its guarantee's gap recorded as alpha c^2 (1 + mu) and its leak
    delta(that gap), in the construction as certified and in the module users get (so in its
    file): the sign of mu slipped in the record."""
    g = case.cons.guarantee
    gap = g.alpha * g.c**2 * (1 + g.mu)
    cons = case.cons.with_guarantee(replace(g, gap=gap, leak=lemma11_leak(g.N, gap)))
    return (
        replace(case, cons=cons, module=cons)
        if hasattr(case, "module")
        else replace(case, cons=cons)
    )


# ---------------------------------------------------------------- the guarantee, independently


def l11_leak_mp(N, gap):
    """delta = (N - 1) e^{-gap} / (1 + (N - 1) e^{-gap}) at the working precision (call inside
    ``mpmath.workdps``; docs/derivations/lemma11.md, step 2)."""
    X = (mp.mpf(N) - 1) * mp.exp(-mp.mpf(gap))
    return X / (1 + X)


def l11_gap_mp(mu, c, alpha):
    """Delta = alpha c^2 (1 - mu) (docs/derivations/lemma11.md, step 1)."""
    return mp.mpf(alpha) * mp.mpf(c) ** 2 * (1 - mp.mpf(mu))


def l11_bound_mp(N, H, mu, c, alpha, r_x, lip):  # noqa: PLR0913 - the statement's symbols
    """Lip sqrt(H) 2 delta r_x (docs/derivations/lemma11.md, the statement with explicit
    constants)."""
    delta = l11_leak_mp(N, l11_gap_mp(mu, c, alpha))
    return mp.mpf(lip) * mp.sqrt(H) * 2 * delta * mp.mpf(r_x)


def l11_alpha_mp(N, H, mu, c, r_x, lip, eps):  # noqa: PLR0913 - the statement's symbols
    """alpha(eps) = ln((N - 1)(1 - delta*) / delta*) / (c^2 (1 - mu)), delta* = eps / (2 Lip
    sqrt(H) r_x); 0 when delta* >= (N - 1) / N (docs/derivations/lemma11.md, 'Choosing alpha')."""
    star = mp.mpf(eps) / (2 * mp.mpf(lip) * mp.sqrt(H) * mp.mpf(r_x))
    if star >= (mp.mpf(N) - 1) / N:
        return mp.mpf(0)
    return mp.log((mp.mpf(N) - 1) * (1 - star) / star) / (mp.mpf(c) ** 2 * (1 - mp.mpf(mu)))


# ---------------------------------------------------------------- the record, measured


def module_net(model, d: int) -> TwoLayerNet:
    """The built module's output net on the stacked tokens: a^T relu(W_x z + b), W_x the columns
    of W that read each head's x block (the first d of its D_e)."""
    W = model.W.detach().reshape(model.m, model.H, model.D_e)[:, :, :d]
    return TwoLayerNet(a=model.a.detach(), W=W.reshape(model.m, -1), b=model.b.detach())


RECORD_CHUNK = 256  # query rows of the built module's scores at a time: O(H 256 N) memory


def _score_rows(model, Z: torch.Tensor, s: int, n: int):
    """Query rows s .. s + n of the built module's scores on Z (row i targets key i): the targets'
    scores (H, n), and of those rows the least gap, the largest |other score| / target score, the
    largest off-target softmax mass."""
    S = model._scores(Z[:, s : s + n], Z)[0]  # (H, n, N)
    rows = torch.arange(S.shape[1], device=S.device)
    own, off = S[:, rows, rows + s], torch.zeros_like(S, dtype=torch.bool)
    off[:, rows, rows + s] = True
    gap = float((own - S.masked_fill(off, -math.inf).amax(-1)).min())
    mu = float((S.masked_fill(off, 0.0).abs() / own[..., None]).max())
    leak = float((1 - torch.softmax(S, dim=-1)[:, rows, rows + s]).max())
    return own, gap, mu, leak


_MEASURED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def measured_record(model, omega: torch.Tensor, c: float, q: int, r_x: float) -> Dict[str, Any]:
    """:func:`built_record`, measured once per built model while neither its parameters nor the
    codes change (torch's in-place version counters): the record and leak checks, and the faults
    that only edit the guarantee, share one measurement."""
    params = tuple(p._version for p in model.parameters())
    key = (omega.data_ptr(), tuple(omega.shape), omega._version, c, q, r_x, params)
    seen = _MEASURED.setdefault(model, {})
    if key not in seen:
        seen[key] = built_record(model, omega, c, q, r_x)
    return seen[key]


def built_record(model, omega: torch.Tensor, c: float, q: int, r_x: float) -> Dict[str, Any]:
    """Each field of a Lemma 11 guarantee as the built module measures it, on the prompt whose
    position i reads target i in every slot (every head scores every target): A = the target's
    score (unit codes), gap = the smallest target score - largest other score, mu = the largest
    |other score| / A, the output net's Lipschitz constant (W's x columns), the weights' norms,
    the sizes; leak and bound: delta(gap) and Lip sqrt(H) 2 delta(gap) r_x at 40 digits
    (docs/derivations/lemma11.md); 'largest leak': the largest off-target softmax mass."""
    N, d_e = omega.shape
    d, H = model.D_e - (q + 1) * d_e, model.H
    idx = torch.arange(N, device=omega.device)
    x = torch.zeros(1, N, d, dtype=omega.dtype, device=omega.device)
    with torch.no_grad():
        Z = transformer_encoding(x, idx[None, :, None].expand(1, N, q), omega, c=c)
        parts = [_score_rows(model, Z, s, RECORD_CHUNK) for s in range(0, N, RECORD_CHUNK)]
        own = torch.cat([p[0] for p in parts], dim=-1)
        gap, mu = min(p[1] for p in parts), max(p[2] for p in parts)
        largest = max(p[3] for p in parts)
        norms = {"W_QK": [float(w.norm()) for w in model.W_QK], "W": float(model.W.norm())}
        norms.update(a=float(model.a.norm()), b=float(model.b.norm()))
        lip = module_net(model, d).lipschitz
    with mp.workdps(L11_DPS):
        delta = l11_leak_mp(N, gap)
        bound = float(mp.mpf(lip) * mp.sqrt(H) * 2 * delta * mp.mpf(r_x))
    return {
        "error_bound": bound,
        "alpha": float(own.mean()) / c**2,
        "gap": gap,
        "leak": float(delta),
        "mu": mu,
        "c": c,
        "N": N,
        "q": q,
        "d": d,
        "d_e": d_e,
        "H": H,
        "lipschitz": lip,
        "weight_norms": norms,
        "largest leak": largest,
    }
