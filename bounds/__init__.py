"""Numbers the paper proves, as functions you can evaluate (closed form or Monte Carlo)."""
