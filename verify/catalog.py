"""The paper's catalog: the one module of the toolkit's core that imports the paper's claims
(``qstr.verify.claims``), so that the registry and the runner never do.

The CLI, the pytest plugin and ``qstr.verify.inputs`` ask here for the paper's claims; the
runner is handed them (docs/architecture.md, "The registry and the runner").
"""

from __future__ import annotations

from typing import Any, List, Optional

from qstr.verify import claims as paper  # importing it registers the paper's claims
from qstr.verify import registry
from qstr.verify.claim import Claim, Context


def paper_claims() -> List[Claim]:
    """The paper's claims, in table order (the order of the paper's sections)."""
    return [c for c in registry.REGISTRY.values() if _is_papers(c)]


def claim_inputs(claim_id: str, ctx: Optional[Context] = None) -> Any:
    """The honest inputs of a registered claim, the paper's included, at ``ctx`` (default:
    quick, CPU, seed 0): what ``qstr.verify.inputs`` and the ``qstr_inputs`` fixture return."""
    return registry.claim_inputs(claim_id, ctx)


def _is_papers(claim: Claim) -> bool:
    """Whether ``claim`` is declared in a module of the paper's catalog."""
    module = getattr(claim.inputs_function, "__module__", "") or ""
    return module.startswith(paper.__name__ + ".")
