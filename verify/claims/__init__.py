"""One module per section of the paper; importing this package registers every claim."""
from verify.claims import setup, auxiliary, transformer, feedforward, recurrent, rnn_lower  # noqa: F401
