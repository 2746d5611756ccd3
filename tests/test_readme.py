"""The README's Python example runs as written (a user copies it first)."""
import re
from pathlib import Path


def test_readme_python_example_runs(capsys):
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out.split()
    bound, alpha, mse = (float(v) for v in printed[:3])
    assert bound <= 0.01 and alpha > 0 and mse < 0.01


def test_formats_hand_rebuild_matches_load_multihead(tmp_path, monkeypatch):
    """docs/formats.md's plain-torch rebuild of a `qstr construct transformer` file gives the same outputs."""
    import torch

    from qstr.constructions.export import load_multihead
    from qstr.verify.cli import main

    assert main(["construct", "transformer", "--N", "16", "--d", "2", "--q", "2", "--out", str(tmp_path / "c.pt")]) == 0
    text = (Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    sd = torch.load(tmp_path / "c.pt", weights_only=True)
    Z = torch.randn(3, 16, sd["mha_config"]["D_e"], dtype=sd["W_QK"].dtype)
    monkeypatch.chdir(tmp_path)
    scope = {"Z": Z}
    exec(compile(block, "formats.md", "exec"), scope)
    with torch.no_grad():
        assert torch.allclose(scope["y_hat"], load_multihead(tmp_path / "c.pt")(Z), atol=1e-12)
