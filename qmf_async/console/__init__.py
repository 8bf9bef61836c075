"""qmf_async.console."""

from __future__ import annotations

from ._callbacks import Console
from ._objects import Change, Event, MethodResult, QmfObject, RemoteAgent
from ._session import Broker, Session
from ._subscriptions import Subscription

__all__ = [
    "Broker",
    "Change",
    "Console",
    "Event",
    "MethodResult",
    "QmfObject",
    "RemoteAgent",
    "Session",
    "Subscription",
]
