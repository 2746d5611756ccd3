"""Tests for verify/training/adamw.py: StackedAdamW against torch.optim.AdamW on each member
alone."""

import torch

from qstr.verify.training import StackedAdamW

DT = torch.float64


def test_stacked_adamw_matches_torch_and_keeps_padding_zero():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(3, 5, generator=g, dtype=DT)
    for lr in ([1e-2] * 3, [1e-2, 2e-3, 5e-2]):  # fused and explicit paths
        ref = [torch.nn.Parameter(w[i].clone()) for i in range(3)]
        opts = [torch.optim.AdamW([ref[i]], lr=lr[i], weight_decay=0.1) for i in range(3)]
        P = {"w": torch.cat([w, torch.zeros(3, 2, dtype=DT)], 1)}  # two zero-padded columns
        opt = StackedAdamW(P, torch.tensor(lr, dtype=DT), torch.full((3,), 0.1, dtype=DT))
        for _ in range(7):
            grad = torch.randn(3, 5, generator=g, dtype=DT)
            for i in range(3):
                ref[i].grad = grad[i].clone()
                opts[i].step()
            opt.step({"w": torch.cat([grad, torch.zeros(3, 2, dtype=DT)], 1)})
        assert torch.allclose(
            P["w"][:, :5], torch.stack([r.detach() for r in ref]), atol=1e-12, rtol=0
        )
        assert torch.equal(P["w"][:, 5:], torch.zeros(3, 2, dtype=DT))


def test_select_keeps_the_rows_as_new_leaves():
    """The kept members' parameters, moments and rates are the selected rows, and the parameters
    are leaves: no graph back to the old stack (it would keep that stack alive, and on CUDA tie
    the gradients to the stream the selection ran on)."""
    g = torch.Generator().manual_seed(1)
    P = {"w": torch.randn(4, 3, generator=g, dtype=DT).requires_grad_(True)}
    opt = StackedAdamW(
        P, torch.tensor([1e-2, 2e-2, 3e-2, 4e-2], dtype=DT), torch.full((4,), 0.1, dtype=DT)
    )
    opt.step({"w": torch.randn(4, 3, generator=g, dtype=DT)})
    before = {k: (opt.params[k].detach().clone(), opt.m[k].clone(), opt.v[k].clone()) for k in P}
    keep = torch.tensor([3, 1])
    opt.select(keep)
    for k, (p, m, v) in before.items():
        assert torch.equal(opt.params[k].detach(), p[keep])
        assert torch.equal(opt.m[k], m[keep]) and torch.equal(opt.v[k], v[keep])
        assert opt.params[k].grad_fn is None
    assert opt.lr.tolist() == [4e-2, 2e-2]
