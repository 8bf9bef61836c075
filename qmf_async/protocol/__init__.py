"""qmf_async.protocol: the sans-I/O protocol core (no asyncio, no client library).

:class:`ConsoleProtocol` is the console's state for one broker connection:
bodies in (``receive(body, routing_key, now)``), events out, requests built by
``send_*`` and returned as :class:`Outgoing`; time is passed in.
:class:`AgentProtocol` is the agent's: bodies in (``receive(body, routing_key,
reply_to)``), request events out; every body the agent sends is built by it and
returned as a :class:`Send`.
"""

from __future__ import annotations

from ._agent import (
    DIRECT,
    MANAGEMENT,
    STATUS_TEXT,
    AgentEvent,
    AgentProtocol,
    AttachAnswered,
    ClassesRequested,
    ConsoleJoined,
    GetRequested,
    GetSelection,
    MethodRequested,
    PackagesRequested,
    RequestDropped,
    SchemaRequested,
    Send,
    reply_target,
    validate_arguments,
)
from ._console import BROKER_AGENT_CLASS, AgentInfo, ConsoleProtocol, Outgoing, agent_banks
from ._correlation import Correlator, ItemSink, Pending, ReplyMessage
from ._events import (
    AgentArrived,
    AgentLeft,
    AgentRelabeled,
    BodyMalformed,
    ClassSeen,
    Event,
    EventReceived,
    HeartbeatReceived,
    HeldDropped,
    ObjectUpdate,
    PackageSeen,
    QueryDone,
    Reply,
    RequestFailed,
    SchemaNeeded,
    SchemaSeen,
)
from ._selector import Selector, SelectorError, compile_selector

__all__ = [
    "DIRECT",
    "MANAGEMENT",
    "STATUS_TEXT",
    "AgentEvent",
    "AgentProtocol",
    "AttachAnswered",
    "ClassesRequested",
    "ConsoleJoined",
    "GetRequested",
    "GetSelection",
    "MethodRequested",
    "PackagesRequested",
    "RequestDropped",
    "SchemaRequested",
    "Send",
    "reply_target",
    "validate_arguments",
    "BROKER_AGENT_CLASS",
    "AgentArrived",
    "AgentInfo",
    "AgentLeft",
    "AgentRelabeled",
    "BodyMalformed",
    "ClassSeen",
    "ConsoleProtocol",
    "Correlator",
    "Event",
    "EventReceived",
    "HeartbeatReceived",
    "HeldDropped",
    "ItemSink",
    "ObjectUpdate",
    "Outgoing",
    "PackageSeen",
    "Pending",
    "QueryDone",
    "Reply",
    "ReplyMessage",
    "RequestFailed",
    "SchemaNeeded",
    "SchemaSeen",
    "Selector",
    "SelectorError",
    "agent_banks",
    "compile_selector",
]
