"""Map constructions to and from ``torch.nn.MultiheadAttention`` and plain state dicts.

Separate W_Q, W_K, W_V (torch.nn.MultiheadAttention) are what users train; the paper's
constructions merge W_QK. This module maps between the two parametrisations both ways.

Parametrisations (see :class:`~constructions.experiment_models.PracticalTransformer`):

* merged (Appendix A.1, :class:`~constructions.paper_models.MergedAttention`): scores
  z_i^T W_QK[h] z_j, head h outputs sum_j A^h_ij z_j, y = a^T relu(W h + b);
* practical: ``nn.MultiheadAttention(embed_dim=H D_e, num_heads=H, kdim=vdim=D_e,
  bias=False)`` on the query Z tiled H times, then ``hidden`` (Linear H D_e -> width) and
  ``readout`` (Linear width -> out_dim, with bias).

Functions

* :func:`to_multihead`   merged -> practical, exact: q_proj rows of head h =
  sqrt(D_e) [0 .. I (tile h) .. 0], k_proj rows of head h = W_QK[h] (so ``merged_qk()``
  returns W_QK up to rounding), v_proj = I per head, out_proj = I, hidden = (W, b),
  readout = (a, 0).
* :func:`from_multihead` practical -> merged: W_QK = ``merged_qk()``, the value path
  folded into W_eff = hidden.weight @ out_proj.weight @ blockdiag(V_h), b = hidden.bias,
  a = readout.weight; a nonzero readout bias is folded into one extra hidden unit
  (bias 1, zero weights, output weight = the bias) or refused (``readout_bias="raise"``).
* :func:`init_from_construction` a trainable practical model at the construction, plus
  relative Gaussian noise.
* :func:`construction_state` / :func:`load_construction_state` a plain dict for
  ``torch.save`` and ``torch.load(path, weights_only=True)``.
* :func:`load_multihead` / :func:`load_rnn` the trainable module of a file written by
  ``qstr construct transformer`` / ``qstr construct rnn``, in one call.

A state carries the toolkit's and torch's versions (``"versions"``, constructions/provenance.py);
loading one a newer toolkit wrote warns (``provenance.NewerFileWarning``), or, where it cannot be
read, says so in its one-line ValueError.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from qstr.constructions import validate
from qstr.constructions.attention import Construction
from qstr.constructions.experiment_models import PracticalTransformer
from qstr.constructions.paper_models import MergedAttention
from qstr.constructions.provenance import KEY, newer_note, versions, warn_if_newer
from qstr.constructions.recurrent import module_from_state

__all__ = [
    "load_multihead",
    "load_rnn",
    "to_multihead",
    "from_multihead",
    "init_from_construction",
    "construction_state",
    "load_construction_state",
    "logical_parameters",
]


def _model_of(obj) -> MergedAttention:
    if isinstance(obj, Construction):
        return obj.model
    if isinstance(obj, MergedAttention):
        return obj
    raise ValueError(f"expected a Construction or a MergedAttention, got {type(obj).__name__}")


def _fresh_generator() -> torch.Generator:
    # the weights are overwritten; a private generator keeps torch's global RNG untouched
    return torch.Generator().manual_seed(0)


def to_multihead(model: MergedAttention) -> PracticalTransformer:
    """A :class:`PracticalTransformer` (q = H heads, D_e kept, width = m) computing the same
    outputs.

    Query of head h: sqrt(D_e) * tile h of the tiled query = sqrt(D_e) z_i; key: W_QK[h] z_j;
    logit = <sqrt(D_e) z_i, W_QK[h] z_j> / sqrt(D_e) = z_i^T W_QK[h] z_j. Values V_h = I and
    out_proj = I return the concatenated sum_j A^h_ij z_j, on which hidden = (W, b) and
    readout = (a, 0) act. Vector outputs (out_dim > 1, a of shape (out_dim, m)) are
    supported. Same dtype and device as ``model``; reproduces it to rounding (~1e-15 relative
    in float64).
    """
    model = _model_of(model)
    D, H, m, out_dim = model.D_e, model.H, model.m, model.out_dim
    p = model.W_QK
    for name in ("W_QK", "W", "b", "a"):
        validate.finite_tensor(f"model.{name}", getattr(model, name).detach())
    mt = PracticalTransformer(
        D, H, width=m, out_dim=out_dim, generator=_fresh_generator(), dtype=p.dtype, device=p.device
    )
    E = H * D
    eye = torch.eye(D, dtype=p.dtype, device=p.device)
    with torch.no_grad():
        Wq, Wk, Wv = mt.projection_weights()
        Wq.zero_()
        for h in range(H):
            Wq[h * D : (h + 1) * D, h * D : (h + 1) * D] = math.sqrt(D) * eye
        Wk.copy_(model.W_QK.detach().reshape(E, D))
        Wv.copy_(eye.repeat(H, 1))
        mt.mha.out_proj.weight.copy_(torch.eye(E, dtype=p.dtype, device=p.device))
        if mt.mha.out_proj.bias is not None:  # bias=False in PracticalTransformer; be safe
            mt.mha.out_proj.bias.zero_()
        mt.hidden.weight.copy_(model.W.detach())
        mt.hidden.bias.copy_(model.b.detach())
        mt.readout.weight.copy_(model.a.detach().reshape(out_dim, m))
        mt.readout.bias.zero_()
    return mt


def from_multihead(mt: PracticalTransformer, *, readout_bias: str = "fold") -> MergedAttention:
    """The merged-parametrisation model computing the same outputs as ``mt``.

    W_QK[h] = ``mt.merged_qk()[h]`` (Q_h^T K_h / sqrt(D_e)); W = hidden.weight @
    out_proj.weight @ blockdiag(V_0, ..., V_{H-1}) (the paper's W_2NN with W_V absorbed);
    b = hidden.bias; a = readout.weight. The readout bias c has no place in
    a^T relu(W h + b): with ``readout_bias="fold"`` (default) a nonzero c adds one hidden
    unit with zero input weights and bias 1 (relu(1) = 1) and output weight c, so m grows
    by one and the outputs are unchanged; a zero c adds nothing. ``readout_bias="raise"``
    refuses a nonzero c. Same dtype and device as ``mt``.
    """
    if not isinstance(mt, PracticalTransformer):
        raise ValueError(f"mt must be a PracticalTransformer, got {type(mt).__name__}")
    if readout_bias not in ("fold", "raise"):
        raise ValueError(f"readout_bias must be 'fold' or 'raise', got {readout_bias!r}")
    mha = mt.mha
    if mha.bias_k is not None or mha.bias_v is not None or mha.add_zero_attn:
        raise ValueError(
            "mt.mha has bias_k/bias_v or add_zero_attn, "
            "which the merged parametrisation cannot express"
        )
    if mha.in_proj_bias is not None:
        raise ValueError(
            "mt.mha has input-projection biases, which the merged parametrisation cannot express"
        )
    D, H, width, out_dim = mt.D_e, mt.q, mt.width, mt.out_dim
    with torch.no_grad():
        W_QK = mt.merged_qk().detach().clone()
        _, _, Wv = mt.projection_weights()
        blockdiag = torch.block_diag(*[Wv[h * D : (h + 1) * D] for h in range(H)])  # (H D, H D)
        W = mt.hidden.weight @ mha.out_proj.weight @ blockdiag
        b = mt.hidden.bias.detach().clone()
        if mha.out_proj.bias is not None:
            b = b + mt.hidden.weight @ mha.out_proj.bias  # the out_proj bias enters before the ReLU
        a = mt.readout.weight.detach().clone()  # (out_dim, width)
        c = mt.readout.bias.detach().clone() if mt.readout.bias is not None else None
    for name, value in (("W_QK", W_QK), ("W", W), ("b", b), ("a", a)):
        validate.finite_tensor(f"mt ({name})", value)
    m = width
    if c is not None and bool((c != 0).any()):
        if readout_bias == "raise":
            raise ValueError(
                f"mt.readout.bias is nonzero (max |c| = {float(c.abs().max()):.3g}); "
                f"pass readout_bias='fold' "
                f"to fold it into one extra hidden unit"
            )
        W = torch.cat([W, W.new_zeros(1, W.shape[1])])
        b = torch.cat([b, b.new_ones(1)])
        a = torch.cat([a, c[:, None]], dim=1)
        m = width + 1
    model = MergedAttention(
        D, H, m, out_dim=out_dim, generator=_fresh_generator(), dtype=W_QK.dtype, device=W_QK.device
    )
    model.set_weights(W_QK=W_QK, W=W, b=b, a=a[0] if out_dim == 1 else a)
    return model


def logical_parameters(mt: PracticalTransformer) -> dict:
    """Name -> tensor view of every weight of ``mt``, with the q/k/v projections separate.

    For q = 1 torch stacks the projections in one ``in_proj_weight``; here they are the
    three views Wq, Wk, Wv either way, so noise is relative to each logical matrix.
    """
    Wq, Wk, Wv = mt.projection_weights()
    out = {"Wq": Wq, "Wk": Wk, "Wv": Wv, "out_proj.weight": mt.mha.out_proj.weight}
    if mt.mha.out_proj.bias is not None:
        out["out_proj.bias"] = mt.mha.out_proj.bias
    out.update(
        {
            "hidden.weight": mt.hidden.weight,
            "hidden.bias": mt.hidden.bias,
            "readout.weight": mt.readout.weight,
            "readout.bias": mt.readout.bias,
        }
    )
    return out


def init_from_construction(
    construction_or_model,
    *,
    noise: float = 0.0,
    generator: Optional[torch.Generator] = None,
    dtype=None,
) -> PracticalTransformer:
    """A trainable :class:`PracticalTransformer` at the construction, plus relative Gaussian noise.

    Each logical tensor P (Wq, Wk, Wv, out_proj.weight, hidden.weight, hidden.bias,
    readout.weight, readout.bias; see :func:`logical_parameters`) becomes
    P + noise * rms(P) * G with G i.i.d. N(0, 1) and rms(P) = ||P||_F / sqrt(numel P), so
    E ||P_new - P||_F^2 = noise^2 ||P||_F^2: relative Frobenius perturbation ~ ``noise``.
    Tensors that are exactly zero (the readout bias) stay zero. The noise is drawn with
    ``generator`` (required when ``noise > 0``, as for every random function here) on the
    generator's device, in the order listed, then converted to the parameter's device and
    dtype: the same generator state gives the same model. ``dtype`` (e.g. ``torch.float32`` for
    training on float32 prompts) casts the result; default: the construction's dtype.
    """
    mt = to_multihead(_model_of(construction_or_model))
    if dtype is not None:
        mt = mt.to(dtype=validate.float_dtype("dtype", dtype))
    noise = validate.positive_float("noise", noise, allow_zero=True)
    if generator is not None:
        validate.generator("generator", generator)
    if noise == 0:
        return mt
    if generator is None:
        raise ValueError("noise > 0 draws random numbers: pass generator=torch.Generator()")
    gen_device = generator.device
    with torch.no_grad():
        for P in logical_parameters(mt).values():
            rms = P.norm() / math.sqrt(P.numel())
            G = torch.randn(P.shape, generator=generator, dtype=torch.float64, device=gen_device)
            P.add_(noise * rms * G.to(dtype=P.dtype, device=P.device))
    return mt


# ------------------------------------------------------------------------- state dicts

_STATE_KEYS = (
    "config",
    "omega",
    "W_QK",
    "ffn",
    "mha_state_dict",
    "mha_config",
    "guarantee",
    "layout",
)


def construction_state(construction) -> dict:
    """A plain dict (tensors, numbers, strings, lists) for ``torch.save`` /
    ``torch.load(weights_only=True)``.

    Keys: ``config`` (N, d, q, d_e, c, alpha, D_e, H, m, out_dim, slots, kind), ``omega``
    (N, d_e), ``W_QK`` (H, D_e, D_e), ``ffn`` (a, W, b), ``mha_state_dict`` (of
    :func:`to_multihead`), ``mha_config`` (D_e, q, width, out_dim), ``guarantee``
    (``qstr.bounds.attention.Guarantee.as_dict``, incl. ``error_bound``; None for weights built
    without a bound), ``layout`` ([name, size] list), ``versions`` (``{"qstr-toolkit", "torch"}``
    that wrote it).
    Tensors are detached clones on their current device.
    """
    if not isinstance(construction, Construction):
        raise ValueError(f"construction must be a Construction, got {type(construction).__name__}")
    model = construction.model
    mt = to_multihead(model)
    cons, g = construction, construction.guarantee
    return {
        "config": {
            "N": int(cons.N),
            "d": int(cons.d),
            "q": int(cons.q),
            "d_e": int(cons.d_e),
            "c": float(cons.c),
            "alpha": float(cons.alpha),
            "D_e": int(model.D_e),
            "H": int(model.H),
            "m": int(model.m),
            "out_dim": int(model.out_dim),
            "slots": [int(s) for s in construction.slots],
            "kind": str(construction.kind),
        },
        "omega": construction.omega.detach().clone(),
        "W_QK": model.W_QK.detach().clone(),
        "ffn": {
            "a": model.a.detach().clone(),
            "W": model.W.detach().clone(),
            "b": model.b.detach().clone(),
        },
        "mha_state_dict": {k: v.detach().clone() for k, v in mt.state_dict().items()},
        "mha_config": {
            "D_e": int(mt.D_e),
            "q": int(mt.q),
            "width": int(mt.width),
            "out_dim": int(mt.out_dim),
        },
        "guarantee": None if g is None else g.as_dict(),
        "layout": [[str(n), int(s)] for n, s in construction.layout.blocks],
        KEY: versions(),
    }


def load_construction_state(state: dict) -> Tuple[MergedAttention, PracticalTransformer]:
    """Rebuild (MergedAttention, PracticalTransformer) from :func:`construction_state` output.

    Dtype and device follow the stored tensors (``torch.load(..., map_location=...)`` moves
    them). ``ValueError`` naming the first missing or inconsistent entry (and the newer toolkit
    that wrote the state, if one did); a state a newer toolkit wrote that loads warns
    (``provenance.NewerFileWarning``).
    """
    return _loaded(_rebuild, state, "the construction state")


def _loaded(rebuild, state, what: str):
    """``rebuild(state)``, warning when a newer toolkit wrote ``what`` and naming that toolkit in
    the ValueError of a state that cannot be read."""
    stored = state.get(KEY) if isinstance(state, dict) else None
    try:
        built = rebuild(state)
    except ValueError as exc:
        raise ValueError(f"{exc}{newer_note(stored)}") from None
    warn_if_newer(stored, what, stacklevel=3)  # at the caller of the public loader
    return built


def _rebuild(state) -> Tuple[MergedAttention, PracticalTransformer]:
    if not isinstance(state, dict):
        raise ValueError(
            f"state must be a dict from construction_state, got {type(state).__name__}"
        )
    missing = [k for k in _STATE_KEYS if k not in state]
    if missing:
        raise ValueError(f"state is missing keys {missing}")
    cfg, mcfg, ffn = state["config"], state["mha_config"], state["ffn"]
    for k in ("D_e", "H", "m", "out_dim"):
        if k not in cfg:
            raise ValueError(f"state['config'] is missing {k!r}")
    for k in ("D_e", "q", "width", "out_dim"):
        if k not in mcfg:
            raise ValueError(f"state['mha_config'] is missing {k!r}")
    for k in ("a", "W", "b"):
        if k not in ffn:
            raise ValueError(f"state['ffn'] is missing {k!r}")
    W_QK = state["W_QK"]
    if not isinstance(W_QK, torch.Tensor):
        raise ValueError("state['W_QK'] must be a tensor")
    validate.float_dtype("state['W_QK'].dtype", W_QK.dtype)
    D, H, m, out_dim = (int(cfg[k]) for k in ("D_e", "H", "m", "out_dim"))
    model = MergedAttention(
        D, H, m, out_dim=out_dim, generator=_fresh_generator(), dtype=W_QK.dtype, device=W_QK.device
    )
    model.set_weights(W_QK=W_QK, W=ffn["W"], b=ffn["b"], a=ffn["a"])
    mt = PracticalTransformer(
        int(mcfg["D_e"]),
        int(mcfg["q"]),
        width=int(mcfg["width"]),
        out_dim=int(mcfg["out_dim"]),
        generator=_fresh_generator(),
        dtype=W_QK.dtype,
        device=W_QK.device,
    )
    try:
        mt.load_state_dict(state["mha_state_dict"])
    except RuntimeError as err:
        raise ValueError(
            f"state['mha_state_dict'] does not fit mha_config {dict(mcfg)}: {err}"
        ) from None
    return model, mt


def _read_state(path, device, what: str):
    """``torch.load(path, weights_only=True)`` onto ``device``, or a ValueError with the cause: no
    such file, an unreadable one, a device this machine lacks, or not ``what`` (unpickling)."""
    if device is not None:
        validate.device_of("device", device)
    try:
        return torch.load(path, weights_only=True, map_location=device)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except OSError as exc:  # a folder, no permission
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except Exception as exc:  # not a torch file, or tensors of a device this machine lacks
        if "torch.cuda.is_available() is False" in str(exc):
            raise ValueError(
                f"{path} holds CUDA tensors but CUDA is not available on this machine; "
                "pass device='cpu'"
            ) from None
        raise ValueError(
            f"{path} is not {what} written by torch.save ({type(exc).__name__})"
        ) from None


def load_multihead(path, *, dtype=None, device=None) -> PracticalTransformer:
    """The trainable ``nn.MultiheadAttention`` model (Appendix A.1's merged W_QK split back into
    W_Q, W_K, W_V) of a file written by ``qstr construct transformer``
    (or ``torch.save(construction_state(c))``), in one call: read with ``weights_only=True``,
    rebuilt with the saved shapes (docs/formats.md), cast to ``dtype`` and moved to ``device`` when
    given."""
    state = _read_state(path, device, "a construction file")
    _, mt = _loaded(_rebuild, state, str(path))
    return mt if dtype is None else mt.to(dtype=validate.float_dtype("dtype", dtype))


def load_rnn(path, *, dtype=None, device=None):
    """The Prop 28 bidirectional RNN (``DeepTransitionBiRNN``: nn.Linear layers, projected states)
    of a file written by ``qstr construct rnn`` (or ``torch.save(rnn_state(c))``), in one call:
    read with ``weights_only=True``, cast to ``dtype`` (default: the stored float64) and moved to
    ``device``. Its codebook rides along as the buffer ``omega``:
    ``model(rnn_encoding(x, t, model.omega))`` (docs/formats.md)."""
    state = _read_state(path, device, "an RNN file")
    dtype = torch.float64 if dtype is None else validate.float_dtype("dtype", dtype)

    def rebuild(state):
        if not isinstance(state, dict) or not isinstance(state.get("omega"), torch.Tensor):
            raise ValueError(
                f"{path} is not an RNN file written by qstr construct rnn (no omega codebook)"
            )
        model = module_from_state(state, dtype=dtype, device=device)
        model.register_buffer("omega", state["omega"].to(dtype=dtype, device=device))
        return model

    return _loaded(rebuild, state, str(path))
