"""Claims, checks, experiments, reports and the ``qstr`` command line."""


def inputs(claim_id: str, ctx=None):
    """The honest inputs of the registered claim ``claim_id`` at ``ctx`` (default: quick, CPU,
    seed 0), as ``qstr verify`` builds them (``qstr.verify.catalog.claim_inputs``: the paper's
    claims registered first)."""
    from qstr.verify.catalog import claim_inputs  # noqa: PLC0415 - the package imports nothing

    return claim_inputs(claim_id, ctx)
