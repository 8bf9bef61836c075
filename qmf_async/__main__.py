"""``python -m qmf_async``: the ``qmf`` command-line tools."""

import sys

from .tools.cli import main

sys.exit(main())
