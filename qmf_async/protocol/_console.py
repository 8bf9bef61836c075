"""The console's protocol core for one broker connection (QMF v1).  No I/O.

:class:`ConsoleProtocol` holds, as plain data, what a console knows about one
broker connection: the sequence numbers of its outstanding requests
(:class:`~._correlation.Correlator`), the agent directory with heartbeat aging,
the agents seen leaving, the method calls waiting for an ``m`` (whose output
arguments need the method's schema to decode), and the bodies held until the
schema of their class arrives.

Bodies go in (:meth:`ConsoleProtocol.receive`), events come out (a list of the
values of :mod:`._events`); requests are built by the ``send_*`` methods, which
return the bytes to publish and their routing key, never sending anything.
Time is passed in (``now``, any monotonic clock in seconds).  Records of a query
answer go straight to the query's sink when it has one (one lookup per body),
so a large answer makes no event per record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, cast

from ..errors import AgentGoneError, DecodeError, QmfError
from ..names import (
    BROKER_KEY,
    EVENT_KEY_PREFIX,
    HEARTBEAT_KEY_PREFIX,
    MANAGEMENT_EXCHANGE,
    OBJECT_KEY_PREFIX,
    agent_key,
)
from ..wire import (
    BrokerRequest,
    BrokerResponse,
    ClassIndication,
    ClassKey,
    ClassQuery,
    EventIndication,
    GetQuery,
    Heartbeat,
    Message,
    MethodResponse,
    ObjectRecord,
    PackageIndication,
    PackageQuery,
    RawObjectRecord,
    SchemaClass,
    SchemaMethod,
    SchemaRegistry,
    SchemaRequest,
    SchemaResponse,
    UndecodedTail,
    decode,
    encode,
)
from ._agents import AgentDirectory
from ._correlation import Correlator, ItemSink, Pending
from ._envelope import Delivery, Outgoing
from ._events import (
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
    SchemaNeeded,
    SchemaSeen,
)

__all__ = ["BROKER_AGENT_CLASS", "AgentInfo", "ConsoleProtocol", "agent_banks"]

log = logging.getLogger("qmf_async.session")

#: the management broker's class of agent objects (they keep the agent list current)
BROKER_AGENT_CLASS = ("org.apache.qpid.broker", "agent")

#: (brokerBank, agentBank)
Banks = tuple[int, int]


class AgentInfo:
    """What the directory knows of one agent (times in the caller's clock)."""

    __slots__ = ("agent_bank", "broker_bank", "interval", "label", "last_heartbeat", "last_seen")

    def __init__(self, broker_bank: int, agent_bank: int, label: str, now: float,
                 interval: float) -> None:
        self.broker_bank = broker_bank
        self.agent_bank = agent_bank
        self.label = label
        self.last_seen = now
        self.interval = interval
        self.last_heartbeat: float | None = None

    def __repr__(self) -> str:
        return (f"<AgentInfo {self.broker_bank}.{self.agent_bank} {self.label!r} "
                f"interval={self.interval:.3g}>")


def agent_banks(routing_key: str, prefix: str) -> Banks | None:
    """(brokerBank, agentBank) from ``console.obj.<bb>.<ab>...``-style keys."""
    if not routing_key.startswith(prefix):
        return None
    parts = routing_key[len(prefix):].split(".", 2)
    if len(parts) < 2:
        return None
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return None


class ConsoleProtocol:
    """The protocol state of one console <-> broker connection.

    ``schemas`` is read to decode bodies (the driver adds schemas to it when it
    handles :class:`~._events.SchemaSeen`, then calls :meth:`schema_known`).
    ``has_management`` is set by the driver once a management broker answered
    ``B``.  Limits: ``max_held`` bodies held for schemas, ``max_departed``
    departed agents remembered.
    """

    def __init__(self, schemas: SchemaRegistry, *, where: str = "", start_seq: int | None = None,
                 max_held: int = 10_000, agent_interval: float = 10.0,
                 min_agent_interval: float = 0.1, missed_heartbeats: int = 3,
                 max_departed: int = 4096) -> None:
        self.schemas = schemas
        self.where = where
        self.max_held = max_held
        self.agent_interval = agent_interval
        self.min_agent_interval = min_agent_interval
        self.missed_heartbeats = missed_heartbeats
        self.has_management = False
        self.correlator = Correlator(start_seq)
        #: the agents of this connection (the one directory and aging rule, _agents.py)
        self.directory: AgentDirectory[Banks, AgentInfo] = AgentDirectory(max_departed)
        #: agents known on this connection, by banks, in the order they arrived
        self.agents = self.directory.agents
        #: banks of agents seen leaving (newest last, bounded) -> why
        self.departed = self.directory.departed
        #: seq of a method call -> (class schema, method schema), to decode its ``m``
        self.method_targets: dict[int, tuple[SchemaClass, SchemaMethod]] = {}
        #: class key -> bodies waiting for its schema: (tail, routing key, arrival)
        #: bodies waiting for a schema: (tail, routing key, arrival, the query it
        #: answers or 0: unsolicited, whose sequence number is 0 as ``B``'s is)
        self.held: dict[ClassKey, list[tuple[UndecodedTail, str, int, int]]] = {}
        self.held_count = 0
        #: class keys whose schema fetch was asked for (SchemaNeeded) and not finished
        self.fetching: set[ClassKey] = set()
        self.arrivals = 0  # bodies received, in order

    def __len__(self) -> int:
        """How many requests are outstanding."""
        return len(self.correlator)

    # ------------------------------------------------------------------ requests

    def _send(self, make: Callable[[int], Message], routing_key: str, *, query: bool,
              agent: Hashable | None, expect: str, sink: ItemSink | None,
              deadline: float | None, seq: int | None = None,
              exchange: str = MANAGEMENT_EXCHANGE) -> Outgoing:
        entry = self.correlator.register(query=query, agent=agent, expect=expect, sink=sink,
                                         seq=seq, deadline=deadline)
        try:
            body = encode(make(entry.seq), self.schemas)
        except BaseException:
            self.correlator.discard(entry.seq, entry)
            raise
        return Outgoing(exchange, routing_key, body, correlation=entry.seq)

    def send_request(self, make: Callable[[int], Message], routing_key: str, *, query: bool,
                     agent: Banks | None = None, expect: str = "",
                     sink: ItemSink | None = None, deadline: float | None = None,
                     exchange: str = MANAGEMENT_EXCHANGE) -> Outgoing:
        """Any request: ``make(seq)`` builds the message under a fresh number, to
        ``exchange`` (``qpid.management``; ``qmf.default.direct`` for a v1 ``S`` to a
        v2 agent's address) under ``routing_key``.

        ``query`` requests end with a ``z`` (:class:`~._events.QueryDone`),
        others with their first reply whose opcode is in ``expect``
        (:class:`~._events.Reply`).  ``agent`` (banks) is the addressed agent:
        its requests fail when it leaves.

        Raises:
            EncodeError: the message cannot be encoded (nothing is registered).
        """
        return self._send(make, routing_key, query=query, agent=agent, expect=expect,
                          sink=sink, deadline=deadline, exchange=exchange)

    def send_broker_request(self, deadline: float | None = None) -> Outgoing:
        """``B`` to the management broker (sequence 0); a ``b`` answers it.

        Raises:
            UsageError: a ``B`` is already outstanding.
        """
        return self._send(lambda _seq: BrokerRequest(), BROKER_KEY, query=False, agent=None,
                          expect="b", sink=None, deadline=deadline, seq=0)

    def send_query(self, agent: Banks, query: Mapping[str, Any], *,
                   sink: ItemSink | None = None, deadline: float | None = None) -> Outgoing:
        """``G`` to one agent; records go to ``sink`` (else collected in the
        :class:`~._events.QueryDone`)."""
        bb, ab = agent
        return self._send(lambda seq: GetQuery(seq, dict(query)), agent_key(bb, ab),
                          query=True, agent=agent, expect="", sink=sink, deadline=deadline)

    def send_schema_request(self, class_key: ClassKey, agent: Banks | None, *,
                            deadline: float | None = None) -> Outgoing:
        """``S`` to ``agent`` (None: the management broker); an ``s`` answers it."""
        routing = BROKER_KEY if agent is None else agent_key(*agent)
        return self._send(lambda seq: SchemaRequest(seq, class_key), routing, query=False,
                          agent=agent, expect="s", sink=None, deadline=deadline)

    def send_package_query(self, agent: Banks | None, *,
                           deadline: float | None = None) -> Outgoing:
        """``P`` to ``agent`` (None: the management broker); ``p``... then ``z``."""
        routing = BROKER_KEY if agent is None else agent_key(*agent)
        return self._send(PackageQuery, routing, query=True, agent=agent, expect="p",
                          sink=None, deadline=deadline)

    def send_class_query(self, package: str, agent: Banks | None, *,
                         deadline: float | None = None) -> Outgoing:
        """``Q`` to ``agent`` (None: the management broker); ``q``... then ``z``."""
        routing = BROKER_KEY if agent is None else agent_key(*agent)
        return self._send(lambda seq: ClassQuery(seq, package), routing, query=True,
                          agent=agent, expect="q", sink=None, deadline=deadline)

    def send_method(self, agent: Banks, routing_key: str, schema: SchemaClass,
                    method: SchemaMethod, object_id: bytes, arguments: Mapping[str, Any], *,
                    deadline: float | None = None) -> Outgoing:
        """``M`` calling ``method`` on the object whose 16-byte id is ``object_id``;
        an ``m`` (or a ``z``) answers it.

        Raises:
            ArgumentError, EncodeError: the arguments do not fit the method.
        """
        correlator = self.correlator
        entry = correlator.register(query=False, agent=agent, expect="m", deadline=deadline)
        seq = entry.seq
        try:
            # the M written by the method's cached writer (the bytes encode() writes)
            body = self.schemas.request_writer(schema.class_key, method.name)(
                seq, object_id, arguments)
        except BaseException:
            correlator.discard(seq, entry)
            raise
        self.method_targets[seq] = (schema, method)
        return Outgoing(MANAGEMENT_EXCHANGE, routing_key, body, correlation=seq)

    def cancel(self, seq: int, entry: Pending | None = None) -> bool:
        """Forget request ``seq`` (timed out, cancelled): its number is free again and
        its replies are ignored.  Returns whether it was still outstanding."""
        self.method_targets.pop(seq, None)
        return self.correlator.discard(seq, entry)

    def expired(self, now: float) -> list[int]:
        """Requests whose deadline passed at ``now`` (they stay open until :meth:`cancel`)."""
        return self.correlator.expired(now)

    # ------------------------------------------------------------------ receiving

    def feed(self, delivery: Delivery, now: float) -> list[Any]:
        """One delivery: :meth:`receive` of its body under its routing key."""
        return self.receive(delivery.body, delivery.routing_key, now)

    def receive(self, body: bytes, routing_key: str, now: float) -> list[Any]:
        """Decode and route one body; returns the events it caused, in order.

        Records of a query with a sink go to the sink during this call.
        Never raises for a malformed body (:class:`~._events.BodyMalformed`).
        """
        self.arrivals += 1
        events: list[Any] = []
        self._decode_and_route(body, routing_key, self.arrivals, now, events)
        return events

    def _decode_and_route(self, body: bytes, routing_key: str, arrival: int, now: float,
                          events: list[Any]) -> None:
        # ``arrival`` orders bodies as received, also when one was held for a schema
        try:
            messages = decode(body, self.schemas, methods=self.method_targets,
                              defer_unknown=True, lazy=True)
        except DecodeError as exc:
            events.append(BodyMalformed(routing_key, exc))
            return
        correlator = self.correlator
        # records of one query answer usually fill the body: find their query once
        sink: ItemSink | None = None
        sink_seq = 0
        for msg in messages:
            try:
                if type(msg) is RawObjectRecord and msg.seq:
                    if msg.seq != sink_seq:
                        sink_seq = msg.seq
                        sink = correlator.item_sink(sink_seq, arrival)
                    if sink is not None:
                        sink(msg)
                        continue
                sink_seq = 0  # anything else may finish a query: look it up again
                self._route(msg, routing_key, arrival, now, events)
            except Exception:
                log.exception("failed to handle %r from %s", msg.OPCODE, self.where)

    def _route(self, msg: Message | RawObjectRecord, routing_key: str, arrival: int,
               now: float, events: list[Any]) -> None:
        correlator = self.correlator
        if type(msg) is RawObjectRecord:  # the hot path: query answers and updates
            if msg.seq and correlator.resolve(msg, events, arrival=arrival):
                return
            if msg.opcode != "g":
                self._content(msg, routing_key, now, events)
            return
        if isinstance(msg, UndecodedTail):
            self._hold(msg, routing_key, arrival, now, events)
            return
        if isinstance(msg, SchemaResponse):
            # decoding never registers; the core does, so that the rest of this body
            # (records of that class after the schema) decodes at once
            self.schemas.add(msg.schema)
            events.append(SchemaSeen(msg.schema))
        elif isinstance(msg, MethodResponse):
            self.method_targets.pop(msg.seq, None)
        if (msg.seq or isinstance(msg, BrokerResponse)) and correlator.resolve(
                msg, events, arrival=arrival):
            return
        if isinstance(msg, EventIndication):
            banks = agent_banks(routing_key, EVENT_KEY_PREFIX)
            if banks is not None:
                self._see(banks[0], banks[1], now, events)
            events.append(EventReceived(banks, msg))
        elif isinstance(msg, Heartbeat):
            banks = agent_banks(routing_key, HEARTBEAT_KEY_PREFIX)
            if banks is not None:
                self._see(banks[0], banks[1], now, events, heartbeat=True)
                events.append(HeartbeatReceived(banks, msg.timestamp))
        elif isinstance(msg, PackageIndication):
            events.append(PackageSeen(msg.package))
        elif isinstance(msg, ClassIndication):
            events.append(PackageSeen(msg.class_key.package))
            events.append(ClassSeen(int(msg.kind), msg.class_key))

    def _content(self, rec: RawObjectRecord, routing_key: str, now: float,
                 events: list[Any]) -> None:
        banks = agent_banks(routing_key, OBJECT_KEY_PREFIX)
        if banks is None and rec.object_id is not None:
            banks = rec.object_id.agent_key()
        if banks is not None:
            self._see(banks[0], banks[1], now, events)
        key = rec.codec.class_key
        if (key.package, key.name) == BROKER_AGENT_CLASS and rec.opcode != "i":
            try:
                self._agent_object(rec, now, events)
            except DecodeError as exc:
                events.append(BodyMalformed(routing_key, exc))
                return
        events.append(ObjectUpdate(banks, rec))

    # ------------------------------------------------------------------ agents

    def see_agent(self, broker_bank: int, agent_bank: int, now: float, *,
                  label: str | None = None, heartbeat: bool = False) -> list[Any]:
        """Note that an agent is alive at ``now``; events: its arrival or new label."""
        events: list[Any] = []
        self._see(broker_bank, agent_bank, now, events, label=label, heartbeat=heartbeat)
        return events

    def _see(self, bb: int, ab: int, now: float, events: list[Any], *,
             label: str | None = None, heartbeat: bool = False) -> AgentInfo:
        info = self.agents.get((bb, ab))
        if info is None:
            info = AgentInfo(bb, ab, label or "", now, self.agent_interval)
            self.directory.add((bb, ab), info)
            events.append(AgentArrived((bb, ab), info.label))
        elif label and info.label != label:
            info.label = label
            events.append(AgentRelabeled((bb, ab), label))
        if heartbeat:
            last = info.last_heartbeat
            if last is not None:
                gap = now - last
                # follow the agent's real interval, smoothing jitter
                info.interval = max(0.05, 0.7 * info.interval + 0.3 * gap) \
                    if info.interval else gap
            info.last_heartbeat = now
        info.last_seen = now
        return info

    def agent_objects(self, records: Iterable[Any], now: float) -> list[Any]:
        """The management broker's ``agent`` objects (the answer to the agent list
        query): agents arrive or leave.  A malformed one is skipped
        (:class:`~._events.BodyMalformed`)."""
        events: list[Any] = []
        for rec in records:
            if isinstance(rec, (RawObjectRecord, ObjectRecord)):
                try:
                    self._agent_object(rec, now, events)
                except DecodeError as exc:
                    events.append(BodyMalformed("broker", exc))
        return events

    def _agent_object(self, rec: RawObjectRecord | ObjectRecord, now: float,
                      events: list[Any]) -> None:
        values = rec.properties_dict() if rec.properties is not None else {}
        bb, ab = values.get("brokerBank"), values.get("agentBank")
        if not isinstance(bb, int) or not isinstance(ab, int):
            return
        if rec.deleted:
            self._gone((bb, ab), "deleted by the management broker", events)
            return
        self._see(bb, ab, now, events, label=str(values.get("label", "")))

    def _gone(self, banks: Banks, why: str, events: list[Any]) -> None:
        info = self.directory.leave(banks, why)
        if info is None:
            return
        error = AgentGoneError(f"RemoteAgent({banks[0]}.{banks[1]} {info.label or '?'}) on "
                               f"{self.where} left: {why}")
        self.correlator.fail_agent(banks, error, events)
        events.append(AgentLeft(banks, why))

    def _silent(self, now: float) -> list[tuple[Banks, float]]:
        # the management broker's own agent stays while the broker answers
        return self.directory.silent(
            now, self.missed_heartbeats, self.min_agent_interval,
            exempt=lambda banks: banks == (1, 0) and self.has_management)

    def overdue(self, now: float) -> bool:
        """Whether :meth:`age` at ``now`` would make some agent leave."""
        return bool(self._silent(now))

    def age(self, now: float) -> list[Any]:
        """Agents whose heartbeats stopped by ``now`` leave (their requests fail)."""
        events: list[Any] = []
        for banks, silent in self._silent(now):
            self._gone(banks, f"no heartbeat for {silent:.1f}s", events)
        return events

    def departed_why(self, banks: Banks) -> str | None:
        """Why an agent that is not known now left (None: never seen leaving, or back)."""
        return self.directory.departed_why(banks)

    def forget_agents(self, why: str) -> list[Any]:
        """Every known agent leaves (the connection ended); not remembered as departed."""
        return [AgentLeft(banks, why) for banks in self.directory.clear()]

    # ------------------------------------------------------------------ unknown schemas

    def _hold(self, tail: UndecodedTail, routing_key: str, arrival: int, now: float,
              events: list[Any]) -> None:
        correlator = self.correlator
        if correlator.after_end(tail.seq, arrival):
            return  # received after its query's z: a duplicate, ignored as when not held
        key = tail.class_key
        if key in self.schemas:
            # its schema came earlier in the same body
            self._decode_and_route(tail.remaining, routing_key, arrival, now, events)
            return
        if self.held_count >= self.max_held:
            events.append(HeldDropped(key, 1, "too many bodies waiting for schemas"))
            return
        # only a query's answer holds its query open: an unsolicited body (sequence 0)
        # has nothing to do with the ``B`` that is also sequence 0
        query = tail.seq if tail.seq and correlator.hold(tail.seq) else 0
        self.held.setdefault(key, []).append((tail, routing_key, arrival, query))
        self.held_count += 1
        if key not in self.fetching:
            self.fetching.add(key)
            pending = correlator.get(query) if query else None
            # the core registers its requests with banks (or None) as their agent
            agent = cast("Banks | None", pending.agent if pending is not None else None)
            if agent is None:
                banks = (agent_banks(routing_key, OBJECT_KEY_PREFIX)
                         or agent_banks(routing_key, EVENT_KEY_PREFIX))
                if banks is not None:
                    self._see(banks[0], banks[1], now, events)
                    agent = banks
            events.append(SchemaNeeded(key, agent))

    def schema_known(self, class_key: ClassKey, now: float) -> list[Any]:
        """The schema of ``class_key`` is in the registry now: route the bodies held
        for it, in the order they were received; returns their events."""
        events: list[Any] = []
        held = self.held.pop(class_key, None)
        if not held:
            return events
        correlator = self.correlator
        for tail, routing_key, arrival, query in held:
            self.held_count -= 1
            self._decode_and_route(tail.remaining, routing_key, arrival, now, events)
            if query:
                correlator.unhold(query, events)
        return events

    def fetch_finished(self, class_key: ClassKey) -> None:
        """The fetch asked for by :class:`~._events.SchemaNeeded` is over (either way)."""
        self.fetching.discard(class_key)

    def drop_held(self, why: str, class_key: ClassKey | None = None) -> list[Any]:
        """Drop the bodies held for ``class_key`` (None: for every class); the queries
        they belong to fail with ``QmfError(why)``."""
        events: list[Any] = []
        keys = [class_key] if class_key is not None else list(self.held)
        dropped = 0
        for k in keys:
            for _, _, _, query in self.held.pop(k, []):
                dropped += 1
                self.held_count -= 1
                if query:
                    self.correlator.fail(query, QmfError(why), events)
        if dropped:
            events.append(HeldDropped(class_key, dropped, why))
        return events

    # ------------------------------------------------------------------ connection

    def connection_lost(self, error: QmfError) -> list[Any]:
        """The connection is gone: every request fails with ``error``, held bodies
        are dropped, every agent leaves."""
        events: list[Any] = []
        self.correlator.fail_all(error, events)
        self.method_targets.clear()
        events.extend(self.drop_held("connection lost"))
        events.extend(self.forget_agents("connection lost"))
        return events

    def close(self, error: QmfError) -> list[Any]:
        """The connection is being closed: every request fails with ``error`` and
        held bodies are dropped (the agents stay known until forgotten)."""
        events: list[Any] = []
        self.correlator.fail_all(error, events)
        self.method_targets.clear()
        events.extend(self.drop_held("session closed"))
        return events
