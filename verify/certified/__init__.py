"""Certified computations (ball arithmetic, verify/ball.py) of the paper's statements on the built
objects: each returns a :class:`~qstr.verify.ball.Certified` with its enclosure, the bound's,
the verdict and the cost (docs/derivations/certified.md)."""
