"""Positional codebooks omega_1..omega_N of Assumption 3 (rademacher, experimental
d_e = floor(5 ln N), rs-hadamard) with their exact coherence mu, carried into the bounds.
Derivation: docs/derivations/codebooks.md.

This module builds the Rademacher codes (and the experiments' d_e = floor(5 ln N)) and re-exports
every codebook name (the path users have imported them from); the content lives by kind (issue 56):

* ``codebook.py``     the Codebook record, its file (save / load), require_coherence, the kinds;
* ``coherence.py``    the exact chunked coherence (coherence, coherence_report);
* ``rs_hadamard.py``  GF(2^m), the RS-Hadamard and star codes, the padded entry point.
"""

from __future__ import annotations

import importlib
import math
import warnings

import torch

from qstr.constructions.codebook import (
    BUILDABLE_KINDS,
    KINDS,
    Codebook,
    CodebookFileError,
    _fits,
    require_coherence,
)
from qstr.constructions.coherence import (
    UNIT_NORM_TOL,
    CoherenceReport,
    coherence,
    coherence_report,
)
from qstr.constructions.rs_hadamard import (
    IRREDUCIBLE,
    MAX_M,
    gf_mul_table,
    padded_rs_hadamard_codebook,
    rs_hadamard_codebook,
    rs_hadamard_coherence,
    rs_hadamard_dim,
    star_codebook,
)
from qstr.constructions.validate import (
    device_of,
    float_dtype,
    generator_on,
    positive_int,
    probability,
)

__all__ = [
    # codebook.py
    "KINDS",
    "BUILDABLE_KINDS",
    "Codebook",
    "CodebookFileError",
    "require_coherence",
    # coherence.py
    "UNIT_NORM_TOL",
    "CoherenceReport",
    "coherence",
    "coherence_report",
    # this module
    "rademacher",
    "coherent_rademacher",
    "experimental_dim",
    "experimental_codes",
    # rs_hadamard.py
    "IRREDUCIBLE",
    "MAX_M",
    "gf_mul_table",
    "rs_hadamard_dim",
    "rs_hadamard_coherence",
    "rs_hadamard_codebook",
    "star_codebook",
    "padded_rs_hadamard_codebook",
]


# --------------------------------------------------------------------------- rademacher


def rademacher(
    N: int, d_e: int, *, generator: torch.Generator, device=None, dtype=torch.float32
) -> torch.Tensor:
    """(N, d_e) i.i.d. entries +-1/sqrt(d_e), drawn with ``generator`` on ``device``
    (Assumption 3)."""
    N, d_e = positive_int("N", N), positive_int("d_e", d_e)
    device, dtype = device_of("device", device), float_dtype("dtype", dtype)
    generator_on("generator", generator, device)
    _fits(N, d_e, device, dtype)
    bits = torch.randint(0, 2, (N, d_e), generator=generator, device=device, dtype=dtype)
    return (2 * bits - 1) * (1 / math.sqrt(d_e))


def coherent_rademacher(
    N: int,
    d_e: int,
    *,
    mu_max: float = 0.5,
    generator: torch.Generator,
    device=None,
    dtype=torch.float32,
    max_tries: int = 20,
) -> Codebook:
    """Rademacher codes in ``d_e`` columns with measured coherence <= ``mu_max`` (Assumption 3
    when mu_max = 1/2): drawn with ``generator`` until the exact coherence is <= mu_max
    (``params['tries']``), at most ``max_tries`` times. The d_e at which one draw fails with
    probability <= delta is ``qstr.bounds.codebooks.rademacher_dim``, and
    ``qstr.bounds.codebooks.rademacher_codebook`` builds at it."""
    N, d_e = positive_int("N", N), positive_int("d_e", d_e)
    mu_max, max_tries = probability("mu_max", mu_max), positive_int("max_tries", max_tries)
    for tries in range(1, max_tries + 1):
        omega = rademacher(N, d_e, generator=generator, device=device, dtype=dtype)
        mu = coherence(omega)
        if mu <= mu_max:
            params = {"N": N, "d_e": d_e, "mu_max": mu_max, "tries": tries}
            return Codebook(omega, mu, "rademacher", params)
    raise ValueError(
        f"max_tries={max_tries} draws all had coherence > mu_max={mu_max} at d_e={d_e}; "
        f"increase d_e or max_tries"
    )


# --------------------------------------------------------------------------- experiments


def experimental_dim(N: int) -> int:
    """d_e = floor(5 ln N) (at least 1), the dimension of the paper's experiments."""
    N = positive_int("N", N)
    return max(1, math.floor(5 * math.log(N)))


def experimental_codes(
    N: int, *, generator: torch.Generator, device=None, dtype=torch.float32
) -> Codebook:
    """Rademacher codes at d_e = floor(5 ln N), NOT resampled: they may violate Assumption 3.

    ``params`` records this draw's pairs above 1/2 and whether it satisfies Assumption 3;
    ``qstr.bounds.codebooks.experimental_codebook`` adds the expected number of them.
    """
    d_e = experimental_dim(N)
    omega = rademacher(N, d_e, generator=generator, device=device, dtype=dtype)
    report = coherence_report(omega, 0.5)
    params = {
        "N": N,
        "d_e": d_e,
        "rule": "floor(5 ln N)",
        "n_violations": report.n_violations,
        "satisfies_assumption3": report.ok,
    }
    return Codebook(omega, report.mu, "experimental", params)


# Names that moved to qstr.bounds.codebooks (issue 56), loaded from there only when asked for:
# the two bounds with a DeprecationWarning; the builders that pick d_e by them (rademacher) or
# record their tail (experimental), and the entry point over every kind, without one.
_MOVED_TO_BOUNDS = ("rademacher_dim", "rademacher_pair_tail", "RADEMACHER_DIM_MAX")
_BUILT_IN_BOUNDS = ("rademacher_codebook", "experimental_codebook", "build_codebook")


def __getattr__(name: str):
    """The old path of a name that moved to ``qstr.bounds.codebooks`` (PEP 562). Loading the
    module by name here is the one way constructions reaches bounds, and only when asked."""
    if name not in _MOVED_TO_BOUNDS + _BUILT_IN_BOUNDS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home = "qstr.bounds.codebooks"
    if name in _MOVED_TO_BOUNDS:
        warnings.warn(
            f"{__name__}.{name} moved to {home}.{name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
    return getattr(importlib.import_module(home), name)
