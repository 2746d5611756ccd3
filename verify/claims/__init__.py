"""Every claim the toolkit checks, one module per claim (a few tightly linked claims share one),
named for the result. Importing this package imports them in table order (the order of the
paper's sections) and holds each one complete; it is the one place that collects them. No claim
module imports another: helpers several claims use live in the ``_`` modules."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from qstr.verify import registry

# in table order, one claim module per line
from qstr.verify.claims import (  # noqa: F401  (importing a claim module registers its claims)
    assumption_3,
    data_model,
    assumption_1,
    assumption_2,
    lemma_12,
    rs_hadamard_codes,
    experimental_encoding,
    lemma_40,
    lemma_39,
    lemma_41,
    lemma_42,
    lemma_11,
    lemma_13_15,
    lemma_14_16,
    lemma_20,
    sparse_average,
    prop_21,
    prop_3,
    thm_4,
    export_roundtrip,
    figure_2,
    experiment_models,
    thm_6,
    lemma_22,
    lemma_24,
    lemma_23_25,
    prop_26,
    cor_27,
    prop_28,
    lemma_37,
    lemma_38,
    lemma_36,
    prop_8,
    thm_9,
    lemma_29_30,
    lemma_34,
    thm_7,
)
from qstr.verify.registry import PROFILES, REGISTRY, Claim  # noqa: F401  (REGISTRY: for imports)

registry.require_complete(list(registry.REGISTRY.values()))


def all_claims() -> Dict[str, Claim]:
    """Every registered claim by id, in table order."""
    return registry.REGISTRY


def select(profile: str, only: Optional[Sequence[str]] = None) -> List[Claim]:
    """The claims of ``profile`` (all of them when ``only`` is None), in registry order; ``only``
    keeps the order given and each id once."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    claims = registry.REGISTRY
    if only:
        unknown = [c for c in only if c not in claims]
        if unknown:
            raise ValueError(
                f"unknown claim id(s) {', '.join(unknown)}; known: {', '.join(claims)}"
            )
        return [claims[c] for c in dict.fromkeys(only)]
    return [c for c in claims.values() if profile in c.profiles]
