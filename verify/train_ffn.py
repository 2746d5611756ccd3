"""Former home of the full-batch FFN fits; they live in :mod:`verify.training.ffn` now."""
from qstr.verify.training.ffn import *  # noqa: F401,F403
