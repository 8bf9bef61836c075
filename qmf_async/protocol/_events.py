"""Events the console protocol core hands its driver (see :mod:`._console`).

Small frozen values; agents are named by ``(brokerBank, agentBank)``, requests
by their sequence number.  None of them carries an AMQP property.
"""

from __future__ import annotations

from typing import Any

from ..errors import QmfError
from ..frozen import frozen
from ..wire import ClassKey, EventIndication, Message, RawObjectRecord, SchemaClass

__all__ = [
    "AgentArrived",
    "AgentLeft",
    "AgentRelabeled",
    "BodyMalformed",
    "ClassSeen",
    "Event",
    "EventReceived",
    "HeartbeatReceived",
    "HeldDropped",
    "ObjectUpdate",
    "PackageSeen",
    "QueryDone",
    "Reply",
    "RequestFailed",
    "SchemaNeeded",
    "SchemaSeen",
]

#: (brokerBank, agentBank)
Banks = tuple[int, int]


@frozen(slots=True)
class Reply:
    """Request ``seq`` completed with ``message`` (``b``, ``s``, ``m``, a ``z`` with code 0)."""

    seq: int
    message: Message | RawObjectRecord


@frozen(slots=True)
class QueryDone:
    """Request ``seq`` ended with a ``z``: ``code`` 0 is success; ``items`` are the
    indications collected (empty when they went to the query's sink)."""

    seq: int
    items: list[Any]
    code: int = 0
    text: str = "OK"


@frozen(slots=True)
class RequestFailed:
    """Request ``seq`` can no longer complete: its agent left, the connection was
    lost, a body it waited for was dropped."""

    seq: int
    error: QmfError


@frozen(slots=True)
class AgentArrived:
    """An agent was seen for the first time (or again, after it left)."""

    broker_bank: int
    agent_bank: int
    label: str


@frozen(slots=True)
class AgentRelabeled:
    """A known agent is now known under ``label``."""

    broker_bank: int
    agent_bank: int
    label: str


@frozen(slots=True)
class AgentLeft:
    """An agent aged out, was deleted by the management broker, or the
    connection it was seen on was lost."""

    broker_bank: int
    agent_bank: int
    why: str


@frozen(slots=True)
class HeartbeatReceived:
    """An ``h`` of a known (or just arrived) agent; ``timestamp`` in ns."""

    broker_bank: int
    agent_bank: int
    timestamp: int


@frozen(slots=True)
class ObjectUpdate:
    """An unsolicited ``c``/``i`` (or a ``g`` nobody waits for); ``agent`` as banks."""

    agent: Banks | None
    record: RawObjectRecord


@frozen(slots=True)
class EventReceived:
    """An ``e``; ``agent`` as banks."""

    agent: Banks | None
    message: EventIndication


@frozen(slots=True)
class PackageSeen:
    """A package name appeared (``p``, or the package of a class)."""

    package: str


@frozen(slots=True)
class ClassSeen:
    """A class key was announced (``q``); ``kind`` 1 data, 2 event."""

    kind: int
    class_key: ClassKey


@frozen(slots=True)
class SchemaSeen:
    """An ``s`` arrived: add it to the registry, then release what waits for it
    (:meth:`ConsoleProtocol.schema_known`)."""

    schema: SchemaClass


@frozen(slots=True)
class SchemaNeeded:
    """Bodies of ``class_key`` wait for its schema: fetch it (from ``agent``, given
    as banks, else from the management broker), then call
    :meth:`ConsoleProtocol.schema_known` or :meth:`ConsoleProtocol.drop_held`."""

    class_key: ClassKey
    agent: Banks | None


@frozen(slots=True)
class HeldDropped:
    """``count`` bodies of ``class_key`` (None: of several classes) waiting for a
    schema were dropped (too many held, the fetch failed, the connection ended)."""

    class_key: ClassKey | None
    count: int
    why: str


@frozen(slots=True)
class BodyMalformed:
    """A body did not decode (or an agent object in it was malformed); it was dropped."""

    routing_key: str
    error: QmfError


#: any event of the console core
Event = (Reply | QueryDone | RequestFailed | AgentArrived | AgentRelabeled | AgentLeft
         | HeartbeatReceived | ObjectUpdate | EventReceived | PackageSeen | ClassSeen
         | SchemaSeen | SchemaNeeded | HeldDropped | BodyMalformed)
