"""The classic ``qpidtoollibs`` (BrokerAgent, EventHelper), implemented on qmf-async.

See ``qmf_async.classic.toollibs`` and docs/classic.md.
"""

from __future__ import annotations

from qmf_async.classic.toollibs import (
    YN,
    Acl,
    Binding,
    Bridge,
    Broker,
    BrokerAgent,
    BrokerEvent,
    BrokerObject,
    Cluster,
    Commas,
    Connection,
    EventHelper,
    Exchange,
    HaBroker,
    Link,
    Memory,
    Queue,
    Subscription,
    TimeLong,
    TimeShort,
)
from qmf_async.classic.toollibs import Session_ as Session

__all__ = [
    "BrokerAgent",
    "EventHelper",
    "BrokerEvent",
    "BrokerObject",
    "Broker",
    "Cluster",
    "HaBroker",
    "Memory",
    "Connection",
    "Session",
    "Subscription",
    "Exchange",
    "Binding",
    "Queue",
    "Link",
    "Bridge",
    "Acl",
    "YN",
    "Commas",
    "TimeLong",
    "TimeShort",
]
