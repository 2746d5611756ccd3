"""The claims' index, generated from the registry: `qstr verify --list`, the table of
docs/claims-index.md."""

from __future__ import annotations

from typing import Dict, List, Sequence

from qstr.verify.claim import Claim, evidence_mix


def _functions(fns) -> List[str]:
    """'qstr.bounds.attention.lemma11' for each function (the module path users import)."""
    return [f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', repr(f))}" for f in fns]


def entry(claim: Claim) -> Dict[str, object]:
    """Everything the index says about one claim (its marks only when it has some)."""
    marks = {"marks": list(claim.marks)} if claim.marks else {}
    return {
        "id": claim.id,
        "ref_seed": claim.ref.seed,
        "ref_conference": claim.ref.conference,
        "statement": claim.statement,
        "checks": [c.name for c in claim.checks],
        "evidence": {c.name: c.evidence for c in claim.checks},
        "faults": [{"name": f.name, "breaks": list(f.breaks)} for f in claim.faults],
        "builds": _functions(claim.builds),
        "bounds": _functions(claim.bounds),
        "derivation": claim.derivation,
        "profiles": list(claim.profiles),
    } | marks


def text(claims: Sequence[Claim]) -> str:
    """The index as plain text, one block per claim (`qstr verify --list`)."""
    blocks = []
    for c in claims:
        e = entry(c)
        lines = [
            f"{c.id}  [{c.ref}]",
            f"  statement:  {c.statement}",
            "  checks:     " + "; ".join(f"{k.name} [{k.evidence}]" for k in c.checks),
            "  rests on:   " + evidence_mix([k.evidence for k in c.checks]),
            "  faults:     "
            + "; ".join(f"{f['name']} (breaks {', '.join(f['breaks'])})" for f in e["faults"]),
        ]
        if e["builds"]:
            lines.append("  builds:     " + ", ".join(e["builds"]))
        if e["bounds"]:
            lines.append("  bounds:     " + ", ".join(e["bounds"]))
        if c.derivation:
            lines.append(f"  derivation: {c.derivation}")
        if c.marks:
            lines.append("  marks:      " + ", ".join(c.marks))
        blocks.append("\n".join(lines))
    if len(claims) > 1:
        blocks.append(
            "not claims of their own:\n" + "\n".join(f"  {ref}: {why}" for ref, why in NOT_CLAIMS)
        )
    return "\n\n".join(blocks)


# The paper's results that are no claim of their own, and why (each with where it is checked, if
# anywhere): docs/claims-index.md prints them under the claims table, `qstr verify --list` after the
# index.
NOT_CLAIMS = (
    (
        "Prop 17",
        "the cover's Lipschitz constants are Lemmas 13 and 15's (`lemma-13`, `lemma-15`, read by "
        "`theorem4_bound`), its blocks Lemmas 14 and 16's (`lemma-14`, `lemma-16`, on built "
        "packings); `lemma-16` holds their sum under the covering Theorem 4 reads, and `thm-4` "
        "the assembled log-covering to an independent sympy expression",
    ),
    (
        "Lemma 18 and Cor 19",
        "Dudley's chaining and the symmetrisation bound hold for the truncated loss class over all "
        "of Theta, a statement over training sets that no finite computation exhausts; their "
        "algebra (constant 12, beta = tau / sqrt n, 2 Rad) is held to sympy in `thm-4`",
    ),
    (
        "Lemmas 20 and 34, the tails themselves",
        "E(loss - tau)_+ <= tau e^{-p} at Theorem 4's and Theorem 7's tau: the truncated mass "
        "there is below what Monte Carlo resolves, and the step from the moments is Markov's "
        "inequality "
        "(its algebra held in `thm-4` and `thm-7`); `lemma-20` and `lemma-34` check the facts the "
        "tails rest on, the output envelope or growth and the moments, on built modules",
    ),
    (
        "Cor 31, Lemma 32 and Cor 33",
        "the RNN class's covering, Rademacher bound and generalisation gap: the covering's "
        "constants are Lemmas 29 and 30's (`lemma-29`, `lemma-30`, read by `theorem7_bound`); "
        "the rest is the same symmetrisation as Cor 19, held to a 40-digit evaluation in `thm-7`",
    ),
)


def not_claims_markdown() -> str:
    """docs/claims-index.md's table of the results that are no claim of their own."""
    rows = ["| result | why it is not a claim of its own |", "|---|---|"]
    rows += [f"| {ref} | {_cell(why)} |" for ref, why in NOT_CLAIMS]
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(claims: Sequence[Claim]) -> str:
    """docs/claims-index.md's claims table: one row per claim, generated from the registry."""
    rows = [
        "| id | arXiv v1 / conference | checks | faults (each must make its checks fail) "
        "| derivation |",
        "|---|---|---|---|---|",
    ]
    for c in claims:
        here = c.derivation.removeprefix("docs/")  # the table lives in docs/claims-index.md
        derivation = f"[{c.derivation.split('/')[-1]}]({here})" if c.derivation else "-"
        rows.append(
            "| "
            + " | ".join(
                [
                    f"`{c.id}`",
                    _cell(str(c.ref)),
                    _cell("; ".join(f"{k.name} [{k.evidence}]" for k in c.checks)),
                    _cell("; ".join(f.name for f in c.faults)),
                    derivation,
                ]
            )
            + " |"
        )
    return "\n".join(rows)


if __name__ == "__main__":  # python -m qstr.verify.index: docs/claims-index.md's table
    from qstr.verify.catalog import paper_claims

    print(markdown(paper_claims()) + "\n\n" + not_claims_markdown())
