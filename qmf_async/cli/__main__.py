"""``python -m qmf_async.cli``: the same as ``qmf``."""

import sys

from . import main

sys.exit(main())
