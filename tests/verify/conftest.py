"""Shared fixtures of tests/verify: ``pytest ...`` run in this process (pytester), each run seeing
what a fresh ``python -m pytest`` would see, and the process left as it was found."""

import contextlib
import os
import subprocess
import sys

import pytest


def pytest_configure(config):
    # pytester's fixture without `pytest_plugins` (refused in a conftest below the rootdir's)
    if not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")


@contextlib.contextmanager
def _as_a_fresh_process(folder, profiles_too=True):
    """The claim registry as a fresh process has it (the paper's claims, no module loaded), no
    module of ``folder``'s .py files imported, hypothesis's default profile loaded and the qstr-*
    ones unregistered (with ``profiles_too``); after the block, the registry, those modules,
    hypothesis's profiles (the current one loaded again), the environment and torch's thread
    count as they were."""
    import torch  # noqa: PLC0415
    from hypothesis import settings  # noqa: PLC0415

    from qstr.verify import registry  # noqa: PLC0415

    saved = dict(registry.REGISTRY), dict(registry._LOADED)
    paper = {
        cid: c
        for cid, c in registry.REGISTRY.items()
        if getattr(c.inputs_function, "__module__", "").startswith("qstr.verify.claims.")
    }
    profiles, profile = dict(settings._profiles), settings.get_current_profile_name()
    environ, threads = dict(os.environ), torch.get_num_threads()
    hidden = {p.stem: sys.modules.pop(p.stem) for p in folder.glob("*.py") if p.stem in sys.modules}
    # the dicts changed in place: other modules hold them (all_claims() returns REGISTRY itself)
    registry.REGISTRY.clear()
    registry.REGISTRY.update(paper)
    registry._LOADED.clear()
    if profiles_too:
        settings.load_profile("default")
        for name in [n for n in settings._profiles if n.startswith("qstr-")]:
            del settings._profiles[name]
    try:
        yield
    finally:
        registry.REGISTRY.clear()
        registry.REGISTRY.update(saved[0])
        registry._LOADED.clear()
        registry._LOADED.update(saved[1])
        settings._profiles.clear()
        settings._profiles.update(profiles)
        settings.load_profile(profile)
        for name in set(os.environ) - set(environ):
            del os.environ[name]
        os.environ.update(environ)
        torch.set_num_threads(threads)
        sys.modules.update(hidden)


@pytest.fixture
def inner_pytest(request, tmp_path):
    """``inner_pytest(*args, cache=False)``: ``python -m pytest ARGS`` (``-p no:cacheprovider``
    unless ``cache``) started in ``tmp_path`` (``inner_pytest.path``), run in this process by
    pytester: a ``subprocess.CompletedProcess`` (returncode, stdout, stderr) without the
    interpreter's start and the import of torch and of the paper's claims each run. Each run starts
    from what a fresh process would see (:func:`_as_a_fresh_process`); what a run or the test
    registers is dropped after it."""
    # imported before pytester's snapshot of sys.modules, so that the runs share them and pytester
    # does not drop them after (a later import would make second copies of their classes)
    import qstr.verify.claims  # noqa: F401, PLC0415
    import qstr.verify.report  # noqa: F401, PLC0415
    import qstr.verify.strategies  # noqa: F401, PLC0415

    pytester = request.getfixturevalue("pytester")
    request.getfixturevalue("monkeypatch").chdir(tmp_path)
    pytester.syspathinsert(tmp_path)  # `python -m` puts the folder it starts in first on sys.path

    def run(*args, cache=False):
        args = [*(() if cache else ("-p", "no:cacheprovider")), *map(str, args)]
        with _as_a_fresh_process(tmp_path):
            out = pytester.runpytest_inprocess(*args)
        return subprocess.CompletedProcess(
            ["pytest", *args], int(out.ret), out.stdout.str() + "\n", out.stderr.str() + "\n"
        )

    run.path = tmp_path
    # the test's own registrations dropped after it (the current hypothesis profile kept meanwhile)
    with _as_a_fresh_process(tmp_path, profiles_too=False):
        yield run
