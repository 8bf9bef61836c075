"""The classic synchronous QMF console API, implemented on qmf-async.

``from qmf.console import Session`` works as with the Qpid Python tools; see
``qmf_async.classic`` and docs/classic.md for what differs.
"""

from __future__ import annotations

from qmf_async.classic import (
    Agent,
    Broker,
    BrokerURL,
    ClassKey,
    Console,
    DebugConsole,
    Event,
    MethodResult,
    Object,
    ObjectId,
    SchemaArgument,
    SchemaClass,
    SchemaMethod,
    SchemaProperty,
    SchemaStatistic,
    Session,
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
