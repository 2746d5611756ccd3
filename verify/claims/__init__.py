"""One module per section of the paper; importing this package registers every claim."""
from verify.claims import setup, auxiliary  # noqa: F401
