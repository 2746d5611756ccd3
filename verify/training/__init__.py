"""Training for the claims and the experiments (Appendix E): streams of prompts, the one-model
loops, the stacked trainer of Figures 1-3, and the full-batch FFN fits of Theorem 6."""

from qstr.verify.training.adamw import StackedAdamW
from qstr.verify.training.families import (
    FFNFamily,
    GRUFamily,
    TransformerFamily,
    family_of,
    stack_key,
)
from qstr.verify.training.ffn import (
    FFNTrace,
    SimpleData,
    ffn_test_risk,
    fit_full_batch,
    make_vec_ffn,
    simple_1str_data,
)
from qstr.verify.training.loop import (
    FitResult,
    OnlineFit,
    fit_online,
    fit_until_threshold,
    position_risk,
)
from qstr.verify.training.members import Member, MemberResult
from qstr.verify.training.stack import StackOptions, train_stack
from qstr.verify.training.streams import EpochStream, OnlineStream

__all__ = [
    "EpochStream",
    "FFNFamily",
    "FFNTrace",
    "FitResult",
    "GRUFamily",
    "Member",
    "MemberResult",
    "OnlineStream",
    "SimpleData",
    "StackedAdamW",
    "TransformerFamily",
    "family_of",
    "ffn_test_risk",
    "fit_full_batch",
    "fit_online",
    "OnlineFit",
    "fit_until_threshold",
    "make_vec_ffn",
    "position_risk",
    "simple_1str_data",
    "stack_key",
    "StackOptions",
    "train_stack",
]
