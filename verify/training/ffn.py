"""Full-batch gradient descent with weight decay for vec(x) FFNs on simple-1STR: the Definition 5
algorithms of Theorem 6, whose off-span first-layer weights decay like e^{-lambda tau}.
Derivation: docs/derivations/theorem6.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List

import torch
from torch import nn

from qstr.bounds.feedforward import orthonormal_row_basis
from qstr.constructions import validate
from qstr.constructions.paper_models import VecFFN

__all__ = [
    "SimpleData",
    "simple_1str_data",
    "make_vec_ffn",
    "FFNTrace",
    "fit_full_batch",
    "ffn_test_risk",
]


@dataclass(frozen=True, eq=False)
class SimpleData:
    """n simple-1STR prompts: x (n, N, d), t (n, 1) long, y (n, N) with y[i, :] = <u, x_i[t_i]>."""

    x: torch.Tensor
    t: torch.Tensor
    y: torch.Tensor
    u: torch.Tensor

    @property
    def X(self) -> torch.Tensor:
        """The training inputs vec(x^(i)) as rows: (n, N d)."""
        return self.x.reshape(self.x.shape[0], -1)


def simple_1str_data(
    n: int, N: int, d: int, u: torch.Tensor, *, generator: torch.Generator, dtype=torch.float64
) -> SimpleData:
    """Draw n prompts of simple-1STR with direction ``u`` (unit, shape (d,))
    on the generator's device."""
    n = validate.positive_int("n", n)
    N = validate.positive_int("N", N)
    d = validate.positive_int("d", d)
    dtype = validate.float_dtype("dtype", dtype)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    validate.finite_tensor("u", u)
    validate.shape("u", u, (d,))
    if abs(float(u.norm()) - 1.0) > 1e-6:
        raise ValueError(f"u must be a unit vector, got norm {float(u.norm())}")
    dev = generator.device
    x = torch.randn(n, N, d, generator=generator, dtype=dtype, device=dev)
    t = torch.randint(N, (n, 1), generator=generator, device=dev)
    target = x[torch.arange(n, device=dev), t[:, 0]]  # (n, d)
    y = (target @ u.to(dtype=dtype, device=dev))[:, None].expand(n, N).contiguous()
    return SimpleData(x=x, t=t, y=y, u=u.to(dtype=dtype, device=dev))


@dataclass
class FFNTrace:
    """What :func:`fit_full_batch` did.

    ``steps`` / ``times`` (tau = lr * step) / ``span_distance`` (||W_perp||_F / ||W||_F) /
    ``perp_norm`` (||W_perp||_F) / ``rel_grad`` at the recorded steps; ``predicted_perp`` is
    prod_k (1 - eta_k lambda) ||W_perp(0)||_F over the accepted steps (exact GD prediction;
    (1 - lr lambda)^step without backtracking) and ``exp_perp`` is e^{-lambda tau} ||W_perp(0)||_F,
    tau = sum_k eta_k. ``stopped`` is "tolerance" or "step cap"; ``rejected`` counts undone
    steps (backtracking), ``final_lr`` the step size at the end.
    """

    lr: float
    weight_decay: float
    tol: float
    max_steps: int
    steps: List[int] = field(default_factory=list)
    times: List[float] = field(default_factory=list)
    span_distance: List[float] = field(default_factory=list)
    perp_norm: List[float] = field(default_factory=list)
    predicted_perp: List[float] = field(default_factory=list)
    exp_perp: List[float] = field(default_factory=list)
    rel_grad: List[float] = field(default_factory=list)
    train_loss: List[float] = field(default_factory=list)
    stopped: str = ""
    final_step: int = 0
    final_lr: float = 0.0
    rejected: int = 0
    initial_norm: float = 0.0

    @property
    def max_decay_deviation(self) -> float:
        """max_k |perp(k) - predicted(k)| / ||W(0)||_F: how far the off-span part is from its law
        (relative to the initial layer, so that an (almost) empty off-span part, n = N d,
        reads 0)."""
        if not self.perp_norm or self.initial_norm == 0.0:
            return 0.0
        return (
            max(abs(a - b) for a, b in zip(self.perp_norm, self.predicted_perp, strict=True))
            / self.initial_norm
        )


ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


def make_vec_ffn(
    N: int,
    d: int,
    hidden,
    *,
    activation: str = "tanh",
    generator=None,
    dtype=torch.float64,
    device=None,
) -> VecFFN:
    """VecFFN(N, d, q=1, hidden, task="simple") with its hidden activations set to ``activation``.

    ``"relu"`` is VecFFN unchanged. ``"tanh"`` replaces every ``nn.ReLU`` by ``nn.Tanh``: the
    first layer still reads vec(x) (the only thing Theorem 6 restricts), but the objective is
    smooth, so gradient descent can reach a stationary point to a tight tolerance. With ReLU,
    GD on these tiny training sets stalls at kinks (a minimiser sitting on a kink has no zero
    gradient): rel = ||grad J|| / (lambda ||theta||) stays near 1e-1 (measured, N = d = 4, n = 8).
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    model = VecFFN(N, d, 1, hidden, task="simple", generator=generator, dtype=dtype, device=device)
    if activation != "relu":
        for i, layer in enumerate(model.net):
            if isinstance(layer, nn.ReLU):
                model.net[i] = ACTIVATIONS[activation]()
    return model


def _layers(model: VecFFN):
    """(linear layers, activation names) of model.net, or ValueError for other layer types."""
    lins, acts = [], []
    for layer in model.net:
        if isinstance(layer, nn.Linear):
            lins.append(layer)
        elif isinstance(layer, nn.ReLU):
            acts.append("relu")
        elif isinstance(layer, nn.Tanh):
            acts.append("tanh")
        else:
            raise ValueError(
                f"model.net may hold only Linear, ReLU and Tanh layers, got {type(layer).__name__}"
            )
    if any(lin.bias is None for lin in lins):
        raise ValueError("every Linear layer of model.net must have a bias")
    return lins, acts


def _objective_and_grads(lins, acts, Z: torch.Tensor, Y: torch.Tensor, lam: float):
    """Mean squared error, J = MSE + (lambda/2)||theta||^2 and grad J, by hand-written backprop.

    Parameters are ordered (W_1, b_1, W_2, b_2, ...). Equal to autograd (checked in the tests);
    written out because autograd's per-step overhead dominates on these tiny problems.
    """
    with torch.no_grad():
        return _backprop(lins, acts, Z, Y, lam)


def _backprop(lins, acts, Z, Y, lam):
    hs, outs = [], [Z]
    a = Z
    for k, lin in enumerate(lins):
        h = a @ lin.weight.T + lin.bias
        if k < len(acts):
            hs.append(h)
            a = torch.relu(h) if acts[k] == "relu" else torch.tanh(h)
            outs.append(a)
        else:
            a = h
    resid = a - Y
    mse = (resid * resid).mean()
    g = 2.0 * resid / resid.numel()
    grads = []
    for k in range(len(lins) - 1, -1, -1):
        lin = lins[k]
        inp = outs[k]
        grads.append(lin.bias.detach() * lam + g.sum(0))
        grads.append(g.T @ inp + lam * lin.weight.detach())
        if k > 0:
            g = g @ lin.weight
            h = hs[k - 1]
            g = g * (h > 0).to(g.dtype) if acts[k - 1] == "relu" else g * (1.0 - outs[k] * outs[k])
    grads.reverse()  # (W_1, b_1, W_2, b_2, ...)
    sq = sum(
        float((lin.weight.detach() ** 2).sum() + (lin.bias.detach() ** 2).sum()) for lin in lins
    )
    return float(mse), float(mse) + 0.5 * lam * sq, grads, math.sqrt(sq)


def fit_full_batch(
    model: VecFFN,
    data: SimpleData,
    *,
    weight_decay: float,
    lr: float,
    max_steps: int,
    tol: float = 1e-6,
    record_every: int = 10,
    backtrack: bool = True,
) -> FFNTrace:
    """Full-batch GD on J = mean squared error + (lambda/2) ||theta||^2 towards a stationary point.

    theta <- theta - eta_k (grad L_hat + lambda theta) for all parameters, eta_0 = ``lr``; stops
    when ||grad J||_F <= tol * lambda ||theta||_F ("tolerance") or after ``max_steps`` steps
    ("step cap"). With ``backtrack`` a step that increases J is undone and eta halved (GD at a
    too large step size oscillates instead of converging); every accepted step still multiplies
    the off-span part of W by (1 - eta_k lambda), so the prediction is prod_k (1 - eta_k lambda)
    and the training time tau = sum_k eta_k. Rejected steps count towards ``max_steps``.
    Records, every ``record_every`` steps (and at the first and last), the span distance of
    the first layer's x-columns against the training inputs and the predicted decay.
    Everything runs on the model's device in the model's dtype (float64 for the certified
    checks); ``data`` must live on the same device.
    """
    if not isinstance(model, VecFFN):
        raise ValueError(
            f"model must be a constructions.paper_models.VecFFN, got {type(model).__name__}"
        )
    if model.task != "simple" or model.q != 1 or model.out_dim is not None:
        raise ValueError("model must be VecFFN(N, d, q=1, task='simple') with scalar outputs")
    lam = validate.positive_float("weight_decay", weight_decay)
    lr = validate.positive_float("lr", lr)
    max_steps = validate.positive_int("max_steps", max_steps)
    tol = validate.positive_float("tol", tol)
    record_every = validate.positive_int("record_every", record_every)
    if lr * lam >= 1:
        raise ValueError(
            "lr * weight_decay must be < 1 (the decay factor 1 - lr lambda must be positive), "
            f"got {lr * lam}"
        )
    W = model.first_layer_x_weight()
    if data.x.shape[1:] != (model.N, model.d):
        raise ValueError(
            f"data.x must have shape (n, {model.N}, {model.d}), got {tuple(data.x.shape)}"
        )
    if data.x.dtype != W.dtype or data.x.device != W.device:
        raise ValueError(
            f"data ({data.x.dtype}, {data.x.device}) must match the model ({W.dtype}, {W.device})"
        )
    V = orthonormal_row_basis(data.X).to(dtype=W.dtype, device=W.device)
    trace = FFNTrace(lr=lr, weight_decay=lam, tol=tol, max_steps=max_steps)

    def perp() -> float:
        Wd = model.first_layer_x_weight().detach()
        return float(torch.linalg.matrix_norm(Wd - (Wd @ V.T) @ V)), float(
            torch.linalg.matrix_norm(Wd)
        )

    p0, trace.initial_norm = perp()
    state = {"factor": 1.0, "tau": 0.0}

    def record(step: int, loss: float, rel: float):
        p, w = perp()
        trace.steps.append(step)
        trace.times.append(state["tau"])
        trace.perp_norm.append(p)
        trace.span_distance.append(p / w if w > 0 else 0.0)
        trace.predicted_perp.append(p0 * state["factor"])
        trace.exp_perp.append(p0 * math.exp(-lam * state["tau"]))
        trace.rel_grad.append(rel)
        trace.train_loss.append(loss)

    lins, acts = _layers(model)
    params = [p for lin in lins for p in (lin.weight, lin.bias)]
    eta = lr
    with torch.no_grad():
        inputs = model.inputs(data.x, data.t)
        step = 0
        prev = None  # (J, parameter copies, eta) before the last step
        while True:
            loss, J, grads, pnorm = _objective_and_grads(lins, acts, inputs, data.y, lam)
            if backtrack and prev is not None and not J <= prev[0] + 1e-12 * abs(prev[0]):
                for p, old in zip(
                    params, prev[1], strict=True
                ):  # undo the step, halve the step size
                    p.copy_(old)
                state["factor"] /= 1.0 - prev[2] * lam
                state["tau"] -= prev[2]
                eta = prev[2] / 2
                loss, J, grads, pnorm = prev[3]
                trace.rejected += 1
                prev = None
            gnorm = math.sqrt(sum(float((g * g).sum()) for g in grads))
            rel = gnorm / (lam * pnorm) if pnorm > 0 else math.inf
            if not math.isfinite(loss) or not math.isfinite(gnorm):
                raise ValueError(f"training diverged at step {step} (loss {loss}); lower lr = {lr}")
            done = rel <= tol
            if step % record_every == 0 or done or step == max_steps:
                record(step, loss, rel)
            if done or step == max_steps:
                trace.stopped = "tolerance" if done else "step cap"
                trace.final_step = step
                trace.final_lr = eta
                return trace
            if backtrack:
                prev = (J, [p.detach().clone() for p in params], eta, (loss, J, grads, pnorm))
            for p, g in zip(params, grads, strict=True):
                p.sub_(eta * g)
            state["factor"] *= 1.0 - eta * lam
            state["tau"] += eta
            step += 1


@torch.no_grad()
def ffn_test_risk(
    model: VecFFN, u: torch.Tensor, *, samples: int, generator: torch.Generator, chunk: int = 8192
) -> tuple:
    """Mean and standard error of the squared error on fresh simple-1STR prompts with direction u.

    The per-prompt loss is the mean over the N positions (all positions share the label);
    prompts are the independent units.
    """
    samples = validate.positive_int("samples", samples, minimum=2)
    dtype = model.first_layer.weight.dtype
    vals = []
    done = 0
    while done < samples:
        B = min(chunk, samples - done)
        data = simple_1str_data(B, model.N, model.d, u, generator=generator, dtype=dtype)
        vals.append(((model(data.x, data.t) - data.y) ** 2).mean(dim=1))
        done += B
    v = torch.cat(vals).double()
    return float(v.mean()), float(v.std() / math.sqrt(v.numel()))
