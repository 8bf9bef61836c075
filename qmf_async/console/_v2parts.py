"""What waits in parts on a QMF v2 link (loaded with it, where v2 is spoken only):
the indications held for what they need (:class:`HeldIndications`: per lane, an
agent's objects or its events, in order, while a schema they need is fetched or their
agent is not yet in the directory) and the answer to a streamed query
(:class:`V2Answer`); and what the link needs of its broker (:class:`V2Host`)."""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from ..errors import DecodeError, QmfError
from ..logs import warn_limited
from ..protocol import ConsoleProtocolV2, Outgoing
from ..transport import TransportProtocol
from ..wire import ClassKey, RawObjectRecord, SchemaClass, V2Data, V2Event
from ._objects import Event, RemoteAgent
from ._sessionevents import EventRaised, ObjectsReceived, SessionEvent
from ._waits import later

__all__ = ["HeldIndications", "Lane", "PartsLink", "V2Agents", "V2Answer", "V2Beats", "V2Host",
           "V2Owner"]

log = logging.getLogger("qmf_async.console")

#: where held indications queue: (agent name, events rather than objects)
Lane = tuple[str | None, bool]


class V2Host(Protocol):
    """What :class:`V2Link` needs of its broker connection (a Broker is one)."""

    where: str

    @property
    def session(self) -> Any: ...

    @property
    def owner(self) -> V2Owner: ...

    @property
    def reply_queue(self) -> str | None: ...

    @property
    def closing(self) -> bool: ...

    @property
    def has_management(self) -> bool: ...

    def check(self) -> TransportProtocol: ...

    def publish(self, out: Outgoing) -> Awaitable[None]: ...

    def known_agent(self, banks: tuple[int, int]) -> RemoteAgent | None: ...

    async def fetch_v1_schema(self, key: ClassKey, timeout: float,
                              agent: RemoteAgent | None = None) -> SchemaClass | None: ...

    async def classes_named(self, name: str, package: str | None,
                            timeout: float) -> list[ClassKey]: ...

    def emit(self, event: SessionEvent) -> None:
        """Hand ``event`` to the session (returned by the broker's dispatch, when
        within one)."""


class V2Agents(Protocol):
    """Where a :class:`V2Link`'s agents go: the agent list of its broker connection
    (an ``AgentList`` is one), a collaborator given to the link."""

    def v2_arrived(self, agent: RemoteAgent) -> None: ...

    def v2_left(self, banks: tuple[int, int]) -> None: ...


class V2Beats(Protocol):
    """What a :class:`V2Link` tells of each v2 heartbeat: the QMF version choice of its
    connection (a ``VersionChoice`` is one), a collaborator given to the link."""

    def v2_beat_of(self, banks: tuple[int, int]) -> None: ...


class V2Owner(Protocol):
    """What :class:`V2Link` reads of the session, through its broker (a part of the
    broker's ``SessionHost``): whether anybody takes what it would convert.  What
    it received goes up as values (``V2Host.emit``), not through calls."""

    def follows_objects(self) -> bool: ...

    def follows_events(self) -> bool: ...


class PartsLink(Protocol):
    """What the parts need of their v2 link (a ``V2Link`` is one)."""

    host: V2Host
    core: ConsoleProtocolV2

    def agent(self, name: str | None) -> RemoteAgent | None: ...

    def missing(self, items: list[Any]) -> set[ClassKey]: ...

    async def fetch_schemas(self, keys: Iterable[ClassKey],
                            agent: RemoteAgent | None = None) -> None: ...

    def record(self, data: V2Data, banks: tuple[int, int]) -> RawObjectRecord | None: ...

    def event(self, ev: V2Event, agent: RemoteAgent | None) -> Event: ...

    def convert_into(self, items: Iterable[Any], banks: tuple[int, int],
                     sink: Callable[[RawObjectRecord], None]) -> None: ...


class HeldIndications:
    """The indication messages of one :class:`V2Link` waiting for schemas or for their
    agent (``count`` of them in all, at most the session's ``max_held``)."""

    def __init__(self, link: PartsLink) -> None:
        self.link = link
        #: the link's broker connection
        self.host = link.host
        #: per (agent, events or objects): indication messages waiting for schemas
        self.queues: dict[Lane, collections.deque[list[Any]]] = {}
        self.count = 0
        #: the schema fetch of each lane whose indications are held
        self._fetching: dict[Lane, asyncio.Task[Any]] = {}
        #: lanes whose objects wait for their agent to be in the directory: the timer
        #: that ends the wait (None: it is over, what still waits is dropped)
        self._agent_waits: dict[Lane, asyncio.TimerHandle | None] = {}
        self._locating: asyncio.Task[None] | None = None

    def clear(self) -> None:
        """The connection was lost: what is held is dropped, the waits for agents end."""
        self.queues.clear()
        self.count = 0
        for lane in list(self._agent_waits):
            self.end_agent_wait(lane)

    def close(self) -> None:
        """The broker is removed: the schema fetches and the agent locate end."""
        for task in self._fetching.values():
            task.cancel()
        self._fetching.clear()
        if self._locating is not None:
            self._locating.cancel()

    def hold(self, lane: Lane, items: list[Any]) -> None:
        """Deliver the objects or events of one indication message, in order, after
        those of the same ``lane`` (agent name, events or not) held before it; held
        while a schema they need is fetched.  Each agent's objects and events have
        their own queue: an agent whose schemas cannot be fetched delays only its
        own indications, and objects waiting for a schema do not delay events.  At
        most ``max_held`` messages wait in all: past that, a message is dropped and
        its items counted in ``held_dropped``."""
        session = self.host.session
        if self.count >= session.options.max_held:
            session.held_dropped += len(items)
            log.warning("dropped a QMF v2 indication of %d item(s) from %s: %d messages "
                        "wait for schemas", len(items), self.host.where, self.count)
            return
        queue = self.queues.get(lane)
        if queue is None:
            queue = self.queues[lane] = collections.deque()
        queue.append(items)
        self.count += 1
        self.pump(lane)

    def pump(self, lane: Lane) -> None:
        """Deliver a lane's held messages in order, up to the first that needs a
        schema being fetched (every schema its held messages lack is fetched at
        once; the fetch resumes the pump)."""
        session = self.host.session
        name = lane[0]
        held = self.queues.get(lane)
        while held:
            items = held[0]
            agent = self.link.agent(name)
            if agent is None and not lane[1] and self._wait_for_agent(lane):
                return
            if self.link.missing(items):
                task = self._fetching.get(lane)
                if task is None or task.done():
                    wanted: set[ClassKey] = set()
                    for more in held:
                        wanted |= self.link.missing(more)
                    self._fetching[lane] = asyncio.get_running_loop().create_task(
                        self._fetch_then_pump(wanted, lane))
                return
            held.popleft()
            self.count -= 1
            # the records of one message go up together (one value, in order)
            records: list[RawObjectRecord] = []
            for item in items:
                if isinstance(item, V2Event):
                    if records:
                        self.host.emit(ObjectsReceived(self.host, agent, tuple(records)))
                        records = []
                    self.host.emit(EventRaised(self.host, self.link.event(item, agent)))
                    continue
                if agent is None:  # its agent did not come in time
                    session.held_dropped += 1
                    warn_limited(log, session.held_dropped, "QMF v2 object from %s dropped: "
                                 "its agent %r is not known there", self.host.where, name)
                    continue
                try:
                    rec = self.link.record(item, (agent.broker_bank, agent.agent_bank))
                except DecodeError as exc:
                    session.malformed += 1
                    log.warning("QMF v2 object from %s dropped: %s", self.host.where, exc)
                    continue
                if rec is None:  # its schema could not be fetched
                    session.held_dropped += 1
                    continue
                records.append(rec)
            if records:
                self.host.emit(ObjectsReceived(self.host, agent, tuple(records)))
        if held is not None and not held:
            del self.queues[lane]
            self.end_agent_wait(lane)

    def _wait_for_agent(self, lane: Lane) -> bool:
        """Whether the objects at the head of ``lane``, whose agent is not in the
        directory, wait for it.  An agent's data can come before its first heartbeat
        or locate answer, or just after it was aged out and before its next
        heartbeat; dropping them would lose an update that is never sent again (qpidd
        publishes an unchanged object once).  The first call sends a locate and gives
        the agent the session's ``timeout``: its arrival resumes the lane, and the end
        of that time drops what still waits (counted in ``held_dropped``).  False for
        objects without an agent name, and once the time is out."""
        if lane[0] is None:
            return False
        if lane in self._agent_waits:
            return self._agent_waits[lane] is not None
        self._agent_waits[lane] = later(self.host.session.options.timeout,
                                        self._agent_wait_over, lane)
        if self._locating is None or self._locating.done():
            self._locating = asyncio.get_running_loop().create_task(self._locate())
        return True

    def _agent_wait_over(self, lane: Lane) -> None:
        self._agent_waits[lane] = None
        self.pump(lane)

    def end_agent_wait(self, lane: Lane) -> bool:
        """Forget the lane's wait for its agent (its timer cancelled); whether there
        was one."""
        if lane not in self._agent_waits:
            return False
        timer = self._agent_waits.pop(lane)
        if timer is not None:
            timer.cancel()
        return True

    async def _locate(self) -> None:
        """An agent locate, for objects from an agent not in the directory (its
        answer adds the agent; a failure leaves it to the agent's next heartbeat)."""
        try:
            await self.host.publish(self.link.core.send_locate(time.monotonic()))
        except QmfError as exc:
            log.debug("agent locate on %s not sent: %s", self.host.where, exc)

    async def _fetch_then_pump(self, keys: set[ClassKey], lane: Lane) -> None:
        try:
            await self.link.fetch_schemas(keys, self.link.agent(lane[0]))
        finally:
            self._fetching.pop(lane, None)
            self.pump(lane)


class V2Answer:
    """The answer to one streamed query: each part is converted as it arrives (in the
    delivery callback: its decoded maps are dropped at once) unless a schema it
    needs is being fetched; then the parts wait, in order, for a task that fetches
    and converts them.  ``done`` (its wait's future) completes after the last part
    was handed out."""

    __slots__ = ("agent", "backlog", "done", "ended", "link", "sink", "task")

    def __init__(self, link: PartsLink, agent: RemoteAgent, sink: Callable[[RawObjectRecord], None],
                 done: asyncio.Future[Any]) -> None:
        self.link = link
        self.agent = agent
        self.sink = sink
        self.done = done
        self.backlog: collections.deque[list[Any]] = collections.deque()
        self.ended = False
        self.task: asyncio.Task[None] | None = None

    @property
    def banks(self) -> tuple[int, int]:
        return self.agent.broker_bank, self.agent.agent_bank

    def push(self, items: list[Any]) -> None:
        if self.done.done():
            return
        if self.backlog or not self._ready(items):
            self.backlog.append(items)
            if self.task is None:
                self.task = asyncio.get_running_loop().create_task(self._drain())
            return
        try:
            self.link.convert_into(items, self.banks, self.sink)
        except Exception as exc:  # a sink that raised: the query fails with it
            self.fail(exc)

    def _ready(self, items: list[Any]) -> bool:
        return not self.link.missing(items)

    def end(self) -> None:
        self.ended = True
        if self.task is None and not self.done.done():
            self.done.set_result(None)

    def fail(self, error: BaseException) -> None:
        self.cancel()
        if not self.done.done():
            self.done.set_exception(error)

    def cancel(self) -> None:
        self.backlog.clear()
        if self.task is not None and not self.task.done() \
                and self.task is not asyncio.current_task():
            self.task.cancel()

    async def _drain(self) -> None:
        try:
            while self.backlog:
                items = self.backlog[0]
                await self.link.fetch_schemas(self.link.missing(items), self.agent)
                if not self.backlog or self.backlog[0] is not items:
                    return  # cancelled or failed meanwhile
                self.backlog.popleft()
                self.link.convert_into(items, self.banks, self.sink)
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            if not self.done.done():
                self.done.cancel()
            raise
        except Exception as exc:
            if not self.done.done():
                self.done.set_exception(exc)
            return
        finally:
            self.task = None
        if self.ended and not self.done.done():
            self.done.set_result(None)
