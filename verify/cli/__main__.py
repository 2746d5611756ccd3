"""``python -m qstr.verify.cli ...``: the ``qstr`` command."""

import sys

from qstr.verify.cli import main

sys.exit(main())
