"""The registry of claims: ``register``, the catalog ``REGISTRY`` (id -> claim, in the order
registered) and the loading of users' ``--claims`` modules.

The registry never imports a claim module: the claims import it (``register``), and the paper's
catalog is loaded by ``qstr.verify.catalog``. Claims are declared with the primitives of
``qstr.verify.claim`` (docs/claims.md) and run by ``qstr.verify.runner``, which is handed them.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from typing import Any, Dict, List, Optional, Tuple

# Re-exported: the names users, the CLI and the pytest plugin import from here (docs/claims.md
# imports register and run_claim from this module): the declaration primitives, the records and
# the runner.
from qstr.verify.claim import (  # noqa: F401
    PROFILES,
    UNDECLARED,
    Check,
    Claim,
    Context,
    Fault,
    Number,
    Ref,
    Vacuity,
    Verdict,
    evidence_mix,
)
from qstr.verify.results import TIMED_OUT, CheckResult, FaultResult, Result  # noqa: F401
from qstr.verify.runner import (  # noqa: F401
    ClaimTimeout,
    _error_line,
    _time_limit,
    run_check,
    run_claim,
)
from qstr.verify.threads import cpu_threads


REGISTRY: Dict[str, Claim] = {}


def register(claim: Claim) -> Claim:
    """Add ``claim`` to the registry (ids are unique); returns it. A claim declared piece by piece
    (``@claim.check``, ``@claim.fault``) is held complete by ``require_complete`` once its module
    is imported."""
    if not isinstance(claim, Claim):
        raise ValueError(f"register takes a qstr.verify.claim.Claim, got {type(claim).__name__}")
    if claim.id in REGISTRY:
        raise ValueError(f"claim id {claim.id!r} registered twice")
    REGISTRY[claim.id] = claim
    return claim


def load_claims(module: str) -> List[Claim]:
    """Import a user's module of claims (a dotted name or a path to a .py file); the claims it
    registers, in order.

    A file is imported under its module name (:func:`file_module`: ``ourpkg/claims.py`` is
    ``ourpkg.claims``), with the folder above its packages first on ``sys.path``, as Python runs a
    script: its sibling imports work, and a test that imports the same module gets the same
    module (nothing registered twice). A module already imported registers nothing new. Whatever
    the import raises (SyntaxError, an undefined name, a failing import, ``sys.exit``) becomes one
    ``ValueError`` naming the module, the error and its line."""
    before = set(REGISTRY)
    try:
        name = _import_file(module) if module.endswith(".py") else module
        if name in _LOADED:  # imported before: its claims again if the registry lost them
            return [
                c for c in _LOADED[name] if REGISTRY.setdefault(c.id, c) is c and c.id not in before
            ]
        importlib.import_module(name)
    except ValueError:
        raise
    except SyntaxError as exc:
        raise ValueError(f"--claims {module}: line {exc.lineno}: {exc.msg}") from None
    except SystemExit as exc:
        raise ValueError(f"--claims {module}: called sys.exit({exc.code}) while imported") from None
    except Exception as exc:  # noqa: BLE001 - a user's module may raise anything at import
        raise ValueError(f"--claims {module}: importing it raised {_where(exc)}") from None
    _LOADED[name] = require_complete([c for cid, c in REGISTRY.items() if cid not in before])
    return _LOADED[name]


_LOADED: Dict[str, List[Claim]] = {}  # module name -> the claims its import registered


def defined_in(module: str) -> List[Claim]:
    """The registered claims whose inputs are defined in ``module`` (a dotted name or a path to a
    .py file, as :func:`load_claims` takes it), in registry order."""
    name = file_module(module)[1] if module.endswith(".py") else module
    return [c for c in REGISTRY.values() if getattr(c.inputs_function, "__module__", "") == name]


def claim_inputs(claim_id: str, ctx: Optional[Context] = None) -> Any:
    """The honest inputs of a registered claim, built as ``qstr verify`` builds them at ``ctx``
    (default: quick, CPU, seed 0): the worst prompts, modules and cases its checks measure, for an
    ordinary test to read. The paper's claims are registered once ``qstr.verify.catalog`` is
    imported (``qstr.verify.inputs`` does it)."""
    if claim_id not in REGISTRY:
        raise ValueError(
            f"unknown claim id {claim_id!r}; known: {', '.join(REGISTRY) or 'none'} (the paper's "
            "claims are registered by importing qstr.verify.catalog)"
        )
    ctx = Context() if ctx is None else ctx
    with cpu_threads(ctx.threads):
        return REGISTRY[claim_id].inputs(ctx)


def check_claims_file(path: str) -> str:
    """The module name a --claims file ``path`` is imported under (:func:`file_module`);
    ValueError if there is no such file or its name is no Python module name (checked before
    anything is imported)."""
    if not os.path.isfile(path):
        raise ValueError(f"--claims {path}: no such file")
    _, name = file_module(path)
    if not all(part.isidentifier() for part in name.split(".")):
        raise ValueError(f"--claims {path}: {name!r} is not a Python module name")
    return name


def file_module(path: str) -> Tuple[str, str]:
    """(the folder to put first on ``sys.path``, the dotted module name) of the .py file ``path``:
    the folders above it that hold an ``__init__.py`` are its packages, as pytest names a test
    file under its rootdir (``ourpkg/claims.py`` is ``ourpkg.claims``, a lone ``claims.py`` is
    ``claims``), so a file and the module a test imports are one module."""
    folder, base = os.path.split(os.path.abspath(path))
    parts = [] if base == "__init__.py" else [base[: -len(".py")]]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    return folder, ".".join(parts)


def _import_file(path: str) -> str:
    """The module name of the file ``path``, importable: the folder above its packages first on
    ``sys.path``, and the name not taken by another file (else which two files, and what to
    pass instead)."""
    name = check_claims_file(path)
    root, _ = file_module(path)
    loaded = sys.modules.get(name)
    if loaded is not None:
        if not _same_file(getattr(loaded, "__file__", None), path):
            raise ValueError(
                f"--claims {path}: a module named {name!r} is already imported from "
                f"{getattr(loaded, '__file__', None) or 'elsewhere'}; {_instead(name)}"
            )
        return name
    if root not in sys.path:
        sys.path.insert(0, root)
    spec = importlib.util.find_spec(name)
    if spec is None or not _same_file(spec.origin, path):
        raise ValueError(
            f"--claims {path}: the name {name!r} is taken by "
            f"{getattr(spec, 'origin', None)}; {_instead(name)}"
        )
    return name


def _same_file(a: Optional[str], b: str) -> bool:
    return bool(a) and os.path.realpath(a) == os.path.realpath(b)


def _instead(name: str) -> str:
    """What to do when the module name of a --claims file belongs to another file."""
    return f"pass --claims {name} for that module, or rename this file (or its package)"


def _where(exc: BaseException) -> str:
    """'TypeError: message (file.py, line 3)': the error and the innermost frame of the user's
    code that raised it."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename]
    at = f" ({os.path.basename(frames[-1].filename)}, line {frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{at}"


def require_complete(claims: List[Claim]) -> List[Claim]:
    """Each claim has its inputs, a check and a fault (``ValueError`` naming the first that does
    not); returns ``claims``."""
    for claim in claims:
        claim.require_complete()
    return claims
