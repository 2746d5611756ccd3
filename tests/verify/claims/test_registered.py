"""Every registered claim holds on the quick profile and its falsifier is caught; the collection
(verify/claims/__init__.py: all_claims, select) holds the foundation claims, each once.

One parametrised test over the whole registry, so a claim added to any ``verify/claims``
module is covered without touching this file.
"""

from pathlib import Path

import pytest

from qstr.verify.claims import all_claims, select
from qstr.verify.registry import Context, run_claim

CLAIMS = all_claims()
ROOT = Path(__file__).resolve().parents[3]
FOUNDATION = ("assumption-3", "lemma-40", "data-model")


def uncaught(r) -> str:
    """Why the falsifier was not caught: each fault left uncaught, the checks it should have broken
    and what they measured on its broken inputs."""
    out = []
    for f in r.faults:
        if f.caught:
            continue
        head = f"fault {f.name!r} (breaks {', '.join(f.breaks)}) not caught"
        out.append(head + (f": {f.error}" if f.error else ""))
        for k in f.checks:
            line = f"  {k.name}: measured {k.measured}, bound {k.relation} {k.bound}"
            out.append(line + (f", error {k.error}" if k.error else ""))
    return "\n".join(out) or r.falsifier


@pytest.mark.parametrize("cid", list(CLAIMS))
def test_claim_holds_and_falsifier_is_caught(cid, declared):
    """On the honest quick inputs the claim tests build once a session (conftest.py: declared),
    the same ``qstr verify`` builds: ``qstr verify`` itself builds them in test_cli.py and CI."""
    claim, inputs = declared(cid)
    r = run_claim(claim, Context(profile="quick"), inputs=inputs)
    assert r.error == "", r.error
    assert r.dtype in ("float32", "float64", "float32+float64") and r.device == "cpu"
    assert r.holds, r.detail
    assert r.falsifier_caught, uncaught(r)
    leaked = [c.name for c in r.checks if " at 0x" in c.detail or "<bound method" in c.detail]
    assert not leaked, f"a detail prints an object's repr, not its numbers: {leaked}"


@pytest.mark.gpu
@pytest.mark.parametrize("cid", [c.id for c in select("gpu")])
def test_gpu_profile_claim_holds_on_cuda(cid):
    """``qstr verify --profile gpu --device cuda``, one claim at a time: it holds, its falsifier
    is caught, and the record says where (cuda) and in which dtype it computed."""
    r = run_claim(CLAIMS[cid], Context(profile="gpu", device="cuda"))
    assert r.error == "", r.error
    assert r.holds, r.detail
    assert r.falsifier_caught, uncaught(r)
    rec = r.record()
    assert rec["device"] == "cuda" and rec["dtype"] in ("float32", "float64", "float32+float64"), (
        rec
    )


@pytest.mark.parametrize("cid", list(CLAIMS))
def test_claim_is_declared_with_references_functions_and_derivation(cid):
    """Both numberings, the public functions that build or bound its object, an existing
    derivation page, and checks no fault leaves untouched: each fault names checks of its claim."""
    c = CLAIMS[cid]
    assert c.ref.seed and c.ref.conference and c.statement
    # a definition (Definition 2) has no bound function, an upper bound no builder
    assert c.builds or c.bounds
    assert all(f.__module__.startswith("qstr.") for f in (*c.builds, *c.bounds))
    # a derivation page, or for the experiments' claims the protocol page docs/experiments.md
    assert c.derivation.startswith("docs/") and (ROOT / c.derivation).is_file(), c.derivation
    assert {n for f in c.faults for n in f.breaks} <= {k.name for k in c.checks}


@pytest.mark.parametrize("cid", list(CLAIMS))
def test_every_check_can_fail(cid):
    """Each check of the paper's claims is the target of at least one fault: a check no fault
    breaks is one whose failure was never seen."""
    c = CLAIMS[cid]
    untargeted = [k.name for k in c.checks if all(k.name not in f.breaks for f in c.faults)]
    assert not untargeted, untargeted
    assert all(k.name != "check" for k in c.checks), "a check is named for what it states"


def test_registry_has_foundation_claims():
    claims = all_claims()
    for cid in FOUNDATION:
        assert cid in claims


def test_list_profile():
    ids = [c.id for c in select("quick")]
    assert set(FOUNDATION) <= set(ids) and len(ids) == len(set(ids))
