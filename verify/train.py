"""Former home of the trainer; it lives in :mod:`verify.training` now (names re-exported)."""
from qstr.constructions.models import BiasedTransformer, EncodedFFN  # noqa: F401
from qstr.verify.training import *  # noqa: F401,F403
from qstr.verify.training.families import _pad_prompts  # noqa: F401
