"""Former home of the experiments' shared machinery, now split by stage: points, results, run,
analysis, plots (names re-exported)."""
from qstr.verify.experiments.points import PROTOCOLS, PROTOCOL_VERSION, MODELS, MATMUL, Protocol, as_protocol, derive_seed, generator, TASK_VARIANT, Point, apply_overrides, seeds_of, build_member  # noqa: F401
from qstr.verify.experiments.results import environment, ResultsFile, row_of, write_json, figure_stem  # noqa: F401
from qstr.verify.experiments.run import wide_console, stacks_of, stack_cost, train_points, default_jobs, run_points, train_figure  # noqa: F401
from qstr.verify.experiments.analysis import fit_exponent, summarize  # noqa: F401
from qstr.verify.experiments.plots import COLORS, LABELS, plot_samples, save_figure, mpl  # noqa: F401
