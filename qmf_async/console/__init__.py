"""qmf_async.console."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time each name is imported on first use (__getattr__)
    from ._console import Console
    from ._objects import QmfObject
    from ._options import SessionOptions
    from ._session import Broker, Session
    from ._state import BrokerState, BrokerStateChange
    from ._subscriptions import Subscription
    from ._values import BrokerObjectId, Change, Event, MethodResult, RemoteAgent

__all__ = [
    "Broker",
    "BrokerObjectId",
    "BrokerState",
    "BrokerStateChange",
    "Change",
    "Console",
    "Event",
    "MethodResult",
    "QmfObject",
    "RemoteAgent",
    "Session",
    "SessionOptions",
    "Subscription",
]


#: each public name -> the module it is imported from on first use (``module:name``
#: when it is renamed here)
_LAZY: dict[str, str] = {
    "BrokerObjectId": "._values",
    "BrokerState": "._state",
    "BrokerStateChange": "._state",
    "Change": "._values",
    "Event": "._values",
    "MethodResult": "._values",
    "QmfObject": "._objects",
    "RemoteAgent": "._values",
    "SessionOptions": "._options",
    "Broker": "._session",
    "Console": "._console",
    "Session": "._session",
    "Subscription": "._subscriptions",
}


if not TYPE_CHECKING:  # type checkers read the imports above; this is the run time
    from ..lazy import lazy_names

    __getattr__, __dir__ = lazy_names(globals(), _LAZY)
    del lazy_names
