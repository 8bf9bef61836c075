"""The classic synchronous API (``qmf.console`` and ``qpidtoollibs``) on qmf-async.

Scripts written for the classic Qpid console run unchanged: ``from qmf.console import
Session``.  Each Session runs the asyncio core on an event-loop thread of its own and
its Console callbacks on a dispatch thread (see docs/classic.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time each name is imported on first use (__getattr__)
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


#: each public name -> the module it is imported from on first use (``module:name``
#: when it is renamed here)
_LAZY: dict[str, str] = {
    "Agent": "._objects",
    "Event": "._objects",
    "Object": "._objects",
    "Broker": "._session",
    "Console": "._session",
    "DebugConsole": "._session",
    "Session": "._session",
    "BrokerURL": "._values",
    "ClassKey": "._values",
    "MethodResult": "._values",
    "ObjectId": "._values",
    "SchemaArgument": "._values",
    "SchemaClass": "._values",
    "SchemaMethod": "._values",
    "SchemaProperty": "._values",
    "SchemaStatistic": "._values",
}


if not TYPE_CHECKING:  # type checkers read the imports above; this is the run time
    from ..lazy import lazy_names

    __getattr__, __dir__ = lazy_names(globals(), _LAZY)
    del lazy_names
