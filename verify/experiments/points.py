"""Points of the experiments (Appendix E): the protocol, one fully specified model per point,
its resume key, and the training member built from it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import torch

from qstr.constructions.codes import experimental_codebook, experimental_dim
from qstr.constructions.experiment_models import build_practical
from qstr.constructions.links import Mean, make_link
from qstr.constructions.published_models import BiasedTransformer, EncodedFFN
from qstr.constructions.task import QSTR
from qstr.verify.training import EpochStream, Member, OnlineStream


PROTOCOLS = ("paper", "published")


# enters every point_id: bump it when a change alters the numbers a point produces, so that
# rows computed under the old rules are not reused on resume
PROTOCOL_VERSION = 2  # 2: the paper protocol's FFN reads the encoded tokens (ffn_input)


MODELS = ("transformer", "rnn", "ffn")


MATMUL = ("float32", "tf32")


# How the FFN reads a prompt. "encoded": vec of the tokens (x_i, omega_i, omega_{t_i}), the
# input the Transformer and the RNN get, codes at c = 1; "encoded-scaled": the same at the
# Transformer's c = sqrt(d/q); "onehot": Theorem 6's concat(vec(x), onehot(t)) (an ablation).
FFN_INPUTS = ("encoded", "encoded-scaled", "onehot")


@dataclass(frozen=True)
class Protocol:
    """How a point is trained and tested.

    ``paper`` follows Appendix E: encoding prefactor c = sqrt(d/q), test
    prompts drawn from the training variant, AdamW weight decay as stated in the paper, a fresh
    task instance (u, codes) per seed, the FFN on the tokens the other two models read,
    vec(x_i, omega_i, omega_{t_i}) with c = 1 (``Point.ffn_input``; docs/experiments.md says
    why c = 1 and keeps Theorem 6's concat(vec(x), onehot(t)) as an ablation).

    ``published`` reproduces the published code's choices: c = 1; test prompts ALWAYS from
    simple-qSTR (even when training on qSTR -- the fault the paper protocol fixes); weight
    decay 0.01 in the sample-complexity runs (the default of its training function, which its
    script does not override; the paper states 0.1); one direction u for all N and seeds and
    one codebook per N for all seeds; the FFN on the flattened encoding vec(x, omega_i,
    omega_t); attention with biases (torch's default). Figure 2 follows its script (simple
    prompts, c = 1, weight decay 0.2).
    """

    name: str

    def __post_init__(self):
        if self.name not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {self.name!r}")

    @property
    def published(self) -> bool:
        return self.name == "published"

    def c(self, d: int, q: int) -> float:
        return 1.0 if self.published else math.sqrt(d / q)

    def test_variant(self, variant: str) -> str:
        return "simple" if self.published else variant

    def online_weight_decay(self, paper_value: float) -> float:
        return 0.01 if self.published else paper_value

    def label_for(self, figure: str) -> str:
        """The label printed on a figure (Figure 2 has its own published choices)."""
        if figure == "figure2":
            if self.published:
                return (
                    "protocol: PUBLISHED CODE (simple-1STR prompts for training and test, c = 1, "
                    "attention biases)"
                )
            return "protocol: paper (1STR prompts for training and test, c = sqrt(d/q))"
        if figure == "figure3" and self.published:
            return self.label + " -- no published Figure 3 script: its choices applied by analogy"
        return self.label

    @property
    def label(self) -> str:
        if self.published:
            return (
                "protocol: PUBLISHED CODE (test prompts always simple, c = 1, weight decay 0.01, "
                "shared u and codes, FFN on vec(encoding))"
            )
        return (
            "protocol: paper v2 (test prompts from the training variant, Transformer c = "
            "sqrt(d/q), FFN on the encoded tokens)"
        )


def as_protocol(p) -> Protocol:
    return p if isinstance(p, Protocol) else Protocol(str(p))


def derive_seed(*parts) -> int:
    """A 62-bit seed from any printable parts (stable across runs, machines and Python versions)."""
    h = hashlib.sha256(repr(tuple(parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") >> 2


def generator(device, *parts) -> torch.Generator:
    g = torch.Generator(device=torch.device(device))
    g.manual_seed(derive_seed(*parts))
    return g


TASK_VARIANT = {"1str": "general", "qstr": "general", "simple": "simple"}


@dataclass(frozen=True)
class Point:
    """One model of one experiment, fully specified (all of it enters ``point_id``)."""

    figure: str
    protocol: str
    model: str
    variant: str  # "1str" / "qstr" (general) or "simple"
    N: int
    q: int
    seed: int
    d: int = 10
    link: str = "linear"
    lr: float = 1e-3
    weight_decay: float = 0.1
    threshold: Optional[float] = 0.7
    check_every: int = 10
    n_test: int = 10_000
    batch_size: int = 64
    max_steps: int = 15_625
    width: int = 100  # transformer ReLU layer
    rnn_hidden: int = 500  # per direction (500 q in the paper)
    ffn_hidden: Tuple[int, ...] = (100, 1000)
    n_train: Optional[int] = None  # fixed training set (Figure 2); None: online
    epoch_loss_threshold: Optional[float] = None
    quick: bool = False
    matmul: str = "float32"  # "tf32": float32 matrix products on TF32 tensor cores (CUDA only)
    ffn_input: str = "encoded"  # FFN_INPUTS (the published protocol: "encoded" only)

    def __post_init__(self):
        self._check_sizes()
        if self.matmul not in MATMUL:
            raise ValueError(f"matmul must be one of {MATMUL}, got {self.matmul!r}")
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.variant not in TASK_VARIANT:
            raise ValueError(f"variant must be one of {tuple(TASK_VARIANT)}, got {self.variant!r}")
        if self.ffn_input not in FFN_INPUTS:
            raise ValueError(f"ffn_input must be one of {FFN_INPUTS}, got {self.ffn_input!r}")
        if as_protocol(self.protocol).published and self.ffn_input != "encoded":
            raise ValueError("the published protocol's FFN reads the encoding: ffn_input='encoded'")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite number > 0, got {self.lr!r}")
        if not (math.isfinite(self.weight_decay) and 0 <= self.lr * self.weight_decay < 1):
            raise ValueError(
                f"weight_decay must be >= 0 with lr * weight_decay < 1 (AdamW's decay factor "
                f"1 - lr weight_decay positive), got {self.weight_decay!r} at lr {self.lr!r}"
            )

    def _check_sizes(self) -> None:
        """Every size an integer >= 1 (seed >= 0), every threshold None or a finite number >= 0:
        a bad override is refused with its own name."""
        sizes = ["N", "q", "d", "check_every", "n_test", "batch_size", "max_steps", "width"]
        sizes += ["rnn_hidden"] + (["n_train"] if self.n_train is not None else [])
        for name in sizes:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if not self.ffn_hidden or any(
            isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in self.ffn_hidden
        ):
            raise ValueError(f"ffn_hidden must be integers >= 1, got {self.ffn_hidden!r}")
        for name in ("threshold", "epoch_loss_threshold"):
            v = getattr(self, name)
            ok = v is None or (
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            )
            if not ok or (v is not None and v < 0):
                raise ValueError(f"{name} must be None or a finite number >= 0, got {v!r}")
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)):
            raise ValueError(f"lr must be a finite number > 0, got {self.lr!r}")

    @property
    def encoding_c(self) -> float:
        """The prefactor c of the codes this point's model reads: the protocol's for the
        Transformer and for an "encoded-scaled" FFN, 1 otherwise (the RNN, the FFN)."""
        scaled = self.model == "transformer" or self.ffn_input == "encoded-scaled"
        return as_protocol(self.protocol).c(self.d, self.q) if scaled else 1.0

    @property
    def config(self) -> dict:
        c = dataclasses.asdict(self)
        c["ffn_hidden"] = list(self.ffn_hidden)
        c["d_e"] = experimental_dim(self.N)
        c["test_variant"] = self.test_variant
        c["c"] = self.encoding_c
        c["protocol_version"] = PROTOCOL_VERSION
        if (
            self.matmul == "float32"
        ):  # the default: ids of rows written before the field existed stay valid
            del c["matmul"]
        return c

    @property
    def test_variant(self) -> str:
        tv = as_protocol(self.protocol).test_variant(TASK_VARIANT[self.variant])
        return "simple" if tv == "simple" else self.variant

    @property
    def point_id(self) -> str:
        return config_id(self.config)

    @property
    def stack_group(self) -> tuple:
        """Points in one group are trained in one stack (same family, variant, protocol)."""
        return (self.figure, self.protocol, self.model, self.variant, self.quick, self.matmul)


def apply_overrides(points: Sequence[Point], overrides: Optional[dict]) -> List[Point]:
    """Replace fields of every point (e.g. ``{"rnn_hidden": 16, "n_test": 200}``): for small
    trial runs; the changed fields enter ``point_id``, so such rows never mix with others."""
    if not overrides:
        return list(points)
    names = {f.name for f in dataclasses.fields(Point)}
    bad = sorted(set(overrides) - names)
    if bad:
        raise ValueError(f"overrides has unknown fields {bad}; allowed: {sorted(names)}")
    fixed = {"figure", "protocol", "model", "variant", "N", "q", "seed"} & set(overrides)
    if fixed:
        raise ValueError(
            f"overrides cannot change {sorted(fixed)}; use the experiment's own options"
        )
    return [dataclasses.replace(p, **overrides) for p in points]


MAX_SEEDS = 1000  # seeds per run: more would build that many members before any training
SEED_LIMIT = 2**63  # seeds are non-negative 64-bit integers


def seeds_of(seeds, default: Sequence[int]) -> List[int]:
    """The seeds of a run: ``None`` (``default``), a count (seeds 0..count-1) or a list of
    distinct integers in [0, 2^63), at most MAX_SEEDS; anything else (a string, a float, a
    bool, a repeated seed) is a ValueError."""
    if seeds is None:
        return list(default)
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if not 1 <= seeds <= MAX_SEEDS:
            raise ValueError(
                f"seeds must be a count from 1 to {MAX_SEEDS} or a list of seeds, got {seeds}"
            )
        return list(range(seeds))
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise ValueError(f"seeds must be a count or a list of integers, got {seeds!r}")
    seeds = list(seeds)
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, numbers.Integral)]
    bad += [s for s in seeds if s not in bad and not 0 <= s < SEED_LIMIT]
    if bad or not seeds:
        raise ValueError(
            f"seeds must be integers in [0, 2^63), got {bad[0]!r}"
            if bad
            else "seeds must not be empty"
        )
    if len(set(seeds)) < len(seeds):
        twice = next(s for s in seeds if seeds.count(s) > 1)
        raise ValueError(f"seeds must be distinct: seed {twice} is given twice")
    if len(seeds) > MAX_SEEDS:
        raise ValueError(f"at most {MAX_SEEDS} seeds per run, got {len(seeds)}")
    return [int(s) for s in seeds]


def prompt_bytes(p: Point, dtype=torch.float32) -> int:
    """Bytes of the prompts a point's member holds: its test set and, for a fixed training set
    (Figure 2), that set (``QSTR.sample_bytes``); checked against memory before members are
    built (verify/experiments/run.py)."""
    task = QSTR(p.N, p.d, Mean(q=p.q, d=p.d))
    return task.sample_bytes(p.n_test, dtype) + (
        task.sample_bytes(p.n_train, dtype) if p.n_train else 0
    )


def _model(p: Point, d_e: int, kw: dict):
    """The point's model (Figure 1-3's three architectures), built with ``kw`` (generator, dtype,
    device)."""
    proto = as_protocol(p.protocol)
    D_e = p.d + (p.q + 1) * d_e
    if p.model == "transformer":
        if proto.published:
            return BiasedTransformer(D_e, p.q, p.width, **kw)
        return build_practical("transformer", N=p.N, d=p.d, q=p.q, d_e=d_e, width=p.width, **kw)
    if p.model == "rnn":
        return build_practical(
            "rnn", N=p.N, d=p.d, q=p.q, d_e=d_e, hidden=p.rnn_hidden, cell="gru", **kw
        )
    if p.ffn_input != "onehot":
        return EncodedFFN(p.N, D_e, tuple(p.ffn_hidden), **kw)
    return build_practical(
        "ffn",
        N=p.N,
        d=p.d,
        q=p.q,
        d_e=d_e,
        hidden=tuple(p.ffn_hidden),
        task=TASK_VARIANT[p.variant],
        **kw,
    )


def model_bytes(p: Point, dtype=torch.float32) -> int:
    """Bytes a point's member holds for its model while training: weights, gradients and
    AdamW's two moments, counted on the meta device (nothing is allocated)."""
    key = config_id({**p.config, "seed": 0})  # the seed changes the weights, not their count
    if key not in _PARAMETERS:
        kw = dict(generator=None, dtype=torch.float32, device=torch.device("meta"))
        model = _model(p, experimental_dim(p.N), kw)
        _PARAMETERS[key] = sum(t.numel() for t in model.parameters())
    return 4 * _PARAMETERS[key] * torch.empty((), dtype=dtype).element_size()


_PARAMETERS: dict = {}  # parameter counts by configuration less the seed (model_bytes)


def build_member(p: Point, *, device="cpu", dtype=torch.float32):
    """The :class:`verify.training.Member` of a point: task instance, model, streams, test set."""
    proto = as_protocol(p.protocol)
    device = torch.device(device)
    d_e = experimental_dim(p.N)
    # task instance: u (link directions) and positional codes omega
    if proto.published:  # one u for all N and seeds, one codebook per N for all seeds
        g_link = generator(device, "published-u", p.figure, p.link, p.q, p.d)
        g_code = generator(device, "published-codes", p.figure, p.N)
    else:
        g_link = generator(device, "u", p.figure, p.link, p.variant, p.N, p.q, p.d, p.seed)
        g_code = generator(device, "codes", p.figure, p.variant, p.N, p.q, p.seed)
    link = make_link(p.link, p.q, p.d, generator=g_link)
    book, redraws = _codebook(p.N, g_code, device, dtype, distinct=not proto.published)
    omega = book.omega
    task = QSTR(p.N, p.d, link, variant=TASK_VARIANT[p.variant])
    test_task = QSTR(p.N, p.d, link, variant="simple" if p.test_variant == "simple" else "general")
    g_test = generator(device, "test", p.figure, p.test_variant, p.N, p.q, p.seed)
    tp = test_task.sample(p.n_test, generator=g_test, device=device, dtype=dtype)
    g_init = generator("cpu", "init", p.figure, p.model, p.variant, p.N, p.q, p.seed)
    kw = dict(generator=g_init, dtype=dtype, device=device)
    model = _model(p, d_e, kw)
    g_train = generator(device, "train", p.figure, p.variant, p.N, p.q, p.seed)
    if p.n_train is None:
        stream = OnlineStream(task, g_train, dtype=dtype)
    else:
        tr = task.sample(p.n_train, generator=g_train, device=device, dtype=dtype)
        stream = EpochStream(tr.x, tr.t, tr.y, generator(device, "shuffle", p.figure, p.N, p.seed))
    info = {
        "code_mu": book.mu,
        "code_pairs_above_half": book.params["n_violations"],
        "code_redraws": redraws,
    }
    return Member(
        model=model,
        stream=stream,
        test=(tp.x, tp.t, tp.y),
        omega=omega,
        c=p.encoding_c,
        threshold=p.threshold,
        lr=p.lr,
        weight_decay=p.weight_decay,
        tag=p,
        info=info,
    )


def _codebook(N: int, g, device, dtype, *, distinct: bool, tries: int = 1000):
    """The experiments' Rademacher codes, d_e = floor(5 ln N) (no coherence check, as in the
    paper). With ``distinct`` (paper protocol) a draw in which two positions get the SAME code is
    drawn again: such positions cannot be told apart by any model reading the codes, which puts
    a floor under the test MSE (at N = 5, d_e = 8 a draw has a repeated code with probability
    ~0.04; at the paper's N >= 25 below 0.01). Returns (codebook, number of redraws)."""
    for k in range(tries):
        book = experimental_codebook(N, generator=g, device=device, dtype=dtype)
        if not distinct or torch.unique(book.omega, dim=0).shape[0] == N:
            return book, k
    raise ValueError(
        f"no codebook with {N} distinct codes in {tries} draws (d_e = {experimental_dim(N)})"
    )


def config_id(config: dict) -> str:
    """The point_id of a configuration: the first 16 hex digits of the SHA-1 of its sorted JSON
    (a row is refused on read when its recorded configuration does not give its point_id)."""
    return hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
