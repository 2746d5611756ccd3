"""Former home of the trainer; it lives in :mod:`verify.training` now (names re-exported)."""
from constructions.models import BiasedTransformer, EncodedFFN  # noqa: F401
from verify.training import *  # noqa: F401,F403
from verify.training.families import _pad_prompts  # noqa: F401
