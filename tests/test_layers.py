"""The one-way layering of the packages (constructions -> bounds -> verify), checked on imports."""
import subprocess
import sys

import pytest


def _modules_after(stmt: str) -> set:
    """The project modules loaded by ``stmt`` in a fresh interpreter."""
    code = f"{stmt}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return {m for m in out if m.split(".")[0] in ("constructions", "bounds", "verify")}


def test_registry_does_not_import_the_claims():
    loaded = _modules_after("import verify.registry")
    assert not any(m.startswith("verify.claims") for m in loaded), sorted(loaded)


@pytest.mark.parametrize("stmt", ["import verify.training", "import constructions.models", "import bounds.transformer"])
def test_lower_layers_do_not_reach_up(stmt):
    """Training uses constructions and bounds only; constructions and bounds never load verify."""
    loaded = _modules_after(stmt)
    allowed = {"verify", "verify.training"} if "training" in stmt else set()
    above = {m for m in loaded if m.split(".")[0] == "verify" and m not in allowed and not m.startswith("verify.training.")}
    assert not above, sorted(above)
