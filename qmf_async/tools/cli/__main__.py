"""``python -m qmf_async.tools.cli``: the same as ``qmf``."""

import sys

from . import main

sys.exit(main())
