"""The claims' index, generated from the registry: `qstr verify --list`, the README's table."""

from __future__ import annotations

from typing import Dict, List, Sequence

from qstr.verify.claim import Claim, evidence_mix


def _functions(fns) -> List[str]:
    """'qstr.bounds.attention.lemma11' for each function (the module path users import)."""
    return [f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', repr(f))}" for f in fns]


def entry(claim: Claim) -> Dict[str, object]:
    """Everything the index says about one claim."""
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
    }


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
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(claims: Sequence[Claim]) -> str:
    """The README's claims table: one row per claim, generated from the registry."""
    rows = [
        "| id | arXiv v1 / conference | checks | faults (each must make its checks fail) "
        "| derivation |",
        "|---|---|---|---|---|",
    ]
    for c in claims:
        derivation = f"[{c.derivation.split('/')[-1]}]({c.derivation})" if c.derivation else "-"
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


if __name__ == "__main__":  # python -m qstr.verify.index: the README's claims table
    from qstr.verify.claims import all_claims

    print(markdown(list(all_claims().values())))
