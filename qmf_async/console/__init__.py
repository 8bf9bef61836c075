"""qmf_async.console."""

from __future__ import annotations

from ._objects import BrokerObjectId, Change, Event, MethodResult, QmfObject, RemoteAgent
from ._options import SessionOptions
from ._session import Broker, Console, Session
from ._state import BrokerState, BrokerStateChange
from ._subscriptions import Subscription

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
