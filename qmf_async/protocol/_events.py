"""Events the console protocol cores hand their drivers: one vocabulary for QMF v1
(:mod:`._console`) and QMF v2 (:mod:`._console_v2`).

Small frozen values.  Where a v1 and a v2 event mean the same thing they are one type
(an agent arrived, beat, left; a request was answered, failed; objects or an event
came unsolicited; a message did not decode), with fields both versions fill:

- a request is named by its ``request`` key: the sequence number (an ``int``) over
  v1, the correlation id (a ``str``) over v2;
- an agent is named by its :data:`AgentKey`: its ``(brokerBank, agentBank)`` over v1,
  its v2 name over v2 (qpidd: ``apache.org:qpidd:<uuid>``; answers from qpidd's own
  agent addressed as ``broker`` carry ``broker``);
- a payload keeps its version's decoded type, in a field typed for it (a v1
  :class:`~qmf_async.wire.RawObjectRecord`, v2 :class:`~qmf_async.wire.V2Data`).

A type only one version produces is named without a version marker too
(:class:`QueryPart`, :class:`RequestExpired`, :class:`AgentRestarted` are v2's;
:class:`AgentRelabeled`, :class:`SchemaNeeded`, ... v1's).  None of them carries an
AMQP property.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import QmfError
from ..frozen import frozen

if TYPE_CHECKING:  # the v2 payload types (QMF v2's modules load where v2 is spoken)
    from ..wire import (
        ClassKey,
        EventIndication,
        Message,
        RawObjectRecord,
        SchemaClass,
        V2Data,
        V2Event,
        V2Exception,
        V2MethodResponse,
    )

__all__ = [
    "AgentArrived",
    "AgentKey",
    "AgentLeft",
    "AgentRelabeled",
    "AgentRestarted",
    "BodyMalformed",
    "ClassSeen",
    "Event",
    "EventReceived",
    "HeartbeatReceived",
    "HeldDropped",
    "MessageUnhandled",
    "ObjectUpdate",
    "PackageSeen",
    "QueryDone",
    "QueryPart",
    "Reply",
    "RequestExpired",
    "RequestFailed",
    "SchemaNeeded",
    "SchemaSeen",
]

#: (brokerBank, agentBank)
Banks = tuple[int, int]
#: an agent as a core names it: its banks over v1, its name over v2
AgentKey = tuple[int, int] | str
#: a request as a core names it: its sequence number over v1, its correlation id over v2
RequestKey = int | str


# ---------------------------------------------------------------------- requests

@frozen(slots=True)
class Reply:
    """Request ``request`` completed with ``message``: over v1 a ``b``, ``s``, ``m``
    or a ``z`` with code 0; over v2 a method call's ``_method_response`` or its
    ``_exception`` (:class:`~qmf_async.wire.V2Exception`: the call failed)."""

    request: RequestKey
    message: Message | RawObjectRecord | V2MethodResponse | V2Exception


@frozen(slots=True)
class QueryDone:
    """Query ``request`` ended: ``code`` 0 is success, any other a failure (v1: the
    ``z``'s code; v2: an ``_exception``'s, None when it sent none).  ``items`` are the
    indications collected (v1: empty when they went to the query's sink), the objects
    of a v2 answer (:class:`~qmf_async.wire.V2Data` for ``_data`` answers, else the
    raw maps: of every part in the order received, of the last part only for a
    streamed query, none for a failure); ``agent`` the v2 ``qmf.agent`` of the last
    part (None over v1)."""

    request: RequestKey
    items: list[Any]
    code: int | None = 0
    text: str = "OK"
    agent: str | None = None


@frozen(slots=True)
class QueryPart:
    """A part of the answer to a streamed v2 query (``send_query(stream=True)``) that
    is not the last: its ``items`` only (the last part comes as :class:`QueryDone`
    holding the items of that part alone)."""

    request: RequestKey
    items: list[Any]
    agent: str | None


@frozen(slots=True)
class RequestFailed:
    """Request ``request`` can no longer complete: its agent left, the connection was
    lost or closed, a body it waited for was dropped, its v2 answer grew past the
    limit.  ``items`` are what a v2 query had gathered (else empty)."""

    request: RequestKey
    error: QmfError
    items: Sequence[Any] = ()


@frozen(slots=True)
class RequestExpired:
    """v2 request ``request`` (``kind`` ``query``, ``method`` or ``locate``) reached its
    deadline; ``items`` are the partial answer gathered so far (for a locate: the
    names of the agents that answered it, which is its normal end)."""

    request: RequestKey
    kind: str
    items: list[Any]


# ---------------------------------------------------------------------- agents

@frozen(slots=True)
class AgentArrived:
    """An agent was seen for the first time (or again, after it left).  ``label``:
    the v1 label (the v2 name over v2); what a v2 agent announces of itself comes in
    ``vendor`` ... ``interval`` (seconds; None over v1)."""

    agent: AgentKey
    label: str
    vendor: str | None = None
    product: str | None = None
    instance: str | None = None
    epoch: int | None = None
    interval: float | None = None


@frozen(slots=True)
class AgentRelabeled:
    """A known v1 agent is now known under ``label``."""

    agent: AgentKey
    label: str


@frozen(slots=True)
class AgentRestarted:
    """A known v2 agent announced another epoch: it restarted (its objects and
    subscriptions are gone)."""

    agent: AgentKey
    old_epoch: int | None
    new_epoch: int | None


@frozen(slots=True)
class AgentLeft:
    """An agent aged out (silent too long), was deleted by the management broker, or
    the connection it was seen on was lost."""

    agent: AgentKey
    why: str


@frozen(slots=True)
class HeartbeatReceived:
    """A heartbeat of a known (or just arrived) agent: ``timestamp`` in ns since the
    epoch (a v2 agent's ``_timestamp``; None when it sent none)."""

    agent: AgentKey
    timestamp: int | None


# ---------------------------------------------------------------------- publications

@frozen(slots=True)
class ObjectUpdate:
    """Objects that came unsolicited, from ``agent`` (None: not said): over v1 one
    ``c``/``i`` (or a ``g`` nobody waits for) decoded as ``record``; over v2 the objects
    of one ``_data_indication`` (qpidd: the changed objects of one class) as
    ``items`` (:class:`~qmf_async.wire.V2Data`, converted by the console once their
    schema is known; ``record`` None)."""

    agent: AgentKey | None
    record: RawObjectRecord | None
    items: Sequence[V2Data] = ()


@frozen(slots=True)
class EventReceived:
    """An event from ``agent`` (None: not said): a v1 ``e`` or one event of a v2
    ``_data_indication`` with content ``_event``."""

    agent: AgentKey | None
    message: EventIndication | V2Event


@frozen(slots=True)
class BodyMalformed:
    """A message did not decode (or an agent object in it was malformed); it was
    dropped.  ``opcode``: the ``qmf.opcode`` of a v2 message, when readable."""

    routing_key: str | None
    error: QmfError
    opcode: str | None = None


@frozen(slots=True)
class MessageUnhandled:
    """A well-formed v2 message a console does not act on (an unknown opcode or
    content: a :class:`~qmf_async.wire.V2UnknownMessage`; a request seen on a shared
    topic); it was dropped."""

    message: Any


# ---------------------------------------------------------------------- v1 schemas

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


#: any event of a console core (v1 or v2)
Event = (Reply | QueryDone | QueryPart | RequestFailed | RequestExpired | AgentArrived
         | AgentRelabeled | AgentRestarted | AgentLeft | HeartbeatReceived | ObjectUpdate
         | EventReceived | BodyMalformed | MessageUnhandled | PackageSeen | ClassSeen
         | SchemaSeen | SchemaNeeded | HeldDropped)
