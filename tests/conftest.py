import os

import pytest
import torch


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


_SUITE_TMP = []  # the suite's folders: Dask's scratch space, a bytecode cache (removed after)


def pytest_unconfigure(config):
    import shutil  # noqa: PLC0415

    for folder in _SUITE_TMP:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_configure(config):
    # Dask (here and in the processes the tests start) keeps its scratch space in a folder of the
    # suite's own, not in the temporary directory it would leave it in
    import tempfile  # noqa: PLC0415

    _SUITE_TMP.append(tempfile.mkdtemp(prefix="suite-dask-tmp-"))
    os.environ["DASK_TEMPORARY_DIRECTORY"] = _SUITE_TMP[-1]
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
    import tempfile  # noqa: PLC0415

    top = tempfile.gettempdir()
    return {f for f in os.listdir(top) if f.startswith(LEFTOVERS)}


@pytest.fixture(scope="session", autouse=True)
def leaves_no_temporary_folders():
    """The suite leaves no Dask scratch folder in the temporary directory (issue 42)."""
    before = _leftovers()
    yield
    left = _leftovers() - before
    assert not left, f"the tests left {sorted(left)} in the temporary directory"
