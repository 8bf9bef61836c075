"""``python -m qmf_async``: the ``qmf`` command-line tools."""

import sys

from .cli import main

sys.exit(main())
