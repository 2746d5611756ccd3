"""The file round trips users take (Appendix A.1, docs/formats.md), shared by the claims that
check a saved construction: a state dict through ``torch.save`` / ``torch.load(weights_only=True)``
in memory or through a real file, and the exporter slips a paper reader could make."""

from __future__ import annotations

import copy
import io
import math
import os
import tempfile

import torch

from qstr.constructions.experiment_models import PracticalTransformer
from qstr.constructions.export import construction_state, load_construction_state


def through_file(state: dict) -> dict:
    """``state`` through torch.save and torch.load(weights_only=True): what `qstr construct`
    writes and a user reads."""
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def saved_and_reloaded(cons):
    """(MergedAttention, PracticalTransformer) exactly as a user gets them from a saved file
    (the Appendix A.1 export: ``construction_state`` :func:`through_file`)."""
    return load_construction_state(through_file(construction_state(cons)))


def through_path(state: dict, load, **kw):
    """``state`` written to a real file by torch.save (what `qstr construct` does) and read back
    by the public loader ``load(path, **kw)`` (torch.load(path, weights_only=True) inside)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "construction.pt")
        torch.save(state, path)
        return load(path, **kw)


def forgot_head_dim_scale(mt: PracticalTransformer) -> PracticalTransformer:
    """A copy exported without pre-multiplying the query projection by sqrt(D_e): torch divides
    each head's logits by sqrt(head_dim), so the export attends too softly."""
    mt = copy.deepcopy(mt)
    with torch.no_grad():
        mt.projection_weights()[0].div_(math.sqrt(mt.D_e))
    return mt
