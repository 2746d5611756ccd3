"""Claims, checks, experiments, reports and the ``qstr`` command line."""
