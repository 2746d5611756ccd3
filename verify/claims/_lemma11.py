"""Lemma 11's claim (verify/claims/lemma_11.py): its star-code cases, the prompts of target tuples
and the mistakes its faults plant (docs/derivations/lemma11.md)."""

from __future__ import annotations

import math
import types
from dataclasses import dataclass, replace
from typing import Any

import torch

from qstr.bounds.attention import lemma11
from qstr.constructions.attention import lemma11_adversarial_prompt, place_block
from qstr.constructions.codes import star_codebook
from qstr.constructions.links import TwoLayerNet
from qstr.constructions.task import gather_tokens
from qstr.verify.adversarial import lemma11_tuple_prompt
from qstr.verify.claim import Context

L11_D, L11_EPS = 4, 0.05


@dataclass(frozen=True, eq=False)
class L11Star:
    """Star codes (mu = 1/2), q = H = 2 and the net <w, z>, w = (u, u)/sqrt 2 written as the
    linear link's +- pair; its built module at the worst prompt (lemma11.md, tightness)."""

    N: int
    cons: Any
    net: Any
    error: float  # the built module's error at the worst prompt, target 0


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
    return (
        f"d = {L11_D}, eps = {L11_EPS}, RS-Hadamard codes: {cases}; star codes N = {stars}; "
        "the module's queries and the fused heads in chunks of N/3 + 1"
    )
