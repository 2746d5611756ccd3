"""Re-exports the RNN bounds from bounds/prop8.py, theorem9.py, theorem7.py and transition.py."""

from __future__ import annotations

from qstr.bounds.attention import lemma12_radius
from qstr.bounds.prop8 import (
    SQRT2 as SQRT2,
    Prop8Packing,
    chi2_lower_rate,
    euclidean_packing_counterexample,
    log_packing_volume,
    prop8_log_norm_lower_bound,
    prop8_norm_lower_bound,
    prop8_norm_lower_bound_paper,
    prop8_packing,
    prop8_width_lower_bound,
)
from qstr.bounds.theorem7 import (
    Layer,
    Theorem7Bound,
    Theorem7Params,
    layer_sensitivities,
    prop28_layers,
    prop28_norm2,
    rnn_output_growth as rnn_output_growth,
    rnn_output_moment as rnn_output_moment,
    rnn_parameter_lipschitz,
    rnn_state_gain,
    theorem7_bound,
    theorem7_sample_size,
    token_norm_moment as token_norm_moment,
)
from qstr.bounds.theorem9 import (
    generalising_log_norm2,
    memoriser_norm2_bound,
    theorem9_crossover,
    theorem9_log_crossover,
)
from qstr.bounds.transformer import loglog_slope
from qstr.bounds.transition import (
    DEFAULT_MARGIN,
    F64 as F64,
    MU_TOL,
    RNNGuarantee,
    TransitionGuarantee,
    TransitionKnots,
    prop26_transition,
    prop28_rnn,
    teacher_rnn,
    token_radius,
)

__all__ = [
    "log_packing_volume",
    "chi2_lower_rate",
    "Prop8Packing",
    "prop8_packing",
    "prop8_width_lower_bound",
    "prop8_log_norm_lower_bound",
    "prop8_norm_lower_bound",
    "prop8_norm_lower_bound_paper",
    "euclidean_packing_counterexample",
    "generalising_log_norm2",
    "memoriser_norm2_bound",
    "theorem9_crossover",
    "theorem9_log_crossover",
    "Theorem7Params",
    "Layer",
    "lemma12_radius",
    "prop28_layers",
    "layer_sensitivities",
    "rnn_parameter_lipschitz",
    "rnn_state_gain",
    "prop28_norm2",
    "Theorem7Bound",
    "theorem7_bound",
    "theorem7_sample_size",
    "loglog_slope",
    "DEFAULT_MARGIN",
    "MU_TOL",
    "token_radius",
    "TransitionKnots",
    "TransitionGuarantee",
    "prop26_transition",
    "RNNGuarantee",
    "prop28_rnn",
    "teacher_rnn",
]
