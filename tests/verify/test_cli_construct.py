"""qstr construct transformer (tests/verify/claims/test_registered.py runs every claim)."""
import pytest
import torch

from qstr.verify.cli import main

def test_construct_transformer_file(tmp_path, capsys):
    path = tmp_path / "t.pt"
    assert main(["construct", "transformer", "--N", "32", "--d", "3", "--q", "2", "--eps", "0.01", "--out", str(path)]) == 0
    s = torch.load(path, weights_only=True)
    cfg = s["config"]
    assert (cfg["N"], cfg["d"], cfg["q"]) == (32, 3, 2) and cfg["alpha"] > 0 and cfg["c"] == pytest.approx((3 / 2) ** 0.5)
    assert s["omega"].shape == (32, cfg["d_e"])
    D_e = 3 + 3 * cfg["d_e"]
    assert s["W_QK"].shape == (2, D_e, D_e)
    assert set(s["ffn"]) == {"a", "W", "b"} and s["guarantee"]["error_bound"] <= 0.01 + 1e-12
    # score of query i and key j = z_i^T W_QK[h] z_j: only the (slot h, pos) block is nonzero
    W = s["W_QK"][0]
    pos, slot0 = slice(3, 3 + cfg["d_e"]), slice(3 + cfg["d_e"], 3 + 2 * cfg["d_e"])
    assert torch.allclose(W[slot0, pos], cfg["alpha"] * torch.eye(cfg["d_e"], dtype=W.dtype))
    assert float(W.abs().sum()) == pytest.approx(cfg["alpha"] * cfg["d_e"])
    assert "mha_state_dict" in s


@pytest.mark.parametrize("argv, needle", [
    (["construct", "transformer", "--N", "4", "--d", "2", "--q", "5", "--out", "x.pt"], "q must satisfy"),
    (["construct", "transformer", "--N", "8", "--d", "2", "--q", "1", "--eps", "0", "--out", "x.pt"], "eps"),
    (["construct", "transformer", "--N", "8", "--d", "2", "--q", "1", "--link", "hermite", "--out", "x.pt"], "--link"),
    (["construct", "lstm", "--N", "8", "--d", "2", "--q", "1", "--out", "x.pt"], "invalid choice"),
])
def test_construct_bad_arguments(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
