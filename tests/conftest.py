import os
import tempfile

import pytest
import torch

from qstr.bounds.transition import prop26_transition
from qstr.constructions.codes import rs_hadamard_codebook
from tests.fixtures import F64, rotated


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA; none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def gen():
    g = torch.Generator()
    g.manual_seed(1234)
    return g


@pytest.fixture(scope="module")
def book64():
    """The RS-Hadamard code of N = 64 (d_e = 16, mu = 1/2 attained), float64."""
    return rs_hadamard_codebook(64, dtype=F64)


@pytest.fixture(scope="module")
def transitions(book64):
    """The Prop 26 transitions of the claim's sizes (d = 3, q = 2, r_x = 2.5, eps = 0.1): exact
    products (RS-Hadamard) and approximate ones (rotated codes)."""
    books = (book64, rotated(book64, 26))
    return [(b, prop26_transition(b, 3, 2, eps=0.1, r_x=2.5)) for b in books]


SYSTEM_TMP = tempfile.gettempdir()  # where a user's runs write, which the suite leaves alone
_SUITE_TMP = []  # the suite's own temporary folder first, then a bytecode cache (removed after)


def pytest_unconfigure(config):
    import shutil  # noqa: PLC0415

    for folder in _SUITE_TMP:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_configure(config):
    # The suite's own temporary folder, removed after: what the tests, pytest's tmp_path (unless
    # --basetemp says otherwise) and the processes the tests start (TMPDIR) put in "the temporary
    # directory" goes there, so the leftover check below sees the suite's files only, never a
    # user's qstr reproduce running meanwhile
    _SUITE_TMP.append(tempfile.mkdtemp(prefix="qstr-suite-tmp-"))
    os.environ["TMPDIR"] = tempfile.tempdir = _SUITE_TMP[0]
    # Dask (here and in the processes the tests start) keeps its scratch space in a folder of the
    # suite's own, not in the temporary directory it would leave it in
    os.environ["DASK_TEMPORARY_DIRECTORY"] = os.path.join(_SUITE_TMP[0], "suite-dask")
    # Where no bytecode may be written beside the sources, the Python processes the tests start
    # (pytest --qstr, qstr verify) share a bytecode cache of the suite's own instead: each would
    # otherwise compile, and assertion-rewrite, every module it imports (about 3 s a pytest run)
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        _SUITE_TMP.append(tempfile.mkdtemp(prefix="suite-pycache-"))
        os.environ["PYTHONPYCACHEPREFIX"] = _SUITE_TMP[-1]
    # The suite is many small tensor operations: one intra-op thread is faster on 2 shared cores
    # (see verify.registry.cpu_threads) and makes timings independent of the machine's load.
    torch.set_num_threads(1)


LEFTOVERS = ("qstr-dask-", "qstr-test-dask-", "dask-scratch-space")  # what runs put in the tmp dir


def _leftovers():
    """What the runs the tests start left in the suite's temporary folder."""
    return {f for f in os.listdir(_SUITE_TMP[0]) if f.startswith(LEFTOVERS)}


@pytest.fixture(scope="session", autouse=True)
def leaves_no_temporary_folders():
    """The suite leaves no Dask scratch folder in its temporary folder (issue 42); a user's
    reproduce running meanwhile writes to the system's, which the suite does not look at."""
    yield
    left = _leftovers()
    assert not left, f"the tests left {sorted(left)} in the temporary directory"
