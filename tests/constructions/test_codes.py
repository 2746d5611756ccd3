"""Positional codebooks (Assumption 3) at constructions/codes.py: the Rademacher and experimental
codes, and the module as the old path of every codebook name (issue 56 split its content into
codebook.py, coherence.py and rs_hadamard.py: tests/constructions/test_codebook.py,
test_coherence.py, test_rs_hadamard.py)."""

from __future__ import annotations

import inspect
import math
from fractions import Fraction

import pytest
import torch

from qstr.bounds.codebooks import rademacher_dim
from qstr.constructions import codebook, codes, rs_hadamard
from qstr.constructions import coherence as coherence_module
from qstr.constructions.codes import (
    build_codebook,
    coherence,
    coherence_report,
    experimental_codebook,
    experimental_dim,
    rademacher,
    rademacher_codebook,
    require_coherence,
    rs_hadamard_codebook,
)
from tests.fixtures import seeded


# --------------------------------------------------------------------------- the public path


# Every name codes.py defined before issue 56 split it by content (constructions/codebook.py,
# coherence.py, rs_hadamard.py), written out: the list this module's users import from.
PUBLIC = (
    "BUILDABLE_KINDS",
    "Codebook",
    "CodebookFileError",
    "CoherenceReport",
    "IRREDUCIBLE",
    "KINDS",
    "MAX_M",
    "UNIT_NORM_TOL",
    "coherence",
    "coherence_report",
    "coherent_rademacher",
    "experimental_codes",
    "experimental_dim",
    "gf_mul_table",
    "padded_rs_hadamard_codebook",
    "rademacher",
    "require_coherence",
    "rs_hadamard_codebook",
    "rs_hadamard_coherence",
    "rs_hadamard_dim",
    "star_codebook",
)
HOMES = (codebook, coherence_module, rs_hadamard)


def test_every_codebook_name_imports_from_codes_as_the_object_of_its_home():
    """codes.__all__ is the public names written out above; each is codes' own (the Rademacher
    and experimental codes) or the very object one of the split modules defines and lists in its
    __all__; the split modules list nothing codes does not."""
    assert sorted(codes.__all__) == sorted(PUBLIC)
    homes = {}
    for home in HOMES:
        for name in home.__all__:
            assert getattr(codes, name) is getattr(home, name), (home.__name__, name)
            homes.setdefault(name, []).append(home.__name__)
    assert all(len(where) == 1 for where in homes.values()), homes
    own = set(PUBLIC) - set(homes)
    assert own == {"rademacher", "coherent_rademacher", "experimental_dim", "experimental_codes"}


def test_moved_functions_and_classes_report_their_home_and_show_their_source():
    """A moved function or class reports the module that defines it, so introspection finds its
    source (``inspect.getsource`` of a class looks in the file of its ``__module__``); the old
    path still serves the same object."""
    for home in HOMES:
        for name in home.__all__:
            obj = getattr(home, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                assert obj.__module__ == home.__name__, (home.__name__, name)
                assert f"{name}" in inspect.getsource(obj), (home.__name__, name)
    assert codes.Codebook.from_tensor.__module__ == "qstr.constructions.codebook"


# --------------------------------------------------------------------------- rademacher codes


def test_rademacher_codebook_coherent_and_small_d_e_refused():
    cb = rademacher_codebook(500, generator=seeded(1))
    assert cb.kind == "rademacher" and cb.d_e == rademacher_dim(500, 1e-3) and cb.N == 500
    assert cb.mu <= 0.5 and cb.mu == coherence(cb.omega) and cb.params["tries"] >= 1
    assert torch.allclose(
        cb.omega.double().norm(dim=1), torch.ones(500, dtype=torch.float64), atol=1e-6
    )
    magnitudes = cb.omega.abs().unique()
    assert magnitudes.numel() == 1 and float(magnitudes) == pytest.approx(
        1 / math.sqrt(cb.d_e), rel=1e-7
    )
    with pytest.raises(ValueError, match=rf"d_e must be >= {cb.d_e}"):
        rademacher_codebook(500, d_e=cb.d_e - 1, generator=seeded(1))
    big = rademacher_codebook(50, d_e=400, generator=seeded(1), mu_max=0.4)
    assert big.d_e == 400 and big.mu <= 0.4


def test_rademacher_codebook_resamples_and_gives_up():
    # delta close to 1: one draw fails often, so some seeds need retries and max_tries=1 refuses
    outcomes = []
    for seed in range(12):
        try:
            cb = rademacher_codebook(300, delta=0.99, generator=seeded(seed), max_tries=1)
            outcomes.append(cb.mu <= 0.5)
        except ValueError as err:
            assert "max_tries" in str(err)
            outcomes.append("refused")
    assert "refused" in outcomes and True in outcomes
    retried = [
        rademacher_codebook(300, delta=0.99, generator=seeded(s)).params["tries"] for s in range(12)
    ]
    assert max(retried) > 1


def test_rademacher_codebook_tries_are_the_draws_a_fresh_generator_needs():
    """params['tries'] = the draws, replayed with a fresh generator, until mu <= mu_max."""
    book = rademacher_codebook(64, mu_max=0.5, delta=0.9, generator=seeded(8))
    g, draws = seeded(8), 0
    while True:
        draws += 1
        omega = rademacher(64, book.d_e, generator=g)
        if coherence(omega) <= 0.5:
            break
    assert book.params["tries"] == draws and torch.equal(omega, book.omega)


def test_rademacher_codebook_d_e_is_the_exact_rule():
    """rademacher_codebook's d_e is rademacher_dim(N, delta, mu_max); N = 1 needs d_e = 1."""
    book = build_codebook(2048, kind="rademacher", generator=seeded(3))
    assert book.d_e == rademacher_dim(2048, 1e-3, 0.5) and book.kind == "rademacher"
    assert rademacher_dim(1, 1e-3) == 1


# --------------------------------------------------------------------------- experiments


def test_experimental_codebook_violates_assumption3():
    assert experimental_dim(100) == 23 and experimental_dim(1) == 1 and experimental_dim(2) == 3
    cb = experimental_codebook(100, generator=seeded(0))
    assert cb.d_e == 23 and cb.kind == "experimental"
    rep = coherence_report(cb.omega, 0.5)
    assert cb.mu == rep.mu > 0.5
    assert 20 <= rep.n_violations <= 100 and cb.params["n_violations"] == rep.n_violations
    assert cb.params["expected_violations"] == pytest.approx(52.579, abs=1e-3)
    assert cb.params["satisfies_assumption3"] is False
    with pytest.raises(ValueError, match="Assumption 3"):
        require_coherence(cb)
    assert require_coherence(rs_hadamard_codebook(100)) <= 0.5


def test_experimental_record_matches_its_own_draw():
    """experimental_codebook(100)'s record (from experimental-encoding): d_e = 23 = floor(5 ln 100),
    n_violations, mu and satisfies_assumption3 as coherence_report measures them, and
    expected_violations = C(100, 2) 89104 / 2^23."""
    book = experimental_codebook(100, generator=seeded(11))
    rep = coherence_report(book.omega, 0.5)
    assert book.d_e == 23 == experimental_dim(100)
    assert book.params["n_violations"] == rep.n_violations and book.mu == rep.mu
    assert book.params["satisfies_assumption3"] == (rep.n_violations == 0)
    assert book.params["expected_violations"] == 4950 * float(Fraction(89104, 2**23))


# --------------------------------------------------------------------------- entry point, errors


def test_build_codebook_dispatch():
    rs = build_codebook(100)
    assert rs.kind == "rs-hadamard" and rs.d_e == 64
    padded = build_codebook(100, d_e=300)
    assert padded.d_e == 300 and padded.params["n"] == 16 and padded.params["k"] == 2
    assert padded.mu == coherence(padded.omega) <= 1 / 16
    assert (padded.omega[:, 256:] == 0).all()
    with pytest.raises(ValueError, match="d_e must be >= 64"):
        build_codebook(100, d_e=63)
    assert build_codebook(100, d_e=64).d_e == 64  # the boundary is allowed
    rad = build_codebook(100, kind="rademacher", generator=seeded(0))
    assert rad.kind == "rademacher" and rad.mu <= 0.5
    exp = build_codebook(100, kind="experimental", generator=seeded(0))
    assert exp.d_e == 23
    with pytest.raises(ValueError, match="d_e is fixed"):
        build_codebook(100, kind="experimental", d_e=30, generator=seeded(0))
    for kind in ("rademacher", "experimental"):
        with pytest.raises(ValueError, match="generator"):
            build_codebook(10, kind=kind)
    with pytest.raises(ValueError, match="kind"):
        build_codebook(10, kind="gaussian", generator=seeded(0))


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: rademacher(0, 3, generator=seeded(0)), "N"),
        (lambda: rademacher(3, 0, generator=seeded(0)), "d_e"),
        (lambda: rademacher(3, 3, generator=None), "generator"),
        (lambda: rademacher(3, 3, generator=seeded(0), dtype=torch.int32), "dtype"),
        (lambda: experimental_dim(0), "N"),
        (lambda: rademacher_codebook(10, delta=2.0, generator=seeded(0)), "delta"),
        (lambda: rademacher_codebook(10, mu_max=0.0, generator=seeded(0)), "mu_max"),
        (lambda: rademacher_codebook(10, max_tries=0, generator=seeded(0)), "max_tries"),
        (lambda: build_codebook(0), "N"),
        (lambda: build_codebook(10, kind="rademacher", delta=0, generator=seeded(0)), "delta"),
    ],
)
def test_bad_arguments_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ------------------------------------------------------------- reproducibility, defaults, cuda


def test_reproducible_and_seed_dependent():
    a = rademacher_codebook(200, generator=seeded(7)).omega
    b = rademacher_codebook(200, generator=seeded(7)).omega
    c = rademacher_codebook(200, generator=seeded(8)).omega
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(
        experimental_codebook(50, generator=seeded(2)).omega,
        experimental_codebook(50, generator=seeded(2)).omega,
    )
    assert torch.equal(rs_hadamard_codebook(300).omega, rs_hadamard_codebook(300).omega)


def test_assumption3_defaults_are_one_half_and_delta_1e3():
    """The documented defaults: mu = 1/2 (require_coherence, coherence_report, star_codebook,
    rademacher_codebook, build_codebook) and delta = 1e-3."""
    base = rs_hadamard_codebook(64, dtype=torch.float64)
    rad = build_codebook(16, kind="rademacher", generator=seeded(9))
    assert coherence_report(base.omega).threshold == 0.5
    assert codes.star_codebook(16).mu == 0.5 and require_coherence(base) == base.mu
    assert rad.params["mu_max"] == 0.5 and rad.params["delta"] == 1e-3
    assert rademacher_codebook(16, generator=seeded(9)).params == rad.params


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    cpu = rademacher_codebook(2000, generator=seeded(0))
    assert coherence(cpu.omega.cuda()) == cpu.mu
    rs = rs_hadamard_codebook(5000, device="cuda")
    assert rs.omega.is_cuda and coherence(rs.omega) == rs.mu == coherence(rs.omega.cpu())
    g = torch.Generator(device="cuda").manual_seed(0)
    x = rademacher(10, 5, generator=g, device="cuda")
    assert x.is_cuda
    with pytest.raises(ValueError, match="generator"):
        rademacher(10, 5, generator=seeded(0), device="cuda")
