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


def pytest_configure(config):
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
