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
