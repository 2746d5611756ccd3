"""docs/cluster.md's SLURM recipe: the ``SLURMCluster(...)`` it shows, built as written there,
submits the job script it shows (dask-jobqueue writes the script without SLURM)."""

import re
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "cluster.md"


def slurm_statement() -> str:
    """The ``cluster = SLURMCluster(...)`` statement of docs/cluster.md, as written there."""
    text = DOC.read_text()
    start = text.index("cluster = SLURMCluster(\n")
    return text[start : text.index("\n)\n", start) + 2]


def shown_job_script() -> str:
    """The job script docs/cluster.md shows (the bash block that starts with a shebang)."""
    text = DOC.read_text()
    start = text.index("```bash\n#!/usr/bin/env bash\n") + len("```bash\n")
    return text[start : text.index("```", start)]


def generic(script: str) -> str:
    """``script`` with the worker's Python and the scheduler's address as placeholders."""
    script = re.sub(r"^\S+/python[0-9.]*(?= -m distributed)", "PYTHON", script, flags=re.M)
    return re.sub(r"tcp://[^\s:]+:8786", "tcp://ADDRESS:8786", script).strip()


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(
            socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
        )  # as Dask binds: a closed port in TIME_WAIT is free
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def test_the_documented_slurm_cluster_submits_the_documented_job_script():
    SLURMCluster = pytest.importorskip("dask_jobqueue").SLURMCluster
    if not port_free(8786):
        pytest.skip("port 8786, which the documented scheduler listens on, is in use here")
    namespace = {"SLURMCluster": SLURMCluster}
    exec(slurm_statement(), namespace)  # starts the scheduler only; scale() would call sbatch
    cluster = namespace["cluster"]
    try:
        script = cluster.job_script()
        assert cluster.scheduler_address.endswith(":8786")
    finally:
        cluster.close()
    assert f"{sys.executable} -m distributed.cli.dask_worker {cluster.scheduler_address} " in script
    for line in [
        "#SBATCH -p cpu",
        "#SBATCH -A mylab",
        "#SBATCH --cpus-per-task=16",
        "#SBATCH -t 08:00:00",
        "source ~/venvs/qstr/bin/activate",
    ]:
        assert line in script.splitlines()
    assert (
        "--nthreads 1 " in script and "--nworkers 16 " in script
    )  # 16 single-threaded worker processes
    assert generic(script) == generic(shown_job_script())


def test_the_cluster_extra_is_the_one_the_docs_install():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["cluster"]
    assert extra == ["dask-jobqueue>=0.8.5"]
    assert 'pip install -e ".[cluster]"         # adds dask-jobqueue>=0.8.5' in DOC.read_text()
