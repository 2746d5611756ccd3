"""What the claim modules' tests share: each claim's honest inputs at the quick profile, built once
per session, and the look-ups the tests make on them (a check's verdict, a fault by name, the
broken inputs).

That every check holds on the honest inputs and every fault makes its checks fail is
test_registered.py's (through ``run_claim``, for every registered claim); the test files here
hold what is particular to one claim.
"""

from typing import Any, Callable, Dict, NamedTuple, Optional

import pytest

from qstr.verify.claim import Claim, Context, Fault, Verdict
from qstr.verify.claims import all_claims

QUICK = Context(profile="quick")


class Declared(NamedTuple):
    """A claim and its honest inputs at the quick profile; unpacks as ``claim, inputs``."""

    claim: Claim
    inputs: Any
    ctx = QUICK  # not a field: the context every look-up runs in

    def fault(self, name: str) -> Fault:
        """The fault called ``name``, else the one fault whose name contains it."""
        faults = self.claim.faults
        found = [f for f in faults if f.name == name] or [f for f in faults if name in f.name]
        assert len(found) == 1, (self.claim.id, name, [f.name for f in found or faults])
        return found[0]

    def broken(self, fault: str, inputs: Optional[Any] = None) -> Any:
        """The inputs (the honest ones by default) broken by the fault ``fault`` names."""
        return self.fault(fault).apply(self.inputs if inputs is None else inputs, self.ctx)

    def verdict(self, check: str, inputs: Optional[Any] = None) -> Verdict:
        """The verdict of the check called ``check`` on ``inputs`` (the honest ones by default)."""
        return self.claim.check_named(check).run(
            self.inputs if inputs is None else inputs, self.ctx
        )

    def verdicts(self) -> Dict[str, Verdict]:
        """Each quick check's verdict on the honest inputs, by name."""
        return {c.name: c.run(self.inputs, self.ctx) for c in self.claim.checks_in("quick")}

    def faults_leave_the_honest_inputs(self) -> None:
        """Every quick fault returns new inputs, and after all of them were applied every quick
        check still holds on the honest inputs (``run_claim`` runs the checks first: a fault
        that edits the honest inputs in place would go unseen there)."""
        for fault in self.claim.faults_in("quick"):
            assert fault.apply(self.inputs, self.ctx) is not self.inputs, fault.name
        for name, v in self.verdicts().items():
            assert v.holds, (name, v)


@pytest.fixture(scope="session")
def declared() -> Callable[[str], Declared]:
    """``declared(cid)``: the claim ``cid`` and its honest quick inputs, built once a session."""
    claims = all_claims()
    built: Dict[str, Declared] = {}

    def get(cid: str) -> Declared:
        if cid not in built:
            built[cid] = Declared(claims[cid], claims[cid].inputs(QUICK))
        return built[cid]

    return get
