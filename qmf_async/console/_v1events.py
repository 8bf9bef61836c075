"""What one broker connection does with each event of its v1 protocol core
(:class:`V1Events`): replies complete the waits of their requests (kept here: not
up-calls), object updates, events, heartbeats, packages, classes and schemas go up as
session-level values (:mod:`~qmf_async.console._sessionevents`) through the broker's
``emit`` (its dispatch returns them), what was dropped is counted; the agent events
go to the broker's :class:`~qmf_async.console._agentlist.AgentList`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from ..errors import CommandError
from ..logs import warn_limited
from ..protocol import (
    AgentArrived,
    AgentLeft,
    AgentRelabeled,
    BodyMalformed,
    ClassSeen,
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
    VersionChoice,
)
from ..wire import ClassKey, EventIndication, MethodResponse
from ._agentlist import AgentList
from ._calls import method_result
from ._dispatch import Handlers, v1_banks
from ._links import SessionSettings
from ._objects import Event
from ._sessionevents import (
    ClassListed,
    EventRaised,
    HeartbeatSeen,
    MethodAnswered,
    ObjectsReceived,
    PackageListed,
    SchemaArrived,
    SessionEvent,
)
from ._waits import Waits

__all__ = ["V1Events", "V1EventsHost"]

# the session's logger: a broker's messages are the console's
log = logging.getLogger("qmf_async.session")


class V1EventsHost(Protocol):
    """What :class:`V1Events` needs of its broker (a ``Broker`` is one)."""

    where: str

    @property
    def session(self) -> SessionSettings: ...

    @property
    def v2(self) -> object: ...

    @property
    def closing(self) -> bool: ...

    def v1_beat_of_qpidd(self) -> None: ...

    def release_held(self, key: ClassKey) -> None: ...

    def emit(self, event: SessionEvent) -> None: ...


class V1Events:
    """The handlers of the v1 core events of the broker ``host`` (``handlers``: one
    per event type), with the broker's waits (``waits``), agent list (``agents``) and
    version choice (``choice``).  None of them raises."""

    def __init__(self, host: V1EventsHost, waits: Waits, agents: AgentList,
                 choice: VersionChoice, schema_needed: Callable[[SchemaNeeded], None]) -> None:
        self.host = host
        self.waits = waits
        self.agents = agents
        self.choice = choice
        emit = host.emit
        self.handlers: Handlers = {
            Reply: self._reply,
            QueryDone: self._query_done,
            RequestFailed: self._request_failed,
            AgentArrived: agents.on_arrived,
            AgentRelabeled: agents.on_relabeled,
            AgentLeft: agents.on_left,
            HeartbeatReceived: self._heartbeat,
            ObjectUpdate: self._object_update,
            EventReceived: self.event,
            PackageSeen: lambda ev: emit(PackageListed(ev.package)),
            ClassSeen: lambda ev: emit(ClassListed(int(ev.kind), ev.class_key)),
            SchemaSeen: self._schema_seen,
            SchemaNeeded: schema_needed,
            HeldDropped: self._held_dropped,
            BodyMalformed: self._malformed,
        }

    def _schema_seen(self, ev: SchemaSeen) -> None:
        """A schema arrived (the core holds it now): the session is to record and
        announce it, then this broker routes the bodies its core held for it (the walk
        of a query goes back up from here, not through the session)."""
        self.host.emit(SchemaArrived(ev.schema))
        self.host.release_held(ev.schema.class_key)

    def _reply(self, ev: Reply) -> None:
        wait = self.waits.finish(ev.request)
        msg = ev.message
        if wait is not None and not wait.future.done():
            wait.future.set_result(msg)
        if type(msg) is MethodResponse and self.host.session.console is not None:
            self.host.emit(MethodAnswered(self.host, msg.seq, method_result(msg)))

    def _query_done(self, ev: QueryDone) -> None:
        wait = self.waits.finish(ev.request)
        if wait is None or wait.future.done():
            return
        if ev.code != 0:
            exc = CommandError(ev.code if ev.code is not None else 7, ev.text)
            exc.partial = list(ev.items)  # type: ignore[attr-defined]
            wait.future.set_exception(exc)
        else:
            wait.future.set_result(ev.items)

    def _request_failed(self, ev: RequestFailed) -> None:
        wait = self.waits.finish(ev.request)
        if wait is not None and not wait.future.done():
            wait.future.set_exception(ev.error)

    def _heartbeat(self, ev: HeartbeatReceived) -> None:
        banks = v1_banks(ev.agent)
        if banks == (1, 0):
            if self.host.v2 is not None:
                self.host.v1_beat_of_qpidd()
            else:
                self.choice.v1_beats += 1
        agent = self.agents.agents.get(banks)
        if agent is not None and not agent.name and self.host.session.options.rcv_heartbeats:
            self.host.emit(HeartbeatSeen(agent, ev.timestamp))

    def _object_update(self, ev: ObjectUpdate) -> None:
        banks: tuple[int, int] | None = ev.agent  # type: ignore[assignment]  # v1: banks
        if self.agents.v2_owns(banks):
            return
        agent = self.agents.agents.get(banks) if banks is not None else None
        rec = ev.record
        if rec is not None:  # always, over v1
            self.host.emit(ObjectsReceived(self.host, agent, (rec,)))

    def event(self, ev: EventReceived) -> None:
        banks: tuple[int, int] | None = ev.agent  # type: ignore[assignment]  # v1: banks
        if self.agents.v2_owns(banks):
            self.choice.hold(banks, ev)  # qpidd's, while its v2 is not known to publish
            return
        agent = self.agents.agents.get(banks) if banks is not None else None
        msg: EventIndication = ev.message  # type: ignore[assignment]  # v1: an ``e``
        event = Event(msg.schema.class_key, msg.timestamp, msg.severity, dict(msg.arguments),
                      agent, msg.schema)
        self.host.emit(EventRaised(self.host, event))

    def _malformed(self, ev: BodyMalformed) -> None:
        self.host.session.malformed += 1
        warn_limited(log, self.host.session.malformed, "malformed QMF body from %s (%s) "
                     "dropped: %s", self.host.where, ev.routing_key, ev.error)

    def _held_dropped(self, ev: HeldDropped) -> None:
        self.host.session.held_dropped += ev.count
        # closing with a schema fetch in flight is normal; anything else is worth a warning
        level = logging.DEBUG if self.host.closing else logging.WARNING
        log.log(level, "dropped %d bodies held for unknown schemas on %s: %s", ev.count,
                self.host.where, ev.why)
