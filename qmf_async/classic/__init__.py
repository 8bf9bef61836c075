"""The classic synchronous API (``qmf.console`` and ``qpidtoollibs``) on qmf-async.

Scripts written for the classic Qpid console run unchanged: ``from qmf.console import
Session``.  Each Session runs the asyncio core on an event-loop thread of its own and
its Console callbacks on a dispatch thread (see docs/classic.md).
"""

from __future__ import annotations

from ._objects import Agent, Event, Object
from ._session import Broker, Console, DebugConsole, Session
from ._values import (
    BrokerURL,
    ClassKey,
    MethodResult,
    ObjectId,
    SchemaArgument,
    SchemaClass,
    SchemaMethod,
    SchemaProperty,
    SchemaStatistic,
)

__all__ = [
    "Session",
    "Broker",
    "Agent",
    "Object",
    "Event",
    "Console",
    "DebugConsole",
    "ClassKey",
    "ObjectId",
    "BrokerURL",
    "MethodResult",
    "SchemaClass",
    "SchemaProperty",
    "SchemaStatistic",
    "SchemaMethod",
    "SchemaArgument",
]
