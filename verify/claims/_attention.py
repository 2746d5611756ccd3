"""Rounding terms of the attention constructions (Lemma 11, the single-head sparse average) and of
their nn.MultiheadAttention export, shared by the claims that run them
(docs/derivations/rounding.md); the averaging head's guarantee measured on the built head and
evaluated at 40 digits (docs/derivations/sparse-averaging.md)."""

from __future__ import annotations

import math
from typing import Any, Dict

import mpmath as mp
import torch

from qstr.constructions.encoding import transformer_encoding
from qstr.constructions.export import construction_state, load_construction_state
from qstr.verify.claim import Verdict, close, exact
from qstr.verify.claims._roundtrip import through_file
from qstr.verify.rounding import Rounding


def attention_rounding(g) -> Rounding:
    """Rounding of one attention output through its net (guarantee ``g``): N-term softmax sums,
    d_e-term scores scaled by alpha, the net's q d-input sums; each term is at most
    max(2, alpha) max(1, Lip) sqrt(H) r_x."""
    scale = max(2.0, g.alpha) * max(1.0, g.lipschitz) * math.sqrt(g.H) * g.r_x
    return Rounding(
        n=g.N + g.d_e + g.q * g.d + 4,
        scale=scale,
        what="(N + d_e + q d + 4) eps max(2, alpha) max(1, Lip) sqrt(H) r_x",
    )


def export_rounding(model, scale: float) -> Rounding:
    """Rounding of the exported nn.MultiheadAttention's forward pass (``scale``: |y|max + 1)."""
    return Rounding(
        n=2 * (model.W_QK.shape[-1] * model.H + model.m),
        scale=scale,
        what="2 (H D_e + m) eps (|y|max + 1)",
    )


def above_rounding(v: Verdict) -> float:
    """How far a verdict's |measured - bound| exceeds its rounding term: ranks the cases of a gap
    (against 0) or of an attained value (against its target)."""
    return abs(v.measured - v.bound) - v.rounding


# a record against the built module (Lemma 11, the averaging head): float64 scores are sums of
# <= D_e products of size <= A (relative rounding ~ D_e eps ~ 1e-13 at D_e <= 400), and the leak
# and bound amplify the gap's error by <= gap ~ 20; 1e-10 leaves room and sits far below any slip
# of a constant (a sign of mu moves the Lemma 11 gap by 2 mu / (1 - mu) >= 0.4 at its codes)
RECORD_RTOL = 1e-10
SA_DPS = 40  # the pins' working precision (decimal digits)


def rel_gap(got: float, want) -> float:
    """|got - want| / |want| in 40 digits (|got - want| where want = 0): a float64 closed form
    against its 40-digit evaluation."""
    with mp.workdps(SA_DPS):
        d = abs(mp.mpf(got) - want)
        return float(d / abs(want)) if want != 0 else float(d)


def file_record(module, measure):
    """(the guarantee saved in the module's construction file, what the reloaded module measures:
    ``measure(model, omega, c, q, r_x)``), the file written and read back as `qstr construct` and a
    user do (through_file)."""
    state = through_file(construction_state(module))
    loaded, cfg, saved = load_construction_state(state)[0], state["config"], state["guarantee"]
    r_x = saved["r_x"] if saved else math.nan
    return saved, measure(loaded, state["omega"], cfg["c"], cfg["q"], r_x)


def record_rows(label: str, recorded, measured: Dict[str, Any]):
    """(label, verdict) for each field the built module measures: the measured value against the
    recorded one, relative RECORD_RTOL (the weight norms one per tensor, per head for W_QK)."""
    if recorded is None:
        return [(f"{label}: no guarantee", exact("none", "the guarantee"))]
    pairs, what = [], "built vs recorded, relative"
    for key, value in measured.items():
        if key == "weight_norms":
            for name, norm in value.items():
                want = recorded[key][name]
                norms = zip(norm, want, strict=True) if isinstance(norm, list) else [(norm, want)]
                pairs += [(f"||{name}||", m, r) for m, r in norms]
        elif key in recorded:
            pairs.append((key, value, recorded[key]))
    return [
        (
            f"{label}: {key}",
            close(m, r, RECORD_RTOL * (max(abs(m), abs(r)) or 1.0), detail=what),
        )
        for key, m, r in pairs
    ]


# ---------------------------------------------------------------- the single averaging head


def sa_leak_mp(N, q, mu, A, spread: int = 2):
    """L = X / (1 + X), X = ((N - q) / q) e^{-A (1 - (2q - 1) mu)} at the working precision (call
    inside ``mpmath.workdps``; docs/derivations/sparse-averaging.md). ``spread`` = 1: the gap
    A (1 - q mu) of codes whose inner products are >= 0 (in-set scores >= A)."""
    lost = (2 * q - 1) if spread == 2 else q
    X = (mp.mpf(N) - q) / q * mp.exp(-mp.mpf(A) * (1 - lost * mp.mpf(mu)))
    return X / (1 + X)


def sa_bound_mp(N, q, mu, A, r_x, spread: int = 2):  # noqa: PLR0913 - the statement's symbols
    """r_x (2 L + W(L, rho)), rho = e^{spread A (q - 2) mu}, W = 2 max_{0 <= k <= q - 1}
    [(1 - L) k rho / (k rho + q - k) - k / q]_+ (docs/derivations/sparse-averaging.md, 'Bounding
    ||pi - w||_1'); ``spread`` = 1 for codes whose inner products are >= 0."""
    L = sa_leak_mp(N, q, mu, A, spread)
    rho = mp.exp(spread * mp.mpf(A) * max(q - 2, 0) * mp.mpf(mu))
    W = 2 * max(
        [mp.mpf(0)] + [(1 - L) * k * rho / (k * rho + q - k) - mp.mpf(k) / q for k in range(1, q)]
    )
    return mp.mpf(r_x) * (2 * L + W)


def sa_pin_rows(inp, N, q, mu, c, alpha, r_x):  # noqa: PLR0913 - the statement's symbols
    """(what, relative gap) of ``inp.error_bound`` and ``inp.leak_of`` (the sparse-average claim's
    bound functions) at one point against their 40-digit values; call inside ``mpmath.workdps``."""
    A = alpha * c * c
    bound = inp.error_bound(N=N, q=q, mu=mu, c=c, alpha=alpha, r_x=r_x)
    at = f"N={N} q={q} mu={mu:.4g} A={A:.4g}"
    return [
        (f"bound, {at}", rel_gap(bound, sa_bound_mp(N, q, mu, A, r_x))),
        (f"leak, {at}", rel_gap(inp.leak_of(N=N, q=q, mu=mu, A=A), sa_leak_mp(N, q, mu, A))),
    ]


def _identity_lipschitz(model, d: int) -> float:
    """The Lipschitz constant of the built head's output net on its x block: ||M||_op for
    relu(h) - relu(-h) pairs (b = 0, W and a negated in the second half: the net is h -> M h), else
    ||a||_op ||W_x||_op."""
    W = model.W.detach()[:, :d]
    a, b, m = model.a.detach(), model.b.detach(), model.m // 2
    if not bool(b.any()) and torch.equal(W[m:], -W[:m]) and torch.equal(a[:, m:], -a[:, :m]):
        return float(torch.linalg.matrix_norm(a[:, :m] @ W[:m], ord=2))
    return float(torch.linalg.matrix_norm(a, ord=2) * torch.linalg.matrix_norm(W, ord=2))


def _set_scores(model, omega, c: float, t: torch.Tensor) -> torch.Tensor:
    """The built head's scores (N, N) on the prompt whose every position reads ``t`` (x = 0)."""
    N, q = omega.shape[0], t.shape[-1]
    d = model.D_e - (q + 1) * omega.shape[1]
    x = torch.zeros(1, N, d, dtype=omega.dtype, device=omega.device)
    return model.scores(transformer_encoding(x, t.expand(1, N, q), omega, c=c))[0, 0]


def sa_measured(  # noqa: PLR0913 - the head, its codes and the parameters it was built at
    model, omega, c: float, q: int, r_x: float, sets
) -> Dict[str, Any]:
    """Each field of the averaging head's guarantee as the built head measures it: A = its score of
    a key against q copies of that key's code / q, mu = the largest |other score| / that score
    (the prompt whose position i reads (i, ..., i)); 'least gap' and 'largest leak': the smallest
    in-set minus largest out-of-set score and the largest out-of-set softmax mass at the prompts
    reading ``sets`` (the sets the search found extreme); gap, leak, bound: the derivation's at the
    measured (A, mu), 40 digits (docs/derivations/sparse-averaging.md)."""
    N, d_e = omega.shape
    d, idx = model.D_e - (q + 1) * d_e, torch.arange(N, device=omega.device)
    with torch.no_grad():
        S = _set_scores(model, omega, c, idx[:, None].expand(N, q)[None])
        own = S[idx, idx]
        mu = float(
            (
                S.masked_fill(torch.eye(N, dtype=torch.bool, device=S.device), 0).abs()
                / own[:, None]
            ).max()
        )
        gaps, leaks = [], []
        for T in sets:
            St, inset = (
                _set_scores(model, omega, c, T[None, None]),
                torch.zeros(N, dtype=torch.bool),
            )
            inset[T.cpu()] = True
            gaps.append(float((St[:, inset].amin(-1) - St[:, ~inset].amax(-1)).min()))
            leaks.append(float(torch.softmax(St, dim=-1)[:, ~inset].sum(-1).max()))
        norms = {"W_QK": [float(w.norm()) for w in model.W_QK], "W": float(model.W.norm())}
        norms.update(a=float(model.a.norm()), b=float(model.b.norm()))
        lip = _identity_lipschitz(model, d)
    A = float(own.mean()) / q
    with mp.workdps(SA_DPS):
        leak, bound = sa_leak_mp(N, q, mu, A), sa_bound_mp(N, q, mu, A, r_x)
        gap = mp.mpf(A) * (1 - (2 * q - 1) * mp.mpf(mu))
    return {
        "error_bound": float(bound),
        "alpha": A / c**2,
        "gap": float(gap),
        "leak": float(leak),
        "mu": mu,
        "c": c,
        "N": N,
        "q": q,
        "d": d,
        "d_e": d_e,
        "H": model.H,
        "lipschitz": lip,
        "weight_norms": norms,
        "least gap": min(gaps),
        "largest leak": max(leaks),
    }
