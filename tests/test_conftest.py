"""The suite's own temporary folder (tests/conftest.py): what its leftover check looks at."""

import os
import tempfile

from tests.conftest import SYSTEM_TMP, _leftovers


def test_the_suite_writes_to_a_temporary_folder_of_its_own():
    assert os.path.commonpath([tempfile.gettempdir(), SYSTEM_TMP]) == SYSTEM_TMP
    assert tempfile.gettempdir() != SYSTEM_TMP and os.environ["TMPDIR"] == tempfile.gettempdir()


def test_a_users_reproduce_running_meanwhile_is_not_a_leftover(tmp_path):
    """A scratch folder in the system's temporary folder (a user's qstr reproduce) is not the
    suite's; one in the suite's folder is."""
    users = tempfile.mkdtemp(prefix="qstr-dask-", dir=SYSTEM_TMP)
    try:
        assert os.path.basename(users) not in _leftovers()
        ours = tempfile.mkdtemp(prefix="qstr-dask-")
        assert os.path.basename(ours) in _leftovers()
        os.rmdir(ours)
        assert os.path.basename(ours) not in _leftovers()
    finally:
        os.rmdir(users)
