"""The AMQP 1.0 ``qmf.client`` (qpid-cpp's ``BrokerAgent`` library), implemented on
qmf-async; see ``qmf_async.classic.client`` and docs/classic.md."""

from __future__ import annotations

from qmf_async.classic.client import *  # noqa: F403  (the module's names, re-exported)
from qmf_async.classic.client import __all__ as __all__
