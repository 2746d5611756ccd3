"""A user's claim: Lemma 11's guarantee holds for the q-head attention built on MY codebook.

Run it beside the paper's claims:  qstr verify --claims docs/examples/my_codebook_claims.py
or as pytest items:                 pytest --qstr --qstr-claims docs/examples/my_codebook_claims.py
(docs/claims.md walks through it.)
"""

from dataclasses import dataclass

import torch

from qstr.bounds.attention import lemma11
from qstr.bounds.lemma11_leaks import worst_target
from qstr.constructions.attention import Construction, lemma11_adversarial_prompt
from qstr.constructions.codes import Codebook
from qstr.constructions.links import affine_net
from qstr.constructions.task import gather_tokens
from qstr.verify.claim import Claim, Context, Ref, Verdict, at_most, edited
from qstr.verify.registry import register
from qstr.verify.rounding import Rounding

N, D, Q, EPS, R_X = 64, 4, 2, 0.05, 2.0

claim = register(
    Claim(
        "my-lemma-11",
        Ref("Lemma 11"),
        statement=f"Lemma 11 on my sign codebook (N={N}, q=H={Q}): the worst prompt's error "
        f"<= the guarantee <= {EPS}",
        builds=(lemma11,),
        bounds=(lemma11,),
        derivation="docs/derivations/lemma11.md",
    )
)


def my_codebook(generator: torch.Generator) -> Codebook:
    """My codes: sign vectors of length 256, then the exact coherence is measured by Codebook."""
    signs = torch.randint(0, 2, (N, 256), generator=generator, dtype=torch.float64) * 2 - 1
    return Codebook.from_tensor(signs / 16.0)


@dataclass(frozen=True)
class Inputs:
    construction: Construction  # the module users get
    net: torch.nn.Module  # the Assumption 2 net it approximates (affine on the r_x-ball)
    direction: torch.Tensor  # sum of the net's per-head gradients: the worst prompt's direction
    bound: float  # the attached guarantee's error bound


@claim.inputs
def inputs(ctx: Context) -> Inputs:
    """Lemma 11's construction at eps on my codebook, for a net affine on the r_x-ball."""
    u = torch.randn(D, generator=ctx.generator("my-lemma-11/u"), dtype=torch.float64)
    w = torch.cat([u, u]) / u.norm() / 2
    net = affine_net(w, R_X)
    codes = my_codebook(ctx.generator("my-lemma-11/codes"))
    cons = lemma11(N, D, Q, net, eps=EPS, r_x=R_X, codebook=codes)
    return Inputs(cons, net, w.view(Q, D).sum(0), cons.guarantee.error_bound)


@claim.check("worst prompt within bound")
def worst_prompt_within_bound(inp: Inputs) -> Verdict:
    """The error at Lemma 11's worst prompt for an affine net is at most the guarantee."""
    cons = inp.construction
    x, t = lemma11_adversarial_prompt(cons, inp.direction, target=worst_target(cons), r_x=R_X)
    with torch.no_grad():
        err = float((inp.construction.predict(x, t) - inp.net(gather_tokens(x, t))).abs().max())
    return at_most(err, inp.bound, Rounding(n=N + 64, scale=R_X, what="(N + 64) eps r_x"))


@claim.check("guarantee meets eps")
def guarantee_meets_eps(inp: Inputs) -> Verdict:
    """The guarantee attached to the construction is at most the eps asked for."""
    return at_most(inp.bound, EPS)


# The same weights at half the attention scale alpha: the softmax leaks more than promised.
claim.fault(
    "scores halved",
    breaks=worst_prompt_within_bound,
    apply=edited(construction=lambda cons: cons.with_alpha(cons.alpha / 2)),
)
