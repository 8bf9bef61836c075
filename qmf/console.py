"""The classic synchronous QMF console API, implemented on qmf-async.

``from qmf.console import Session`` works as with the Qpid Python tools; see
``qmf_async.classic`` and docs/classic.md for what differs.
"""

from __future__ import annotations

from qmf_async.classic import *  # noqa: F403  (the classic module's names, re-exported)
from qmf_async.classic import __all__ as __all__
