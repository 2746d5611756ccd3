"""Architecture families read into canonical, zero-padded blocks and stacked along a member axis.
Why padding leaves every member's trajectory unchanged: docs/experiments.md (batched training)."""

from __future__ import annotations

import copy
import math
from typing import Dict, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from qstr.constructions.experiment_models import PracticalFFN, PracticalRNN, PracticalTransformer
from qstr.constructions.layout import token_layout
from qstr.constructions.published_models import EncodedFFN
from qstr.verify.training.gru_scan import gru_scan
from qstr.verify.training.members import Member
from qstr.verify.training.stacked_linear import stacked_linear


def _place(t: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """``t`` written into the leading corner of a zero tensor of ``shape`` (prefix padding)."""
    out = torch.zeros(tuple(shape), dtype=t.dtype, device=t.device)
    out[tuple(slice(0, s) for s in t.shape)] = t
    return out


def _stack_padded(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    shape = [max(t.shape[i] for t in tensors) for i in range(tensors[0].dim())]
    return torch.stack([_place(t, shape) for t in tensors])


def _pad_prompts(x, t, y, N: int, q: int):
    """Pad one member's prompts to (., N, d), (., N, q) (index 0), (., N)."""
    n, Nm, d = x.shape
    if Nm < N:
        x = torch.cat([x, x.new_zeros(n, N - Nm, d)], 1)
        y = torch.cat([y, y.new_zeros(n, N - Nm)], 1)
        t = torch.cat([t, t.new_zeros(n, N - Nm, t.shape[2])], 1)
    if t.shape[2] < q:
        t = torch.cat([t, t.new_zeros(n, N, q - t.shape[2])], 2)
    return x, t, y


class _Family:
    """A stack of members of one architecture family: canonical blocks <-> modules, padded
    forward. Subclasses define ``canonical``, ``load``, ``member_meta`` and ``forward``."""

    name = "family"

    def __init__(self, members: Sequence[Member]):
        self.d = members[0].d
        self.Nmax = max(m.N for m in members)
        self.qmax = max(m.q for m in members)

    # per-member, unpadded
    def canonical(self, model: nn.Module) -> Dict[str, torch.Tensor]:
        raise NotImplementedError

    def load(self, model: nn.Module, blocks: Dict[str, torch.Tensor]) -> nn.Module:
        raise NotImplementedError

    def member_meta(self, member: Member) -> Dict[str, torch.Tensor]:
        return {}

    def forward(
        self, P: Dict[str, torch.Tensor], meta: Dict[str, torch.Tensor], x, t
    ) -> torch.Tensor:
        raise NotImplementedError

    def evaluate(
        self, P: Dict[str, torch.Tensor], meta: Dict[str, torch.Tensor], x, t
    ) -> torch.Tensor:
        """:meth:`forward` without gradients (the test evaluation); a family may compute the
        same function by a faster route here."""
        return self.forward(P, meta, x, t)

    def elements_per_prompt(self, P) -> int:
        """Rough count of activation elements per prompt and member in a forward pass."""
        raise NotImplementedError

    def evaluation_elements(self, P) -> int:
        """Rough count of activation elements per prompt of :meth:`evaluate` over the stack."""
        return next(iter(P.values())).shape[0] * self.elements_per_prompt(P)

    # shared: the token encoding of Appendix A.1 / B.1 on padded prompts
    def encoding_tables(self, member: Member, Dmax: int) -> Dict[str, torch.Tensor]:
        """pos (Nmax, Dmax) = c omega_i in the pos block; slot (qmax, Nmax, Dmax) = c omega_j in
        slot k's block; zero for padded positions, slots and coordinates."""
        om = member.omega
        N, d_e = om.shape
        q, d, c = member.q, member.d, member.c
        lay = token_layout(d, q, d_e)
        pos = om.new_zeros(self.Nmax, Dmax)
        pos[:N, lay["pos"]] = c * om
        slot = om.new_zeros(self.qmax, self.Nmax, Dmax)
        for k in range(q):
            slot[k, :N, lay.slot(k)] = c * om
        return {"pos_table": pos, "slot_table": slot}

    def encode(self, meta, x, t, Dmax: int) -> torch.Tensor:
        """Padded encodings (M, B, Nmax, Dmax) of padded prompts x (M, B, Nmax, d),
        t (M, B, Nmax, qmax)."""
        M, B, N, _ = x.shape
        z = F.pad(x, (0, Dmax - self.d)) + meta["pos_table"][:, None]
        slots = meta["slot_table"]  # (M, qmax, N, Dmax)
        flat = slots.reshape(M * self.qmax * N, Dmax)
        base = (torch.arange(M, device=x.device) * (self.qmax * N)).view(M, 1, 1)
        for k in range(self.qmax):
            z = z + flat[base + k * N + t[..., k]]
        return z * meta["pos_mask"][:, None, :, None]

    # stacking
    def stack(self, members: Sequence[Member]):
        blocks = [self.canonical(m.model) for m in members]
        P = {k: _stack_padded([b[k].detach() for b in blocks]).contiguous() for k in blocks[0]}
        metas = [self.member_meta(m) for m in members]
        meta = {k: torch.stack([mm[k] for mm in metas]) for k in metas[0]} if metas[0] else {}
        device = P[next(iter(P))].device
        Ns = torch.tensor([m.N for m in members], device=device)
        meta["N"] = Ns
        meta["pos_mask"] = (torch.arange(self.Nmax, device=device)[None] < Ns[:, None]).to(
            P[next(iter(P))].dtype
        )
        return P, meta

    def unstack(self, P: Dict[str, torch.Tensor], i: int, member: Member) -> nn.Module:
        """Member ``i``'s trained weights loaded into a deep copy of its model."""
        ref = self.canonical(member.model)
        blocks = {k: P[k][i][tuple(slice(0, s) for s in ref[k].shape)] for k in ref}
        return self.load(copy.deepcopy(member.model), blocks)


class TransformerFamily(_Family):
    """q-head attention, heads seeing the whole token
    (PracticalTransformer, optionally with biases).

    Blocks: Wq (H, D, H, D) [head, head row, query tile, token coord], Wk / Wv (H, D, D),
    Wo (H, D, H, D) [out head, out row, in head, in coord], biases (H, D), W1 (width, H, D),
    b1 (width,), W2 (out, width), b2 (out,). D = D_e (head_dim = D_e), H = q.
    """

    name = "transformer"

    def __init__(self, members):
        super().__init__(members)
        self.bias = members[0].model.mha.in_proj_bias is not None
        self.Dmax = max(m.model.D_e for m in members)

    def canonical(self, model):
        H, D = model.q, model.D_e
        Wq, Wk, Wv = model.projection_weights()
        b = {
            "Wq": Wq.reshape(H, D, H, D),
            "Wk": Wk.reshape(H, D, D),
            "Wv": Wv.reshape(H, D, D),
            "Wo": model.mha.out_proj.weight.reshape(H, D, H, D),
            "W1": model.hidden.weight.reshape(model.width, H, D),
            "b1": model.hidden.bias,
            "W2": model.readout.weight,
            "b2": model.readout.bias,
        }
        if self.bias:
            bq, bk, bv = model.mha.in_proj_bias.reshape(3, H, D)
            b.update(bq=bq, bk=bk, bv=bv, bo=model.mha.out_proj.bias.reshape(H, D))
        return b

    @torch.no_grad()
    def load(self, model, blocks):
        H, D = model.q, model.D_e
        E = H * D
        mha = model.mha
        if mha.in_proj_weight is not None:
            mha.in_proj_weight[:E] = blocks["Wq"].reshape(E, E)
            mha.in_proj_weight[E : 2 * E] = blocks["Wk"].reshape(E, D)
            mha.in_proj_weight[2 * E :] = blocks["Wv"].reshape(E, D)
        else:
            mha.q_proj_weight.copy_(blocks["Wq"].reshape(E, E))
            mha.k_proj_weight.copy_(blocks["Wk"].reshape(E, D))
            mha.v_proj_weight.copy_(blocks["Wv"].reshape(E, D))
        mha.out_proj.weight.copy_(blocks["Wo"].reshape(E, E))
        if self.bias:
            mha.in_proj_bias.copy_(
                torch.cat([blocks["bq"], blocks["bk"], blocks["bv"]]).reshape(-1)
            )
            mha.out_proj.bias.copy_(blocks["bo"].reshape(-1))
        model.hidden.weight.copy_(blocks["W1"].reshape(model.width, E))
        model.hidden.bias.copy_(blocks["b1"])
        model.readout.weight.copy_(blocks["W2"])
        model.readout.bias.copy_(blocks["b2"])
        return model

    def member_meta(self, member):
        meta = self.encoding_tables(member, self.Dmax)
        om = member.omega
        meta["tile_mask"] = (torch.arange(self.qmax, device=om.device) < member.q).to(om.dtype)
        meta["scale"] = om.new_tensor(1 / math.sqrt(member.model.D_e))
        return meta

    def elements_per_prompt(self, P):
        H, width = P["Wk"].shape[1], P["W1"].shape[1]
        return self.Nmax * (6 * H * self.Dmax + 2 * H * self.Nmax + 2 * width)

    def forward(self, P, meta, x, t):
        z = self.encode(meta, x, t, self.Dmax)  # (M, B, N, D)
        Wq = torch.einsum("mhrtc,mt->mhrc", P["Wq"], meta["tile_mask"])
        Q = torch.einsum("mbnc,mhrc->mbhnr", z, Wq)
        K = torch.einsum("mbnc,mhrc->mbhnr", z, P["Wk"])
        V = torch.einsum("mbnc,mhrc->mbhnr", z, P["Wv"])
        if self.bias:
            Q = Q + P["bq"][:, None, :, None, :]
            K = K + P["bk"][:, None, :, None, :]
            V = V + P["bv"][:, None, :, None, :]
        S = (Q @ K.transpose(-1, -2)) * meta["scale"].view(-1, 1, 1, 1, 1)
        keep = meta["pos_mask"][:, None, None, None, :] > 0
        S = S.masked_fill(~keep, float("-inf"))
        O = torch.softmax(S, dim=-1) @ V  # (M, B, H, N, D)
        out = torch.einsum("mbhnc,mohc->mbno", O, P["Wo"].flatten(1, 2))
        if self.bias:
            out = out + P["bo"].flatten(1)[:, None, None, :]
        M, B, N = out.shape[:3]
        W1 = P["W1"].flatten(2)  # (M, width, H*D)  -- (head, coord) order matches Wo's out axis
        hid = torch.relu(torch.einsum("mbno,mwo->mbnw", out, W1) + P["b1"][:, None, None, :])
        y = torch.einsum("mbnw,mkw->mbnk", hid, P["W2"]) + P["b2"][:, None, None, :]
        return y[..., 0]


class GRUFamily(_Family):
    """Bidirectional one-layer GRU with a linear readout (PracticalRNN, cell 'gru').

    Blocks: Wih (2, 3, Hd, D) [direction, gate r/z/n, unit, token coord], Whh (2, 3, Hd, Hd),
    bih / bhh (2, 3, Hd), Wr (out, 2, Hd), br (out,). The backward direction runs forward over
    each member's own reversed sequence (so padding never enters a real position's state).
    """

    name = "rnn"

    def __init__(self, members):
        super().__init__(members)
        self.Dmax = max(m.model.D_in for m in members)
        for m in members:
            if m.model.cell != "gru" or m.model.num_layers != 1:
                raise ValueError(
                    "batched RNN training supports PracticalRNN(cell='gru', num_layers=1)"
                )

    def canonical(self, model):
        r, H = model.rnn, model.hidden_size

        def both(name, shape):
            return torch.stack(
                [getattr(r, name).reshape(shape), getattr(r, name + "_reverse").reshape(shape)]
            )

        return {
            "Wih": both("weight_ih_l0", (3, H, model.D_in)),
            "Whh": both("weight_hh_l0", (3, H, H)),
            "bih": both("bias_ih_l0", (3, H)),
            "bhh": both("bias_hh_l0", (3, H)),
            "Wr": model.readout.weight.reshape(model.out_dim, 2, H),
            "br": model.readout.bias,
        }

    @torch.no_grad()
    def load(self, model, blocks):
        r, H = model.rnn, model.hidden_size
        for k, name in (
            ("Wih", "weight_ih_l0"),
            ("Whh", "weight_hh_l0"),
            ("bih", "bias_ih_l0"),
            ("bhh", "bias_hh_l0"),
        ):
            getattr(r, name).copy_(blocks[k][0].reshape(getattr(r, name).shape))
            getattr(r, name + "_reverse").copy_(blocks[k][1].reshape(getattr(r, name).shape))
        model.readout.weight.copy_(blocks["Wr"].reshape(model.out_dim, 2 * H))
        model.readout.bias.copy_(blocks["br"])
        return model

    def member_meta(self, member):
        meta = self.encoding_tables(member, self.Dmax)
        N = member.N
        rev = torch.arange(self.Nmax, device=member.omega.device)
        rev[:N] = N - 1 - rev[:N]
        meta["rev"] = rev
        return meta

    def elements_per_prompt(self, P):
        """Inputs in three layouts and the states per position; the gates of one position."""
        Hd = P["Whh"].shape[-1]
        return self.Nmax * (3 * self.Dmax + 2 * Hd) + 16 * Hd

    def forward(self, P, meta, x, t):
        z = self.encode(meta, x, t, self.Dmax)  # (M, B, N, D)
        M, B, N, D = z.shape
        rev = meta["rev"][:, None, :, None].expand(M, B, N, D)
        # (N, M*2, B, D): position-major, each member's two directions (the backward one over
        # its own reversed sequence) as groups of the scan
        zz = torch.stack([z, z.gather(2, rev)], 0).permute(3, 1, 0, 2, 4).reshape(N, M * 2, B, D)
        Hd = P["Whh"].shape[-1]
        WihT = P["Wih"].reshape(M * 2, 3 * Hd, D).transpose(1, 2)  # (M*2, D, 3Hd)
        WhhT = P["Whh"].reshape(M * 2, 3 * Hd, Hd).transpose(1, 2)  # (M*2, Hd, 3Hd)
        bih, bhh = (P[k].reshape(M * 2, 1, 3 * Hd) for k in ("bih", "bhh"))
        hs = gru_scan(zz, WihT, bih, WhhT, bhh)  # (M*2, N+1, B, Hd)
        Hs = hs[:, 1:].view(M, 2, N, B, Hd).transpose(2, 3)  # (M, 2, B, N, Hd)
        revh = meta["rev"][:, None, :, None].expand(M, B, N, Hd)
        hf, hb = Hs[:, 0], Hs[:, 1].gather(2, revh)
        y = (
            torch.einsum("mbnj,mkj->mbnk", hf, P["Wr"][:, :, 0])
            + torch.einsum("mbnj,mkj->mbnk", hb, P["Wr"][:, :, 1])
            + P["br"][:, None, None, :]
        )
        return y[..., 0]

    def evaluation_elements(self, P):
        """On CUDA one member at a time: its encodings, states and gates (both directions)."""
        if not P["Whh"].is_cuda:
            return super().evaluation_elements(P)
        # rounded up: cuDNN's workspace (every position's gates, both directions) and the output
        return self.Nmax * (3 * self.Dmax + 16 * P["Whh"].shape[-1]) + P["Whh"].shape[0] * self.Nmax

    def evaluate(self, P, meta, x, t):
        """On CUDA :meth:`forward_each` (torch's fused recurrent kernel, no per-position
        workspace); on the CPU :meth:`forward`."""
        return self.forward_each(P, meta, x, t) if x.is_cuda else self.forward(P, meta, x, t)

    @torch.no_grad()
    def forward_each(self, P, meta, x, t) -> torch.Tensor:
        """:meth:`forward` (Appendix E's bidirectional GRU) one member at a time through
        ``nn.GRU`` (cuDNN on CUDA, TF32 exactly when the matrix products allow it) on the
        member's own N positions; padding reads 0 (docs/experiments.md, "The test evaluation")."""
        M, B, N = x.shape[:3]
        Hd = P["Whh"].shape[-1]
        gru = nn.GRU(
            self.Dmax, Hd, batch_first=True, bidirectional=True, device="meta", dtype=x.dtype
        ).to_empty(device=x.device)  # no draw from the global RNG
        y = x.new_zeros(M, B, N)
        tf32 = torch.backends.cuda.matmul.allow_tf32
        with torch.backends.cudnn.flags(
            enabled=torch.backends.cudnn.enabled,
            benchmark=torch.backends.cudnn.benchmark,
            deterministic=torch.backends.cudnn.deterministic,
            allow_tf32=tf32,
        ):
            for m, n in enumerate(meta["N"].tolist()):
                one = {k: v[m : m + 1] for k, v in meta.items()}
                z = self.encode(one, x[m : m + 1], t[m : m + 1], self.Dmax)[0, :, :n]  # (B, n, D)
                for k, name in (
                    ("Wih", "weight_ih_l0"),
                    ("Whh", "weight_hh_l0"),
                    ("bih", "bias_ih_l0"),
                    ("bhh", "bias_hh_l0"),
                ):
                    for d, suffix in ((0, ""), (1, "_reverse")):
                        w = getattr(gru, name + suffix)
                        w.copy_(P[k][m, d].reshape(w.shape))
                out, _ = gru(z)  # (B, n, 2 Hd): forward then backward direction
                y[m, :, :n] = out @ P["Wr"][m, 0].reshape(-1) + P["br"][m, 0]
                del z, out
        return y


class FFNFamily(_Family):
    """Feedforward nets on all positions at once (PracticalFFN with one-hot t, or EncodedFFN).

    Blocks: first layer split by logical input axes -- PracticalFFN: Wx (h1, N, d) on vec(x) and
    Wt (h1, N, q, N) [position, slot, value] on onehot(t) (general) or (h1, q, N) (simple);
    EncodedFFN: Wz (h1, N, D_e) on vec(z). Then W{k} (out, in), b{k}; the last layer's rows
    are the N positions.
    """

    name = "ffn"

    def __init__(self, members):
        super().__init__(members)
        m0 = members[0].model
        self.mode = "encoded" if isinstance(m0, EncodedFFN) else m0.task
        if self.mode != "encoded" and any(m.model.t_encoding != "onehot" for m in members):
            raise ValueError("batched FFN training supports t_encoding='onehot'")
        if any(
            (isinstance(m.model, EncodedFFN) and "encoded" or m.model.task) != self.mode
            for m in members
        ):
            raise ValueError("all FFN members of one stack must share their input mode")
        self.Dmax = max(m.model.D_e for m in members) if self.mode == "encoded" else None
        self.depth = len(m0.hidden) + 1

    def canonical(self, model):
        lins = [l for l in model.net if isinstance(l, nn.Linear)]
        W0 = lins[0].weight
        h1 = W0.shape[0]
        if self.mode == "encoded":
            b = {"Wz": W0.reshape(h1, model.N, model.D_e)}
        else:
            N, d, q = model.N, model.d, model.q
            tshape = (h1, N, q, N) if self.mode == "general" else (h1, q, N)
            b = {"Wx": W0[:, : N * d].reshape(h1, N, d), "Wt": W0[:, N * d :].reshape(tshape)}
        b["b1"] = lins[0].bias
        for k, lin in enumerate(lins[1:], 2):
            b[f"W{k}"], b[f"b{k}"] = lin.weight, lin.bias
        return b

    @torch.no_grad()
    def load(self, model, blocks):
        lins = [l for l in model.net if isinstance(l, nn.Linear)]
        h1 = lins[0].weight.shape[0]
        if self.mode == "encoded":
            lins[0].weight.copy_(blocks["Wz"].reshape(h1, -1))
        else:
            lins[0].weight.copy_(
                torch.cat([blocks["Wx"].reshape(h1, -1), blocks["Wt"].reshape(h1, -1)], 1)
            )
        lins[0].bias.copy_(blocks["b1"])
        for k, lin in enumerate(lins[1:], 2):
            lin.weight.copy_(blocks[f"W{k}"])
            lin.bias.copy_(blocks[f"b{k}"])
        return model

    def member_meta(self, member):
        if self.mode == "encoded":
            return self.encoding_tables(member, self.Dmax)
        dev = member.test[0].device
        dt = member.test[0].dtype
        return {"slot_mask": (torch.arange(self.qmax, device=dev) < member.q).to(dt)}

    def elements_per_prompt(self, P):
        first = P["Wz"] if self.mode == "encoded" else P["Wt"]
        feats = first[0, 0].numel() + self.Nmax * self.d
        return feats + 2 * sum(P[f"b{k}"].shape[1] for k in range(1, self.depth + 1))

    def forward(self, P, meta, x, t):
        M, B, N, d = x.shape
        if self.mode == "encoded":
            z = self.encode(meta, x, t, self.Dmax)
            h = stacked_linear(z.reshape(M, B, -1), P["Wz"].flatten(2))
        else:
            h = stacked_linear(x.reshape(M, B, -1), P["Wx"].flatten(2))
            if self.mode == "general":
                oh = _one_hot(t, N, x.dtype) * meta["slot_mask"][:, None, None, :, None]
                oh = oh * meta["pos_mask"][:, None, :, None, None]
            else:
                oh = _one_hot(t[:, :, 0, :], N, x.dtype) * meta["slot_mask"][:, None, :, None]
            h = h + stacked_linear(oh.reshape(M, B, -1), P["Wt"].flatten(2))
        h = h + P["b1"][:, None, :]  # the bias last: the order of the stack's earlier einsums
        for k in range(2, self.depth + 1):
            h = stacked_linear(torch.relu(h), P[f"W{k}"], P[f"b{k}"])
        return h  # (M, B, Nmax): padded output rows are zero and never enter the loss


def _one_hot(t: torch.Tensor, N: int, dtype) -> torch.Tensor:
    """F.one_hot(t, N) as ``dtype`` without its host-side range check
    (capturable in a CUDA graph)."""
    return (t[..., None] == torch.arange(N, device=t.device)).to(dtype)


def family_of(member: Member) -> type:
    m = member.model
    if isinstance(m, PracticalTransformer):
        return TransformerFamily
    if isinstance(m, PracticalRNN):
        return GRUFamily
    if isinstance(m, (PracticalFFN, EncodedFFN)):
        return FFNFamily
    raise ValueError(f"no batched family for {type(m).__name__}")


def stack_key(member: Member) -> tuple:
    """Members with equal keys can share one stack."""
    m = member.model
    fam = family_of(member)
    if fam is TransformerFamily:
        extra = (m.mha.in_proj_bias is not None, m.width)
    elif fam is GRUFamily:
        extra = ()
    else:
        extra = ("encoded" if isinstance(m, EncodedFFN) else m.task, len(m.hidden))
    return (fam.__name__, type(member.stream).__name__, member.d) + extra
