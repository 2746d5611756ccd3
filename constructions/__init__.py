"""Objects from the paper you can hold: the qSTR data model, codebooks, encodings, weights,
models."""
