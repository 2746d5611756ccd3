"""benchmarks/gpu_run.sh: its verify shards name every registered claim once (a claim left out
would never run on CUDA when a GPU is lent)."""

import re
from pathlib import Path

from qstr.verify.claims import all_claims

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_run.sh"


def test_gpu_shards_cover_every_claim_once():
    block = re.search(r"SHARDS=\((.*?)\n\)", SCRIPT.read_text(), re.S).group(1)
    ids = [i for line in re.findall(r'"([^"]*)"', block) for i in line.split()]
    assert sorted(ids) == sorted(all_claims()), set(all_claims()) ^ set(ids)
