"""What a broker connection hands its session: small frozen values, returned by the
broker's dispatch (h11's ``next_event``, websockets' ``events_received``) instead of
calls up into the session.

A :class:`~qmf_async.console._broker.Broker` turns the events of its protocol cores
(v1 and v2) into these; :meth:`Broker.dispatch <qmf_async.console._broker.Broker.dispatch>`
returns those of one delivery, in order, and the session acts on them in one place
(``Session._act``: its console callbacks, its object view, its subscriptions).  What
a broker learns outside a delivery (a schema fetched, the objects held for it, its
agents aged out) goes up the same way: a list of these values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConnectionLostError
from ..frozen import frozen
from ..transport import TransportFactory
from ..wire import ClassKey, RawObjectRecord, SchemaClass
from ._links import SessionSettings
from ._state import BrokerStateChange
from ._values import Event, MethodResult, RemoteAgent

__all__ = [
    "AgentChange",
    "ClassListed",
    "EventRaised",
    "HeartbeatSeen",
    "MethodAnswered",
    "ObjectsReceived",
    "PackageListed",
    "SchemaArrived",
    "SessionEvent",
    "SessionHost",
]


@frozen(slots=True)
class AgentChange:
    """``agent`` joined the broker's agent list (``added``) or left it."""

    agent: RemoteAgent
    added: bool


@frozen(slots=True)
class ObjectsReceived:
    """Object updates (``c``/``i`` over v1, one ``g`` per object over v2, as v1
    records) that ``broker`` received from ``agent`` (None: not in its agent list),
    in order: over v2, those of one indication message together."""

    broker: Any
    agent: RemoteAgent | None
    records: tuple[RawObjectRecord, ...]


@frozen(slots=True)
class EventRaised:
    """An event that ``broker`` received."""

    broker: Any
    event: Event


@frozen(slots=True)
class HeartbeatSeen:
    """A heartbeat of ``agent`` (its ``timestamp``, ns; None when a v1 heartbeat
    carried none), for the console's ``heartbeat`` callback (given only with
    ``rcv_heartbeats``)."""

    agent: RemoteAgent
    timestamp: int | None


@frozen(slots=True)
class MethodAnswered:
    """A v1 method response of sequence ``seq`` on ``broker`` (for the console's
    ``method_response`` callback; given only when the session has a console)."""

    broker: Any
    seq: int
    result: MethodResult


@frozen(slots=True)
class PackageListed:
    """A package named by an indication (``p``) or an answer."""

    package: str


@frozen(slots=True)
class ClassListed:
    """A class named by an indication (``q``) or an answer (``kind``: 1 a table, 2 an
    event)."""

    kind: int
    key: ClassKey


@frozen(slots=True)
class SchemaArrived:
    """A schema arrived (unsolicited, or fetched): the session records and announces
    it (its package and class, then ``schema``)."""

    schema: SchemaClass


#: what a broker hands its session
SessionEvent = (AgentChange | ObjectsReceived | EventRaised | HeartbeatSeen | MethodAnswered
                | PackageListed | ClassListed | SchemaArrived)


@frozen(slots=True)
class SessionHost:
    """What a :class:`~qmf_async.console._broker.Broker` may call on its session,
    declared once: the session (its public settings, read live), its transport
    factory, and its handlers, bound (the session's private methods; none of them
    raises).  What the broker received goes
    up as values (:mod:`~qmf_async.console._sessionevents`): its dispatch returns
    them, and ``act`` takes them (those of each delivery, and those learnt outside
    one).  The session builds one per broker (``Session._broker_host``)."""

    session: SessionSettings
    transport_factory: TransportFactory
    #: ``act(broker, events)``: the session acts on what ``broker`` handed up, in order
    act: Callable[[Any, list[SessionEvent]], None]
    #: ``notify(name, *args)``: call the console callback ``name`` (if any): the
    #: connection's own happenings (connected, disconnected, ``B`` answered)
    notify: Callable[..., None]
    #: the v1 topic binding keys the session's settings ask for
    binding_keys: Callable[[], list[str]]
    v2_bindings_for: Callable[[Any], list[tuple[str, str | None]]]
    #: the broker's connection was lost and will not be made again (the session does
    #: not manage connections)
    connection_lost: Callable[[Any, ConnectionLostError], None]
    #: whether a console or a subscription takes object updates, events
    follows_objects: Callable[[], bool]
    follows_events: Callable[[], bool]
    state_changed: Callable[[BrokerStateChange], None]
